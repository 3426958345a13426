"""A tiny GPT-2 evaluated and predicted on flattened batches, per document.

    flattened_worker.py OUT.json [WAY ...]     (alone, or under torchrun)

``Trainer.evaluate`` (a token-weighted loss with ``num_items``, ``Perplexity(causal=True)`` and
a metric that counts the rows it is given) and ``Trainer.predict`` (the logits) run over the
same documents in three ways (or the WAYs named): padded batches, flattened into one row, and
flattened into rows of 16. Every sample carries its ``index``, so the flattened batches carry
``document_spans``. The main process writes what each way gave, the predictions as nested
lists. The in-process
tests (tests/accmt/test_flattened_batches.py) import this file; tests/distributed/
test_flattened_inference.py runs it on 2 processes.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).parents[3]))  # the repository, for `tests` under torchrun
from accmt_collators import DataCollatorWithFlattening
from accmt_metrics import Perplexity, SummedMetric
from accmt_trainer import AcceleratorModule, HyperParameters, Trainer
from tests.trainer._tiny_gpt2 import IGNORED, LENGTHS, PAD, VOCABULARY, tiny_gpt2

WIDTH = 16  # the longest document, and the rows of the max_length way
WAYS = ("padded", "one row", "rows of 16")


def documents(lengths: Sequence[int] = LENGTHS, seed: int = 0) -> list[dict[str, Any]]:
    """Samples of random tokens, each carrying its dataset ``index``."""
    generator = torch.Generator().manual_seed(seed)
    return [
        {"input_ids": torch.randint(1, VOCABULARY, (n,), generator=generator), "index": i}
        for i, n in enumerate(lengths)
    ]


def padded(samples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    """A padding collator: the batch's longest, an attention mask, labels -100 on padding."""
    longest = max(len(sample["input_ids"]) for sample in samples)
    ids = torch.full((len(samples), longest), PAD, dtype=torch.long)
    mask = torch.zeros((len(samples), longest), dtype=torch.long)
    for row, sample in enumerate(samples):
        ids[row, : len(sample["input_ids"])] = sample["input_ids"]
        mask[row, : len(sample["input_ids"])] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, IGNORED)}


def collator(way: str) -> Any:
    if way == "padded":
        return padded
    return DataCollatorWithFlattening(max_length=WIDTH if way == "rows of 16" else None)


def summed_loss(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The next-token cross-entropy summed over the scored tokens, and their number."""
    targets = labels[:, 1:]
    summed = torch.nn.functional.cross_entropy(
        logits[:, :-1].flatten(0, 1), targets.flatten(), ignore_index=IGNORED, reduction="sum"
    )
    return summed, (targets != IGNORED).sum()


class CausalLM(AcceleratorModule):
    """The same steps for padded and flattened batches: ``model(**batch)`` minus the labels
    (a flattened batch's ``position_ids`` and ``use_cache=False`` go to the model with it)."""

    def __init__(self, dropout: float = 0.1) -> None:
        self.model = tiny_gpt2(resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout)

    def forward_logits(self, batch: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        inputs = {key: value for key, value in batch.items() if key != "labels"}
        return self.model(**inputs).logits, batch["labels"]

    def training_step(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        loss, items = summed_loss(*self.forward_logits(batch))
        return {"loss": loss, "num_items": items}

    def validation_step(self, key: str, batch: dict[str, Any]) -> dict[str, Any]:
        logits, labels = self.forward_logits(batch)
        loss, items = summed_loss(logits, labels)
        pair = (logits, labels)
        return {"loss": loss, "num_items": items, "perplexity": pair, "documents": pair}

    def predict_step(self, batch: dict[str, Any]) -> torch.Tensor:
        return self.forward_logits(batch)[0]


class Documents(SummedMetric):
    """The rows a metric is given and the tokens they score (the labels after the first)."""

    default_name = "documents"

    def statistics(self, predictions: torch.Tensor, references: torch.Tensor) -> Sequence[Any]:
        return references.shape[0], (references[:, 1:] != IGNORED).sum()

    def result(self, *totals: torch.Tensor) -> dict[str, float]:
        rows, scored = totals
        return {"documents": float(rows), "scored": float(scored)}


def trainer(folder: str, way: str, **options: Any) -> Trainer:
    hps = HyperParameters(epochs=1, batch_size=(4, 3), optimizer="SGD", optimizer_kwargs={"lr": 1})
    return Trainer(
        hps,
        folder,
        collate_fn=collator(way),
        metrics=[Perplexity(causal=True), Documents()],
        log_with=None,
        progress_bar=False,
        cpu=True,
        checkpoint_every=None,
        disable_model_saving=True,
        **options,
    )


def inferred(way: str) -> tuple[dict[str, float], list[torch.Tensor]]:
    """``Trainer.evaluate``'s results and ``Trainer.predict``'s logits (one per document, each
    its own length), the one way."""
    data = documents()
    with tempfile.TemporaryDirectory() as folder:
        runner = trainer(folder, way)
        module = CausalLM()
        results = runner.evaluate(module, data)
        logits = runner.predict(module, data)
    if isinstance(logits, torch.Tensor):  # padded batches of one width: trimmed per document
        logits = list(logits.unbind(0))
    trimmed = [row[:n] for row, n in zip(logits, LENGTHS, strict=True)]
    return dict(results), trimmed


def alone() -> list[torch.Tensor]:
    """Each document's logits, run alone through the same weights."""
    model = CausalLM().model.eval()
    with torch.no_grad():
        return [model(input_ids=doc["input_ids"][None]).logits[0] for doc in documents()]


def alone_loss(logits: list[torch.Tensor]) -> float:
    """The token-weighted loss over every document, from each one's logits alone."""
    pairs = zip(logits, documents(), strict=True)
    sums = [summed_loss(row[None], doc["input_ids"][None]) for row, doc in pairs]
    return float(sum(s for s, _ in sums)) / int(sum(n for _, n in sums))


def run(ways: Sequence[str] = WAYS) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for way in ways:
        results, logits = inferred(way)
        found[way] = {"evaluate": results, "predict": [row.tolist() for row in logits]}
    return found


if __name__ == "__main__":
    record = run(sys.argv[2:] or WAYS)
    if os.environ.get("RANK", "0") == "0":
        Path(sys.argv[1]).write_text(json.dumps(record))
