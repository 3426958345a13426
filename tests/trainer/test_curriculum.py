"""Curriculum learning: the stage math of each class, its errors, and Trainer.fit training each
stage's data up to the stage's end, resuming exactly across a stage's end, with the state naming
the current stage."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import TensorDataset

from accmt_callbacks import Callback
from accmt_state import TrainingState
from accmt_trainer import (
    HyperParameters,
    RangeCurriculum,
    RatioCurriculum,
    StepsCurriculum,
    Trainer,
    TrainerConfigError,
)
from accmt_trainer.data._epoch_plan import StageLayout

from .conftest import Classifier, blobs


def tagged(n: int, tag: int, seed: int = 0) -> TensorDataset:
    """``n`` samples whose third field says which stage's data they are."""
    features, labels = blobs(n, seed=seed).tensors
    return TensorDataset(features, labels, torch.full((n,), tag))


def ends(stages: list[tuple[int, Any, dict[str, Any]]]) -> list[int]:
    return [end for end, _, _ in stages]


# ---------------------------------------------------------------------------- stage math


def test_steps_curriculum_adds_up_and_minus_one_takes_the_rest() -> None:
    curriculum = StepsCurriculum()
    curriculum.add(tagged(4, 0), 10)
    curriculum.add(tagged(4, 1), 20, {"shuffle": False})
    curriculum.add(tagged(4, 2), -1)
    stages = curriculum.stages(100)
    assert ends(stages) == [10, 30, 100]
    assert [kwargs for _, _, kwargs in stages] == [{}, {"shuffle": False}, {}]
    assert len(curriculum) == 3


@given(st.lists(st.integers(1, 50), min_size=1, max_size=6), st.integers(0, 30))
def test_steps_curriculum_ends_are_the_running_sums(sizes: list[int], extra: int) -> None:
    fixed = StepsCurriculum()
    rest = StepsCurriculum()
    for size in sizes:
        fixed.add(tagged(1, 0), size)
        rest.add(tagged(1, 0), size)
    rest.add(tagged(1, 0), -1)
    assert ends(fixed.stages(None)) == list(itertools.accumulate(sizes))
    assert ends(fixed.stages(sum(sizes))) == list(itertools.accumulate(sizes))
    total = sum(sizes) + 1 + extra
    assert ends(rest.stages(total)) == [*itertools.accumulate(sizes), total]


def test_ratio_curriculum_ends_are_whole_steps_without_float_noise() -> None:
    curriculum = RatioCurriculum()
    for tag, ratio in enumerate((0.1, 0.2, 0.3, 0.4)):
        curriculum.add(tagged(4, tag), ratio)
    # 0.1 + 0.2 is 0.30000000000000004 in floating point; the stage still ends at step 30.
    assert ends(curriculum.stages(100)) == [10, 30, 60, 100]
    last = RatioCurriculum()
    last.add(tagged(4, 0), 0.25)
    last.add(tagged(4, 1), -1)
    assert ends(last.stages(10)) == [2, 10]  # round(2.5) == 2; the last ends at max_steps


@settings(max_examples=50)
@given(st.lists(st.integers(1, 20), min_size=1, max_size=5), st.integers(0, 200))
def test_ratio_curriculum_ends_rise_and_reach_max_steps(parts: list[int], spare: int) -> None:
    curriculum = RatioCurriculum()
    for part in parts:
        curriculum.add(tagged(1, 0), part / sum(parts))
    max_steps = sum(parts) + spare
    found = ends(curriculum.stages(max_steps))
    assert found[-1] == max_steps
    assert all(a < b for a, b in itertools.pairwise([0, *found]))
    exact = [part * max_steps / sum(parts) for part in itertools.accumulate(parts)]
    assert all(abs(f - e) <= 0.5 for f, e in zip(found, exact, strict=True))


def test_range_curriculum_ends_are_the_range_stops() -> None:
    curriculum = RangeCurriculum()
    curriculum.add(tagged(4, 0), range(10), {"shuffle": False})
    curriculum.add(tagged(4, 1), range(10, 25))
    assert ends(curriculum.stages(25)) == [10, 25]
    assert ends(curriculum.stages(None)) == [10, 25]


