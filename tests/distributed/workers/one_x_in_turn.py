"""Several of the accmt 1.x programs beside this file, run in turn in one process, each as if
launched alone: ``one_x_in_turn.py OUT PROGRAM[:ARG...] ...``. Each program runs as
``__main__`` with ``sys.argv`` ``[PROGRAM, OUT/<program's stem>, ARG...]``, so it writes into a
folder of its own, unchanged. Most of a launch's cost is its processes importing torch and
Accelerate: tests/distributed/test_one_x_programs.py pays it once a number of processes."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

if __name__ == "__main__":
    out, here = Path(sys.argv[1]), Path(__file__).parent
    for spec in sys.argv[2:]:
        program, *arguments = spec.split(":")
        folder = out / Path(program).stem
        folder.mkdir(parents=True, exist_ok=True)
        sys.argv = [str(here / program), str(folder), *arguments]
        runpy.run_path(str(here / program), run_name="__main__")
