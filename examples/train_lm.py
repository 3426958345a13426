"""Train a small causal language model on CPython's own help texts with accmt's Trainer.

    python examples/train_lm.py                       # a minute or two on a CPU
    OMP_NUM_THREADS=1 python examples/train_lm.py     # on cores shared with other work
    python examples/train_lm.py --fresh               # start over in runs/lm

The text ships with every CPython (``pydoc_data.topics``: the help pages of the language
reference), so nothing is downloaded. A byte-pair tokenizer is trained on it in seconds by the
``tokenizers`` library and kept in the run's folder (``<output>/tokenizer.json``), so a run that
resumes, or one that already finished, reads the tokenizer it trained with instead of training
another. ``DataCollatorForLanguageModeling(mlm=False)`` from accmt-collators pads the chunks and
makes their labels (it needs from the tokenizer only ``pad_token_id`` and ``padding_side``); the
``Perplexity(causal=True)`` metric scores each evaluation from the model's logits and labels as
they come (it shifts them), and the validation loss, summed over tokens with ``num_items``, is
the mean over every token, so that its ``exp`` is that perplexity. The Trainer's progress bar
shows each epoch, and after every epoch the Trainer says the validation loss and perplexity,
which falls. Run again, it resumes from its checkpoint (with more ``--epochs``, it trains on);
``--fresh`` starts over, moving the checkpoints aside (nothing is deleted).
"""

from __future__ import annotations

import argparse
import math
import os
import pydoc_data.topics
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from accmt import (
    AcceleratorModule,
    DataCollatorForLanguageModeling,
    HyperParameters,
    Perplexity,
    Trainer,
)

PAD = "[PAD]"


def train_tokenizer(texts: list[str], size: int) -> Tokenizer:
    """Byte-level BPE, trained on the texts themselves."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=size,
        special_tokens=[PAD],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,  # the Trainer's progress bar is the run's only one
    )
    tokenizer.train_from_iterator(texts, trainer)
    return tokenizer


def run_tokenizer(path: Path, texts: list[str], size: int) -> Tokenizer:
    """The run's tokenizer: read from ``path`` when the run made it before, else trained on the
    texts and written there (atomically: a run killed meanwhile leaves no half a file)."""
    if path.is_file():
        return Tokenizer.from_file(str(path))
    tokenizer = train_tokenizer(texts, size)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    tokenizer.save(str(partial))
    os.replace(partial, path)
    return tokenizer


class CollatorTokenizer:
    """What the collator reads from a tokenizer: which id pads, and on which side."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.pad_token_id = tokenizer.token_to_id(PAD)
        self.padding_side = "right"


def chunks(tokenizer: Tokenizer, texts: list[str], length: int) -> list[dict[str, list[int]]]:
    """Each text cut into samples of ``length`` tokens (a text's last one is shorter)."""
    samples = []
    for encoding in tokenizer.encode_batch(texts):
        ids = encoding.ids
        samples += [{"input_ids": ids[i : i + length]} for i in range(0, len(ids) - 1, length)]
    return [sample for sample in samples if len(sample["input_ids"]) > 1]


IGNORED = -100  # the label of padding, which the loss leaves out


class TinyGPT(torch.nn.Module):
    """Token and position embeddings, causal self-attention blocks, tied output layer."""

    def __init__(self, vocabulary: int, length: int, width: int = 64, layers: int = 2) -> None:
        super().__init__()
        self.tokens = torch.nn.Embedding(vocabulary, width)
        self.positions = torch.nn.Embedding(length, width)
        # Small embeddings (GPT-2's 0.02): with torch's default of 1, the tied output layer
        # starts far from uniform and the first perplexities are in the hundred thousands.
        torch.nn.init.normal_(self.tokens.weight, std=0.02)
        torch.nn.init.normal_(self.positions.weight, std=0.01)
        block = torch.nn.TransformerEncoderLayer(
            width, nhead=4, dim_feedforward=4 * width, dropout=0.1, batch_first=True,
            norm_first=True,
        )  # fmt: skip
        self.blocks = torch.nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.norm = torch.nn.LayerNorm(width)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        length = input_ids.shape[1]
        hidden = self.tokens(input_ids) + self.positions(
            torch.arange(length, device=input_ids.device)
        )
        causal = torch.nn.Transformer.generate_square_subsequent_mask(
            length, device=input_ids.device
        )
        hidden = self.blocks(hidden, mask=causal, is_causal=True)
        return self.norm(hidden) @ self.tokens.weight.T  # logits over the vocabulary


