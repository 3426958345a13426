"""A tiny GPT-2 made from a config (no download, random weights): saved where
``AcceleratorModule.from_hf`` can load it, or built in memory with padded sequences for it (the
perplexity and token-weighted validation tests)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    import transformers

VOCABULARY = 32
POSITIONS = 16
PAD = 0
IGNORED = -100  # the label of padding, as Hugging Face's collators give it
# Sequence lengths of different sizes, a 1-token one among them (nothing to score after the
# shift): means over batches would weigh them unlike a mean over their tokens.
LENGTHS = (3, 16, 1, 9, 5, 12, 2, 7, 14, 4, 10)


def tiny_gpt2(seed: int = 0, **overrides: float) -> transformers.GPT2LMHeadModel:
    """``overrides``: other values of the GPT2Config's fields (``resid_pdrop=0.0``, ...)."""
    import transformers  # accmt-trainer's hf extra, in the development environment

    fields: dict[str, float | bool] = {"n_embd": 16, "n_layer": 1, "n_head": 2, **overrides}
    config = transformers.GPT2Config(
        vocab_size=VOCABULARY, n_positions=POSITIONS, use_cache=False, **fields
    )
    torch.manual_seed(seed)
    return transformers.GPT2LMHeadModel(config)


def save_tiny_gpt2(folder: Path) -> Path:
    tiny_gpt2().save_pretrained(folder)
    return folder


def padded_sequences(
    lengths: tuple[int, ...] = LENGTHS, seed: int = 0
) -> list[dict[str, torch.Tensor]]:
    """Samples as a causal LM takes them: ``input_ids`` padded on the right to ``POSITIONS``,
    their ``attention_mask``, and ``labels`` equal to the ids with -100 on the padding."""
    generator = torch.Generator().manual_seed(seed)
    samples = []
    for length in lengths:
        ids = torch.full((POSITIONS,), PAD, dtype=torch.long)
        ids[:length] = torch.randint(1, VOCABULARY, (length,), generator=generator)
        real = torch.arange(POSITIONS) < length
        labels = torch.where(real, ids, IGNORED)
        samples.append({"input_ids": ids, "attention_mask": real.long(), "labels": labels})
    return samples


def batched(samples: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    return {key: torch.stack([sample[key] for sample in samples]) for key in samples[0]}


def token_weighted_loss(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """The mean cross-entropy over every scored token, by hand: each position's logits
    against the next token, summed, over the number of tokens scored."""
    targets = labels[:, 1:]
    summed = torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]).double(),
        targets.reshape(-1),
        ignore_index=IGNORED,
        reduction="sum",
    )
    return float(summed) / int((targets != IGNORED).sum())
