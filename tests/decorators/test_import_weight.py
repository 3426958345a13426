"""accmt_decorators imports nothing but the standard library."""

from __future__ import annotations

import subprocess
import sys


def test_import_leaves_torch_and_accelerate_out() -> None:
    code = (
        "import sys, accmt_decorators\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'torch', 'accelerate', 'numpy'})\n"
        "print(heavy)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
