"""A private SLURM cluster of two nodes on this machine, started and stopped by the tests.

The daemons are Debian's (``apt-get install -y slurmctld slurmd munge slurm-client``, which
.ci/install-slurm runs where they are missing: .ci/run ahead of the tests, or the tests).
Everything else is the tests' own, in one temporary folder: a munge key and munged's socket,
the slurm.conf that ``SLURM_CONF`` names to every SLURM command (/etc is neither read nor
written), the controller's state, the slurmds' spools, the daemons' logs, and ports (the
daemons', and the jobs' through their ids) from this xdist worker's block. So a cluster here
runs beside a system SLURM, or another test session's cluster, without touching either.

Its nodes are slurmds of this machine, each with its own name and port (Debian's slurmd runs
several on one host): the first is named as this machine (``hostname -s``), the others add a
number (``vm2``). A job's first node, where its processes meet, is a name this machine
resolves; a job of ``--nodes=2`` runs one task on each, as on two machines.

munged, slurmctld and the slurmds run in the foreground (``-F``, ``-D``) as children of the test
process, and are stopped by their PIDs: first every job of the cluster is cancelled and waited
for, then the daemons get SIGTERM (SIGKILL if they linger), and last any process still carrying
this cluster's ``SLURM_CONF`` in its environment (a job's process that outlived its step) is
killed by its PID. Nothing is left running, and nothing else is touched.

The daemons run as root (slurmd starts each job as its user): a test session that is not root
fails, saying so.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path

import pytest

from ..distributed._launch import free_port, port_block

INSTALL = "apt-get install -y slurmctld slurmd munge slurm-client"
INSTALLER = Path(__file__).resolve().parents[2] / ".ci" / "install-slurm"
# What the job gets: SIGTERM at its time limit or cancel, then SIGKILL this many seconds
# later (SLURM's default is 30). Long enough for a stop checkpoint of a small model.
KILL_WAIT = 10
# A requeued job may start again this many seconds after the requeue (SLURM's default is
# the credential lifetime, 120 s).
CRED_EXPIRE = 10
# JobState values of a job that will not run again by itself. While any process of an ended job
# is still running (its stop checkpoint being written, say), JobState reads COMPLETING.
ENDED = {
    "BOOT_FAIL",
    "CANCELLED",
    "COMPLETED",
    "DEADLINE",
    "FAILED",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "TIMEOUT",
}


class SlurmError(AssertionError):
    """The cluster did not do what a test waited for; the message holds the daemons' logs."""


def program(name: str) -> str:
    """The path of one of SLURM's or munge's programs (the daemons are in /usr/sbin, which a
    user's PATH may lack). Where it is missing, .ci/install-slurm installs Debian's packages (as
    .ci/run does, so that the README's test command works on a fresh machine); a test fails
    where that cannot be done, saying why and how to install them."""
    found = _which(name)
    if found is None:
        installing = subprocess.run(
            ["sh", str(INSTALLER)], capture_output=True, text=True, timeout=600, check=False
        )
        found = _which(name)
        if found is None:
            pytest.fail(
                f"{name} is not installed: the SLURM tests run a real SLURM cluster on this "
                f"machine, and {INSTALLER.name} could not install it:\n"
                f"{installing.stdout[-3000:]}{installing.stderr[-3000:]}\n"
                f"Install Debian's packages as root: {INSTALL}"
            )
    return found


def _which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin")


