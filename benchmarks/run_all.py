"""Run every benchmark script in this folder, one after the other."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def main() -> None:
    for script in sorted(HERE.glob("*.py")):
        if script.name.startswith("_") or script.name == "run_all.py":
            continue
        print(f"=== {script.name}", flush=True)
        subprocess.run([sys.executable, str(script)], check=True, cwd=HERE)


if __name__ == "__main__":
    main()
