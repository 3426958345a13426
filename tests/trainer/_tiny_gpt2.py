"""A tiny GPT-2 for the from_hf tests: made from a config (no download) and saved where
``AcceleratorModule.from_hf`` can load it."""

from __future__ import annotations

from pathlib import Path

import torch


def save_tiny_gpt2(folder: Path) -> Path:
    import transformers  # accmt-trainer's hf extra, in the development environment

    config = transformers.GPT2Config(
        vocab_size=32, n_positions=16, n_embd=16, n_layer=1, n_head=2, use_cache=False
    )
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(config).save_pretrained(folder)
    return folder
