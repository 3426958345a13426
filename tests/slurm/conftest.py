"""The SLURM tests share one cluster a session (tests/conftest.py deals every file of this
folder to one xdist worker, so no two workers start daemons; see _cluster.py), and one
uninterrupted training run that runs resumed from a stop are compared with (_jobs.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ._cluster import Cluster, slurm_cluster
from ._jobs import Run, submit


@pytest.fixture(scope="session")
def slurm() -> Iterator[Cluster]:
    """A running SLURM cluster of two nodes on this machine, stopped (with whatever it still
    runs) at the end of the session."""
    with slurm_cluster() as cluster:
        yield cluster


@pytest.fixture(scope="session")
def uninterrupted(slurm: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The worker's run on 2 processes by ``srun accmt launch``, never stopped: submitted when
    a test first asks for it, and not waited for (the first test that reads it waits)."""
    return submit(slurm, tmp_path_factory.mktemp("uninterrupted"))
