"""Resuming on another number of processes, as arithmetic: where a checkpoint's moment lands,
which moments are refused and what the refusal offers, the counters' offsets across one resize
and another, the loss windows, and the schedule lengths a scheduler's state would put back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest
import torch
from accelerate.data_loader import prepare_data_loader
from torch.optim import lr_scheduler
from torch.utils.data import DataLoader

from accmt_state import TrainingState
from accmt_trainer import CheckpointError
from accmt_trainer.checkpointing._manifest import RESHARDED, check_compatible
from accmt_trainer.checkpointing._resize import (
    check_position,
    fitting_counts,
    merge_losses,
    position_at,
    ranks_taken_over,
    read_by_a_process,
    refusal,
    resized_facts,
    restore_lengths,
    schedule_lengths,
    seen_here,
)
from accmt_trainer.checkpointing._run_facts import FileEntry, RunFacts
from accmt_trainer.data._epoch_plan import order_batches

HERE = Path("state.json")


def facts(
    world_size: int, *, order: int | None = 25, accumulation: int = 2, **others: Any
) -> RunFacts:
    """A run over one order of ``order`` batches an epoch of 8 samples, dealt to
    ``world_size`` processes (Accelerate evens the last round out: ceil(order / world_size)
    each)."""
    batches = -(-order // world_size) if order is not None else 13
    settings = {"stages": None, "sharded": False, "max_steps": None, **others}
    return RunFacts(
        world_size=world_size,
        train_batch_size=8,
        grad_accumulation_steps=accumulation,
        batches_per_epoch=batches,
        order_batches=order,
        **settings,
    )


def at(epoch: int, seen: int, made: RunFacts, **offsets: int) -> TrainingState:
    """A state of the run with ``made``'s facts (and offsets) after ``seen`` batches of
    ``epoch``."""
    counted = attrs.asdict(position_at(attrs.evolve(made, **offsets), epoch, seen, HERE))
    return TrainingState(epoch=epoch, train_step=seen, **counted)


@pytest.mark.parametrize(
    ("made_on", "now_on", "seen", "expected"),
    [
        (2, 1, 4, 8),  # 8 batches of the order read: 8 on one process
        (1, 2, 8, 4),  # 8 read: 4 on each of two, two windows of 2 each
        (1, 2, 6, None),  # 6 read: 3 on each of two, not whole windows
        (4, 3, 6, 8),  # 24 read: 8 on each of three
        (3, 4, 2, None),  # 6 read: 1.5 on each of four
        (2, 1, 0, 0),  # an epoch's start: any number of processes
        (1, 2, 0, 0),
        (2, 1, 13, 25),  # the epoch read to its end on two (padded): to its end on one
    ],
)
def test_a_moment_maps_to_the_same_batches_of_the_order(
    made_on: int, now_on: int, seen: int, expected: int | None
) -> None:
    state = TrainingState(epoch=1, batches_seen_in_epoch=seen)
    assert seen_here(state, facts(made_on), facts(now_on)) == expected


def test_a_moment_within_an_epoch_needs_the_same_countable_order() -> None:
    state = TrainingState(epoch=0, batches_seen_in_epoch=4)
    assert seen_here(state, facts(2, order=24), facts(1, order=25)) is None
    assert seen_here(state, facts(2, order=None), facts(1, order=None)) is None
    # An epoch's start needs no order at all.
    assert seen_here(TrainingState(epoch=1), facts(2, order=None), facts(1)) == 0


def test_the_refusal_says_where_it_stopped_and_what_would_resume_it() -> None:
    state = TrainingState(epoch=0, global_step=3, batches_seen_in_epoch=6, batch_iteration=6)
    assert fitting_counts(state, facts(1)) == [1, 3]
    assert refusal(state, facts(1), facts(2), "1 (checkpoint_000001, epoch 0, step 2)") == (
        "it was made at batch 6 of epoch 1 (step 3), after 6 batches of the epoch's order; on 2 "
        "processes that is 3 batches each, not a whole number of accumulation windows of 2 "
        "batches. To go on: resume it on a number of processes that splits it so: 1, 3; or "
        "pass resume=1 (checkpoint_000001, epoch 0, step 2), a moment this run can start from"
    )
    state = TrainingState(epoch=0, global_step=2, batches_seen_in_epoch=2, batch_iteration=2)
    message = refusal(state, facts(2, order=None), facts(3, order=None), None)
    assert "after 4 batches of the epoch's order (2 on each of 2 processes)" in message
    assert "this run cannot count the batches of that order" in message
    assert message.endswith(
        "To go on: resume from a checkpoint made at an epoch's end (any number of processes "
        "can start from one)"
    )


def test_a_stream_s_places_within_an_epoch_are_refused_on_another_number_of_processes() -> None:
    state = TrainingState(epoch=0, global_step=5, batches_seen_in_epoch=5, batch_iteration=5)
    stream = {"batches_per_epoch": None, "stream": "IterableDataset"}  # without a length
    made = attrs.evolve(facts(2, order=None), **stream)
    now = attrs.evolve(facts(3, order=None), **stream)
    assert seen_here(state, made, now) is None
    assert seen_here(TrainingState(epoch=1), made, now) == 0  # between epochs: afresh
    message = refusal(state, made, now, None)
    assert "the training stream IterableDataset keeps its place within an epoch for the 2 " in (
        message
    )
    assert "which does not split onto 3 processes" in message
    assert "To go on: resume it on 2 processes, as it was made; or resume from a checkpoint" in (
        message
    )


def test_counters_go_on_across_a_resize_and_another() -> None:
    two, one = facts(2), facts(1)  # 13 batches, 7 steps an epoch; 25 batches, 13 steps
    made = at(1, 0, two)  # the end of epoch 1 on two processes: step 7, batch 13
    assert (made.global_step, made.batch_iteration) == (7, 13)
    check_position(made, two, HERE)
    here = resized_facts(one, made, HERE)
    assert (here.step_offset, here.iteration_offset) == (7 - 13, 13 - 25)
    # 3 epochs on one process are 39 steps; 7 are done and 26 left: 33 in all.
    assert 3 * 13 + here.step_offset == 7 + 26
    # A step later on one process, then a checkpoint, checked against the facts it carries.
    later = at(1, 2, one, step_offset=-6, iteration_offset=-12)
    assert (later.global_step, later.batch_iteration) == (8, 15)
    check_position(later, here, HERE)
    with pytest.raises(CheckpointError, match=r"global_step is 8, but .* it must be 14"):
        check_position(later, one, HERE)  # without the offsets it is no moment of that run
    # Back on two processes: 2 batches on one are 1 on each of two, not a window of 2...
    assert seen_here(later, here, two) is None
    # ...but 4 are 2 each.
    later = at(1, 4, one, step_offset=-6, iteration_offset=-12)
    seen = seen_here(later, here, two)
    assert seen == 2
    later.batches_seen_in_epoch = later.train_step = seen
    again = resized_facts(two, later, HERE)
    assert (later.global_step, later.batch_iteration) == (9, 17)
    check_position(later, again, HERE)
    assert position_at(again, 3, 0, HERE).global_step == 9 + 6 + 7


def test_each_old_process_s_losses_are_taken_by_one_process() -> None:
    assert [ranks_taken_over(rank, 2, 1) for rank in range(1)] == [[0, 1]]
    assert [ranks_taken_over(rank, 1, 2) for rank in range(2)] == [[0], []]
    assert [ranks_taken_over(rank, 3, 2) for rank in range(2)] == [[0, 2], [1]]
    assert [ranks_taken_over(rank, 2, 2) for rank in range(2)] == [[0], [1]]
    window = {"total": torch.tensor(1.5, dtype=torch.float64), "count": 2}
    other = {"total": torch.tensor(2.0, dtype=torch.float64), "count": 3}
    merged = merge_losses([{"window": window}, {"window": other}], like={"window": window})
    assert merged["window"]["count"] == 5
    assert float(merged["window"]["total"]) == 3.5
    empty = merge_losses([], like={"window": window})
    assert empty["window"]["count"] == 0
    assert float(empty["window"]["total"]) == 0.0


def test_a_process_reads_the_shared_files_and_those_of_the_processes_it_takes_over() -> None:
    sizes = {
        "accelerate/model.safetensors": 100,
        "accelerate/random_states_0.pkl": 10,
        "accelerate/random_states_1.pkl": 20,
        "accelerate/pytorch_model_fsdp_0/__0_0.distcp": 1000,
        "accelerate/pytorch_model_fsdp_0/__1_0.distcp": 2000,
        "process_0.safetensors": 3,
        "process_1.safetensors": 4,
        "stream_1.safetensors": 5,
        "object_0.safetensors": 7,
        "state.json": 1,
    }
    files = {name: FileEntry(size=size, xxh3_128="0" * 32) for name, size in sizes.items()}
    shared = 100 + 7 + 1
    assert read_by_a_process(files, 2, 2) == shared + 20 + 2000 + 4 + 5  # process 1 reads most
    assert read_by_a_process(files, 2, 1) == sum(sizes.values())  # one process takes both
    # From one process onto two: process 0 takes over the files of process 0, process 1 none.
    assert read_by_a_process(files, 1, 2) == shared + 10 + 1000 + 3


def _optimizer() -> torch.optim.Optimizer:
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=1.0)


SIZED = {
    "OneCycleLR": lambda opt, n: lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=n),
    "CosineAnnealingLR": lambda opt, n: lr_scheduler.CosineAnnealingLR(opt, T_max=n),
    "LinearLR": lambda opt, n: lr_scheduler.LinearLR(opt, 1.0, 0.1, total_iters=n),
    "PolynomialLR": lambda opt, n: lr_scheduler.PolynomialLR(opt, total_iters=n),
    "SequentialLR": lambda opt, n: lr_scheduler.SequentialLR(
        opt,
        [
            lr_scheduler.LinearLR(opt, 0.1, total_iters=2),
            lr_scheduler.CosineAnnealingLR(opt, T_max=n - 2),
        ],
        milestones=[2],
    ),
}


@pytest.mark.parametrize("name", sorted(SIZED))
def test_a_schedule_keeps_this_run_s_length_over_the_checkpoint_s(name: str) -> None:
    make = SIZED[name]
    old_optimizer = _optimizer()
    old = make(old_optimizer, 12)
    for _ in range(5):
        old_optimizer.step()
        old.step()
    new_optimizer = _optimizer()
    new = make(new_optimizer, 20)
    lengths = schedule_lengths(new)
    assert lengths
    new_optimizer.load_state_dict(old_optimizer.state_dict())
    new.load_state_dict(old.state_dict())
    restore_lengths(lengths)
    assert new.last_epoch == 5
    for scheduler, sized in lengths:
        assert all(getattr(scheduler, key) == value for key, value in sized.items())
    for _ in range(15):  # to the end of this run's length: OneCycleLR refuses a step past it
        new_optimizer.step()
        new.step()
    if name in ("CosineAnnealingLR", "PolynomialLR", "SequentialLR"):
        assert new_optimizer.param_groups[0]["lr"] == 0.0


def test_the_order_is_counted_before_it_is_dealt_out() -> None:
    loader = DataLoader(list(range(200)), batch_size=8, shuffle=True)
    assert order_batches(loader) == 25
    dealt = prepare_data_loader(loader, num_processes=2, process_index=1, put_on_device=False)
    assert (len(dealt), order_batches(dealt)) == (13, 25)


def test_a_curriculum_resumes_only_on_its_number_of_processes(tmp_path: Path) -> None:
    made = facts(2, stages=((9, 5), (24, 25)))
    now = facts(1, stages=((9, 10), (24, 50)))
    with pytest.raises(CheckpointError) as refused:
        check_compatible(made, now, tmp_path)
    message = str(refused.value)
    assert "was made on 2 processes, and this run has 1; its state cannot be read. " in message
    assert "A curriculum's stages end at optimizer steps, and an optimizer step holds" in message
    assert "so it resumes only on 2 processes: resume on 2 processes, or give" in message


def test_another_order_is_refused_on_another_number_of_processes_too(tmp_path: Path) -> None:
    made, now = facts(2, order=24), facts(1, order=25)
    with pytest.raises(CheckpointError, match="made with order_batches=24, but this run has "):
        check_compatible(made, now, tmp_path)
    # Cannot tell: an epoch's start resumes.
    check_compatible(attrs.evolve(made, order_batches=None), now, tmp_path)
    check_compatible(attrs.evolve(made, order_batches=25), now, tmp_path)


def test_sharded_state_resumes_only_on_its_number_of_processes(tmp_path: Path) -> None:
    made = facts(2, sharded=True)
    with pytest.raises(CheckpointError, match="Its model and optimizer state is sharded by"):
        check_compatible(made, facts(1, sharded=True), tmp_path)
    # Into a run that holds it whole: that is what is said, on any number of processes.
    made = facts(2, sharded=True, sharding=RESHARDED)
    with pytest.raises(CheckpointError, match=r"sharded by process .*this run's is whole on each"):
        check_compatible(made, facts(1), tmp_path)


@pytest.mark.parametrize("now_on", [1, 3])
def test_fsdp2_sharded_state_dicts_resume_on_another_number_of_processes(
    tmp_path: Path, now_on: int
) -> None:
    """DCP reshards them on load (the real resume: tests/distributed/test_fsdp.py); the same
    run with full state dicts is refused."""
    made = facts(2, sharded=True, sharding=RESHARDED)
    now = facts(now_on, sharded=True, sharding=RESHARDED)
    check_compatible(made, now, tmp_path)
    full = "FSDP2 FULL_STATE_DICT"
    with pytest.raises(CheckpointError, match=rf"sharded by process \({full}\); only FSDP2"):
        check_compatible(attrs.evolve(made, sharding=full), attrs.evolve(now, sharding=full), HERE)


@pytest.mark.parametrize(
    ("was", "is_"),
    [
        ("FSDP1 SHARDED_STATE_DICT", "FSDP1 SHARDED_STATE_DICT"),
        ("FSDP2 FULL_STATE_DICT", "FSDP2 FULL_STATE_DICT"),
        ("DEEPSPEED", "DEEPSPEED"),
        (None, RESHARDED),  # a checkpoint from before the sharding was recorded
        (RESHARDED, "FSDP1 SHARDED_STATE_DICT"),
    ],
)
def test_other_sharded_state_resumes_only_on_its_number_of_processes(
    tmp_path: Path, was: str | None, is_: str
) -> None:
    made, now = facts(2, sharded=True, sharding=was), facts(1, sharded=True, sharding=is_)
    with pytest.raises(CheckpointError) as refused:
        check_compatible(made, now, tmp_path)
    message = str(refused.value)
    assert f"Its model and optimizer state is sharded by process ({was or 'FSDP, De'}" in message
    assert f"only FSDP2's sharded state dicts ({RESHARDED}) are resharded on load" in message
    assert "so it resumes only on 2 processes: resume on 2 processes, or give" in message


def test_another_sharding_is_refused_on_the_same_number_of_processes(tmp_path: Path) -> None:
    made = facts(2, sharded=True, sharding=RESHARDED)
    now = facts(2, sharded=True, sharding="FSDP2 FULL_STATE_DICT")
    with pytest.raises(CheckpointError, match=r"sharded as FSDP2 SHARDED_STATE_DICT, and this run"):
        check_compatible(made, now, tmp_path)
    check_compatible(made, attrs.evolve(now, sharding=None), tmp_path)  # unknown: not refused


def test_sharded_state_resumes_only_into_a_sharded_run(tmp_path: Path) -> None:
    made, now = facts(2, sharded=True), facts(2, sharded=False)
    with pytest.raises(CheckpointError, match=r"sharded by process .*this run's is whole on each"):
        check_compatible(made, now, tmp_path)
    with pytest.raises(CheckpointError, match="state whole on each process, and this run's is sh"):
        check_compatible(now, made, tmp_path)
    check_compatible(now, now, tmp_path)