Steps, Ratio, Range = StepsCurriculum, RatioCurriculum, RangeCurriculum


@pytest.mark.parametrize(
    ("kind", "build", "message"),
    [
        (Steps, lambda c: c.add(tagged(4, 0), 0), r"stage 0: steps must be at least 1.*got 0"),
        (Steps, lambda c: c.add(tagged(4, 0), -2), r"stage 0: steps must be.*got -2"),
        (Steps, lambda c: c.add(tagged(4, 0), 2.5), r"stage 0: steps must be.*got 2.5"),
        (
            Steps,
            lambda c: [c.add(tagged(4, 0), -1), c.add(tagged(4, 1), 5)],
            r"StepsCurriculum stage 1: the stage before it is -1",
        ),
        (Steps, lambda c: c.add(tagged(0, 0), 5), r"StepsCurriculum stage 0: the dataset is empty"),
        (Steps, lambda c: c.add([], 5), r"stage 0: the dataset is empty"),
        (Steps, lambda c: c.add(5, 5), r"stage 0: expected a map-style dataset.*got int"),
        (
            Steps,
            lambda c: c.add(tagged(4, 0), 5, ["shuffle"]),
            r"stage 0: dataloader_kwargs must be a dict",
        ),
        (Ratio, lambda c: c.add(tagged(4, 0), 0), r"stage 0: ratio must be in \(0, 1\].*got 0"),
        (Ratio, lambda c: c.add(tagged(4, 0), 1.5), r"stage 0: ratio must be.*got 1.5"),
        (
            Ratio,
            lambda c: [c.add(tagged(4, 0), 0.7), c.add(tagged(4, 1), 0.4)],
            r"stage 1: ratio 0.4 brings the ratios to 1.1; they may add up to 1",
        ),
        (
            Ratio,
            lambda c: [c.add(tagged(4, 0), 1.0), c.add(tagged(4, 1), -1)],
            r"stage 1: -1 takes the share left, but the ratios before it already add up to 1",
        ),
        (
            Ratio,
            lambda c: [c.add(tagged(4, 0), -1), c.add(tagged(4, 1), 0.5)],
            r"RatioCurriculum stage 1: the stage before it is -1",
        ),
        (Range, lambda c: c.add(tagged(4, 0), range(1, 10)), r"stage 0: expected range\(0, "),
        (Range, lambda c: c.add(tagged(4, 0), range(0, 10, 2)), r"stage 0: .*a step of 1"),
        (Range, lambda c: c.add(tagged(4, 0), range(0)), r"stage 0: expected range\(0, "),
        (
            Range,
            lambda c: [c.add(tagged(4, 0), range(10)), c.add(tagged(4, 1), range(12, 20))],
            r"stage 1: expected range\(10, .*got range\(12, 20\)",
        ),
        (Range, lambda c: c.add(tagged(4, 0), (0, 10)), r"stage 0: expected a range of steps"),
    ],
)
def test_bad_stages_are_refused_when_added_naming_them(
    kind: type[Any], build: Any, message: str
) -> None:
    with pytest.raises(TrainerConfigError, match=message):
        build(kind())


def curriculum(kind: type[Any], *sizes: Any) -> Any:
    built = kind()
    for stage, size in enumerate(sizes):
        built.add(tagged(4, stage), size)
    return built


@pytest.mark.parametrize(
    ("built", "max_steps", "message"),
    [
        (curriculum(Steps, 10, 20), 25, r"reach step 30, past max_steps=25"),
        (curriculum(Steps, 10, 20), 40, r"end at step 30, but max_steps is 40"),
        (curriculum(Steps, 10, -1), None, r"stage 1: sizes relative to the run.*max_steps"),
        (curriculum(Steps, 10, -1), 10, r"stage 1: -1 takes the steps left, but"),
        (curriculum(Ratio, 0.5), None, r"need max_steps"),
        (curriculum(Ratio, 0.5), 10, r"the ratios add up to 0.5; they must add up"),
        (curriculum(Ratio, 0.01, -1), 10, r"stage 0: ratio 0.01 of max_steps=10 is less"),
        (curriculum(Range, range(10)), 12, r"end at step 10, but max_steps is 12"),
        (curriculum(Range), 10, r"RangeCurriculum has no stages"),
    ],
)
def test_stages_that_do_not_fit_max_steps_are_refused(
    built: Any, max_steps: int | None, message: str
) -> None:
    with pytest.raises(TrainerConfigError, match=message):
        built.stages(max_steps)


