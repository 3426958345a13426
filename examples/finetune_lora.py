"""Fine-tune a pretrained GPT-2 with LoRA adapters (PEFT) with accmt's Trainer, then generate from
the merged model.

    python examples/finetune_lora.py                          # a minute on a CPU
    accmt launch --cpu -N 2 examples/finetune_lora.py         # the same run on 2 processes
    python examples/finetune_lora.py --epochs 4               # resumes, and trains 2 epochs more
    python examples/finetune_lora.py --base path/to/gpt2      # your own pretrained model

It needs transformers, tokenizers and peft (``pip install "accmt[peft]" transformers
tokenizers``). The pretrained model is read with ``from_pretrained`` from a local folder;
without ``--base``, the example first writes one there (``<output>/pretrained``: a tiny GPT-2
from its config and a byte-pair tokenizer trained on CPython's help texts), so nothing is
downloaded. The base is frozen and LoRA adapters are trained on its attention
(``peft.get_peft_model``), with gradient checkpointing and the token-weighted loss of
``examples/train_lm.py`` (whose module and helpers it imports). A checkpoint after each epoch
lets a stopped run resume. The best model by validation loss is an adapter folder
(``<output>/best_valid_loss``: PEFT's ``adapter_config.json`` and
``adapter_model.safetensors``, which ``PeftModel.from_pretrained(base, folder)`` loads), and,
with ``save_merged=True``, the base with the adapters merged into it beside it (``merged/``,
which ``GPT2LMHeadModel.from_pretrained`` loads). The best adapters are evaluated on held-out
text, and the main process generates from the merged model.
"""

from __future__ import annotations

import argparse
import os
import pydoc_data.topics
from pathlib import Path

import torch
from peft import LoraConfig, get_peft_model
from train_lm import END, PAD, LanguageModel, chunks, generate, say, tiny_gpt2, train_tokenizer
from transformers import GPT2LMHeadModel, PreTrainedTokenizerFast
from transformers.utils import logging as transformers_logging

from accmt import (
    DataCollatorForLanguageModeling,
    HyperParameters,
    Perplexity,
    Trainer,
    main_process_first,
    on_main_process,
)


def write_pretrained(folder: Path, texts: list[str], length: int) -> None:
    """A stand-in for a model downloaded once: a tiny GPT-2 and its tokenizer, written where
    ``from_pretrained`` reads them (whole or not at all: a run killed meanwhile leaves none)."""
    if (folder / "config.json").is_file():
        return
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=train_tokenizer(texts, size=1000),
        pad_token=PAD,
        eos_token=END,
        model_input_names=["input_ids", "attention_mask"],
    )
    torch.manual_seed(0)
    model = tiny_gpt2(tokenizer, length)
    model.config.use_cache = False  # gradient checkpointing keeps no cache
    partial = folder.with_name(f".{folder.name}.{os.getpid()}")
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    os.replace(partial, folder)


@on_main_process
def say_sizes(best: Path) -> None:
    adapter = (best / "adapter_model.safetensors").stat().st_size
    merged = sum(path.stat().st_size for path in (best / "merged").glob("*.safetensors"))
    say(f"best adapter: {adapter / 1024:.0f} KiB; merged model: {merged / 1024:.0f} KiB")


@on_main_process
def generate_merged(best: Path, tokenizer: PreTrainedTokenizerFast, prompt: str) -> None:
    """The merged model, as anyone with transformers alone loads it, generates."""
    generate(GPT2LMHeadModel.from_pretrained(best / "merged"), tokenizer, prompt)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=Path("runs/lora"))
    parser.add_argument("--base", type=Path, help="a pretrained model's folder, with its tokenizer")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--length", type=int, default=64, help="tokens per sample, at most")
    parser.add_argument("--texts", type=int, help="use the first TEXTS help pages only")
    parser.add_argument("--rank", type=int, default=8, help="LoRA's rank")
    parser.add_argument("--prompt", default="A class")
    args = parser.parse_args()
    transformers_logging.disable_progress_bar()  # the Trainer's bar is the run's only one

    texts = sorted(pydoc_data.topics.topics.values())[: args.texts]
    base = args.base or args.output / "pretrained"
    if args.base is None:
        with main_process_first():  # the main process writes it, the others read it
            write_pretrained(base, texts, args.length)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(base)
    # Every 10th help page is held out for validation, and every 10th from the 5th for test.
    train = chunks(tokenizer, [t for i, t in enumerate(texts) if i % 5], args.length)
    valid = chunks(tokenizer, texts[::10], args.length)
    test = chunks(tokenizer, texts[5::10], args.length)

    torch.manual_seed(0)  # the adapters start the same on every process
    model = get_peft_model(
        GPT2LMHeadModel.from_pretrained(base),
        LoraConfig(
            r=args.rank,
            lora_alpha=2 * args.rank,
            target_modules=["c_attn"],  # GPT-2's query, key and value projection
            fan_in_fan_out=True,  # GPT-2's Conv1D holds its weight transposed
            task_type="CAUSAL_LM",
        ),
    )
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    say(f"{len(train)} training chunks; {trainable:,} of {total:,} parameters train (LoRA)")

    hps = HyperParameters(
        epochs=args.epochs,
        batch_size=(16, 64),
        optimizer="AdamW",
        optimizer_kwargs={"lr": 5e-3},
        scheduler="CosineWithWarmup",
        scheduler_kwargs={"warmup_ratio": 0.05},
    )
    trainer = Trainer(
        hps,
        args.output,
        grad_accumulation_steps=2,
        gradient_checkpointing=True,
        gradient_checkpointing_kwargs={"use_reentrant": False},
        collate_fn=DataCollatorForLanguageModeling(tokenizer, mlm=False),
        metrics=[Perplexity(causal=True)],
        checkpoint_every="epoch",
        max_checkpoints=1,
        save_merged=True,  # also the merged full model beside each best adapter
        log_with=None,
        seed=0,
    )
    module = LanguageModel(model)
    trainer.fit(module, train, valid)  # resumes from the newest checkpoint when there is one

    # The best adapters, loaded into the module's PEFT model, on held-out help pages.
    tested = trainer.evaluate(module, test, weights="best_valid_loss")
    say(f"test perplexity of the best adapter: {tested['perplexity']:.2f}")
    best = args.output / "best_valid_loss"
    say_sizes(best)
    generate_merged(best, tokenizer, args.prompt)


if __name__ == "__main__":
    main()
