"""What a run says on the console: one line on how it starts (afresh, or resumed from which
checkpoint, epoch and step, and what the resume costs) and one line per evaluation, seen on
stderr by a program that configured no logging, and handed to the program's own handlers when
it did."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import re
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from torch.utils.data import IterableDataset

from accmt_callbacks import Callback
from accmt_metrics import Accuracy
from accmt_trainer import HyperParameters, Trainer
from accmt_trainer.checkpointing import _manifest
from accmt_trainer.checkpointing._run_facts import FileEntry
from accmt_trainer.console._console import console_lines, evaluation_postfix
from accmt_trainer.console._progress_bar import ProgressBar
from accmt_trainer.fit._start_lines import _size

from .conftest import Classifier, blobs

# 32 samples in batches of 8: 4 optimizer steps an epoch.
TRAIN, VALID = blobs(32), blobs(16, seed=1)
EVALUATION = re.compile(
    r"^epoch (\d+)/(\d+) step (\d+): validation loss=(\d+\.\d{4}) accuracy=(\d+\.\d{4})$"
)


class StopAt(Callback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_after_training_step(self) -> None:
        if self.state.global_step == self.step:
            self.request_stop(f"step {self.step}")


def make(folder: Path, epochs: int, **options: Any) -> Trainer:
    hps = HyperParameters(
        epochs=epochs, batch_size=8, optimizer="SGD", optimizer_kwargs={"lr": 0.1}
    )
    return Trainer(hps, folder, metrics=[Accuracy()], log_with=None, seed=0, **options)


@contextlib.contextmanager
def no_logging_configured() -> Iterator[None]:
    """As in a script that never touched logging: no handler on the root logger (pytest's
    capture handler is set aside for the block)."""
    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers.clear()
    try:
        yield
    finally:
        root.handlers[:] = saved


def console_of(
    trainer: Trainer, capsys: pytest.CaptureFixture[str], train: Any = TRAIN
) -> list[str]:
    """The lines a fit writes to stderr in a program that configured no logging."""
    capsys.readouterr()
    with no_logging_configured():
        trainer.fit(Classifier(), train, VALID)
    return capsys.readouterr().err.splitlines()


def cost(checkpoint: Path) -> str:
    """What resuming ``checkpoint`` on one process costs: every file its manifest lists is
    verified, and read."""
    files = json.loads((checkpoint / "manifest.json").read_text())["files"]
    total = sum(entry["size"] for entry in files.values())
    return f"; verified {_size(total)} once per machine, read up to {_size(total)} per process"


def test_a_fresh_run_says_so_and_gives_one_line_per_evaluation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trainer = make(tmp_path, epochs=3)
    lines = console_of(trainer, capsys)
    assert lines[0] == f"starting afresh in {tmp_path}: 3 epochs, 12 optimizer steps"
    evaluations = [EVALUATION.match(line) for line in lines[1:]]
    assert all(evaluations), lines
    found = [(m[1], m[2], m[3]) for m in evaluations if m]
    assert found == [("1", "3", "4"), ("2", "3", "8"), ("3", "3", "12")]
    assert len(found) == trainer.state.evaluations_done
    last = trainer.state.additional_metrics["validation"]
    assert lines[-1].endswith(f"loss={last['loss']:.4f} accuracy={last['accuracy']:.4f}")
    # The handler lived for the fit only; the program's logging is as it was.
    assert logging.getLogger("accmt_trainer").handlers == []
    assert logging.getLogger("accmt_trainer").level == logging.NOTSET


def test_a_run_resumed_mid_epoch_says_from_where_and_hashes_each_file_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    console_of(make(tmp_path, epochs=3, callbacks=[StopAt(6)]), capsys)  # stops in epoch 2
    checkpoint = tmp_path / "checkpoints" / "checkpoint_000002"
    hashed: Counter[Path] = Counter()
    describe = _manifest.describe

    def counted(path: Path) -> FileEntry:
        hashed[path] += 1
        return describe(path)

    monkeypatch.setattr(_manifest, "describe", counted)
    lines = console_of(make(tmp_path, epochs=3), capsys)
    assert lines[0] == (
        f"resuming {tmp_path} from checkpoint_000002: epoch 2/3 at batch 2/4, step 6/12"
        + cost(checkpoint)
    )
    # Verified once: each file of the checkpoint hashed once (the later checkpoints' files are
    # hashed in their temporary folders, for their manifests).
    listed = json.loads((checkpoint / "manifest.json").read_text())["files"]
    verified = {path: n for path, n in hashed.items() if checkpoint in path.parents}
    assert verified == {checkpoint / name: 1 for name in listed}
    steps = [match.group(3) if (match := EVALUATION.match(line)) else line for line in lines[1:]]
    assert steps == ["8", "12"]


def test_a_stopped_run_says_why_where_and_that_it_did_not_finish(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = console_of(make(tmp_path, epochs=3, callbacks=[StopAt(6)]), capsys)
    checkpoint = tmp_path / "checkpoints" / "checkpoint_000002"
    assert lines[-1] == (
        f"stopped at epoch 2, step 6 (step 6): the run did not finish; its checkpoint is "
        f"{checkpoint}; fit again (run the script again) to resume it"
    )
    finished = console_of(make(tmp_path / "whole", epochs=1), capsys)
    assert not [line for line in finished if line.startswith("stopped")]


def test_a_finished_run_given_more_epochs_says_it_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    console_of(make(tmp_path, epochs=2), capsys)
    lines = console_of(make(tmp_path, epochs=3), capsys)
    assert lines[0] == (
        f"resuming {tmp_path} from checkpoint_000002: epoch 2/3 done, step 8/12 "
        "(that run had finished; it goes on to 3 epochs)"
        + cost(tmp_path / "checkpoints" / "checkpoint_000002")
    )
    assert len(lines) == 2
    evaluation = EVALUATION.match(lines[1])
    assert evaluation is not None
    assert evaluation.group(1, 2, 3) == ("3", "3", "12")


class Stream(IterableDataset[Any]):
    """TRAIN as a stream that keeps no place: a resume reads it again."""

    def __iter__(self) -> Iterator[Any]:
        return iter(TRAIN)

    def __len__(self) -> int:
        return len(TRAIN)


def test_a_stream_resumed_mid_epoch_says_the_batches_it_reads_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    console_of(make(tmp_path, epochs=3, callbacks=[StopAt(6)]), capsys, Stream())
    lines = console_of(make(tmp_path, epochs=3), capsys, Stream())
    assert lines[0] == (
        f"resuming {tmp_path} from checkpoint_000002: epoch 2/3 at batch 2/4, step 6/12"
        + cost(tmp_path / "checkpoints" / "checkpoint_000002")
        + "; the first 2 batches of epoch 2 of the stream are read again and skipped to "
        "reach its place"
    )
    assert len(lines) == 3  # and no other line says it


@pytest.mark.parametrize(
    ("count", "said"),
    [(0, "0 B"), (999, "999 B"), (4096, "4.1 kB"), (999_960, "1.0 MB"), (1_300_000_000, "1.3 GB")],
)
def test_sizes_are_said_in_decimal_units(count: int, said: str) -> None:
    assert _size(count) == said


def test_one_epoch_is_said_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = console_of(make(tmp_path, epochs=1), capsys)
    assert lines[0] == f"starting afresh in {tmp_path}: 1 epoch, 4 optimizer steps"


def test_a_program_that_configured_logging_gets_the_lines_through_its_handlers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    capsys.readouterr()
    with caplog.at_level(logging.INFO, logger="accmt_trainer"):
        make(tmp_path, epochs=1).fit(Classifier(), TRAIN, VALID)
    assert "starting afresh" not in capsys.readouterr().err  # no second handler of ours
    messages = [record.getMessage() for record in caplog.records]
    assert messages[0].startswith("starting afresh in")
    assert EVALUATION.match(messages[1])


def test_other_processes_get_no_handler() -> None:
    logger = logging.getLogger("accmt_trainer")
    with no_logging_configured():
        with console_lines(main_process=False):
            assert logger.handlers == []
        with console_lines(main_process=True):
            assert len(logger.handlers) == 1
            assert logger.getEffectiveLevel() == logging.INFO
    assert logger.handlers == []


def test_the_progress_bar_shows_the_latest_evaluation(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    # A terminal wide enough for the whole postfix: tqdm 4.66 fits a bar to COLUMNS (80 when
    # unset), where newer releases leave a width they cannot read unbounded.
    monkeypatch.setenv("COLUMNS", "200")
    bar = ProgressBar(enabled=True, is_main_process=True)
    bar.start_epoch(0, 2, total=4, done=0)
    bar.show({"loss": 0.5, "lr": 0.1})
    bar.show_evaluation(evaluation_postfix({"validation": {"loss": 0.1234, "accuracy": 0.975}}))
    bar.start_epoch(1, 2, total=4, done=0)  # the next epoch's bar keeps showing them
    bar.close()
    second = terminal.getvalue().split("epoch 2/2")[-1]
    assert "loss=0.5, lr=0.1, val_loss=0.1234, accuracy=0.9750" in second
