"""Runs of a LoRA model (a frozen GPT-2 base), killed and resumed; used by
tests/distributed/test_frozen_resume.py.

    frozen_worker.py PLAN.json LAUNCH

PLAN.json lists the launches, each a list of runs, each ``{"out": OUT, "async": bool,
"kill_at_step": N | null, "shift": float}``; this is launch LAUNCH, whose runs go one after the
other in this job. A run trains LoRA adapters (r=8 on ``c_attn``, through PEFT) of a GPT-2 of
2 layers x 128 made from its config (nothing downloaded; its dropouts and LoRA's on) as a causal
language model of fixed random token rows, with a weight average and a checkpoint every 3
optimizer steps (in the background with ``async``) into OUT/run; it SIGKILLs its main process
right after optimizer step ``kill_at_step`` (the last run of its launch), or writes each
process's final weights and averages to OUT/final_rank<R>.pt. ``shift`` moves the frozen final
layer norm's bias (SHIFTED): another base, which a resume refuses; the run then notes the
error. Each run appends to OUT/events_rank<R>.jsonl:
"start", "resume" (the step it resumed at), then "kill", "refused" (the error) or "end".
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import peft
import torch
import transformers
from resume_worker import Events
from torch.utils.data import TensorDataset

from accmt_callbacks import Callback
from accmt_trainer import AcceleratorModule, CheckpointError, HyperParameters, Trainer

VOCAB, LENGTH = 512, 16
SHIFTED = "base_model.model.transformer.ln_f.bias"
"""The frozen parameter ``shift`` moves: not the first in the checkpoint's list, so a refusal
that names it found the one that differs."""


class LoRA(AcceleratorModule):
    def __init__(self, shift: float) -> None:
        config = transformers.GPT2Config(
            vocab_size=VOCAB, n_positions=32, n_embd=128, n_layer=2, n_head=2, use_cache=False
        )
        torch.manual_seed(0)
        lora = peft.LoraConfig(
            r=8, target_modules=["c_attn"], task_type="CAUSAL_LM", fan_in_fan_out=True
        )
        self.model = peft.get_peft_model(transformers.GPT2LMHeadModel(config), lora)
        with torch.no_grad():
            self.model.get_parameter(SHIFTED)[0] += shift

    def training_step(self, batch: Any) -> torch.Tensor:
        ids = batch[0]
        loss: torch.Tensor = self.model(input_ids=ids, labels=ids).loss
        return loss


def token_rows(n: int) -> TensorDataset:
    generator = torch.Generator().manual_seed(1)
    return TensorDataset(torch.randint(0, VOCAB, (n, LENGTH), generator=generator))


class Watch(Callback):
    def __init__(self, events: Events, kill_at: int | None) -> None:
        self.events, self.kill_at = events, kill_at

    def on_resume(self) -> None:
        self.events.note("resume", step=self.state.global_step)

    def on_after_training_step(self) -> None:
        if self.state.global_step == self.kill_at and self.trainer.accelerator.is_main_process:
            self.events.kill(f"step {self.kill_at}")


def train(run: dict[str, Any], launch: int) -> None:
    out = Path(run["out"])
    out.mkdir(parents=True, exist_ok=True)
    events = Events(out, launch)
    events.note("start")
    hps = HyperParameters.from_dict(
        {
            "epochs": 2,
            "batch_size": 8,
            "optimizer": "AdamW",
            "optimizer_kwargs": {"lr": 0.01},
            "scheduler": "LinearWithWarmup",
            "scheduler_kwargs": {"num_warmup_steps": 2},
        }
    )
    trainer = Trainer(
        hps,
        out / "run",
        checkpoint_every="3 steps",
        seed=7,
        log_with=None,
        progress_bar=False,
        cpu=True,
        callbacks=[Watch(events, run["kill_at_step"])],
        checkpoint_async=run["async"],
        ema_decay=0.9,
    )
    module = LoRA(run["shift"])
    parameters = dict(module.model.named_parameters())
    events.note(
        "model",
        trainable=sorted(name for name, p in parameters.items() if p.requires_grad),
        frozen=sorted(name for name, p in parameters.items() if not p.requires_grad),
        trainable_bytes=sum(p.nbytes for p in parameters.values() if p.requires_grad),
        frozen_bytes=sum(p.nbytes for p in parameters.values() if not p.requires_grad),
    )
    try:
        state = trainer.fit(module, token_rows(96))
    except CheckpointError as error:
        events.note("refused", error=str(error))
        return
    model = trainer.accelerator.unwrap_model(trainer.model)
    weights = {name: value.detach().cpu() for name, value in model.state_dict().items()}
    averaged = trainer.averaged_weights() or {}
    weights.update({f"average/{name}": value.detach().cpu() for name, value in averaged.items()})
    rank = trainer.accelerator.process_index
    torch.save({"weights": weights, "state": state.to_dict()}, out / f"final_rank{rank}.pt")
    events.note("end", global_step=state.global_step)


def main() -> None:
    plan, launch = Path(sys.argv[1]), int(sys.argv[2])
    for run in json.loads(plan.read_text())[launch]:
        train(run, launch)


if __name__ == "__main__":
    main()
