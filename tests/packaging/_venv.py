"""Fresh virtual environments holding one built wheel and only what it declares."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# What runs in a fresh environment sees none of the test run's own import paths, and caches
# the bytecode of what it imports (nothing is byte-compiled at install time).
CLEAN = {
    name: value
    for name, value in os.environ.items()
    if name not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")
}


def fresh_venv(where: Path, torch_site: Path | None = None) -> Path:
    """Make an empty virtual environment (no pip, no site packages) and return its python.

    With ``torch_site`` (the site-packages of an environment holding torch alone, see the
    ``torch_site`` fixture), the environment sees that torch through a ``.pth`` file, as if it
    had been installed into it, without the gigabyte being installed again.
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    if torch_site is not None:
        (site_packages(python) / "_torch_site.pth").write_text(f"{torch_site}\n")
    return python


def site_packages(python: Path) -> Path:
    code = "import sysconfig; print(sysconfig.get_path('purelib'))"
    return Path(run(python, code).strip())


def install(python: Path, wheelhouse: Path, *requirements: str) -> None:
    """Install requirements into the environment, siblings taken from the wheelhouse.

    Not byte-compiled: for scikit-learn and SciPy that is most of the install, and nothing the
    tests check (Python compiles what is imported, as it is imported)."""
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet"]
    options = ["--no-compile", "--find-links", str(wheelhouse)]
    subprocess.run([*pip, *options, *requirements], check=True, env=CLEAN)


def run(python: Path, code: str) -> str:
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, env=CLEAN)
    if done.returncode != 0:
        raise AssertionError(f"{code}\n--- exited {done.returncode}\n{done.stderr}")
    return done.stdout


def run_script(python: Path, script: Path, *args: str) -> str:
    """Run a script with the environment's python from its own folder; return its output."""
    done = subprocess.run(
        [str(python), str(script), *args],
        capture_output=True,
        text=True,
        cwd=script.parent,
        env=CLEAN,
    )
    if done.returncode != 0:
        raise AssertionError(f"{script.name} exited {done.returncode}\n{done.stderr[-4000:]}")
    return done.stdout
