"""``Trainer(profile_steps=(start, stop))``: torch.profiler records the optimizer steps
``start + 1`` to ``stop`` and writes a Chrome trace under the run's logging folder; the steps
outside the window are not in it. (Two processes: tests/distributed/test_profile.py.)"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from accmt_callbacks import Callback
from accmt_trainer import HyperParameters, Trainer, TrainerConfigError

from .conftest import Classifier, blobs

sys.path.insert(0, str(Path(__file__).parent / "workers"))
from profiled_run import optimizer_steps_in, profiled_fit, traces


def test_the_trace_holds_the_windows_optimizer_steps_and_no_other(tmp_path: Path) -> None:
    profiled_fit(tmp_path, (2, 4))
    (trace,) = traces(tmp_path)
    assert trace.name.startswith("process_0.")
    # Steps 3 and 4 of the run's 8: two optimizer steps, marked as the profiler's two steps.
    assert optimizer_steps_in(trace) == {
        "optimizer": 2,
        "marked": ["ProfilerStep#0", "ProfilerStep#1"],
    }


def test_a_window_from_the_start_profiles_the_first_steps(tmp_path: Path) -> None:
    profiled_fit(tmp_path, (0, 3))
    (trace,) = traces(tmp_path)
    assert optimizer_steps_in(trace)["optimizer"] == 3


def test_a_window_past_the_runs_end_ends_with_the_run(tmp_path: Path) -> None:
    profiled_fit(tmp_path, (6, 20))  # the run has 8 steps
    (trace,) = traces(tmp_path)
    assert optimizer_steps_in(trace)["optimizer"] == 2


class StopAt(Callback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_after_training_step(self) -> None:
        assert self.state is not None
        assert self.trainer is not None
        if self.state.global_step == self.step:
            self.trainer.request_stop("the test stops here")


def test_a_run_stopped_in_the_window_writes_its_part_and_its_resume_the_rest(
    tmp_path: Path,
) -> None:
    every_step = {"checkpoint_every": "1 steps"}
    profiled_fit(tmp_path, (2, 5), callbacks=[StopAt(3)], **every_step)  # steps 1-3 of 8
    profiled_fit(tmp_path, (2, 5), **every_step)  # resumes at step 3
    stopped, resumed = traces(tmp_path)  # named by the time they were written
    assert optimizer_steps_in(stopped)["optimizer"] == 1  # step 3
    assert optimizer_steps_in(resumed)["optimizer"] == 2  # steps 4 and 5


def test_a_window_after_the_run_profiles_nothing_and_says_so(tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match=r"profile_steps=\(8, 9\).*8 optimizer steps"):
        profiled_fit(tmp_path, (8, 9))
    assert traces(tmp_path) == []


def test_without_profile_steps_nothing_is_written(tmp_path: Path) -> None:
    profiled_fit(tmp_path, None)
    assert not (tmp_path / "logs" / "run" / "profile").exists()


@pytest.mark.parametrize(
    ("steps", "problem"),
    [
        ((4, 2), "start must be below stop"),
        ((3, 3), "start must be below stop"),
        ((-1, 2), "start must be 0 or more"),
        ((1, 2, 3), "expected a pair (start, stop)"),
        (5, "expected a pair (start, stop)"),
        ((1.0, 2), "expected a pair (start, stop)"),
        ((True, 2), "expected a pair (start, stop)"),
    ],
)
def test_a_bad_window_is_named_when_the_trainer_is_made(
    tmp_path: Path, steps: Any, problem: str
) -> None:
    with pytest.raises(TrainerConfigError) as raised:
        Trainer(HyperParameters(epochs=1), tmp_path, profile_steps=steps)
    message = str(raised.value)
    assert message.startswith("Trainer(profile_steps=...)")
    assert problem in message
    assert repr(steps) in message


def test_a_list_is_taken_as_the_pair(tmp_path: Path) -> None:
    trainer = Trainer(HyperParameters(epochs=1), tmp_path, profile_steps=[1, 2])  # type: ignore[arg-type]
    assert trainer.fit_options.profile_steps == (1, 2)


def test_a_profiled_run_trains_as_an_unprofiled_one(tmp_path: Path) -> None:
    first, second = Classifier(), Classifier()
    for module, steps, folder in ((first, (1, 3), "a"), (second, None, "b")):
        hps = HyperParameters(epochs=1, batch_size=8, optimizer="SGD", optimizer_kwargs={"lr": 0.1})
        options: dict[str, Any] = {"log_with": None, "progress_bar": False, "cpu": True}
        Trainer(hps, tmp_path / folder, profile_steps=steps, seed=0, **options).fit(
            module, blobs(32)
        )
    for a, b in zip(first.model.parameters(), second.model.parameters(), strict=True):
        assert a.equal(b)
