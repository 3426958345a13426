"""Batches per second of each accmt-collators collator next to transformers' of the same name.

./hatchw run python benchmarks/collators.py

Both sides collate the same tokenized samples (lists of ints, as a tokenizer returns them):
batches of 32 and 256 samples, each sample between half the length and the length, for
lengths 16, 128 and 512. Ours runs as the Trainer runs it: set_epoch called, so its masks are a
function of (seed, epoch, sample). transformers 5 has no DataCollatorForWholeWordMask: its
replacement, DataCollatorForLanguageModeling(whole_word_mask=True), is timed, on samples of
one length with their offset_mapping (which transformers cannot pad). Medians of interleaved
runs; the goal is a ratio (ours / transformers) of at least 2.

Permutation LM returns two dense (batch, length, length) float32 tensors, as transformers does.
Its rows have a "ceiling" column: transformers' time over the time of making those two tensors
alone (fresh from the allocator, written once), timed in the same turns. No collator that
returns them can be faster than that here: at length 512 the kernel's zeroing of fresh pages
sets it.
"""

from __future__ import annotations

import pydoc_data.topics
import random
from collections.abc import Callable
from typing import Any

import torch
import transformers
from _timing import interleaved_medians
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

import accmt_collators

BATCHES = (32, 256)
LENGTHS = (16, 128, 512)
GOAL = 2.0
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def tokenizer() -> transformers.PreTrainedTokenizerFast:
    """A WordLevel tokenizer trained here on CPython's help texts (no download)."""
    model = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    model.pre_tokenizer = pre_tokenizers.Whitespace()
    texts = list(pydoc_data.topics.topics.values())
    model.train_from_iterator(
        texts, trainers.WordLevelTrainer(vocab_size=8000, special_tokens=SPECIALS)
    )
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=model,
        pad_token="[PAD]",
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )


def samples(
    name: str, count: int, length: int, vocabulary: int, rng: random.Random
) -> list[dict[str, Any]]:
    """Tokenized samples with what collator ``name`` reads besides input_ids."""
    made = []
    for _ in range(count):
        size = rng.randint(length // 2, length)
        if name == "DataCollatorForWholeWordMask":
            size = length
        elif name == "DataCollatorForPermutationLanguageModeling":
            size -= size % 2  # XLNet needs an even padded length; transformers cannot pad to one
        ids = [2, *(rng.randrange(5, vocabulary) for _ in range(size - 2)), 3]
        sample: dict[str, Any] = {"input_ids": ids, "attention_mask": [1] * size}
        if name == "DataCollatorForTokenClassification":
            sample["labels"] = [rng.randrange(9) for _ in range(size)]
        elif name == "DataCollatorForSeq2Seq":
            sample["labels"] = [rng.randrange(5, vocabulary) for _ in range(rng.randint(1, length))]
        elif name == "DataCollatorForWholeWordMask":
            sample["offset_mapping"] = offsets(size, rng)
        made.append(sample)
    return made


def offsets(size: int, rng: random.Random) -> list[tuple[int, int]]:
    """Character spans of tokens that form words of 1 to 3 tokens (specials at (0, 0))."""
    spans, at = [(0, 0)], 0
    for _ in range(size - 2):
        at += rng.choice([0, 0, 1])  # a gap starts a new word
        spans.append((at, at + 3))
        at += 3
    return [*spans, (0, 0)]


def pair(name: str, tok: Any) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    """(ours, transformers') collator of this name; ours with its epoch set."""
    if name == "DataCollatorForWholeWordMask":
        theirs = transformers.DataCollatorForLanguageModeling(
            tok, whole_word_mask=True, mask_replace_prob=1.0, random_replace_prob=0.0, seed=0
        )
        ours = accmt_collators.DataCollatorForWholeWordMask(
            tok, mask_replace_prob=1.0, random_replace_prob=0.0, seed=0
        )
    elif name == "DataCollatorForPermutationLanguageModeling":
        theirs = transformers.DataCollatorForPermutationLanguageModeling(tok)
        ours = accmt_collators.DataCollatorForPermutationLanguageModeling(
            tok, pad_to_multiple_of=2, seed=0
        )
    else:
        seeded = {"seed": 0} if name == "DataCollatorForLanguageModeling" else {}
        theirs = getattr(transformers, name)(tok, **seeded)
        ours = getattr(accmt_collators, name)(tok, **seeded)
    if hasattr(ours, "set_epoch"):
        ours.set_epoch(0)
    return ours, theirs


def dense_outputs(count: int, length: int) -> Callable[[], Any]:
    """The floor of a permutation-LM batch: its two (count, length, length) float32 tensors."""

    def make() -> Any:
        return [torch.zeros((count, length, length)) for _ in range(2)]

    return make


def main() -> None:
    # One thread, as in a DataLoader worker (torch sets one there), and the same for both.
    torch.set_num_threads(1)
    tok = tokenizer()
    rng = random.Random(0)
    names = [n for n in accmt_collators.__all__ if n.startswith("DataCollator")]
    print(
        f"{'collator':45} {'batch':>5} {'length':>6} {'transformers/s':>14} "
        f"{'ours/s':>9} {'ratio':>6} {'ceiling':>7}"
    )
    ratios = []
    for name in names:
        ours, theirs = pair(name, tok)
        for count in BATCHES:
            for length in LENGTHS:
                batch = samples(name, count, length, len(tok), rng)
                repeats = 7 if count * length > 20_000 else 41
                runs = {
                    "ours": lambda c=ours, b=batch: c(b),
                    "theirs": lambda c=theirs, b=batch: c(b),
                }
                if name == "DataCollatorForPermutationLanguageModeling":
                    runs["floor"] = dense_outputs(count, length)
                for run in runs.values():
                    run()  # warm-up: first-call caches (tables, special ids) on both sides
                medians = interleaved_medians(runs, repeats)
                ratio = medians["theirs"] / medians["ours"]
                ratios.append(ratio)
                ceiling = ""
                if "floor" in medians:
                    ceiling = f" {medians['theirs'] / medians['floor']:>6.1f}x"
                row = (
                    f"{name:45} {count:>5} {length:>6} {1 / medians['theirs']:>14.1f} "
                    f"{1 / medians['ours']:>9.1f} {ratio:>5.1f}x"
                )
                print(row + ceiling, flush=True)
    print(
        f"smallest ratio {min(ratios):.1f}x, median {sorted(ratios)[len(ratios) // 2]:.1f}x "
        f"(goal {GOAL:.0f}x): {'met' if min(ratios) >= GOAL else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
