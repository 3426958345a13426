"""Type checkers see the decorated function's real signature (ParamSpec), checked with mypy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SNIPPET = """
from typing import assert_type
from accmt_decorators import on_main_process, on_process

@on_main_process
def bare(x: int, *, name: str = "a") -> float:
    return 1.0

@on_process(1, broadcast=True)
def shared(x: int) -> str:
    return "s"

assert_type(bare(1, name="b"), float | None)
assert_type(shared(2), str)
bare("not an int")
"""


def test_mypy_sees_the_wrapped_signature(tmp_path: Path) -> None:
    snippet = tmp_path / "usage.py"
    snippet.write_text(SNIPPET)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--python-version=3.11", str(snippet)],
        capture_output=True,
        text=True,
    )
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    # Exactly one error: the call with a str where the signature wants an int.
    assert len(errors) == 1, done.stdout
    assert 'Argument 1 to "bare" has incompatible type "str"; expected "int"' in errors[0]