class Cluster:
    """A running cluster: its folder, its nodes' names, and the environment (with
    ``SLURM_CONF``) that SLURM's commands and the jobs they submit get."""

    def __init__(self, home: Path, nodes: list[str], environment: dict[str, str]) -> None:
        self.home, self.nodes, self.environment = home, nodes, environment

    def command(self, *argv: str, timeout: float = 60) -> str:
        """Run one of SLURM's commands (``sbatch``, ``scontrol``...) against this cluster; its
        standard output. A failure raises SlurmError with its output and the daemons' logs."""
        done = subprocess.run(
            [program(argv[0]), *argv[1:]],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.environment,
        )
        if done.returncode != 0:
            raise SlurmError(
                f"{' '.join(argv)} exited {done.returncode}\n{done.stdout}{done.stderr}"
                + self.logs()
            )
        return done.stdout

    def submit(self, script: str, *options: str) -> int:
        """``sbatch`` a batch script (its text, ``#!`` line and ``#SBATCH`` lines included)
        with extra command-line ``options``; the job's id. The job starts in the cluster's
        folder unless an option says ``--chdir``, with the environment of :attr:`environment`
        (sbatch's default ``--export=ALL``)."""
        handle, name = tempfile.mkstemp(prefix="job-", suffix=".sh", dir=self.home)
        os.close(handle)
        path = Path(name)
        path.write_text(script)
        out = self.command("sbatch", "--parsable", f"--chdir={self.home}", *options, str(path))
        return int(out.strip().split(";")[0])

    def job(self, job_id: int) -> dict[str, str]:
        """``scontrol show job``'s fields of the job (JobState, ExitCode, Restarts, ...)."""
        line = self.command("scontrol", "--oneliner", "show", "job", str(job_id))
        return dict(re.findall(r"(\S+?)=(\S*)", line))

    def wait(
        self,
        job_id: int,
        until: Callable[[dict[str, str]], bool] = lambda job: job["JobState"] in ENDED,
        timeout: float = 240,
        log: Path | None = None,
    ) -> dict[str, str]:
        """Poll the job until ``until`` holds of its fields (by default: it has ended); its
        fields then. Past ``timeout`` seconds, SlurmError with its fields, ``log`` (the job's
        output) and the daemons' logs."""
        deadline = time.monotonic() + timeout
        while True:
            job = self.job(job_id)
            if until(job):
                return job
            if time.monotonic() > deadline:
                output = log.read_text(errors="replace")[-4000:] if log and log.exists() else ""
                raise SlurmError(
                    f"job {job_id} after {timeout:.0f} s: {job}\n--- its log\n{output}"
                    + self.logs()
                )
            time.sleep(0.25)

    def start_now(self, job_id: int) -> None:
        """Let a pending job start now, rather than at its begin time."""
        self.command("scontrol", "update", f"JobId={job_id}", "StartTime=now")

    def logs(self) -> str:
        """The end of each daemon's log, for a failure's message."""
        return daemon_logs(self.home)


def daemon_logs(home: Path) -> str:
    return "".join(
        f"\n--- {log.name}\n{log.read_text(errors='replace')[-3000:]}"
        for log in sorted(home.glob("*.log"))
    )


