"""Train a small GPT-2 on CPython's own help texts with accmt's Trainer, then generate from it.

    python examples/train_lm.py                           # a few minutes on a CPU
    accmt launch --cpu -N 2 examples/train_lm.py          # the same run on 2 processes
    python examples/train_lm.py --epochs 6                # resumes, and trains 2 epochs more
    python examples/train_lm.py --fresh                   # starts over in runs/lm
    python examples/train_lm.py --texts 12 --epochs 1     # a quick try on 12 help pages

It needs transformers and tokenizers (``pip install transformers tokenizers``) besides accmt. The
text ships with every CPython (``pydoc_data.topics``: the help pages of the language reference),
so nothing is downloaded. A byte-pair tokenizer is trained on it in seconds by the
``tokenizers`` library and kept in the run's folder (``<output>/tokenizer.json``): the main
process trains it while the others wait (``main_process_first``), then they read it, and a run
that resumes reads the tokenizer it trained with. The model is a GPT-2 made from its config, with
random weights. ``DataCollatorForLanguageModeling(mlm=False)`` pads the chunks and makes their
labels; the loss is summed over tokens and given with their number, so that every optimizer
step (two accumulated batches, on every process) is the mean over its tokens, and the
validation loss is the mean over the validation tokens: its ``exp`` is the ``Perplexity``
metric. After training, the best model by validation loss is evaluated on held-out help pages,
and the main process generates a few lines from it.
"""

from __future__ import annotations

import argparse
import os
import pydoc_data.topics
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

from accmt import (
    AcceleratorModule,
    DataCollatorForLanguageModeling,
    HyperParameters,
    Perplexity,
    Trainer,
    main_process_first,
    on_main_process,
)

PAD, END = "[PAD]", "<|endoftext|>"
IGNORED = -100  # the label of padding, which the loss leaves out


def train_tokenizer(texts: list[str], size: int) -> Tokenizer:
    """Byte-level BPE, trained on the texts themselves."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=size,
        special_tokens=[PAD, END],
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


def chunks(tokenizer: PreTrainedTokenizerFast, texts: list[str], length: int) -> list[Any]:
    """Each text, ended by the end-of-text token, cut into samples of ``length`` tokens (a
    text's last one is shorter)."""
    samples = []
    for ids in tokenizer([text + END for text in texts])["input_ids"]:
        samples += [{"input_ids": ids[i : i + length]} for i in range(0, len(ids) - 1, length)]
    return [sample for sample in samples if len(sample["input_ids"]) > 1]


def tiny_gpt2(tokenizer: PreTrainedTokenizerFast, length: int) -> GPT2LMHeadModel:
    """A GPT-2 of 2 layers of width 64 (0.2M parameters), its output layer tied to its token
    embedding; no dropout: the model is too small to overfit a few epochs."""
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=length,
        n_embd=64,
        n_layer=2,
        n_head=4,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return GPT2LMHeadModel(config)


class LanguageModel(AcceleratorModule):
    def __init__(self, model: GPT2LMHeadModel) -> None:
        self.model = model

    def step(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, Any]]:
        """The logits at every position, and the loss summed over the labelled tokens (the
        logits at position t predict token t + 1; padding is labelled -100 and left out) with
        their number."""
        inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
        logits = self.model(**inputs).logits
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


@on_main_process
def say(line: str) -> None:
    print(line, flush=True)


@on_main_process
def generate(model: GPT2LMHeadModel, tokenizer: PreTrainedTokenizerFast, prompt: str) -> None:
    """Greedy decoding from ``prompt``: after fit and evaluate, ``module.model`` is the GPT-2
    itself (no DDP wrapper) on every process, holding the weights evaluate loaded."""
    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
    model.eval()
    with torch.no_grad():
        # Greedy, with no 3 tokens twice: a model this small would otherwise repeat a token.
        ids = model.generate(**inputs, max_new_tokens=40, do_sample=False, no_repeat_ngram_size=3)
    print(f"generated: {tokenizer.decode(ids[0])!r}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=Path("runs/lm"))
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--length", type=int, default=64, help="tokens per sample, at most")
    parser.add_argument("--texts", type=int, help="train on the first TEXTS help pages only")
    parser.add_argument("--prompt", default="A class")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model")
    parser.add_argument("--bf16", action="store_true", help="bf16 autocast (mixed precision)")
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="start over in --output (its checkpoints are moved aside, not deleted)",
    )
    args = parser.parse_args()

    texts = sorted(pydoc_data.topics.topics.values())[: args.texts]
    with main_process_first():  # the main process trains and writes it, the others read it
        bpe = run_tokenizer(args.output / "tokenizer.json", texts, size=1000)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        pad_token=PAD,
        eos_token=END,
        model_input_names=["input_ids", "attention_mask"],
    )
    # Every 10th help page is held out for validation, and every 10th from the 5th for the
    # final test: text the model never trains on.
    train = chunks(tokenizer, [t for i, t in enumerate(texts) if i % 5], args.length)
    valid = chunks(tokenizer, texts[::10], args.length)
    test = chunks(tokenizer, texts[5::10], args.length)
    say(
        f"{len(train)} training, {len(valid)} validation and {len(test)} test chunks of up to "
        f"{args.length} tokens; vocabulary {len(tokenizer)}"
    )

    torch.manual_seed(0)
    hps = HyperParameters(
        epochs=args.epochs,
        batch_size=(16, 64),  # 16 a batch, 2 batches a step: 32 sequences a step per process
        optimizer="AdamW",
        optimizer_kwargs={"lr": 2e-3, "weight_decay": 0.01},
        scheduler="CosineWithWarmup",
        scheduler_kwargs={"warmup_ratio": 0.05},
    )
    trainer = Trainer(
        hps,
        args.output,
        grad_accumulation_steps=2,
        # Compiled, every batch is padded to one length: each new shape would compile again.
        collate_fn=DataCollatorForLanguageModeling(
            tokenizer, mlm=False, pad_to_multiple_of=args.length if args.compile else None
        ),
        metrics=[Perplexity(causal=True)],
        compile=args.compile,
        mixed_precision="bf16" if args.bf16 else None,
        checkpoint_every="epoch",
        max_checkpoints=1,
        log_with=None,
        seed=0,
        resume=False if args.fresh else None,  # None: resume when there is a checkpoint
    )
    module = LanguageModel(tiny_gpt2(tokenizer, args.length))
    trainer.fit(module, train, valid)
    final = trainer.state.additional_metrics["validation"]
    say(
        f"final validation perplexity: {final['perplexity']:.2f} "
        f"(loss {final['loss']:.4f} nats/token)"
    )

    best = trainer.evaluate(module, test, weights="best_valid_loss")
    say(f"test perplexity of the best model: {best['perplexity']:.2f} (loss {best['loss']:.4f})")
    generate(module.model, tokenizer, args.prompt)


if __name__ == "__main__":
    main()
