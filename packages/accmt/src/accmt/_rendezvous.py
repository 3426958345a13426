"""Where the processes of ``accmt launch`` meet: one machine or several, restarts or none;
the checks of the options that say so; and, run as one task per machine by ``srun``, the
machines SLURM gave it."""

from __future__ import annotations

import argparse
import random
import socket
from collections.abc import Mapping

import attrs

from accmt_decorators import SlurmJob

from ._errors import LaunchError


@attrs.frozen
class Rendezvous:
    """Where and how the processes of every machine meet."""

    backend: str
    address: str
    port: int
    num_machines: int = 1
    machine_rank: int = 0

    @property
    def endpoint(self) -> str:
        return f"{self.address}:{self.port}"


def rendezvous(
    options: argparse.Namespace,
    job: SlurmJob | None = None,
    environ: Mapping[str, str] | None = None,
) -> Rendezvous:
    """The machines and where they meet: the options where given, else SLURM's ``job`` (run
    by ``srun`` once per machine), else one machine. ``environ``'s ``MASTER_ADDR`` and
    ``MASTER_PORT`` (set by hand in a batch script) come before SLURM's."""
    machines, rank, slurm = _machines(options, job)
    if rank >= machines:
        raise LaunchError(
            f"--machine-rank {rank}: with --num-machines {machines}, 0 to {machines - 1}"
        )
    several = machines > 1
    address, port = options.main_address, options.main_port
    if several and slurm is not None:
        environ = environ or {}
        address = address or environ.get("MASTER_ADDR") or slurm.main_address
        port = port or int(environ.get("MASTER_PORT") or slurm.main_port)
    if several and (address is None or port is None):
        raise LaunchError(
            f"--num-machines {machines}: give --main-address and --main-port, machine 0's "
            "address and a port every machine can reach, the same on each machine"
        )
    backend = options.rdzv_backend or ("c10d" if options.max_restarts else "static")
    return Rendezvous(backend, address or "127.0.0.1", port or free_port(), machines, rank)


def _machines(
    options: argparse.Namespace, job: SlurmJob | None
) -> tuple[int, int, SlurmJob | None]:
    """The number of machines, this one's rank, and the SLURM step they come from (None when
    the options or a single machine say them)."""
    given_rank = options.machine_rank
    if options.num_machines is not None or job is None:
        return options.num_machines or 1, given_rank or 0, None
    if not job.in_step:
        if job.num_nodes > 1:
            raise LaunchError(
                f"runs outside srun in SLURM job {job.job_id}, an allocation of "
                f"{job.num_nodes} nodes: it would start only this machine's share of the job. "
                "Run it once per node, 'srun --ntasks-per-node=1 accmt launch ...' (the "
                "machines, each one's rank and where they meet are then SLURM's), or give "
                "--num-machines, --machine-rank, --main-address and --main-port yourself"
            )
        return 1, given_rank or 0, None
    if job.num_processes != job.num_nodes:
        raise LaunchError(
            f"runs under srun as {job.num_processes} task(s) on {job.num_nodes} node(s) "
            f"(SLURM job {job.job_id}): it starts each machine's processes itself, so it runs "
            "as one task per machine, 'srun --ntasks-per-node=1 accmt launch ...'; or start "
            "the script itself as SLURM's tasks, 'srun --ntasks=N python train.py'"
        )
    rank = job.node_index if given_rank is None else given_rank
    return job.num_nodes, rank, job if job.num_nodes > 1 else None


def count(value: str) -> int:
    if not value.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number (0 or more), got {value!r}")
    return int(value)


def positive(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number (1 or more), got {value!r}")
    return int(value)


def port(value: str) -> int:
    if not value.isdigit() or not 1 <= int(value) <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port (1 to 65535), got {value!r}")
    return int(value)


# Below Linux's ephemeral range (32768-60999): a port the kernel hands out to outgoing
# connections (gloo's, a TCP store client's) can be taken between this check and the
# launcher's bind; one chosen here is taken only by another program listening on it.
_QUIET_PORTS = range(20000, 32768)


def free_port() -> int:
    """A loopback port that nothing listens on, at random outside the ephemeral range."""
    for candidate in random.sample(_QUIET_PORTS, 64):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", candidate))
            except OSError:
                continue
            return candidate
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
