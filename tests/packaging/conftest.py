"""Wheels and sdists of every package, built once per session with ``hatch build --all``."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding a freshly built wheel and sdist of each package under packages/."""
    hatch = shutil.which("hatch")
    if hatch is None:
        pytest.fail("the packaging tests build with Hatch: run them through ./hatchw run test")
    out = tmp_path_factory.mktemp("wheelhouse")
    subprocess.run([hatch, "build", "--all", str(out)], cwd=ROOT, check=True,
                   capture_output=True)  # fmt: skip
    return out
