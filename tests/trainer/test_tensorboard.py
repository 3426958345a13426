"""TensorBoard keeps one run per output folder, continuous across resumes: the learning rate
is logged, each step shows once (what a killed run logged after its last checkpoint is
hidden), and the hyperparameters sit in the run's own events, in no folder of their own."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import plugin_data_pb2

from accmt_callbacks import Callback
from accmt_metrics import Accuracy
from accmt_trainer import HyperParameters, Monitor, Trainer

from .conftest import Classifier, blobs

# 32 samples in batches of 8: 4 optimizer steps an epoch.
TRAIN, VALID = blobs(32), blobs(16, seed=1)


class Killed(Exception):
    pass


class KillAt(Callback):
    """Dies at ``step`` as a killed run would: after its last checkpoint, having logged on."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_after_training_step(self) -> None:
        if self.state.global_step == self.step:
            raise Killed


def fit(folder: Path, epochs: int, **options: Any) -> Trainer:
    hps = HyperParameters(
        epochs=epochs,
        batch_size=8,
        optimizer="SGD",
        optimizer_kwargs={"lr": 0.1},
        scheduler="LinearWithWarmup",
        scheduler_kwargs={"num_warmup_steps": 2},
    )
    options = {"log_with": "tensorboard", "progress_bar": False, "seed": 0, **options}
    trainer = Trainer(hps, folder, metrics=[Accuracy()], **options)
    trainer.fit(Classifier(), TRAIN, VALID)
    return trainer


def events(folder: Path) -> EventAccumulator:
    accumulator = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
    accumulator.Reload()
    return accumulator


def steps(accumulator: EventAccumulator, tag: str) -> list[int]:
    return [event.step for event in accumulator.Scalars(tag)]


def next_second() -> None:
    """Until the clock's second changes. An events file is named by the second it was opened
    in, then by a counter compared as text, and TensorBoard reads a folder's files in name
    order: two starts within one second (as fits in one test process can be) could be read in
    the wrong order, where starts of a real run, seconds apart, cannot."""
    start = int(time.time())
    while int(time.time()) == start:
        time.sleep(0.01)


def test_a_resumed_run_is_one_run_whose_steps_go_on(tmp_path: Path) -> None:
    with pytest.raises(Killed):
        fit(tmp_path, epochs=2, callbacks=[KillAt(7)])  # checkpoint at step 4, logs to 6
    next_second()
    first = fit(tmp_path, epochs=2)  # resumes at step 4, finishes at 8
    next_second()
    fit(tmp_path, epochs=3)  # the finished run, given one more epoch: steps 9 to 12

    run = tmp_path / "logs" / tmp_path.name
    assert [path for path in run.iterdir() if not path.name.startswith("events.out.")] == []
    assert len(list(run.iterdir())) == 3  # one events file per start
    assert [path.name for path in (tmp_path / "logs").iterdir()] == [run.name]

    logged = events(run)
    assert steps(logged, "train/loss") == list(range(1, 13))  # steps 5 and 6 once
    assert steps(logged, "train/lr") == list(range(1, 13))
    assert steps(logged, "validation/accuracy") == [4, 8, 12]
    # The learning rate is the schedule's: a warmup over 2 steps, then a linear fall to 0 at
    # the end of the 2-epoch run (step 8).
    rates = [event.value for event in logged.Scalars("train/lr")]
    assert rates[:2] == [pytest.approx(0.05), pytest.approx(0.1)]
    assert rates[1:8] == sorted(rates[1:8], reverse=True)
    assert rates[7] == pytest.approx(first.optimizer.param_groups[0]["lr"]) == 0

    # Hyperparameters: HParams' session start in the run itself, and each start's as text.
    (content,) = logged.PluginTagToContent("hparams").values()
    hparams = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info.hparams
    assert hparams["optimizer"].string_value == "SGD"
    texts = logged.Tensors("hparams/text_summary")
    assert [event.step for event in texts] == [0, 5, 9]
    assert b"| epochs | 3 |" in texts[-1].tensor_proto.string_val[0]


def test_several_parameter_groups_log_each_learning_rate(tmp_path: Path) -> None:
    logged: list[dict[str, float]] = []

    class TwoGroups(Classifier):
        def get_optimizer(self) -> Any:
            import torch

            first, second = self.model[0], self.model[3]
            return torch.optim.SGD(
                [{"params": first.parameters()}, {"params": second.parameters(), "lr": 0.01}],
                lr=0.1,
            )

    hps = HyperParameters(epochs=1, batch_size=8, optimizer="SGD", optimizer_kwargs={"lr": 0.1})
    trainer = Trainer(hps, tmp_path, log_with=None, progress_bar=False)
    trainer.log = lambda values, step=None: logged.append(dict(values))  # type: ignore[method-assign]
    trainer.fit(TwoGroups(), TRAIN)
    training = [values for values in logged if "train/loss" in values]
    assert training
    assert training[0]["train/lr/0"] == pytest.approx(0.1)
    assert training[0]["train/lr/1"] == pytest.approx(0.01)
    assert "train/lr" not in training[0]


def test_the_learning_rate_can_be_turned_off(tmp_path: Path) -> None:
    fit(tmp_path, epochs=1, monitor=Monitor(learning_rate=False))
    logged = events(tmp_path / "logs" / tmp_path.name)
    assert "train/loss" in logged.Tags()["scalars"]
    assert not [tag for tag in logged.Tags()["scalars"] if tag.startswith("train/lr")]
