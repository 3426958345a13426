"""accmt_state never imports torch, accelerate or numpy, not even while saving and loading."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_import_and_use_leave_torch_accelerate_and_numpy_out(tmp_path: Path) -> None:
    code = (
        "import sys, accmt_state\n"
        "state = accmt_state.TrainingState(additional_metrics={'v': {'loss': 0.5}})\n"
        "state.save(sys.argv[1])\n"
        "accmt_state.TrainingState.load(sys.argv[1])\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'torch', 'accelerate', 'numpy'})\n"
        "print(heavy)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "state.json")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "[]"