def first_job_id() -> int:
    """A job id whose port under srun (10000 + id % 20000, 10000-29999) is the first of the
    upper half of this xdist worker's block of ports."""
    block = port_block()
    port = block[len(block) // 2]
    if port >= 30000:  # a worker past the 20th: its block is out of reach; any ports then
        return 1
    return 20000 + port - 10000


def slurm_conf(home: Path, nodes: list[str], cpus: int) -> str:
    return "\n".join(
        [
            "ClusterName=accmt-tests",
            # Job N's processes meet on port 10000 + N % 20000 (accmt's port under srun): the
            # jobs' ports are the upper half of this xdist worker's block, where free_port (the
            # daemons', other tests') never goes.
            f"FirstJobId={first_job_id()}",
            f"SlurmctldHost={nodes[0]}(127.0.0.1)",
            f"SlurmctldPort={free_port()}",
            f"SlurmdPort={free_port()}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={home / 'munge.socket'},cred_expire={CRED_EXPIRE}",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={home / 'state'}",
            f"SlurmdSpoolDir={home / 'spool'}/%n",  # %n: the node's name
            f"SlurmctldPidFile={home / 'slurmctld.pid'}",
            f"SlurmdPidFile={home / 'slurmd-%n.pid'}",
            f"PlugStackConfig={home / 'plugstack.conf'}",
            # Without systemd or cgroups: processes are tracked by their parents, not bound.
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "MpiDefault=none",
            "JobRequeue=1",
            "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none",
            "JobCompType=jobcomp/none",
            f"KillWait={KILL_WAIT}",
            # A pending job whose begin time has come (a requeued one) starts within 2 s, not at
            # the next pass of the scheduler (every 60 s by default).
            "SchedulerParameters=sched_interval=2",
            # Ended jobs stay for `scontrol show job` for an hour (longer than any test).
            "MinJobAge=3600",
            "ReturnToService=2",
            # A node is what this file says, whatever its slurmd finds on the machine.
            "SlurmdParameters=config_overrides",
            *(
                f"NodeName={node} NodeAddr=127.0.0.1 Port={free_port()} CPUs={cpus} State=UNKNOWN"
                for node in nodes
            ),
            f"PartitionName=debug Nodes={','.join(nodes)} Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
    )


class Daemons:
    """The daemons this cluster started, stopped in the reverse order by their PIDs."""

    def __init__(self, home: Path, environment: dict[str, str]) -> None:
        self.home, self.environment = home, environment
        self.started: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(self, program_name: str, *argv: str, log: str = "") -> subprocess.Popen[bytes]:
        """Start ``program_name`` with ``argv``, its output in <log>.log (by default, named
        after the program)."""
        name = log or program_name
        with (self.home / f"{name}.log").open("wb") as output:
            process = subprocess.Popen(
                [program(program_name), *argv],
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                env=self.environment,
                start_new_session=True,  # a ^C to the tests reaches them through stop()
            )
        self.started.append((name, process))
        return process

    def check(self) -> None:
        for name, process in self.started:
            if process.poll() is not None:
                log = (self.home / f"{name}.log").read_text(errors="replace")[-4000:]
                raise SlurmError(f"{name} exited {process.returncode} at its start:\n{log}")

    def stop(self) -> None:
        for _, process in reversed(self.started):
            if process.poll() is None:
                process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=20)


def poll(what: str, ready: Callable[[], bool], daemons: Daemons, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        daemons.check()
        if time.monotonic() > deadline:
            raise SlurmError(f"{what} not ready after {timeout:.0f} s{daemon_logs(daemons.home)}")
        time.sleep(0.1)


def idle(cluster: Cluster) -> bool:
    """Whether every node of the cluster is up and idle."""
    done = subprocess.run(
        [program("sinfo"), "--noheader", "--Node", "--format=%N %T"],
        capture_output=True,
        text=True,
        timeout=30,
        env=cluster.environment,
    )
    states = dict(line.split() for line in done.stdout.splitlines() if line.strip())
    return states == dict.fromkeys(cluster.nodes, "idle")


def cancel_everything(cluster: Cluster, timeout: float = KILL_WAIT + 30) -> None:
    """Cancel the cluster's jobs that have not ended, and wait until none is left."""

    def unfinished() -> list[str]:
        return cluster.command("squeue", "--noheader", "--format=%i").split()

    jobs = unfinished()
    if jobs:
        cluster.command("scancel", *jobs)
    deadline = time.monotonic() + timeout
    while unfinished() and time.monotonic() < deadline:
        time.sleep(0.25)


def kill_strays(conf: Path) -> None:
    """SIGKILL, by PID, every process whose environment names this cluster's slurm.conf (what
    the daemons, steps and jobs of this cluster alone carry) other than this one."""
    mark = f"SLURM_CONF={conf}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environment = (entry / "environ").read_bytes().split(b"\0")
        except OSError:  # gone already, or not ours to read
            continue
        if mark in environment:
            with suppress(ProcessLookupError):
                os.kill(int(entry.name), signal.SIGKILL)


@contextmanager
def slurm_cluster(nodes: int = 2, cpus: int | None = None) -> Iterator[Cluster]:
    """Start a cluster of ``nodes`` nodes of ``cpus`` CPUs each (default: this machine's, at
    least 8) in one partition, ``debug``; stop it, and everything it ran, at the end. The CPUs
    are what SLURM counts, not cores a job is bound to (task/none): every node's jobs share
    this machine's cores, so that the tests' small jobs can all run at once."""
    for name in ("munged", "slurmctld", "slurmd", "sbatch"):
        program(name)  # a missing package fails here, saying how to install it
    if os.geteuid() != 0:
        pytest.fail(
            "the SLURM tests start slurmctld and slurmd, which run jobs as their users and so "
            "must run as root: run these tests as root (CI does)"
        )
    host = socket.gethostname().split(".")[0]
    names = [host, *(f"{host}{number}" for number in range(2, nodes + 1))]
    with ExitStack() as cleanup:
        home = Path(tempfile.mkdtemp(prefix="accmt-slurm-"))
        cleanup.callback(shutil.rmtree, home, ignore_errors=True)
        home.chmod(0o755)  # munged wants its socket's folder open to every user
        for folder in ("state", *(f"spool/{name}" for name in names)):
            (home / folder).mkdir(parents=True)
        (home / "plugstack.conf").write_text("")
        key = home / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        conf = home / "slurm.conf"
        conf.write_text(slurm_conf(home, names, cpus or max(os.cpu_count() or 1, 8)))
        environment = {**os.environ, "SLURM_CONF": str(conf)}
        cluster = Cluster(home, names, environment)
        cleanup.callback(kill_strays, conf)
        daemons = Daemons(home, environment)
        cleanup.callback(daemons.stop)
        daemons.start(
            "munged",
            "--foreground",
            f"--socket={home / 'munge.socket'}",
            f"--key-file={key}",
            f"--pid-file={home / 'munged.pid'}",
            f"--seed-file={home / 'munged.seed'}",
        )
        poll("munged", (home / "munge.socket").exists, daemons, timeout=30)
        daemons.start("slurmctld", "-D")
        for name in names:
            daemons.start("slurmd", "-D", "-N", name, log=f"slurmd-{name}")
        poll("the nodes", lambda: idle(cluster), daemons, timeout=60)
        cleanup.callback(cancel_everything, cluster)
        yield cluster
