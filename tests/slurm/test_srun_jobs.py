"""srun forms the job from SLURM's variables, on the cluster that the tests start: ``srun
--ntasks=2 python train.py`` is one job of two processes, and ``srun accmt launch -N 1`` in a
job of ``--nodes=2 --ntasks-per-node=1`` one job of two machines (two slurmds of this machine).
Both train to the weights of ``srun accmt launch -N 2`` on one node, bit for bit."""

from __future__ import annotations

import pytest

from ._cluster import Cluster
from ._jobs import Run, assert_same_weights, assert_trained_from_scratch

pytestmark = [pytest.mark.distributed, pytest.mark.slurm]


def test_srun_ntasks_2_python_is_one_job_of_two_processes(
    slurm: Cluster, uninterrupted: Run, srun_python: Run
) -> None:
    assert_trained_from_scratch(slurm, srun_python)
    slurm.wait(uninterrupted.job_id)
    assert_same_weights(srun_python.records(), uninterrupted.records())


def test_srun_accmt_launch_on_two_nodes_is_one_job_of_two_machines(
    slurm: Cluster, uninterrupted: Run, two_nodes: Run
) -> None:
    assert_trained_from_scratch(slurm, two_nodes)
    slurm.wait(uninterrupted.job_id)
    assert_same_weights(two_nodes.records(), uninterrupted.records())
