"""Batches of every collator survive Accelerate's dispatch between real processes: made on the
main process, broadcast over gloo, split, and equal on each process to its share of the batch
the collator makes (see workers/collators_dispatch_worker.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ._launch import torchrun

pytestmark = pytest.mark.distributed

COLLATORS = {
    "DataCollatorWithPadding",
    "DataCollatorForTokenClassification",
    "DataCollatorForSeq2Seq",
    "DataCollatorForLanguageModeling",
    "DataCollatorForWholeWordMask",
    "DataCollatorForPermutationLanguageModeling",
}


def test_dispatched_batches_arrive_as_the_collator_made_them(tmp_path: Path) -> None:
    torchrun("collators_dispatch_worker.py", 2, str(tmp_path))
    for rank in range(2):
        checked = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert checked == dict.fromkeys(COLLATORS, 2), rank