class LanguageModel(AcceleratorModule):
    def __init__(self, vocabulary: int, length: int) -> None:
        self.model = TinyGPT(vocabulary, length)

    def step(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, Any]]:
        """The logits at every position, and the loss summed over the labelled tokens (the
        logits at position t predict token t + 1; padding is labelled -100 and left out) with
        their number."""
        logits = self.model(batch["input_ids"])
        targets = batch["labels"][:, 1:]
        summed = torch.nn.functional.cross_entropy(
            logits[:, :-1].flatten(0, 1), targets.flatten(), ignore_index=IGNORED, reduction="sum"
        )
        return logits, {"loss": summed, "num_items": (targets != IGNORED).sum()}

    def training_step(self, batch: Any) -> dict[str, Any]:
        # A summed loss and its number of tokens: each optimizer step is the mean over every
        # token of its batches (accumulation and processes included), so a short sequence
        # weighs as little as its few tokens.
        return self.step(batch)[1]

    def validation_step(self, key: str, batch: Any) -> dict[str, Any]:
        # The same on validation: the set's loss is the mean over its tokens. Perplexity gets
        # the logits and labels unshifted, as a causal LM takes them (causal=True shifts).
        logits, loss = self.step(batch)
        return {**loss, "perplexity": (logits, batch["labels"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=Path("runs/lm"))
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="start over in --output (its checkpoints are moved aside, not deleted)",
    )
    args = parser.parse_args()

    texts = sorted(pydoc_data.topics.topics.values())
    tokenizer = run_tokenizer(args.output / "tokenizer.json", texts, size=1000)
    # Every 10th help page is held out: validation text the model never trains on.
    train = chunks(tokenizer, [t for i, t in enumerate(texts) if i % 10], args.length)
    valid = chunks(tokenizer, texts[::10], args.length)
    print(f"{len(train)} training and {len(valid)} validation chunks of up to {args.length} "
          f"tokens, vocabulary {tokenizer.get_vocab_size()}", flush=True)  # fmt: skip
    print(f"untrained perplexity would be about {tokenizer.get_vocab_size()} (uniform guess)")

    torch.manual_seed(0)
    hps = HyperParameters(
        epochs=args.epochs,
        batch_size=(32, 64),
        optimizer="AdamW",
        optimizer_kwargs={"lr": 2e-3, "weight_decay": 0.01},
        scheduler="CosineWithWarmup",
        scheduler_kwargs={"warmup_ratio": 0.05},
    )
    trainer = Trainer(
        hps,
        args.output,
        collate_fn=DataCollatorForLanguageModeling(CollatorTokenizer(tokenizer), mlm=False),
        metrics=[Perplexity(causal=True)],
        checkpoint_every="epoch",
        max_checkpoints=1,
        log_with=None,
        seed=0,
        resume=False if args.fresh else None,  # None: resume when there is a checkpoint
    )
    trainer.fit(LanguageModel(tokenizer.get_vocab_size(), args.length), train, valid)
    final = trainer.state.additional_metrics["validation"]
    print(f"final validation perplexity: {final['perplexity']:.1f} (exp of the loss, "
          f"{final['loss']:.3f} nats/token: {math.exp(final['loss']):.1f})")  # fmt: skip


if __name__ == "__main__":
    main()
