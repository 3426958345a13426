"""The token-weighted validation loss on 2 processes through torchrun: a tiny GPT-2's
validation and Trainer.evaluate with ``num_items`` record the one-process loss (the processes'
sums are added, never their means), and its ``exp`` is still the perplexity.
(One process, in the test's own process: tests/trainer/test_validation_tokens.py.)"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from ._launch import torchrun

pytestmark = [pytest.mark.distributed, pytest.mark.transformers]

# The worker the one-process test imports; torchrun runs the same file here.
WORKER = Path(__file__).parents[1] / "trainer" / "workers" / "causal_lm_validation.py"


def recorded(tmp_path: Path, processes: int) -> dict[str, Any]:
    out = tmp_path / f"validation{processes}.json"
    torchrun(str(WORKER), processes, str(out))
    found: dict[str, Any] = json.loads(out.read_text())
    return found


def test_two_processes_record_the_one_process_token_weighted_loss(tmp_path: Path) -> None:
    one, two = recorded(tmp_path, 1), recorded(tmp_path, 2)
    assert one["fit"]["loss"] == pytest.approx(one["by_hand"], rel=1e-6)
    for where in ("fit", "evaluate"):
        # Float tolerance: the two processes' batches are other shapes than one process's, so
        # other kernels, and their sums are added in another order.
        assert two[where]["loss"] == pytest.approx(one[where]["loss"], rel=1e-6), where
        assert two[where]["perplexity"] == pytest.approx(one[where]["perplexity"], rel=1e-6)
        assert math.exp(two[where]["loss"]) == pytest.approx(two[where]["perplexity"], rel=1e-6)
