"""Wheels of every package, built once per session from the working tree."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ROOT / "packages"


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding a freshly built wheel of each package under packages/."""
    out = tmp_path_factory.mktemp("wheelhouse")
    folders = sorted(str(p) for p in PACKAGES.iterdir() if (p / "pyproject.toml").exists())
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(out), *folders],
        check=True,
    )  # fmt: skip
    return out
