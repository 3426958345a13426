"""current_process() reads the launcher's environment when nothing else is initialised."""

from __future__ import annotations

import pytest

from accmt_decorators import ProcessInfo, current_process, main_process_first, wait_for_everyone

from .test_slurm import SLURM_NAMES

LAUNCHER_NAMES = [
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    *SLURM_NAMES,
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "PMI_RANK",
    "PMI_SIZE",
    "MPI_LOCALRANKID",
    "MPI_LOCALNRANKS",
    "PMIX_RANK",
    "PMIX_SIZE",
    "PMIX_LOCAL_RANK",
    "PMIX_LOCAL_SIZE",
]


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in LAUNCHER_NAMES:
        monkeypatch.delenv(name, raising=False)


def test_single_process_by_default() -> None:
    assert current_process() == ProcessInfo(0, 0, 1, 1, "single")
    process = current_process()
    assert process.is_main_process
    assert process.is_local_main_process
    assert process.is_last_process


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        (
            {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"},
            (3, 1, 4, 2),
        ),
        ({"RANK": "1", "WORLD_SIZE": "2"}, (1, 1, 2, 2)),
        (
            {  # a task of srun: 8 tasks, 4 on each of 2 nodes
                "SLURM_JOB_ID": "77",
                "SLURM_STEP_ID": "0",
                "SLURM_PROCID": "5",
                "SLURM_NTASKS": "8",
                "SLURM_LOCALID": "1",
                "SLURM_NODEID": "1",
                "SLURM_NNODES": "2",
                "SLURM_TASKS_PER_NODE": "4(x2)",
            },
            (5, 1, 8, 4),
        ),
        (  # uneven: 3 tasks on the first node, 1 on the second
            {
                "SLURM_JOB_ID": "77",
                "SLURM_STEP_ID": "3",
                "SLURM_PROCID": "3",
                "SLURM_NTASKS": "4",
                "SLURM_LOCALID": "0",
                "SLURM_NODEID": "1",
                "SLURM_NNODES": "2",
                "SLURM_STEP_TASKS_PER_NODE": "3,1",
            },
            (3, 0, 4, 1),
        ),
        (
            {
                "OMPI_COMM_WORLD_RANK": "2",
                "OMPI_COMM_WORLD_SIZE": "3",
                "OMPI_COMM_WORLD_LOCAL_RANK": "0",
                "OMPI_COMM_WORLD_LOCAL_SIZE": "1",
            },
            (2, 0, 3, 1),
        ),
        ({"PMI_RANK": "1", "PMI_SIZE": "2"}, (1, 1, 2, 2)),
        # torchrun inside a SLURM allocation: torchrun's own variables win.
        ({"RANK": "0", "WORLD_SIZE": "2", "SLURM_PROCID": "0", "SLURM_NTASKS": "1"}, (0, 0, 2, 2)),
    ],
)
def test_launcher_environments(
    monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], expected: tuple[int, ...]
) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    process = current_process()
    assert process.source == "environment"
    assert (
        process.process_index,
        process.local_process_index,
        process.num_processes,
        process.num_local_processes,
    ) == expected


def test_a_slurm_batch_script_is_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """sbatch --ntasks=2 gives the batch script SLURM_PROCID=0 and SLURM_NTASKS=2, but no
    SLURM_STEP_ID: it is one process, not task 0 of 2 waiting for a task 1."""
    for name, value in {"SLURM_JOB_ID": "77", "SLURM_PROCID": "0", "SLURM_NTASKS": "2"}.items():
        monkeypatch.setenv(name, value)
    assert current_process() == ProcessInfo(0, 0, 1, 1, "single")


def test_bad_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "zero")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match=r"RANK='zero' is not a whole number"):
        current_process()


def test_single_process_barrier_and_ordering_return_at_once() -> None:
    wait_for_everyone()
    order = []
    with main_process_first():
        order.append("inside")

    @main_process_first
    def load() -> str:
        return "loaded"

    assert load() == "loaded"
    assert order == ["inside"]
