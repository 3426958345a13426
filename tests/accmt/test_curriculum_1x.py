"""accmt 1.x's curriculum as a plain list of ``(max_step, dataset)`` stages, through ``accmt``'s
Trainer (which turns it into a curriculum); a list of samples is still one dataset; a callback
reads the current stage in ``state.train_dataloader_idx``, which a finished run leaves one past
the last stage, as in 1.x; 1.x's RatioCurriculum takes a last -1 after ratios that add up to 1
(a stage that trains no step), which accmt-trainer's refuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

import accmt_trainer
from accmt import Callback, HyperParameters, Trainer, TrainerConfigError, TrainingState
from accmt.curriculum import RatioCurriculum, StepsCurriculum
from tests.trainer.test_curriculum import (
    StageRecorder,
    StopAt,
    curriculum_for_resume,
    stage_of_each_step,
    tagged,
)


def run(tmp_path: Path, max_steps: int | None = None, **options: Any) -> Trainer:
    hps = HyperParameters(epochs=1, batch_size=4, optimizer_kwargs={"lr": 0.1}, max_steps=max_steps)
    quiet: dict[str, Any] = {"log_with": None, "progress_bar": False, "checkpoint_every": None}
    return Trainer(hps, tmp_path / "run", **{**quiet, **options})


def test_fit_takes_1x_plain_list_of_stages(tmp_path: Path) -> None:
    module = StageRecorder()
    stages = [(2, tagged(8, 0)), (5, tagged(8, 1), {"batch_size": 2, "shuffle": False})]
    state = run(tmp_path).fit(module, stages)
    assert stage_of_each_step(module) == {1: {0}, 2: {0}, 3: {1}, 4: {1}, 5: {1}}
    assert state.global_step == 5  # max_steps follows the stages
    assert module.sizes == [4, 4, 2, 2, 2]  # the second stage's own batch size


def test_a_list_of_samples_is_still_one_dataset(tmp_path: Path) -> None:
    # Pairs whose first item is a tensor, not a whole number: samples, not stages.
    module, samples = StageRecorder(), list(map(tuple, tagged(12, 7)))
    assert run(tmp_path).fit(module, samples).global_step == 3
    assert stage_of_each_step(module) == {1: {7}, 2: {7}, 3: {7}}


def test_a_stage_size_follows_max_steps(tmp_path: Path) -> None:
    module = StageRecorder()
    stages = [(3, tagged(8, 0)), (-1, tagged(8, 1))]
    state = run(tmp_path, max_steps=6).fit(module, stages)
    assert stage_of_each_step(module) == {s: {0 if s <= 3 else 1} for s in range(1, 7)}
    assert state.global_step == 6


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([tagged(8, 0), tagged(8, 1)], r"stage 0 is TensorDataset"),
        ([(0, tagged(8, 0)), (torch.ones(2), 0)], r"stage 0: max_step must be a whole number"),
        ([(4, tagged(8, 0)), "a sample"], r"stage 1 is str 'a sample'"),
        ([(1.5, tagged(8, 0))], r"stage 0: max_step must be a whole number.*got float 1.5"),
        ([(4, tagged(8, 0)), (4, tagged(8, 1))], r"stage 1's max_step 4 is not above .*\(4\)"),
        ([(-1, tagged(8, 0)), (4, tagged(8, 1))], r"stage 0: .*\(-1 is for the last stage only\)"),
        ([(4, tagged(8, 0)), (-1, tagged(8, 1))], r"-1, which needs HyperParameters\(max_steps"),
        ([(4, tagged(0, 0))], r"stage 0: the dataset is empty"),
        ([(4, tagged(8, 0), "shuffle")], r"stage 0: dataloader_kwargs must be a dict"),
        ([], r"the list is empty"),
    ],
)
def test_a_list_that_is_not_stages_is_refused_before_training(
    tmp_path: Path, data: list[Any], message: str
) -> None:
    module = StageRecorder()
    with pytest.raises(TrainerConfigError, match=message):
        run(tmp_path).fit(module, data)
    assert module.seen == []
    assert not (tmp_path / "run").exists()  # refused before the run touched its folder


def test_stages_must_end_at_max_steps(tmp_path: Path) -> None:
    module = StageRecorder()
    stages = [(3, tagged(8, 0)), (5, tagged(8, 1))]
    with pytest.raises(TrainerConfigError, match=r"end at step 5, but max_steps is 8"):
        run(tmp_path, max_steps=8).fit(module, stages)
    assert module.seen == []


def test_bad_dataloader_kwargs_are_named_before_training(tmp_path: Path) -> None:
    module = StageRecorder()
    stages = [(3, tagged(8, 0), {"batch_sise": 2})]
    with pytest.raises(TrainerConfigError, match=r"dataloader_kwargs \{'batch_sise': 2\} do not"):
        run(tmp_path).fit(module, stages)
    assert module.seen == []


def test_a_1x_callback_reads_the_stage_index_from_the_state(tmp_path: Path) -> None:
    class Stages(Callback):
        def __init__(self) -> None:
            self.seen: dict[int, int] = {}

        def on_after_training_step(self) -> None:
            assert self.state is not None
            self.seen[self.state.global_step] = self.state.train_dataloader_idx

    hps = HyperParameters(epochs=1, batch_size=4, optimizer_kwargs={"lr": 0.1}, max_steps=7)
    stages, module = Stages(), StageRecorder()
    with pytest.warns(DeprecationWarning, match=r"Trainer\(callback"):
        trainer = Trainer(hps, str(tmp_path / "run"), callback=stages, log_with=None)
    state = trainer.fit(module, [(2, tagged(8, 0)), (5, tagged(8, 1)), (-1, tagged(8, 2))])
    assert stages.seen == {1: 0, 2: 0, 3: 1, 4: 1, 5: 1, 6: 2, 7: 2}
    assert state.train_dataloader_idx == 3  # finished: one past the last stage, as in 1.x


# ----------------------------------------------- where a finished run leaves the stage index


def test_a_finished_curriculum_leaves_the_index_one_past_its_last_stage(tmp_path: Path) -> None:
    curriculum = StepsCurriculum()
    curriculum.add(tagged(8, 0), 2)
    curriculum.add(tagged(8, 1), -1)
    trainer = run(tmp_path, max_steps=5, checkpoint_every="epoch")
    state = trainer.fit(StageRecorder(), curriculum)
    assert (state.finished, state.train_dataloader_idx) == (True, 2)
    assert trainer.state is state  # 1.x's tests read it from trainer.state
    # The checkpoint keeps the last stage's index, which a resume of the run reads.
    latest = sorted((tmp_path / "run" / "checkpoints").glob("checkpoint_*"))[-1]
    assert TrainingState.load(latest / "state.json").train_dataloader_idx == 1


def test_a_stopped_curriculum_keeps_the_index_of_its_stage(tmp_path: Path) -> None:
    trainer = run(tmp_path, callbacks=[StopAt(7)])  # stage 1 is steps 6 to 9
    state = trainer.fit(StageRecorder(), curriculum_for_resume())
    assert (state.finished, state.global_step, state.train_dataloader_idx) == (False, 7, 1)


def test_one_dataset_keeps_index_0(tmp_path: Path) -> None:
    state = run(tmp_path).fit(StageRecorder(), tagged(8, 0))
    assert (state.finished, state.train_dataloader_idx) == (True, 0)


# ------------------------------------------- 1.x's RatioCurriculum: -1 when no share is left


def ratios_to_one(ratios: list[float]) -> RatioCurriculum:
    curriculum = RatioCurriculum()
    for tag, ratio in enumerate(ratios):
        curriculum.add(tagged(8, tag), ratio)
    return curriculum


def test_minus_one_after_ratios_adding_up_to_1_is_a_stage_that_trains_no_step(
    tmp_path: Path,
) -> None:
    curriculum = ratios_to_one([0.1, 0.2, 0.3, 0.4])
    curriculum.add(tagged(8, 4), -1, {"shuffle": False})
    assert len(curriculum) == 5
    assert [end for end, _, _ in curriculum.stages(20)] == [2, 6, 12, 20]
    module = StageRecorder()
    state = run(tmp_path, max_steps=20).fit(module, curriculum)
    stage = {
        step: 0 if step <= 2 else 1 if step <= 6 else 2 if step <= 12 else 3
        for step in range(1, 21)
    }
    assert stage_of_each_step(module) == {step: {tag} for step, tag in stage.items()}
    assert (state.global_step, state.finished, state.train_dataloader_idx) == (20, True, 5)


def test_accmt_trainer_s_ratio_curriculum_still_refuses_it() -> None:
    curriculum = accmt_trainer.RatioCurriculum()
    curriculum.add(tagged(8, 0), 1.0)
    with pytest.raises(TrainerConfigError, match=r"stage 1: -1 .* already add up to 1"):
        curriculum.add(tagged(8, 1), -1)


@pytest.mark.parametrize("ratios", [[1.0], [0.7, 0.2, 0.1], [0.5, 0.5 - 1e-12]])
def test_ratios_that_add_up_to_1_in_floating_point_leave_no_share(ratios: list[float]) -> None:
    curriculum = ratios_to_one(ratios)
    curriculum.add(tagged(8, 9), -1)
    assert len(curriculum) == len(ratios) + 1
    two_x = accmt_trainer.RatioCurriculum()
    for ratio in ratios:
        two_x.add(tagged(8, 0), ratio)
    assert [end for end, _, _ in curriculum.stages(10)] == [end for end, _, _ in two_x.stages(10)]


def test_minus_one_with_a_share_left_is_accmt_trainer_s() -> None:
    curriculum = ratios_to_one([0.3])
    curriculum.add(tagged(8, 1), -1)
    two_x = accmt_trainer.RatioCurriculum()
    two_x.add(tagged(8, 0), 0.3)
    two_x.add(tagged(8, 1), -1)
    assert [end for end, _, _ in curriculum.stages(10)] == [3, 10]
    assert [end for end, _, _ in two_x.stages(10)] == [3, 10]


@pytest.mark.parametrize("ratio", [-1, 0.5])
def test_nothing_may_follow_the_stage_with_no_share(ratio: float) -> None:
    curriculum = ratios_to_one([1.0])
    curriculum.add(tagged(8, 1), -1)
    with pytest.raises(TrainerConfigError, match=r"stage 2: the stage before it is -1"):
        curriculum.add(tagged(8, 2), ratio)
    assert len(curriculum) == 2


@pytest.mark.parametrize(
    ("dataset", "kwargs", "message"),
    [
        ("samples", None, r"RatioCurriculum stage 1: expected a map-style dataset"),
        (tagged(0, 1), None, r"RatioCurriculum stage 1: the dataset is empty"),
        (tagged(8, 1), "shuffle", r"RatioCurriculum stage 1: dataloader_kwargs must be a dict"),
    ],
)
def test_the_stage_with_no_share_is_checked_like_any(
    dataset: Any, kwargs: Any, message: str
) -> None:
    curriculum = ratios_to_one([1.0])
    with pytest.raises(TrainerConfigError, match=message):
        curriculum.add(dataset, -1, kwargs)
    assert len(curriculum) == 1
