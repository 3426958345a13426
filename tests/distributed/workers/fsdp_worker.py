"""FSDP2 runs on CPU processes that are killed and resumed; used by tests/distributed/test_fsdp.py.

    fsdp_worker.py PLAN.json LAUNCH

PLAN.json lists the launches, each a list of runs, each ``{"out": OUT, "state_dict":
"SHARDED_STATE_DICT" | "FULL_STATE_DICT", "kill_at_step": N | null, "forced": bool,
"frozen": bool, "shift": float}`` (and optionally ``"full_states": true``, ``"resume"``: the
Trainer's, ``"cpu": true``); this is launch LAUNCH, whose runs go one after the other in this
job. A run SIGKILLs its main process right after optimizer step ``kill_at_step`` (the last
run of its launch), or writes each process's final weights, gathered whole, to
OUT/final_rank<R>.pt. Each run appends to
OUT/events_rank<R>.jsonl: "start", "fit_start" (whether the parameters are the shards FSDP2
made, after the sanity check), "resume" (the same, once the checkpoint is loaded), then "kill"
or "end" (with the warnings the fit gave). A ``frozen`` run freezes the classifier's first
layer, whose bias ``shift`` moves: another base, which a resume refuses ("refused", with the
error). A ``full_states`` run gathers the whole model and optimizer state (torch's
``get_model_state_dict`` / ``get_optimizer_state_dict``, ``full_state_dict=True``) as each
checkpoint is written (OUT/saved_step<S>.pt) and once a checkpoint is loaded
(OUT/loaded_step<S>.pt), on the main process, and notes each training loss in "end": what a
resume on another number of processes is checked with. ``cpu`` runs on the CPU, GPUs or not.

The harness: Accelerate does not take its FSDP path on the CPU (it runs DDP there), so a
``forced`` run makes it take it (:func:`force_fsdp`): once Accelerate has made its state
with an FSDP plugin, a state of CPU processes that torchrun started (MULTI_CPU, a single
one too) becomes FSDP, in this process only. The model then goes through Accelerate's FSDP2
preparation (torch's ``fully_shard`` over gloo), and through its FSDP ``save_state`` and
``load_state``; the processes, the process group and the sharding are real. A run that is not
forced shows what a user gets on the CPU. On a machine with two GPUs or more the runs take one
GPU a process (but ``cpu`` ones), where Accelerate takes its FSDP path unforced.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

import torch
from _toy import clusters  # beside this file
from accelerate.state import AcceleratorState, PartialState
from accelerate.utils import DistributedType
from resume_worker import Classifier, Events
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
)
from torch.distributed.tensor import DTensor

from accmt_callbacks import Callback
from accmt_trainer import CheckpointError, HyperParameters, Trainer

FORCED = False
# With a GPU a process Accelerate takes its FSDP path itself, and nothing is forced.
ON_GPUS = torch.cuda.device_count() >= 2


def force_fsdp() -> None:
    """Accelerate's state of a job of CPU processes with an FSDP plugin is FSDP while
    ``FORCED`` is true (the harness: see the module's text)."""
    made = AcceleratorState.__init__

    def init(self: AcceleratorState, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        plugin = kwargs.get("fsdp_plugin")
        if FORCED and plugin is not None and self.distributed_type == DistributedType.MULTI_CPU:
            self.distributed_type = DistributedType.FSDP
            self.fsdp_plugin = plugin
            PartialState._shared_state["distributed_type"] = DistributedType.FSDP

    AcceleratorState.__init__ = init  # type: ignore[method-assign]


class Watch(Callback):
    """Notes whether every parameter is a shard at the fit's start (after the sanity check)
    and after a resume; kills after step ``kill_at``; at the fit's end, while the process
    group is still the fit's, writes the weights gathered whole. With ``full_states``, writes
    the whole model and optimizer state at each checkpoint and after a resume, and keeps the
    losses."""

    def __init__(
        self, events: Events, kill_at: int | None, out: Path, full_states: bool = False
    ) -> None:
        self.events, self.kill_at, self.out = events, kill_at, out
        self.full_states, self.losses = full_states, list[float]()

    def sharded(self) -> bool:
        return all(isinstance(p, DTensor) for p in self.trainer.model.parameters())

    def write_full_state(self, name: str) -> None:
        """The whole model and optimizer state, gathered from every process's shards (a
        collective: every process calls it), written by the main process."""
        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        model, optimizer = self.trainer.model, self.trainer.optimizer
        optimizer = getattr(optimizer, "optimizer", optimizer)  # Accelerate's wrapper
        full = {
            "model": get_model_state_dict(model, options=options),
            "optimizer": get_optimizer_state_dict(model, optimizer, options=options),
        }
        if self.trainer.accelerator.is_main_process:
            torch.save(full, self.out / f"{name}_step{self.state.global_step}.pt")

    def on_fit_start(self) -> None:
        self.events.note("fit_start", sharded=self.sharded(), step=self.state.global_step)

    def on_resume(self) -> None:
        self.events.note("resume", sharded=self.sharded(), step=self.state.global_step)
        if self.full_states:
            self.write_full_state("loaded")

    def on_save_checkpoint(self) -> None:
        if self.full_states:
            self.write_full_state("saved")

    def on_before_backward(self, loss: torch.Tensor) -> None:
        if self.full_states:
            self.losses.append(float(loss))

    def on_after_training_step(self) -> None:
        if self.state.global_step == self.kill_at and self.trainer.accelerator.is_main_process:
            self.events.kill(f"step {self.kill_at}")

    def on_fit_end(self) -> None:
        weights = {
            name: (value.full_tensor() if isinstance(value, DTensor) else value).detach().cpu()
            for name, value in self.trainer.model.state_dict().items()
        }
        rank = self.trainer.accelerator.process_index
        final = {"weights": weights, "state": self.state.to_dict()}
        torch.save(final, self.out / f"final_rank{rank}.pt")


def train(run: dict[str, Any], launch: int) -> None:
    global FORCED
    out = Path(run["out"])
    out.mkdir(parents=True, exist_ok=True)
    events = Events(out, launch)
    events.note("start")
    FORCED = run["forced"]
    os.environ["FSDP_STATE_DICT_TYPE"] = run["state_dict"]
    watch = Watch(events, run["kill_at_step"], out, run.get("full_states", False))
    hps = HyperParameters.from_dict(
        {
            "epochs": 2,
            "batch_size": 8,
            "optimizer": "AdamW",
            "optimizer_kwargs": {"lr": 0.05},
            "scheduler": "LinearWithWarmup",
            "scheduler_kwargs": {"num_warmup_steps": 2},
        }
    )
    trainer = Trainer(
        hps,
        out / "run",
        checkpoint_every="2 steps",
        evaluate_every_n_steps=3,
        seed=7,
        log_with=None,
        progress_bar=False,
        cpu=run.get("cpu", False) or not ON_GPUS,
        resume=run.get("resume"),
        callbacks=[watch],
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # resume_worker's classifier: 2 -> 32 -> 3 with dropout, sharded on dim 0 over two
        # processes (32 rows in halves, 3 as 2 + 1).
        model = Classifier()
        if run.get("frozen"):
            model.model[0].requires_grad_(False)
            with torch.no_grad():
                model.model[0].bias[0] += run.get("shift", 0.0)
        try:
            state = trainer.fit(model, clusters(64, seed=1), clusters(16, seed=2))
        except CheckpointError as error:
            events.note("refused", error=str(error))
            return
    said = [str(warning.message) for warning in caught]
    events.note("end", global_step=state.global_step, warnings=said, losses=watch.losses)


def main() -> None:
    force_fsdp()
    plan, launch = Path(sys.argv[1]), int(sys.argv[2])
    for run in json.loads(plan.read_text())[launch]:
        train(run, launch)


if __name__ == "__main__":
    main()
