"""Token-weighted steps on 2 processes through torchrun: one optimizer step over sequences of
different lengths equals one full batch of every token, for each split of the batch across
processes and accumulation; an epoch's shorter last window is the mean over its own batches.
(One process: tests/trainer/test_token_steps.py.)"""

from __future__ import annotations

import json
from pathlib import Path

from ._launch import torchrun

# The worker the one-process test imports; torchrun runs the same file here.
WORKER = Path(__file__).parents[1] / "trainer" / "workers" / "token_steps.py"


def test_two_processes_step_as_one_batch_of_all_the_tokens(tmp_path: Path) -> None:
    out = tmp_path / "differences.json"
    torchrun(str(WORKER), 2, str(out))
    differences = json.loads(out.read_text())
    expected = {"tokens 4x1", "tokens 2x2", "tokens 1x4", "partial window 2x2"}
    assert set(differences) == expected
    assert max(differences.values()) < 1e-5, differences
