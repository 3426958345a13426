"""Token sequences of given lengths and their padding collator: what the token-budget tests
batch (tests/distributed/workers/token_budget_worker.py, which imports this module by its bare
name, and tests/trainer/test_token_budget.py)."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import Dataset

VOCABULARY = 32


class Sequences(Dataset[dict[str, Any]]):
    """Sample ``i``: ``lengths[i]`` token ids in 1..VOCABULARY-1 (0 pads), its index, and a
    label (the index's parity)."""

    def __init__(self, lengths: list[int]) -> None:
        self.lengths = lengths

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, index: int) -> dict[str, Any]:
        ids = [(index * 5 + step) % (VOCABULARY - 1) + 1 for step in range(self.lengths[index])]
        return {"input_ids": ids, "index": index, "label": index % 2}


def pad(samples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    """The samples' ids padded with 0 to the longest, their indices and labels."""
    longest = max(len(sample["input_ids"]) for sample in samples)
    ids = torch.zeros(len(samples), longest, dtype=torch.long)
    for row, sample in enumerate(samples):
        ids[row, : len(sample["input_ids"])] = torch.tensor(sample["input_ids"])
    return {
        "input_ids": ids,
        "index": torch.tensor([sample["index"] for sample in samples]),
        "label": torch.tensor([sample["label"] for sample in samples]),
    }
