"""Monitor(cpu_utilization=True, gpu_utilization=True): the process's CPU use and each GPU's
busy percentage, read on logging steps only; without a GPU or NVML, one warning and nothing
logged."""

from __future__ import annotations

import importlib.util
import re
import resource
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from accmt_metrics import Accuracy
from accmt_trainer import HyperParameters, Monitor, Trainer
from accmt_trainer.runtime import _usage
from accmt_trainer.runtime._usage import CpuClock, Usage

from .conftest import Classifier, blobs

NO_GPU = r"Monitor\(gpu_utilization=True\): this run has no GPU \(it trains on cpu\); no GPU"


def logged_fit(tmp_path: Path, monitor: Monitor) -> list[dict[str, float]]:
    """What a fit of 4 optimizer steps, logging every 2, with validation, logs."""
    hps = HyperParameters(epochs=1, batch_size=16, optimizer_kwargs={"lr": 0.05})
    options: dict[str, Any] = {"log_with": None, "progress_bar": False, "log_every": 2}
    options["metrics"] = [Accuracy()]
    run = Trainer(hps, tmp_path / "run", monitor=monitor, **options)
    logged: list[dict[str, float]] = []
    run.log = lambda values, step=None: logged.append(dict(values))  # type: ignore[method-assign]
    run.fit(Classifier(), blobs(64), blobs(32, seed=1))
    return logged


Mark = tuple[float, float]  # this process's CPU seconds and the wall clock's, at one moment


def mark() -> Mark:
    """This process's CPU time (user and system, all threads), read by getrusage rather than
    by the ``time.process_time`` the CpuClock reads, and the wall clock's time."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime, time.perf_counter()


def between(start: Mark, end: Mark) -> Mark:
    return end[0] - start[0], end[1] - start[1]


def bounds(inner: Mark, outer: Mark) -> tuple[float, float]:
    """What a CPU reading can be when its window holds the ``inner`` one and lies within the
    ``outer`` one: the least CPU over the most wall, and the most over the least, give or take
    a millisecond of CPU between the two ways of reading the process's CPU time (they read the
    kernel's one count, to the microsecond)."""
    return 100 * max(inner[0] - 0.001, 0) / outer[1], 100 * (outer[0] + 0.001) / inner[1]


def test_cpu_utilization_is_logged_on_logging_steps_as_the_process_used_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each reading the fit makes is held against the process's CPU and wall time over windows
    # just inside and just outside the clock's own. No fixed share: a loaded machine gives the
    # process less than a core, and over a window of a few milliseconds the kernel may count a
    # thread's earlier CPU time at once (227 % of one core over 3 ms was seen on 2 cores).
    readings: list[tuple[float, Mark, Mark]] = []  # the value, its inner and outer windows
    around: dict[int, tuple[Mark, Mark]] = {}  # each clock's marks around its last restart
    restart, percent = CpuClock.restart, CpuClock.percent

    def marked_restart(clock: CpuClock) -> None:
        before = mark()
        restart(clock)
        around[id(clock)] = (before, mark())

    def marked_percent(clock: CpuClock) -> float:
        before = mark()
        value = percent(clock)
        after = mark()
        last_before, last_after = around[id(clock)]
        readings.append((value, between(last_after, before), between(last_before, after)))
        around[id(clock)] = (before, after)
        return value

    monkeypatch.setattr(CpuClock, "restart", marked_restart)
    monkeypatch.setattr(CpuClock, "percent", marked_percent)
    logged = logged_fit(tmp_path, Monitor(cpu_utilization=True))
    training = [values for values in logged if "train/loss" in values]
    assert len(training) == 2
    assert [values["train/cpu_utilization"] for values in training] == [
        value for value, _, _ in readings
    ]
    for value, inner, outer in readings:
        low, high = bounds(inner, outer)
        assert low <= value <= high
    assert all("train/cpu_utilization" not in values for values in logged if values not in training)
    off = logged_fit(tmp_path / "off", Monitor())
    assert all("train/cpu_utilization" not in values for values in off)


