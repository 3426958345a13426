"""Streams (``IterableDataset``s) on one process: one without a length trains with the default
options to ``max_steps``, its epochs ending where it ends and its schedule sized by
``max_steps``; what cannot work is refused by name before anything is written; evaluate and
predict read it in its order; a stream that keeps its place has it in each checkpoint, this
process's own file. (Kills and resumes, and several processes: tests/distributed.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import IterableDataset

from accmt_metrics import Accuracy
from accmt_trainer import (
    CheckpointError,
    HyperParameters,
    StepsCurriculum,
    Trainer,
    TrainerConfigError,
)
from accmt_trainer.checkpointing._parts import read_stream_place
from accmt_trainer.checkpointing._safe_tree import load_tree, save_tree

from .conftest import Classifier, blobs


class Stream(IterableDataset[Any]):
    """``count`` blobs, in order; counts how many samples it gave."""

    def __init__(self, count: int) -> None:
        self.data, self.given = blobs(count), 0

    def __iter__(self) -> Iterator[Any]:
        for features, label in self.data:
            self.given += 1
            yield features, label


class PlacedStream(Stream):
    """Keeps its place (torchdata's protocol): ``position`` samples of this pass given."""

    def __init__(self, count: int) -> None:
        super().__init__(count)
        self.position = 0

    def state_dict(self) -> dict[str, int]:
        return {"position": self.position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.position = state["position"]

    def __iter__(self) -> Iterator[Any]:
        for index in range(self.position, len(self.data)):
            self.position = index + 1
            self.given += 1
            yield self.data[index]
        self.position = 0


class SizedStream(Stream):
    def __len__(self) -> int:
        return len(self.data)


def trainer(tmp_path: Path, max_steps: int | None = 10, **options: Any) -> Trainer:
    hps = HyperParameters(
        epochs=5,
        batch_size=4,
        max_steps=max_steps,
        scheduler="LinearWithWarmup",
        scheduler_kwargs={"warmup_ratio": 0.0},
        optimizer_kwargs={"lr": 0.1},
    )
    quiet = {"log_with": None, "progress_bar": False, "checkpoint_every": None}
    return Trainer(hps, tmp_path / "run", **{**quiet, **options})


def test_a_stream_without_length_trains_to_max_steps_with_default_options(
    tmp_path: Path,
) -> None:
    run, stream = trainer(tmp_path, max_steps=10), Stream(14)  # 4 batches a pass
    state = run.fit(Classifier(), stream)
    assert state.global_step == 10
    # Each pass of the stream is an epoch: steps 1-4, 5-8, then 9-10 of the third.
    assert (state.epoch, state.batches_seen_in_epoch) == (2, 2)
    assert state.finished
    # The schedule spans max_steps: the linear decay ends at 0 at step 10, not before.
    assert run.latest_fit.run.optimizer.param_groups[0]["lr"] == pytest.approx(0.0, abs=1e-12)


def test_a_stream_ends_its_epochs_where_it_ends(tmp_path: Path) -> None:
    # epochs=5 passes of 4 batches end the run before max_steps=100.
    state = trainer(tmp_path, max_steps=100).fit(Classifier(), Stream(14))
    assert (state.global_step, state.epoch) == (20, 5)


def test_a_sized_stream_still_counts_its_epochs(tmp_path: Path) -> None:
    state = trainer(tmp_path, max_steps=None).fit(Classifier(), SizedStream(14))
    assert (state.global_step, state.epoch) == (20, 5)


@pytest.mark.parametrize(
    ("options", "max_steps", "message"),
    [
        ({}, None, r"stream Stream has no length .* give HyperParameters\(max_steps=...\)"),
        (
            {"shuffle_train": True},
            10,
            r"Trainer\(shuffle_train=True\): .* \(Stream, an IterableDataset\)",
        ),
        ({"sampler": torch.utils.data.SequentialSampler(range(3))}, 10, r"Trainer\(sampler"),
    ],
)
def test_what_a_stream_cannot_do_is_refused_before_anything_is_written(
    tmp_path: Path, options: dict[str, Any], max_steps: int | None, message: str
) -> None:
    stream = Stream(14)
    with pytest.raises(TrainerConfigError, match=message):
        trainer(tmp_path, max_steps=max_steps, **options).fit(Classifier(), stream)
    assert stream.given == 0
    assert not (tmp_path / "run").exists()


def test_a_curriculum_refuses_a_stream_as_a_stage() -> None:
    curriculum = StepsCurriculum()
    curriculum.add(blobs(16), 4)
    with pytest.raises(TrainerConfigError, match="stage 1: expected a map-style dataset"):
        curriculum.add(Stream(16), -1)


def test_shuffle_train_false_is_allowed_and_a_map_dataset_still_shuffles(tmp_path: Path) -> None:
    assert trainer(tmp_path / "a", shuffle_train=False).fit(Classifier(), Stream(14)).finished
    seen: list[list[float]] = []

    class Recording(Classifier):
        def training_step(self, batch: Any) -> torch.Tensor:
            seen.extend(batch[0][:, 0].tolist())
            return super().training_step(batch)

    trainer(tmp_path / "b", max_steps=None, seed=1).fit(Recording(), blobs(14))
    in_order = blobs(14).tensors[0][:, 0].tolist()
    assert sorted(seen[:14]) == sorted(in_order)
    assert seen[:14] != in_order  # shuffled by default


def test_evaluate_and_predict_read_a_stream_in_its_order(tmp_path: Path) -> None:
    class Predicting(Classifier):
        def predict_step(self, batch: Any) -> torch.Tensor:
            return batch[1]

    run = trainer(tmp_path, metrics=[Accuracy()])
    assert torch.equal(run.predict(Predicting(), Stream(11)), blobs(11).tensors[1])
    assert 0.0 <= run.evaluate(Classifier(), Stream(11))["accuracy"] <= 1.0


@pytest.mark.parametrize("checkpoint_async", [False, True])
def test_a_stream_s_place_is_this_process_s_part_of_a_checkpoint(
    tmp_path: Path, checkpoint_async: bool
) -> None:
    run = trainer(
        tmp_path, max_steps=3, checkpoint_every="2 steps", checkpoint_async=checkpoint_async
    )
    run.fit(Classifier(), PlacedStream(14))
    folder = tmp_path / "run" / "checkpoints" / "checkpoint_000001"
    # As of the batches trained (2 of 4 samples), not of the batch read ahead; in a background
    # checkpoint too, and not in Accelerate's one file for every process.
    assert load_tree(folder / "stream_0.safetensors")["dataset_state"] == {"position": 8}
    assert not (folder / "accelerate" / "dl_state_dict.bin").exists()


def test_a_process_reads_its_own_place_or_a_one_process_checkpoint_s_former_one(
    tmp_path: Path,
) -> None:
    (tmp_path / "accelerate").mkdir()
    torch.save({"dataset_state": {"position": 4}}, tmp_path / "accelerate" / "dl_state_dict.bin")
    assert read_stream_place(tmp_path, 0, 1) == {"dataset_state": {"position": 4}}
    with pytest.raises(CheckpointError, match=r"stream_1.safetensors is missing: .* process 1"):
        read_stream_place(tmp_path, 1, 2)
    save_tree(tmp_path / "stream_1.safetensors", {"dataset_state": {"position": 8}})
    assert read_stream_place(tmp_path, 1, 2) == {"dataset_state": {"position": 8}}
