"""What the search writes to the terminal: log lines above its bar, never glued onto it; one
short line per trial instead of optuna's; a table whose heading counts what finished how."""

from __future__ import annotations

import io
import logging
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest
from tqdm.auto import tqdm

from accmt_metrics import Accuracy
from accmt_search import HyperParameterSearch
from accmt_search._console import short_params, trial_line
from accmt_search._progress import route_logging
from accmt_search._trial import TrialOutcome

from ._data import DigitsMLP, PruneTrial
from .test_search import SPACE, Data


class Terminal(io.StringIO):
    """A captured stderr that says it is a terminal, so that the search shows its bar."""

    def isatty(self) -> bool:
        return True


def visible_lines(written: str) -> list[str]:
    """What a terminal shows of each line: the text after its last carriage return (a bar
    redraws itself after one; a log line written onto the bar has none before it)."""
    return [line.rpartition("\r")[2] for line in written.split("\n")]


@pytest.fixture
def optuna_logger() -> Iterator[logging.Logger]:
    """optuna's logger at INFO with a console handler of its own, as optuna sets it up."""
    logger = logging.getLogger("optuna")
    optuna.logging.set_verbosity(optuna.logging.INFO)
    handlers = logger.handlers[:]
    yield logger
    logger.handlers[:] = handlers
    optuna.logging.set_verbosity(optuna.logging.WARNING)


def test_route_logging_writes_each_line_above_a_real_bar(optuna_logger: logging.Logger) -> None:
    stream = Terminal()
    optuna_logger.handlers[:] = [logging.StreamHandler(stream)]
    root_handler = logging.StreamHandler(stream)
    root_handler.setFormatter(logging.Formatter("[%(levelname)s] %(message)s"))
    root = logging.getLogger()
    root.addHandler(root_handler)
    try:
        bar = tqdm(total=3, desc="trials", file=stream)
        bar.set_postfix(best="0.9778")
        # Without the routing, a line lands on the bar's own line: what the user saw.
        optuna_logger.info("Trial 0 pruned.")
        glued = [line for line in visible_lines(stream.getvalue()) if "Trial 0" in line]
        assert glued[0].startswith("trials:")
        with route_logging(bar, stream):
            bar.update(1)
            optuna_logger.info("Trial 1 pruned.")
            logging.getLogger("accmt_search").warning("trial 2 failed: ValueError: no")
            bar.update(1)
        bar.close()
        # The handlers are themselves again afterwards.
        assert type(optuna_logger.handlers[0]) is logging.StreamHandler
        assert root_handler in root.handlers
    finally:
        root.removeHandler(root_handler)
    lines = visible_lines(stream.getvalue())
    assert "Trial 1 pruned." in lines
    assert "[WARNING] trial 2 failed: ValueError: no" in lines  # the handler's own format


def test_a_search_writes_one_short_line_per_trial_above_its_bar(
    data: Data, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, optuna_logger: logging.Logger
) -> None:
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    optuna_logger.handlers[:] = [logging.StreamHandler(terminal)]
    handler = logging.StreamHandler(terminal)
    search_logger = logging.getLogger("accmt_search")
    search_logger.addHandler(handler)
    search_logger.setLevel(logging.INFO)
    train, valid = data
    found = HyperParameterSearch(
        DigitsMLP, train, valid, metrics=[Accuracy()], output_dir=tmp_path, log_with=None
    )
    found.set_space(SPACE)
    try:
        found.optimize(
            lambda m: m["validation"]["accuracy"],
            "maximize",
            n_trials=3,
            pruner=PruneTrial(1),
            plots=False,
        )
    finally:
        search_logger.removeHandler(handler)
        search_logger.setLevel(logging.NOTSET)
    written = terminal.getvalue()
    assert "trials:" in written  # the bar was shown
    lines = visible_lines(written)
    # optuna's own line per trial is gone; every line the search wrote stands on its own.
    assert not [line for line in lines if re.search(r"Trial \d", line)]
    ended = [line for line in lines if re.match(r"accmt_search: trial \d", line)]
    assert [line.split()[2] for line in ended] == ["0", "1", "2"]
    assert [line.split()[3] for line in ended] == ["complete:", "pruned", "complete:"]
    assert not [line for line in lines if "accmt_search" in line and not line.startswith("accm")]
    for line in ended:
        assert len(line) < 120, line
        value = re.search(r"(complete: |pruned at )([0-9.e-]+)", line)
        assert value is not None
        assert len(value.group(2).strip("0.").replace(".", "")) <= 4  # 4 significant digits
    assert "accmt_search: best 2 of 3 trials (2 complete, 1 pruned):" in lines


def test_a_trial_line_rounds_and_abbreviates() -> None:
    params = {
        "optimizer_kwargs.lr": 0.019395599978154897,
        "optimizer_kwargs.decay": 0.027944888160427762,
        "scheduler_kwargs.decay": 0.5,
        "scheduler": "CosineWithWarmupAndAVeryLongNameIndeed",
    }
    outcome = TrialOutcome("complete", 0.9527777777777777, global_step=180, seconds=7.25)
    level, line = trial_line(3, outcome, params, best=0.9, maximize=True)
    assert level == logging.INFO
    assert line.startswith("trial 3 complete: 0.9528 (new best), 180 steps in 7.2 s; lr=0.0194 ")
    # Two parameters end in decay: both keep their whole names.
    assert "optimizer_kwargs.decay=0.0279 scheduler_kwargs.decay=0.5 " in line
    assert line.endswith(" scheduler=CosineWithWarmupA...")
    level, line = trial_line(4, TrialOutcome("pruned", 0.25), params, best=0.9, maximize=True)
    assert line.startswith("trial 4 pruned at 0.25, 0 steps in 0.0 s;")
    failed = TrialOutcome("failed", error="ValueError: " + "x" * 300 + "\nsecond line")
    level, line = trial_line(5, failed, params, best=None, maximize=False, retry_of=1)
    assert level == logging.WARNING
    assert line.startswith("trial 5 (retry of 1) failed: ValueError: xxx")
    assert "second line" not in line
    assert len(line) < 250


def test_long_parameters_are_cut_with_a_count_of_the_rest() -> None:
    params = {f"module.layer_{index}_width": 1000 + index for index in range(20)}
    shown = short_params(params, width=60)
    assert len(shown) <= 60
    assert shown.startswith("layer_0_width=1000 layer_1_width=1001 ")
    kept = shown.count("=")
    assert shown.endswith(f"(+{20 - kept} more)")