# ------------------------------------------------------------------------ epoch layout


def test_layout_cuts_the_pass_at_the_stage_end_and_counts_steps() -> None:
    # Stage 0: 7 steps over a loader of 3 batches, accumulation 2 (2 steps a pass).
    layout = StageLayout(end_steps=(7, 9), lengths=(3, 5), accumulation=2)
    assert layout.passes(0) == (4, 2)  # 2+2+2 steps of whole passes, then 1 step: 2 batches
    assert layout.passes(1) == (1, 4)  # 2 steps of 2 batches, cut before the 5th
    assert layout.epochs == 5
    assert [layout.epoch(e) for e in range(5)] == [(0, 3), (0, 3), (0, 3), (0, 2), (1, 4)]
    assert layout.counters_at(4, 0) == (7, 11)
    assert layout.counters_at(5, 0) == (9, 15)


# ---------------------------------------------------------------------------- Trainer.fit


class StageRecorder(Classifier):
    """Records, for each batch, the global step it trains towards and the stages it holds."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[int, frozenset[int]]] = []
        self.sizes: list[int] = []

    def training_step(self, batch: Any) -> torch.Tensor:
        features, labels, tags = batch
        self.seen.append((self.state.global_step + 1, frozenset(tags.tolist())))
        self.sizes.append(len(tags))
        return super().training_step((features, labels))


def run(tmp_path: Path, max_steps: int | None = None, **options: Any) -> Trainer:
    config = {"epochs": 1, "batch_size": 4, "optimizer": "SGD", "optimizer_kwargs": {"lr": 0.1}}
    options = {"log_with": None, "progress_bar": False, "checkpoint_every": None, **options}
    hps = HyperParameters.from_dict({**config, "max_steps": max_steps})
    return Trainer(hps, tmp_path / options.pop("folder", "run"), **options)


def stage_of_each_step(module: StageRecorder) -> dict[int, set[int]]:
    found: dict[int, set[int]] = {}
    for step, tags in module.seen:
        found.setdefault(step, set()).update(tags)
    return found


@pytest.mark.parametrize("accumulation", [1, 2])
def test_fit_trains_each_stage_up_to_its_end(tmp_path: Path, accumulation: int) -> None:
    curriculum = StepsCurriculum()
    curriculum.add(tagged(12, 0), 5)  # 3 batches a pass: the stage repeats its data
    curriculum.add(tagged(40, 1, seed=1), 4)  # cut in the middle of a pass
    curriculum.add(tagged(8, 2, seed=2), -1)
    module = StageRecorder()
    trainer = run(tmp_path, 12, grad_accumulation_steps=accumulation)
    state = trainer.fit(module, curriculum)
    expected = {step: {0 if step <= 5 else 1 if step <= 9 else 2} for step in range(1, 13)}
    assert stage_of_each_step(module) == expected
    assert state.global_step == 12
    assert state.finished
    batches_per_step = [sum(1 for s, _ in module.seen if s == step) for step in range(1, 13)]
    # accumulation 2: stage 0's passes of 3 batches end with a window of one batch.
    assert batches_per_step[:5] == ([1] * 5 if accumulation == 1 else [2, 1, 2, 1, 2])


@pytest.mark.parametrize("as_tuple", [False, True])
def test_a_list_of_samples_is_a_dataset_not_stages(tmp_path: Path, as_tuple: bool) -> None:
    module = StageRecorder()
    samples = [tuple(sample) for sample in tagged(12, 7)]
    state = run(tmp_path).fit(module, tuple(samples) if as_tuple else samples)
    assert state.global_step == 3  # one epoch of 12 samples in batches of 4
    assert stage_of_each_step(module) == {1: {7}, 2: {7}, 3: {7}}


class StopAt(Callback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_after_training_step(self) -> None:
        if self.state.global_step == self.step:
            self.trainer.should_stop = True


def curriculum_for_resume() -> RangeCurriculum:
    curriculum = RangeCurriculum()
    curriculum.add(tagged(12, 0), range(5))
    curriculum.add(tagged(20, 1, seed=1), range(5, 9))
    curriculum.add(tagged(8, 2, seed=2), range(9, 12))
    return curriculum


@pytest.mark.parametrize("stop_at", [3, 5, 7])  # in stage 0, at its end, in stage 1
def test_a_stopped_curriculum_resumes_exactly(tmp_path: Path, stop_at: int) -> None:
    options = {"checkpoint_every": "1 step", "seed": 3, "grad_accumulation_steps": 2}
    whole = StageRecorder()
    run(tmp_path, folder="whole", **options).fit(whole, curriculum_for_resume())
    first, second = StageRecorder(), StageRecorder()
    stopped = run(tmp_path, folder="halves", callbacks=[StopAt(stop_at)], **options)
    assert not stopped.fit(first, curriculum_for_resume()).finished
    assert first.seen[-1][0] == stop_at
    state = run(tmp_path, folder="halves", **options).fit(second, curriculum_for_resume())
    assert state.finished
    assert state.global_step == 12
    assert first.seen + second.seen == whole.seen
    for mine, theirs in zip(second.model.parameters(), whole.model.parameters(), strict=True):
        assert torch.equal(mine, theirs)


# ------------------------------------------------------------------ the state's stage index


class StageIndex(Callback):
    """Records ``state.train_dataloader_idx`` for each batch (with the step it trains towards)
    and at ``on_resume``."""

    def __init__(self) -> None:
        self.by_batch: list[tuple[int, int]] = []
        self.at_resume: int | None = None

    def on_resume(self) -> None:
        assert self.state is not None
        self.at_resume = self.state.train_dataloader_idx

    def on_before_training_step(self, batch: Any) -> None:
        assert self.state is not None
        self.by_batch.append((self.state.global_step + 1, self.state.train_dataloader_idx))


@pytest.mark.parametrize("accumulation", [1, 2])
def test_the_state_names_the_stage_of_each_batch(tmp_path: Path, accumulation: int) -> None:
    curriculum = StepsCurriculum()
    curriculum.add(tagged(12, 0), 5)
    curriculum.add(tagged(40, 1, seed=1), 4)
    curriculum.add(tagged(8, 2, seed=2), -1)
    module, stages = StageRecorder(), StageIndex()
    trainer = run(tmp_path, 12, grad_accumulation_steps=accumulation, callbacks=[stages])
    state = trainer.fit(module, curriculum)
    # Each batch's stage index is the stage whose data the batch holds.
    assert stages.by_batch == [(step, *tags) for step, tags in module.seen]
    assert dict(stages.by_batch) == {s: 0 if s <= 5 else 1 if s <= 9 else 2 for s in range(1, 13)}
    assert state.train_dataloader_idx == 2
    assert run(tmp_path, folder="one").fit(StageRecorder(), tagged(8, 0)).train_dataloader_idx == 0


def test_a_run_resumed_in_stage_1_keeps_its_stage_index(tmp_path: Path) -> None:
    options = {"checkpoint_every": "1 step", "seed": 3}
    stopped = run(tmp_path, callbacks=[StopAt(7)], **options)  # stage 1 is steps 6 to 9
    assert stopped.fit(StageRecorder(), curriculum_for_resume()).train_dataloader_idx == 1
    latest = sorted((tmp_path / "run" / "checkpoints").glob("checkpoint_*"))[-1]
    saved = TrainingState.load(latest / "state.json")
    assert (saved.global_step, saved.train_dataloader_idx) == (7, 1)
    stages = StageIndex()
    resumed = run(tmp_path, callbacks=[stages], **options)
    state = resumed.fit(StageRecorder(), curriculum_for_resume())
    assert stages.at_resume == 1
    assert stages.by_batch == [(8, 1), (9, 1), (10, 2), (11, 2), (12, 2)]
    assert (state.global_step, state.train_dataloader_idx) == (12, 2)