def test_the_cpu_clock_measures_since_its_last_reading() -> None:
    # Each reading is held against this process's own CPU and wall time over windows just
    # inside and just outside its own: right on a loaded machine, where the process gets less
    # than a core, and wrong if the clock read wall time for CPU time or forgot a reading.
    marks = [mark()]
    clock = CpuClock()
    marks.append(mark())
    while mark()[0] - marks[-1][0] < 0.3:
        pass  # 0.3 s of CPU on one core, however long the machine takes to give it
    marks.append(mark())
    busy = clock.percent()
    marks.append(mark())
    time.sleep(0.3)
    marks.append(mark())
    idle = clock.percent()
    marks.append(mark())

    low, high = bounds(between(marks[1], marks[2]), between(marks[0], marks[3]))
    assert low <= busy <= high
    low, high = bounds(between(marks[3], marks[4]), between(marks[2], marks[5]))
    assert low <= idle <= high
    # Tight enough to tell: had the idle reading counted the busy window too, it would be over.
    assert high < 100 * 0.3 / between(marks[1], marks[5])[1]


def test_gpu_utilization_without_a_gpu_warns_once_and_logs_nothing(tmp_path: Path) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        logged = logged_fit(tmp_path, Monitor(gpu_utilization=True, learning_rate=True))
    told = [str(w.message) for w in caught if "gpu_utilization" in str(w.message)]
    assert len(told) == 1
    assert re.search(NO_GPU, told[0])
    assert any("train/lr" in values for values in logged)  # the training values were logged
    assert not [key for values in logged for key in values if "gpu" in key]


# ------------------------------------------------------------- reading GPUs, faked here


@pytest.fixture
def two_gpus(monkeypatch: pytest.MonkeyPatch) -> dict[int, Any]:
    """Two GPUs that report 37 % and 80 % busy, and NVML's bindings installed."""
    busy: dict[int, Any] = {0: 37, 1: 80}

    def utilization(gpu: int) -> int:
        value = busy[gpu]
        if isinstance(value, Exception):
            raise value
        return int(value)

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "utilization", utilization)
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(
        _usage.importlib.util,
        "find_spec",
        lambda name, *args: object() if name == "pynvml" else find_spec(name, *args),
    )
    return busy


CUDA = torch.device("cuda", 0)


def test_each_gpu_is_read_on_the_main_process(two_gpus: dict[int, Any]) -> None:
    usage = Usage(Monitor(gpu_utilization=True), CUDA, main_process=True)
    assert usage.read() == {"train/gpu_utilization/0": 37.0, "train/gpu_utilization/1": 80.0}
    two_gpus[1] = 5
    assert usage.read()["train/gpu_utilization/1"] == 5.0
    assert Usage(Monitor(gpu_utilization=True), CUDA, main_process=False).read() == {}
    assert Usage(Monitor(), CUDA, main_process=True).read() == {}


def test_without_nvml_s_bindings_the_warning_names_the_extra(
    two_gpus: dict[int, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_usage.importlib.util, "find_spec", lambda name, *args: None)
    with pytest.warns(UserWarning, match=r"pip install 'accmt-trainer\[gpu\]'; no GPU utiliz"):
        usage = Usage(Monitor(gpu_utilization=True), CUDA, main_process=True)
    assert usage.read() == {}


def test_a_gpu_nvml_does_not_report_is_named_once(two_gpus: dict[int, Any]) -> None:
    two_gpus[1] = RuntimeError("cuda driver can't be loaded, is cuda enabled?")
    with pytest.warns(UserWarning, match=r"NVML does not report it here \(RuntimeError: cuda dr"):
        usage = Usage(Monitor(gpu_utilization=True), CUDA, main_process=True)
    assert usage.read() == {}


def test_a_reading_that_fails_later_warns_once_and_stops(two_gpus: dict[int, Any]) -> None:
    usage = Usage(Monitor(gpu_utilization=True, cpu_utilization=True), CUDA, main_process=True)
    two_gpus[0] = RuntimeError("GPU is lost")
    with pytest.warns(UserWarning, match=r"reading it failed \(RuntimeError: GPU is lost\)"):
        assert set(usage.read()) == {"train/cpu_utilization"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert set(usage.read()) == {"train/cpu_utilization"}
