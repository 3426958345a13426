"""A SLURM job as one of its processes sees it, and torch's rendezvous made from it.

``srun`` gives each task its place (``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID``,
``SLURM_NODEID``, ``SLURM_NNODES``) and the job's nodes (``SLURM_JOB_NODELIST``, compressed as
``node[1-3]``), but nothing torch's ``init_process_group`` reads (``MASTER_ADDR``,
``MASTER_PORT``, ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``): every task would start a job of
its own. :func:`export_slurm_rendezvous` writes those from SLURM's, where torchrun has not:
the main address is the first node of the step, the port is derived from the job id, the same
on every task without talking to each other.

A task of ``srun`` is told apart from the batch script (and ``salloc``'s shell) by
``SLURM_STEP_ID``, which SLURM sets for a step's tasks only: the batch script sees
``SLURM_PROCID=0`` and, with ``--ntasks``, ``SLURM_NTASKS``, but is one process.

Standard library only, and light: no ``re``, ``typing`` or ``dataclasses`` at run time.
"""

from __future__ import annotations

import os

from ._errors import LauncherEnvironmentError
from ._typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, MutableMapping

# The main process's port: 10000 + job id % 20000, so 10000-29999. Every task of a job derives
# the same one, two jobs sharing a node differ unless their ids are 20000 apart, and it stays
# below Linux's ephemeral range (32768-60999), from which outgoing connections are given ports.
# (Lightning's SLURMEnvironment does the same with 15000 + the job id's last four digits.)
FIRST_PORT = 10000
PORTS = 20000

# torch's variables, which torchrun (and accelerate launch, accmt launch) set.
TORCH_RENDEZVOUS = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK")
_TORCHRUN = ("RANK", "WORLD_SIZE")


class SlurmJob:
    """The SLURM job this process belongs to, as the variables SLURM gave it say.

    Inside ``srun`` (``step_id`` set) the process fields are this task's place in the step;
    outside it (a batch script, ``salloc``'s shell) this process is one of its own: index 0 of
    1, on the allocation's ``num_nodes``. Immutable; compares equal by value.
    """

    __slots__ = (
        "cpus_per_task",
        "job_id",
        "local_process_index",
        "node_index",
        "nodelist",
        "num_local_processes",
        "num_nodes",
        "num_processes",
        "process_index",
        "step_id",
    )
    _FIELDS = (
        "job_id",
        "step_id",
        "process_index",
        "num_processes",
        "local_process_index",
        "num_local_processes",
        "node_index",
        "num_nodes",
        "nodelist",
        "cpus_per_task",
    )

    job_id: int
    """``SLURM_JOB_ID``."""
    step_id: int | None
    """``SLURM_STEP_ID``: set for the tasks of ``srun``, None in the batch script."""
    process_index: int
    """``SLURM_PROCID``."""
    num_processes: int
    """``SLURM_STEP_NUM_TASKS`` (else ``SLURM_NTASKS``)."""
    local_process_index: int
    """``SLURM_LOCALID``."""
    num_local_processes: int
    """This node's entry of ``SLURM_STEP_TASKS_PER_NODE`` (else ``SLURM_TASKS_PER_NODE``,
    ``SLURM_NTASKS_PER_NODE``, or the tasks spread evenly over the nodes)."""
    node_index: int
    """``SLURM_NODEID``."""
    num_nodes: int
    """``SLURM_STEP_NUM_NODES`` (else ``SLURM_NNODES``, ``SLURM_JOB_NUM_NODES``)."""
    nodelist: str
    """``SLURM_STEP_NODELIST`` (else ``SLURM_JOB_NODELIST``, ``SLURM_NODELIST``), compressed;
    empty if none was given."""
    cpus_per_task: int | None
    """``SLURM_CPUS_PER_TASK``, set by ``--cpus-per-task`` only."""

    def __init__(
        self,
        job_id: int,
        step_id: int | None,
        process_index: int,
        num_processes: int,
        local_process_index: int,
        num_local_processes: int,
        node_index: int,
        num_nodes: int,
        nodelist: str,
        cpus_per_task: int | None,
    ) -> None:
        values = (
            job_id,
            step_id,
            process_index,
            num_processes,
            local_process_index,
            num_local_processes,
            node_index,
            num_nodes,
            nodelist,
            cpus_per_task,
        )
        for name, value in zip(self._FIELDS, values, strict=True):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"SlurmJob is immutable; cannot set {name}")

    def _astuple(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self._FIELDS)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SlurmJob):
            return NotImplemented
        return self._astuple() == other._astuple()

    def __hash__(self) -> int:
        return hash(self._astuple())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._FIELDS)
        return f"SlurmJob({fields})"

    @property
    def in_step(self) -> bool:
        """Whether this process is a task of ``srun`` (not the batch script)."""
        return self.step_id is not None

    @property
    def hosts(self) -> list[str]:
        """The step's (else the job's) nodes, expanded as ``scontrol show hostnames`` does."""
        return expand_hostlist(self.nodelist, "SLURM_JOB_NODELIST")

    @property
    def main_address(self) -> str:
        """Where the main process (task 0) runs: the first node of the step, or this machine
        (``127.0.0.1``) when the job has one node and no node list was given."""
        first = next(iter_hostlist(self.nodelist, "SLURM_JOB_NODELIST"), None)
        if first is not None:
            return first
        if self.num_nodes == 1:
            return "127.0.0.1"
        raise LauncherEnvironmentError(
            f"SLURM job {self.job_id} runs on {self.num_nodes} nodes but SLURM_JOB_NODELIST "
            "is not set, so the node of its main process is unknown; set MASTER_ADDR"
        )

    @property
    def main_port(self) -> int:
        """The port the main process listens on: ``10000 + job id % 20000``."""
        return FIRST_PORT + self.job_id % PORTS

    def torch_environment(self) -> dict[str, str]:
        """torch's variables for this task: ``MASTER_ADDR``, ``MASTER_PORT``, ``RANK``,
        ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``."""
        return {
            "MASTER_ADDR": self.main_address,
            "MASTER_PORT": str(self.main_port),
            "RANK": str(self.process_index),
            "WORLD_SIZE": str(self.num_processes),
            "LOCAL_RANK": str(self.local_process_index),
            "LOCAL_WORLD_SIZE": str(self.num_local_processes),
        }


