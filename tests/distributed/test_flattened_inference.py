"""Trainer.evaluate and Trainer.predict on flattened batches through torchrun on 2 CPU
processes: per-document results, every document once, in dataset order, equal to the
one-process and padded figures (each document run alone, and the token-weighted loss from
there). (One process, in the test's own process: tests/accmt/test_flattened_batches.py.)"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
import torch

from tests.trainer._tiny_gpt2 import LENGTHS

from ._launch import WORKERS, torchrun

sys.path.insert(0, str(WORKERS))
import flattened_worker as worker

pytestmark = [pytest.mark.distributed, pytest.mark.transformers]

# Rows of 16 (best-fit: a row's documents are not in index order); one row, the same code
# with a single row, runs on one process only (tests/accmt/test_flattened_batches.py).
FLATTENED = ("rows of 16",)


def test_two_processes_give_each_document_once_in_dataset_order(tmp_path: Path) -> None:
    out = tmp_path / "flattened.json"
    # 11 documents in batches of 3: the processes get 2 batches each, the last one short.
    torchrun("flattened_worker.py", 2, str(out), *FLATTENED, timeout=240)
    found = json.loads(out.read_text())
    alone = worker.alone()
    expected = worker.alone_loss(alone)
    for way in FLATTENED:
        evaluated = found[way]["evaluate"]
        assert evaluated["documents"] == len(LENGTHS), way
        assert evaluated["scored"] == sum(n - 1 for n in LENGTHS), way
        assert evaluated["loss"] == pytest.approx(expected, rel=1e-6), way
        assert evaluated["perplexity"] == pytest.approx(math.exp(expected), rel=1e-6)
        predicted = [torch.tensor(rows) for rows in found[way]["predict"]]
        assert [len(rows) for rows in predicted] == list(LENGTHS), way
        for index, (rows, own) in enumerate(zip(predicted, alone, strict=True)):
            assert torch.allclose(rows, own, atol=1e-5), (way, index)
