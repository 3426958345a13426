"""Fresh virtual environments holding one built wheel and only what it declares."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def fresh_venv(where: Path) -> Path:
    """Make an empty virtual environment (no pip, no site packages) and return its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    return where / "bin" / "python"


def install(python: Path, wheelhouse: Path, *requirements: str) -> None:
    """Install requirements into the environment, siblings taken from the wheelhouse."""
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
         "--find-links", str(wheelhouse), *requirements],
        check=True,
    )  # fmt: skip


def run(python: Path, code: str) -> str:
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(f"{code}\n--- exited {done.returncode}\n{done.stderr}")
    return done.stdout


def run_script(python: Path, script: Path, *args: str) -> str:
    """Run a script with the environment's python from its own folder; return its output."""
    done = subprocess.run(
        [str(python), str(script), *args], capture_output=True, text=True, cwd=script.parent
    )
    if done.returncode != 0:
        raise AssertionError(f"{script.name} exited {done.returncode}\n{done.stderr[-4000:]}")
    return done.stdout