def slurm_job(environ: Mapping[str, str] | None = None) -> SlurmJob | None:
    """The SLURM job this process belongs to (read from ``environ``, by default the process's
    environment), or None outside SLURM (no ``SLURM_JOB_ID``). Raises
    :class:`LauncherEnvironmentError` naming a variable that is not what SLURM writes."""
    env = os.environ if environ is None else environ
    job_id = _number(env, "SLURM_JOB_ID", "SLURM_JOBID")
    if job_id is None:
        return None
    nodelist = _first(env, "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST") or ""
    cpus_per_task = _number(env, "SLURM_CPUS_PER_TASK")
    step_id = _number(env, "SLURM_STEP_ID", "SLURM_STEPID")
    if step_id is None:  # the batch script or salloc's shell: one process on the allocation
        nodes = _number(env, "SLURM_JOB_NUM_NODES", "SLURM_NNODES") or 1
        return SlurmJob(job_id, None, 0, 1, 0, 1, 0, nodes, nodelist, cpus_per_task)
    rank = _number(env, "SLURM_PROCID") or 0
    size = _number(env, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS") or 1
    nodes = _number(env, "SLURM_STEP_NUM_NODES", "SLURM_NNODES") or 1
    node = _number(env, "SLURM_NODEID") or 0
    if not rank < size:
        raise LauncherEnvironmentError(
            f"SLURM_PROCID={rank} is not below the step's {size} task(s) (SLURM_NTASKS)"
        )
    if not node < nodes:
        raise LauncherEnvironmentError(
            f"SLURM_NODEID={node} is not below the step's {nodes} node(s) (SLURM_NNODES)"
        )
    local_rank = _number(env, "SLURM_LOCALID")
    local_size = _tasks_on_node(env, node, nodes, size)
    return SlurmJob(
        job_id,
        step_id,
        rank,
        size,
        rank % local_size if local_rank is None else local_rank,
        local_size,
        node,
        nodes,
        nodelist,
        cpus_per_task,
    )


def export_slurm_rendezvous(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Make an ``srun`` task's job one job for torch: inside a step of several tasks, without
    torchrun's ``RANK`` and ``WORLD_SIZE``, set ``MASTER_ADDR``, ``MASTER_PORT``, ``RANK``,
    ``WORLD_SIZE``, ``LOCAL_RANK`` and ``LOCAL_WORLD_SIZE`` from SLURM's variables, and
    ``OMP_NUM_THREADS`` from ``SLURM_CPUS_PER_TASK``, each only where it is not set already
    (what the user or a launcher set wins). Returns the variables it set; nothing outside
    ``srun``, under torchrun, or on a step of one task (but its threads)."""
    env = os.environ if environ is None else environ
    if any(env.get(name, "").strip() for name in _TORCHRUN):
        return {}
    job = slurm_job(env)
    if job is None or not job.in_step:
        return {}
    wanted = job.torch_environment() if job.num_processes > 1 else {}
    if job.cpus_per_task is not None:
        wanted["OMP_NUM_THREADS"] = str(job.cpus_per_task)
    exported = {name: value for name, value in wanted.items() if not env.get(name, "").strip()}
    env.update(exported)
    return exported


def expand_hostlist(hostlist: str, variable: str = "hostlist") -> list[str]:
    """SLURM's compressed host list expanded, as ``scontrol show hostnames`` does:
    ``"gpu[01-02,05],login1"`` is ``["gpu01", "gpu02", "gpu05", "login1"]``.

    Comma-separated items, each a name with bracketed lists of numbers and ranges; a range keeps
    its lower bound's zero padding (``[08-10]``: 08, 09, 10). Several brackets in one name are
    expanded in turn (``a[1-2]b[3-4]``: a1b3, a1b4, a2b3, a2b4), and text may follow a bracket
    (``n[01-02]-ib``), as pdsh reads it. Raises :class:`LauncherEnvironmentError`, naming
    ``variable``, on anything else."""
    return list(iter_hostlist(hostlist, variable))


def iter_hostlist(hostlist: str, variable: str = "hostlist") -> Iterator[str]:
    """:func:`expand_hostlist`, one host at a time (the first without expanding the rest)."""
    for item in _items(hostlist, variable):
        yield from _expand(_pieces(item, hostlist, variable))


def _items(hostlist: str, variable: str) -> list[str]:
    """The top-level comma-separated items (commas inside brackets belong to the item)."""
    items, start, depth = [], 0, 0
    for index, character in enumerate(hostlist):
        if character == "[":
            depth += 1
        elif character == "]":
            depth -= 1
        elif character == "," and depth == 0:
            items.append(hostlist[start:index])
            start = index + 1
        if depth not in (0, 1):
            raise _bad(hostlist, variable, "brackets do not pair up")
    if depth != 0:
        raise _bad(hostlist, variable, "a '[' is not closed")
    items.append(hostlist[start:])
    return [item.strip() for item in items if item.strip()]


def _pieces(item: str, hostlist: str, variable: str) -> list[list[str]]:
    """``item`` as a list of choices per piece: text is one choice, a bracket its numbers."""
    pieces: list[list[str]] = []
    rest = item
    while rest:
        text, bracket, rest = rest.partition("[")
        if text:
            pieces.append([text])
        if bracket:
            inside, _, rest = rest.partition("]")
            pieces.append(_numbers(inside, hostlist, variable))
    return pieces


def _numbers(ranges: str, hostlist: str, variable: str) -> list[str]:
    numbers: list[str] = []
    for part in ranges.split(","):
        low, dash, high = part.strip().partition("-")
        if not dash:
            high = low
        if not (low.isdigit() and high.isdigit() and low.isascii() and high.isascii()):
            raise _bad(hostlist, variable, f"[{ranges}] holds {part!r}, not a number or range")
        if int(high) < int(low):
            raise _bad(hostlist, variable, f"the range {part!r} runs backwards")
        width = len(low)
        numbers.extend(str(number).zfill(width) for number in range(int(low), int(high) + 1))
    return numbers


def _expand(pieces: list[list[str]], prefix: str = "") -> Iterator[str]:
    if not pieces:
        yield prefix
        return
    for choice in pieces[0]:
        yield from _expand(pieces[1:], prefix + choice)


def _bad(hostlist: str, variable: str, why: str) -> LauncherEnvironmentError:
    return LauncherEnvironmentError(f"{variable}={hostlist!r} is not a SLURM host list: {why}")


def _tasks_on_node(env: Mapping[str, str], node: int, nodes: int, size: int) -> int:
    """How many of the step's tasks run on node ``node``. SLURM writes the count per node
    compressed: ``"2(x3),1"`` is 2, 2, 2 and 1."""
    for name in ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"):
        raw = env.get(name, "").strip()
        if raw:
            counts = _per_node(raw, name)
            if node < len(counts):
                return counts[node]
    per_node = _number(env, "SLURM_NTASKS_PER_NODE")
    return per_node if per_node else -(-size // nodes)


def _per_node(raw: str, name: str) -> list[int]:
    counts: list[int] = []
    for part in raw.split(","):
        count, _, times = part.strip().partition("(x")
        repeat = times[:-1] if times.endswith(")") else ("1" if not times else "")
        if not (count.isdigit() and repeat.isdigit()):
            raise LauncherEnvironmentError(
                f"{name}={raw!r} is not SLURM's tasks per node (such as '2(x3),1')"
            )
        counts.extend([int(count)] * int(repeat))
    return counts


def _first(env: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        value = env.get(name, "").strip()
        if value:
            return value
    return None


def _number(env: Mapping[str, str], *names: str) -> int | None:
    """The first of ``names`` that is set, as a whole number."""
    for name in names:
        raw = env.get(name, "").strip()
        if not raw:
            continue
        if not (raw.isdigit() and raw.isascii()):
            raise LauncherEnvironmentError(
                f"environment variable {name}={raw!r} is not a whole number; it is read to "
                "find this process's place in its SLURM job"
            )
        return int(raw)
    return None
