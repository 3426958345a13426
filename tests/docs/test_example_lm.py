"""examples/train_lm.py as a reader sees it in a terminal: accmt's progress bar and the
example's own lines, nothing from the tokenizers library; the tokenizer trained once into the
run's folder; and a finished run that says so at once, with the tokenizer it trained with."""

from __future__ import annotations

import fcntl
import importlib.util
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "train_lm.py"

# What the tokenizers library's trainer draws while it trains (with show_progress=True).
TOKENIZERS_PROGRESS = ["Tokenize words", "Count pairs", "Compute merges"]


def in_terminal(*argv: str, timeout: float = 300) -> tuple[int, str]:
    """Run a command with a 120-column terminal as its stdout and stderr (where tqdm and the
    tokenizers library draw their bars) and return its exit status and everything it wrote."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower, env=environment
    )
    os.close(follower)
    written = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not select.select([leader], [], [], 1.0)[0]:
                continue
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the command and its children closed the terminal
                break
            if not chunk:
                break
            written += chunk
        else:
            process.kill()
            raise AssertionError(f"{argv} ran past {timeout} s:\n{written.decode()[-4000:]}")
        return process.wait(timeout=30), written.decode("utf-8", "replace")
    finally:
        os.close(leader)


def segments(output: str) -> list[str]:
    """What the terminal shows, piece by piece: the text between carriage returns and newlines
    (a progress bar redraws itself after a carriage return)."""
    return [piece for piece in re.split(r"[\r\n]+", output) if piece.strip()]


def test_the_lm_example_shows_accmts_progress_and_keeps_its_tokenizer(tmp_path: Path) -> None:
    output = tmp_path / "lm"
    command = [
        sys.executable,
        str(EXAMPLE),
        "--texts",
        "16",
        "--epochs",
        "1",
        "--output",
        str(output),
    ]
    status, first = in_terminal(*command)
    assert status == 0, first[-4000:]
    shown = segments(first)
    # The Trainer's bar, drawn through the epoch ...
    assert any(line.startswith("epoch 1/1: 100%") for line in shown), first[-4000:]
    # ... with the Trainer's line of the epoch's evaluation on a line of its own, not across
    # the bar ...
    evaluated = [line for line in shown if line.startswith("epoch 1/1 step ")]
    assert any("validation" in line and "perplexity=" in line for line in evaluated), shown
    # ... and no other progress display, nor a library's notice at each save about the
    # model's tied LM head.
    assert not [name for name in TOKENIZERS_PROGRESS if name in first], first[-4000:]
    assert "Removed shared tensor" not in first, first[-4000:]
    # The best model's test perplexity, and text generated from it.
    assert [line for line in shown if line.startswith("generated: 'A class")], shown
    tokenizer = output / "tokenizer.json"
    assert tokenizer.is_file()
    made = tokenizer.stat()

    status, second = in_terminal(*command)
    assert status == 0, second[-4000:]
    assert "already finished (epoch 1, " in second, second
    assert "it/s" not in second, second  # nothing trained, so no bar
    ends = ("final validation perplexity", "test perplexity of the best model", "generated:")
    final = [line for line in segments(second) if line.startswith(ends)]
    assert len(final) == 3, second
    assert final == [line for line in segments(first) if line.startswith(ends)]
    # The same file, neither trained again nor rewritten.
    again = tokenizer.stat()
    assert (again.st_ino, again.st_mtime_ns) == (made.st_ino, made.st_mtime_ns)


def test_a_run_reads_back_the_tokenizer_it_trained(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = importlib.util.spec_from_file_location("train_lm", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    texts = ["def f(x):\n    return x + 1\n", "for item in items:\n    print(item)\n"] * 20
    path = tmp_path / "run" / "tokenizer.json"
    trained = example.run_tokenizer(path, texts, size=300)

    def train_again(*args: Any) -> None:
        raise AssertionError("the tokenizer was trained again")

    monkeypatch.setattr(example, "train_tokenizer", train_again)
    read = example.run_tokenizer(path, texts, size=300)
    assert read.get_vocab() == trained.get_vocab()
    assert read.encode(texts[0]).ids == trained.encode(texts[0]).ids
    assert [entry.name for entry in path.parent.iterdir()] == ["tokenizer.json"]  # no partial
