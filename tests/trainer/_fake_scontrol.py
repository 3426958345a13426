"""A stand-in ``scontrol``: a real program, put first on PATH, that records each call (its
arguments, the process that made it, and the checkpoints as they stood at that moment) and exits
with a given status. The requeue a stopped run asks for is tested with it where there is no
SLURM; the real-SLURM tests run the real one."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

PROGRAM = """#!{python}
import json, os, sys
from pathlib import Path

root = Path({root!r})
pointer = root / "latest.json"
latest = json.loads(pointer.read_text())["latest"] if pointer.exists() else None
call = {{
    "args": sys.argv[1:],
    "caller": os.getppid(),
    "latest": latest,
    "manifest": latest is not None and (root / latest / "manifest.json").exists(),
}}
with open({calls!r}, "a") as calls:
    calls.write(json.dumps(call) + "\\n")
sys.exit({status})
"""


def fake_scontrol(folder: Path, root: Path, status: int = 0) -> Path:
    """Write folder/bin/scontrol, which records its calls in folder/calls (read them with
    :func:`calls`) and reads the checkpoints under ``root``; returns folder/bin, to put first
    on PATH."""
    program = folder / "bin" / "scontrol"
    program.parent.mkdir(parents=True)
    calls = str(folder / "calls")
    program.write_text(
        PROGRAM.format(python=sys.executable, root=str(root), calls=calls, status=status)
    )
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    return program.parent


def calls(folder: Path) -> list[dict[str, Any]]:
    """The calls the fake scontrol of ``folder`` recorded, in order."""
    path = folder / "calls"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def on_path(bin_folder: Path) -> str:
    """PATH with ``bin_folder`` first."""
    return f"{bin_folder}{os.pathsep}{os.environ['PATH']}"
