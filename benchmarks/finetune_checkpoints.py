"""What a checkpoint of a fine-tuning run writes and how long it stalls training: accmt's Trainer
fine-tuning a GPT-2 in full against LoRA on the same base (PEFT), and HF Trainer's checkpoints
of the same two runs.

    ./hatchw run python benchmarks/finetune_checkpoints.py   # 4 minutes on 2 shared cores
    ./hatchw run python benchmarks/finetune_checkpoints.py --layers 2 --width 256 --rounds 1

The model is transformers' ``GPT2LMHeadModel`` from its config (seed 0; ``--layers`` x
``--width``, a vocabulary of ``--vocab``, 128 positions, dropout off). LoRA is
``peft.get_peft_model`` with ``LoraConfig(r=8, target_modules=["c_attn"])``: the base frozen,
adapters on the attention's projection. Each run trains on random sequences of 64 tokens,
batch 8, AdamW (lr 1e-4), one process on the CPU, and writes a checkpoint every ``--every``
optimizer steps, ``--checkpoints`` of them: accmt with ``checkpoint_every="<every> steps"``
(synchronous; no validation, no best model), HF Trainer with ``save_steps=<every>``.

A checkpoint's stall is the wall time of the call the training loop waits for: accmt's
``Checkpoints.save`` (Accelerate's ``save_state`` of model, optimizer and RNGs, the state and
the manifest's digests, the rename into place; the fsyncs of the one before, which the
background writer does, are waited for by the next save, so a save's figure holds them), and
HF Trainer's ``_save_checkpoint`` (the model, or PEFT's adapter, the optimizer, scheduler, RNG
and trainer state). Before each, untimed, an ``os.sync()``, so that the writeback of earlier
files does not land on whichever save comes next. Bytes are those of the newest checkpoint's
folder once the run ended. The figures are medians over every checkpoint of ``--rounds`` runs
of each, the runs taken in turn (the order rotating), in a temporary folder on disk.

This measures whatever the code does: where accmt's LoRA checkpoints still hold the frozen base
(Accelerate's ``save_state`` writes every parameter), its bytes show it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from accelerate.state import AcceleratorState

from accmt_trainer import AcceleratorModule, HyperParameters, Trainer
from accmt_trainer.checkpointing._checkpoints import Checkpoints

LENGTH, BATCH = 64, 8


def model(args: argparse.Namespace, lora: bool) -> torch.nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=args.vocab,
        n_positions=128,
        n_embd=args.width,
        n_layer=args.layers,
        n_head=args.width // 64,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        use_cache=False,
    )
    torch.manual_seed(0)
    base = GPT2LMHeadModel(config)
    if not lora:
        return base
    from peft import LoraConfig, get_peft_model

    adapters = LoraConfig(
        r=8, target_modules=["c_attn"], fan_in_fan_out=True, task_type="CAUSAL_LM"
    )
    peft_model: torch.nn.Module = get_peft_model(base, adapters)
    return peft_model


def samples(args: argparse.Namespace, count: int) -> list[dict[str, torch.Tensor]]:
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, args.vocab, (count, LENGTH), generator=generator)
    return [{"input_ids": row, "labels": row} for row in ids]


class CausalLM(AcceleratorModule):
    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model

    def training_step(self, batch: Any) -> torch.Tensor:
        loss: torch.Tensor = self.model(**batch).loss
        return loss


def timed(owner: Any, name: str, stalls: list[float]) -> Callable[[], None]:
    """``owner.name`` timed into ``stalls`` (an os.sync() before each call, untimed); returns
    what puts it back."""
    original = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        os.sync()
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            stalls.append(time.perf_counter() - start)

    setattr(owner, name, wrapper)
    return lambda: setattr(owner, name, original)


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def accmt_run(args: argparse.Namespace, lora: bool, where: Path) -> tuple[list[float], int]:
    steps = args.every * args.checkpoints
    hps = HyperParameters(
        max_steps=steps, batch_size=BATCH, optimizer="AdamW", optimizer_kwargs={"lr": 1e-4}
    )
    trainer = Trainer(
        hps,
        where,
        checkpoint_every=f"{args.every} steps",
        disable_model_saving=True,
        log_with=None,
        progress_bar=False,
        sanity_check=False,
        cpu=True,
    )
    stalls: list[float] = []
    restore = timed(Checkpoints, "save", stalls)
    try:
        trainer.fit(CausalLM(model(args, lora)), samples(args, 2 * steps * BATCH))
    finally:
        restore()
        AcceleratorState._reset_state(reset_partial_state=True)
    newest = max((where / "checkpoints").glob("checkpoint_*"))
    return stalls, folder_bytes(newest)


def hf_run(args: argparse.Namespace, lora: bool, where: Path) -> tuple[list[float], int]:
    from transformers import Trainer as HFTrainer
    from transformers import TrainingArguments

    steps = args.every * args.checkpoints
    arguments = TrainingArguments(
        output_dir=str(where),
        max_steps=steps,
        save_strategy="steps",
        save_steps=args.every,
        per_device_train_batch_size=BATCH,
        learning_rate=1e-4,
        lr_scheduler_type="constant",
        report_to=[],
        logging_strategy="no",
        disable_tqdm=True,
        use_cpu=True,
        seed=0,
    )
    trainer = HFTrainer(
        model=model(args, lora), args=arguments, train_dataset=samples(args, 2 * steps * BATCH)
    )
    stalls: list[float] = []
    restore = timed(trainer, "_save_checkpoint", stalls)
    try:
        trainer.train()
    finally:
        restore()
        AcceleratorState._reset_state(reset_partial_state=True)
    newest = max(where.glob("checkpoint-*"), key=lambda path: int(path.name.split("-")[1]))
    return stalls, folder_bytes(newest)


RUNS: dict[str, Callable[[argparse.Namespace, Path], tuple[list[float], int]]] = {
    "accmt, full": lambda args, where: accmt_run(args, False, where),
    "accmt, LoRA": lambda args, where: accmt_run(args, True, where),
    "HF Trainer, full": lambda args, where: hf_run(args, False, where),
    "HF Trainer, LoRA": lambda args, where: hf_run(args, True, where),
}


def rotations(names: list[str], rounds: int) -> Iterator[str]:
    for index in range(rounds):
        shift = index % len(names)
        yield from names[shift:] + names[:shift]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--every", type=int, default=2, help="optimizer steps a checkpoint")
    parser.add_argument("--checkpoints", type=int, default=3, help="checkpoints a run")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each")
    args = parser.parse_args()
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    transformers_logging.set_verbosity_error()

    full, lora = model(args, False), model(args, True)
    trainable = sum(p.numel() * p.element_size() for p in lora.parameters() if p.requires_grad)
    weights = sum(p.numel() * p.element_size() for p in full.parameters())
    print(
        f"GPT-2 {args.layers} x {args.width}, vocabulary {args.vocab}: weights "
        f"{weights / 2**20:.1f} MiB; LoRA r=8 on c_attn trains {trainable / 2**20:.3f} MiB"
    )
    stalls: dict[str, list[float]] = {name: [] for name in RUNS}
    sizes: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="finetune-checkpoints-") as scratch:
        for number, name in enumerate(rotations(list(RUNS), args.rounds)):
            where = Path(scratch) / f"run-{number}"
            times, size = RUNS[name](args, where)
            stalls[name] += times
            sizes[name] = size
            shutil.rmtree(where)

    print(f"\n{'run':<18} {'checkpoint':>12} {'stall (median)':>16} {'checkpoints':>12}")
    for name in RUNS:
        median = statistics.median(stalls[name])
        row = f"{sizes[name] / 2**20:>9.2f} MiB {median * 1e3:>13.1f} ms {len(stalls[name]):>12}"
        print(f"{name:<18} {row}")
    print()
    for mine, theirs in [
        ("accmt, full", "accmt, LoRA"),
        ("HF Trainer, full", "HF Trainer, LoRA"),
        ("accmt, LoRA", "HF Trainer, LoRA"),
        ("accmt, full", "HF Trainer, full"),
    ]:
        ratio = sizes[mine] / sizes[theirs]
        stall = statistics.median(stalls[mine]) / statistics.median(stalls[theirs])
        print(f"{mine} / {theirs}: {ratio:.1f}x the bytes, {stall:.2f}x the stall")


if __name__ == "__main__":
    main()
