"""The SLURM tests share one cluster a session (tests/conftest.py deals every file of this
folder to one xdist worker, so no two workers start daemons; see _cluster.py).

Their training jobs are submitted together when the first test starts, and each test waits for
its own: the slowest waits out a time limit (60 to 90 s, which SLURM checks every 30 s), and the
others run meanwhile on the cluster's CPUs, which it has enough of for all of them at once."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from ._cluster import Cluster, slurm_cluster
from ._jobs import ACCMT, Run, submit, submit_forwarding


@pytest.fixture(scope="session")
def slurm() -> Iterator[Cluster]:
    """A running SLURM cluster of two nodes on this machine, stopped (with whatever it still
    runs) at the end of the session."""
    with slurm_cluster() as cluster:
        yield cluster


@pytest.fixture(scope="session")
def uninterrupted(slurm: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The worker's run on 2 processes, ``srun accmt launch --cpu -N 2`` in a job of one task,
    never stopped: the run the others are compared with."""
    return submit(slurm, tmp_path_factory.mktemp("uninterrupted"))


@pytest.fixture(scope="session")
def limited(slurm: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The same run slowed to 1.5 s a step (2 minutes in all) under a time limit of 1 minute."""
    return submit(slurm, tmp_path_factory.mktemp("limited"), "--time=1", step_seconds=1.5)


@pytest.fixture(scope="session")
def srun_python(slurm: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The same run as two srun tasks of ``python``, one per process, no launcher."""
    out = tmp_path_factory.mktemp("srun_python")
    options = ("--ntasks=2", "--cpus-per-task=1")
    return submit(slurm, out, *options, launch=("srun", sys.executable))


@pytest.fixture(scope="session")
def two_nodes(slurm: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The same run as one ``accmt launch`` of one process on each of two nodes."""
    out = tmp_path_factory.mktemp("two_nodes")
    launch = ("srun", ACCMT, "launch", "--cpu", "-N", "1")
    return submit(slurm, out, "--nodes=2", "--ntasks-per-node=1", launch=launch)


# A job SLURM may requeue, its output file kept across its starts.
REQUEUE = ("--requeue", "--open-mode=append")


@pytest.fixture(scope="session")
def warned(slurm: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The same run at 3 s a step (4 minutes in all, in its first start), requeueable: a test
    sends it SLURM's warning signal once it is training."""
    return submit(slurm, tmp_path_factory.mktemp("warned"), *REQUEUE, step_seconds=3)


@pytest.fixture(scope="session")
def warned_batch(slurm: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The same run at 2.5 s a step under a 3-minute limit, with ``--signal=B:USR1@60``: SLURM
    signals the batch shell alone, 60 to 120 s after the start (it may send it up to 60 s
    early: 55 s early for @45 under 2 minutes in a run here, before this run's fit had
    started), and the shell passes it on to the launcher."""
    out = tmp_path_factory.mktemp("warned_batch")
    options = ("--time=3", "--signal=B:USR1@60", *REQUEUE)
    return submit_forwarding(slurm, out, *options, step_seconds=2.5)


@pytest.fixture(scope="session", autouse=True)
def submitted_together(
    uninterrupted: Run,
    limited: Run,
    srun_python: Run,
    two_nodes: Run,
    warned: Run,
    warned_batch: Run,
) -> None:
    """Every training job, submitted when the first test starts."""
