"""Every collator's batches, made on the main process and sent to the others by Accelerate,
arrive as the rows the collator made; used by test_collators_dispatch.py.

    collators_dispatch_worker.py OUT

An IterableDataset under ``dispatch_batches=True, split_batches=True``: the main process
collates each batch of 8 samples, broadcasts it, and every process keeps its share of the
rows. Each process collates the same samples itself and compares its share, key by key (the
masking collators are seeded and their epoch set, so the masks are a function of the sample).
Writes OUT/rank<R>.json: the batches checked per collator.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration

# The worker next to this one; run as a script, this folder is on the path.
from collators_resume_worker import TinyTokenizer, sentences
from torch.utils.data import DataLoader, IterableDataset

import accmt_collators

BATCH = 8


class Stream(IterableDataset[dict[str, Any]]):
    def __init__(self, samples: list[dict[str, Any]]) -> None:
        self.samples = samples

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.samples)


def samples_for(name: str) -> list[dict[str, Any]]:
    """16 tokenized samples of different lengths (even ones for permutation LM), with what
    collator ``name`` reads besides input_ids."""
    samples = []
    for sample in sentences(16):
        ids = sample["input_ids"][: len(sample["input_ids"]) // 2 * 2]
        made: dict[str, Any] = {"input_ids": ids}
        if name == "DataCollatorForTokenClassification":
            made["labels"] = [token % 5 for token in ids]
        elif name == "DataCollatorForSeq2Seq":
            made["labels"] = ids[::-1][: 3 + len(ids) % 4]
        elif name == "DataCollatorForWholeWordMask":
            # A token ending where the next starts makes a word of two.
            made["offset_mapping"] = [(2 * at, 2 * at + 1 + at % 2) for at in range(len(ids))]
        samples.append(made)
    return samples


def collators() -> dict[str, Any]:
    tokenizer = TinyTokenizer()
    made: dict[str, Any] = {
        "DataCollatorWithPadding": accmt_collators.DataCollatorWithPadding(tokenizer),
        "DataCollatorForTokenClassification": accmt_collators.DataCollatorForTokenClassification(
            tokenizer
        ),
        "DataCollatorForSeq2Seq": accmt_collators.DataCollatorForSeq2Seq(tokenizer),
        "DataCollatorForLanguageModeling": accmt_collators.DataCollatorForLanguageModeling(
            tokenizer, mlm_probability=0.3, seed=1
        ),
        "DataCollatorForWholeWordMask": accmt_collators.DataCollatorForWholeWordMask(
            tokenizer, mlm_probability=0.3, seed=2
        ),
        "DataCollatorForPermutationLanguageModeling": (
            accmt_collators.DataCollatorForPermutationLanguageModeling(
                tokenizer, pad_to_multiple_of=2, seed=3
            )
        ),
    }
    for collate in made.values():
        if hasattr(collate, "set_epoch"):
            collate.set_epoch(0)
    return made


def check(accelerator: Accelerator, name: str, collate: Any) -> int:
    samples = samples_for(name)
    loader = accelerator.prepare(DataLoader(Stream(samples), batch_size=BATCH, collate_fn=collate))
    share = BATCH // accelerator.num_processes
    rows = slice(accelerator.process_index * share, (accelerator.process_index + 1) * share)
    checked = 0
    for index, batch in enumerate(loader):
        whole = collate(samples[index * BATCH : (index + 1) * BATCH])
        if set(batch) != set(whole):
            raise SystemExit(f"{name}: batch {index} holds {sorted(batch)}, not {sorted(whole)}")
        for key, value in whole.items():
            if not torch.equal(batch[key], value[rows]):
                raise SystemExit(
                    f"{name}: {key} of batch {index} arrived on process "
                    f"{accelerator.process_index} other than collated"
                )
        checked += 1
    return checked


def main() -> None:
    out = Path(sys.argv[1])
    config = DataLoaderConfiguration(dispatch_batches=True, split_batches=True)
    accelerator = Accelerator(cpu=True, dataloader_config=config)
    checked = {name: check(accelerator, name, collate) for name, collate in collators().items()}
    (out / f"rank{accelerator.process_index}.json").write_text(json.dumps(checked))
    accelerator.end_training()


if __name__ == "__main__":
    main()
