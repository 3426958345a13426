"""Run every benchmark script in this folder, one after the other."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
# Scripts left out, and why: gpu.py exits with an error without CUDA, which would stop the run;
# lm.py and resume.py are long.
LEFT_OUT = {
    "gpu.py": "it needs a CUDA GPU; run it by hand on one (see its docstring)",
    "lm.py": "it takes about 7 minutes on 2 cores (--corpus stdlib: 18 with 3 rounds, loaded); "
    "run it alone (see its docstring and _lm_stdlib.py's)",
    "resume.py": "it takes about 12 minutes on 2 cores (training to step 10,000 four times); "
    "run it alone (see its docstring)",
}


def main() -> None:
    for script in sorted(HERE.glob("*.py")):
        if script.name.startswith("_") or script.name == "run_all.py":
            continue
        if script.name in LEFT_OUT:
            print(f"=== {script.name} left out: {LEFT_OUT[script.name]}", flush=True)
            continue
        print(f"=== {script.name}", flush=True)
        subprocess.run([sys.executable, str(script)], check=True, cwd=HERE)


if __name__ == "__main__":
    main()
