"""Built once per session: wheels and sdists of every package (``hatch build --all``), and
an environment holding torch alone."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ._venv import CLEAN, fresh_venv, site_packages

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


@pytest.fixture(scope="session")
def torch_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site-packages of a fresh environment that holds torch and what it needs, alone.

    The tests' fresh environments see it through a ``.pth`` file instead of installing torch
    each (see ``fresh_venv``); pip counts it as installed there. It is this machine's CPU wheel,
    which the packages' range (torch>=2.4,<3) accepts, and it is not byte-compiled: that is two
    thirds of installing torch, and nothing these tests check.
    """
    python = fresh_venv(tmp_path_factory.mktemp("torch") / "venv")
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet"]
    subprocess.run([*pip, "--no-compile", "torch==2.13.0"], check=True, env=CLEAN)
    return site_packages(python)
