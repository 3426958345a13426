"""accmt-decorators on real processes: torchrun, accelerate launch, and a bare environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from ._launch import accelerate_launch, plain_processes, read_ranks, torchrun

pytestmark = pytest.mark.distributed


def expected_ran(rank: int, nproc: int, with_group: bool) -> list[str]:
    ran = []
    if rank == 0:
        ran.append("main_only")
    if rank == nproc - 1:
        ran.append("last_only")
    if rank == 0:
        ran.append("local_main_only")
    if nproc > 1 and rank == 1:
        ran += ["second_only", "local_second_only"]
    if nproc > 2 and rank == 2:
        ran.append("third_only")
    if rank == nproc - 1:
        ran.append("static_last")
    if rank == 0:
        ran.append("class_main:Logger")
    if with_group:
        if rank == 0:
            ran.append("main_broadcast")
        if rank == nproc - 1:
            ran.append("last_broadcast")
    return ran


def check_group_run(records: list[dict[str, object]], nproc: int, source: str) -> None:
    for rank, record in enumerate(records):
        process = record["process"]
        assert process == {
            "process_index": rank,
            "local_process_index": rank,
            "num_processes": nproc,
            "num_local_processes": nproc,
            "source": source,
        }
        assert record["ran"] == expected_ran(rank, nproc, with_group=True)
        assert record["logger_lines"] == (["hello"] if rank == 0 else [])
        assert record["main_broadcast"] == {"from": 0, "value": 42}
        assert record["last_broadcast"] == (nproc - 1) * 10
        if rank == 0:
            assert record["main_raises"] == "KeyError: 'boom'"
        else:
            assert record["main_raises"].startswith("RuntimeError: process 0")
            assert "KeyError" in record["main_raises"]
        assert record["local_first_done"] is True
    main_left = records[0]["ordering"]["left"]
    for record in records[1:]:
        # The others entered only once the main process had left the block.
        assert record["ordering"]["entered"] >= main_left


@pytest.mark.parametrize("nproc", [2, 3])
def test_torchrun_group_made_after_decoration(tmp_path: Path, nproc: int) -> None:
    torchrun("decorators_worker.py", nproc, str(tmp_path), "torch")
    check_group_run(read_ranks(tmp_path, nproc), nproc, "torch.distributed")


def test_accelerate_launch_accelerator_made_after_decoration(tmp_path: Path) -> None:
    accelerate_launch("decorators_worker.py", 2, str(tmp_path), "accelerate")
    check_group_run(read_ranks(tmp_path, 2), 2, "accelerate")


@pytest.mark.parametrize("nproc", [2, 3])
def test_plain_environment_without_group(tmp_path: Path, nproc: int) -> None:
    plain_processes("decorators_worker.py", nproc, str(tmp_path), "env")
    for rank, record in enumerate(read_ranks(tmp_path, nproc)):
        assert record["process"]["source"] == "environment"
        assert record["process"]["process_index"] == rank
        assert record["process"]["num_processes"] == nproc
        assert record["ran"] == expected_ran(rank, nproc, with_group=False)
        assert "NoProcessGroupError" in record["barrier_error"]
        assert "needs a process group" in record["barrier_error"]
        # No rendezvous to make a group from, and the error names it.
        assert "has no MASTER_ADDR, MASTER_PORT to make one" in record["barrier_error"]
