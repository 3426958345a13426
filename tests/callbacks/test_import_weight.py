"""accmt_callbacks never imports torch or accelerate."""

from __future__ import annotations

import subprocess
import sys


def test_import_leaves_torch_and_accelerate_out() -> None:
    code = (
        "import sys, accmt_callbacks\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in {'torch', 'accelerate'})\n"
        "print(heavy)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
