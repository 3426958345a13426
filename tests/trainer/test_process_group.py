"""ProcessGroupScope on one real process (a gloo group of one): it destroys only a group made
inside it. The two-process behaviour of fit is in tests/distributed/test_process_group.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import accelerate.state
import pytest
import torch.distributed
from accelerate import Accelerator

from accmt_trainer.integration import ProcessGroupScope


def make_group(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    store = f"file://{folder / 'store'}"
    torch.distributed.init_process_group("gloo", init_method=store, rank=0, world_size=1)


@pytest.fixture(autouse=True)
def no_group_left() -> Iterator[None]:
    yield
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def test_a_group_made_inside_is_destroyed_and_accelerate_starts_afresh(tmp_path: Path) -> None:
    with ProcessGroupScope() as scope:
        make_group(tmp_path / "first")
        accelerator = scope.own(Accelerator(cpu=True))
        assert scope.created
    assert not torch.distributed.is_initialized()
    assert not accelerate.state.is_initialized()
    # The Accelerator owned still answers what it was.
    assert (accelerator.num_processes, accelerator.process_index) == (1, 0)
    # The next group and Accelerator of the process are made anew.
    with ProcessGroupScope():
        make_group(tmp_path / "second")
        assert Accelerator(cpu=True).num_processes == 1
        assert torch.distributed.get_world_size() == 1
    assert not torch.distributed.is_initialized()


def test_a_group_made_before_is_left_alive_with_accelerate_s_state(tmp_path: Path) -> None:
    make_group(tmp_path)
    world = torch.distributed.group.WORLD
    accelerator = Accelerator(cpu=True)
    with ProcessGroupScope() as scope:
        Accelerator(cpu=True)
        assert not scope.created
    assert torch.distributed.is_initialized()
    assert torch.distributed.group.WORLD is world
    assert accelerate.state.is_initialized()
    assert accelerator.num_processes == 1


def fails_inside_a_scope(folder: Path) -> None:
    with ProcessGroupScope():
        make_group(folder)
        raise RuntimeError("inside")


def test_an_error_inside_still_destroys_the_group_made_there(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="inside"):
        fails_inside_a_scope(tmp_path)
    assert not torch.distributed.is_initialized()
