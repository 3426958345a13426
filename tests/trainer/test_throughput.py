"""Items (tokens) per second and MFU on logging steps: ``train/items_per_second`` when the steps
give ``num_items``, beside ``train/samples_per_second``; ``train/mfu`` when the Monitor has the
FLOPs per item and the device's peak. Each logged value is checked against the items the test
counted and the times it saw around each log's window."""

from __future__ import annotations

import math
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from accmt_callbacks import Callback
from accmt_trainer import AcceleratorModule, HyperParameters, Monitor, Trainer, TrainerConfigError

from .conftest import Classifier, blobs

sys.path.insert(0, str(Path(__file__).parent / "workers"))
from profiled_run import BATCH, CountedItems


class Times(Callback):
    """When each optimizer step's last batch ended (before that step's log is read): the first
    batch to end at a global step (the next ones accumulate for the step after)."""

    def __init__(self) -> None:
        self.after_step: dict[int, float] = {}

    def on_after_training_step(self) -> None:
        assert self.state is not None
        self.after_step.setdefault(self.state.global_step, time.perf_counter())


class Logs:
    """The training values of each log, with the step and when they reached the trackers; the
    Trainer's own ``log`` still sends them on."""

    def __init__(self, trainer: Trainer) -> None:
        self.entries: list[tuple[int, float, dict[str, float]]] = []
        send = trainer.log

        def log(values: Any, step: int | None = None) -> None:
            if "train/loss" in values:
                self.entries.append((trainer.state.global_step, time.perf_counter(), dict(values)))
            send(values, step)

        trainer.log = log  # type: ignore[method-assign]


def fit(
    tmp_path: Path, module: AcceleratorModule, monitor: Monitor, **options: Any
) -> tuple[Logs, Times, float]:
    hps = HyperParameters(epochs=2, batch_size=BATCH, optimizer="SGD", optimizer_kwargs={"lr": 0.1})
    times = Times()
    options = {"log_with": None, "progress_bar": False, "cpu": True, **options}
    trainer = Trainer(
        hps, tmp_path / "run", monitor=monitor, callbacks=[times], checkpoint_every=None, **options
    )
    logs = Logs(trainer)
    started = time.perf_counter()
    trainer.fit(module, blobs(64))
    return logs, times, started


def windows(
    module: CountedItems, logs: Logs, times: Times, started: float, batches_per_step: int
) -> list[tuple[int, float, float, dict[str, float]]]:
    """For each log: the items of its window, the shortest and the longest its time can be
    (from the first batch's start to the last batch's end; from the previous log's step end to
    this log reaching the tracker), and the values logged."""
    found, previous_step, previous_end = [], 0, started
    for step, logged_at, values in logs.entries:
        batches = module.batches[previous_step * batches_per_step : step * batches_per_step]
        items = sum(count for _, count in batches)
        shortest = times.after_step[step] - batches[0][0]
        longest = logged_at - previous_end
        found.append((items, shortest, longest, values))
        previous_step, previous_end = step, times.after_step[step]
    return found


@pytest.mark.parametrize("accumulation", [1, 2])
def test_items_per_second_are_the_windows_items_over_its_time(
    tmp_path: Path, accumulation: int
) -> None:
    module = CountedItems()
    logs, times, started = fit(
        tmp_path,
        module,
        Monitor(throughput=True),
        log_every=2,
        grad_accumulation_steps=accumulation,
    )
    assert len(logs.entries) == 8 // accumulation  # 2 epochs of 8 batches, a log every 2 steps
    for items, shortest, longest, values in windows(module, logs, times, started, accumulation):
        per_second = values["train/items_per_second"]
        assert items / longest <= per_second <= items / shortest
        # Both rates are over the same time: their ratio is the window's items per sample.
        samples = 2 * accumulation * BATCH
        ratio = per_second / values["train/samples_per_second"]
        assert ratio == pytest.approx(items / samples, rel=1e-9)
        assert "train/mfu" not in values
    assert {count for _, count in module.batches} != {BATCH}  # items are not the samples


def test_mean_losses_log_no_items_per_second(tmp_path: Path) -> None:
    logs, _, _ = fit(tmp_path, Classifier(), Monitor(throughput=True), log_every=2)
    assert logs.entries
    for _, _, values in logs.entries:
        assert values["train/samples_per_second"] > 0
        assert "train/items_per_second" not in values


def test_mfu_is_the_items_flops_over_the_devices_peak(tmp_path: Path) -> None:
    flops, peak = 6.0 * 99, 1e6  # 6 x the Classifier's parameters, a made-up peak
    module = CountedItems()
    monitor = Monitor(throughput=True, flops_per_item=flops, peak_flops=peak)
    logs, _, _ = fit(tmp_path, module, monitor, log_every=2)
    assert logs.entries
    for _, _, values in logs.entries:
        expected = values["train/items_per_second"] * flops / peak
        assert values["train/mfu"] == pytest.approx(expected, rel=1e-12)


def test_mfu_alone_is_logged_without_the_rates(tmp_path: Path) -> None:
    flops, peak = 594.0, 1e6
    module = CountedItems()
    logs, times, started = fit(
        tmp_path, module, Monitor(flops_per_item=flops, peak_flops=peak), log_every=2
    )
    for items, shortest, longest, values in windows(module, logs, times, started, 1):
        assert "train/items_per_second" not in values
        assert "train/samples_per_second" not in values
        low, high = items / longest * flops / peak, items / shortest * flops / peak
        assert low <= values["train/mfu"] <= high


def test_mfu_without_num_items_is_not_logged_and_says_why(tmp_path: Path) -> None:
    monitor = Monitor(throughput=True, flops_per_item=594.0, peak_flops=1e6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        logs, _, _ = fit(tmp_path, Classifier(), monitor, log_every=2)
    said = [str(w.message) for w in caught if "train/mfu is not logged" in str(w.message)]
    assert len(said) == 1
    assert "num_items" in said[0]
    assert all("train/mfu" not in values for _, _, values in logs.entries)


def test_the_values_reach_the_trackers(tmp_path: Path) -> None:
    monitor = Monitor(throughput=True, flops_per_item=594.0, peak_flops=1e6)
    logs, _, _ = fit(tmp_path, CountedItems(), monitor, log_every=4, log_with="tensorboard")
    events = EventAccumulator(str(tmp_path / "run" / "logs" / "run"), size_guidance={"scalars": 0})
    events.Reload()
    for tag in ("train/items_per_second", "train/mfu", "train/samples_per_second"):
        stored = {event.step: event.value for event in events.Scalars(tag)}
        sent = {step: values[tag] for step, _, values in logs.entries}
        assert stored.keys() == sent.keys() == {4, 8, 12, 16}
        assert all(math.isclose(stored[s], sent[s], rel_tol=1e-6) for s in sent)  # float32


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        ({"flops_per_item": 6e9}, "needs peak_flops too"),
        ({"peak_flops": 989e12}, "needs flops_per_item too"),
        ({"flops_per_item": -1.0, "peak_flops": 1e12}, "Monitor(flops_per_item=...)"),
        ({"flops_per_item": 1.0, "peak_flops": math.inf}, "Monitor(peak_flops=...)"),
        ({"flops_per_item": True, "peak_flops": 1e12}, "Monitor(flops_per_item=...)"),
    ],
)
def test_bad_mfu_numbers_are_named(flags: dict[str, Any], named: str) -> None:
    with pytest.raises(TrainerConfigError) as raised:
        Monitor(**flags)
    assert named in str(raised.value)
