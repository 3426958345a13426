"""The SLURM tests share one cluster a session (tests/conftest.py deals every file of this
folder to one xdist worker, so no two workers start daemons): see _cluster.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ._cluster import Cluster, slurm_cluster


@pytest.fixture(scope="session")
def slurm() -> Iterator[Cluster]:
    """A running SLURM cluster of one node, stopped (with whatever it still runs) at the end of
    the session."""
    with slurm_cluster() as cluster:
        yield cluster
