"""The Trainer's own cost per step, against a plain PyTorch loop and a plain Accelerate loop.

    ./hatchw run python benchmarks/overhead.py

The same tiny MLP, data (one shuffled DataLoader) and AdamW are trained by the three loops, in
turn, for several rounds. Each is timed in CPU time (this process's, one thread: less shaken
by the machine's other work than wall time) over one epoch of STEPS steps, from the start of
the epoch's loop to its end; for the Trainer a callback overriding only on_epoch_start and
on_epoch_end takes the times, so nothing is added to a step. Set-up (building the
Accelerator, preparing) is outside the timing for all three. Progress bar, trackers,
checkpoints and model saving are off: this measures the loop, not what it writes.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState
from torch.utils.data import DataLoader, TensorDataset

from accmt_callbacks import Callback
from accmt_trainer import AcceleratorModule, HyperParameters, Trainer

BATCH = 32
STEPS = 600
ROUNDS = 15


def data(steps: int) -> TensorDataset:
    generator = torch.Generator().manual_seed(0)
    n = steps * BATCH
    return TensorDataset(torch.randn(n, 32, generator=generator), torch.randint(0, 10, (n,)))


def mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))


def plain_torch(steps: int) -> float:
    model = mlp()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loader = DataLoader(data(steps), batch_size=BATCH, shuffle=True)
    start = time.process_time()
    for features, labels in loader:
        loss = torch.nn.functional.cross_entropy(model(features), labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return time.process_time() - start


def plain_accelerate(steps: int) -> float:
    accelerator = Accelerator(cpu=True)
    model = mlp()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loader = DataLoader(data(steps), batch_size=BATCH, shuffle=True)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    start = time.process_time()
    for features, labels in loader:
        loss = torch.nn.functional.cross_entropy(model(features), labels)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    elapsed = time.process_time() - start
    AcceleratorState._reset_state(reset_partial_state=True)
    return elapsed


class Module(AcceleratorModule):
    def __init__(self) -> None:
        self.model = mlp()

    def training_step(self, batch: Any) -> torch.Tensor:
        features, labels = batch
        return torch.nn.functional.cross_entropy(self.model(features), labels)


class EpochClock(Callback):
    """Times the epoch; its hooks fire once per epoch, so steps pay nothing for it."""

    def on_epoch_start(self) -> None:
        self.started = time.process_time()

    def on_epoch_end(self) -> None:
        self.elapsed = time.process_time() - self.started


def accmt_trainer(steps: int) -> float:
    hps = HyperParameters.from_dict(
        {"epochs": 1, "batch_size": BATCH, "optimizer": "AdamW", "optimizer_kwargs": {"lr": 1e-3}}
    )
    clock = EpochClock()
    trainer = Trainer(
        hps, "/tmp/accmt-overhead", log_with=None, progress_bar=False, cpu=True,
        checkpoint_every=None, disable_model_saving=True, eval_when_finish=False,
        log_every=10**9, callbacks=[clock],
    )  # fmt: skip
    trainer.fit(Module(), data(steps))
    AcceleratorState._reset_state(reset_partial_state=True)
    return clock.elapsed


def per_step(loop: Callable[[int], float]) -> float:
    return loop(STEPS) / STEPS


def main() -> None:
    torch.set_num_threads(1)
    loops = {"plain PyTorch": plain_torch, "plain Accelerate": plain_accelerate,
             "accmt Trainer.fit": accmt_trainer}  # fmt: skip
    samples: dict[str, list[float]] = {name: [] for name in loops}
    for loop in loops.values():  # warm-up: imports, allocator, first-call costs
        loop(50)
    for _ in range(ROUNDS):
        for name, loop in loops.items():
            samples[name].append(per_step(loop))
    medians = {name: statistics.median(values) for name, values in samples.items()}
    # Rounds run back to back, so a round's ratio cancels most of the machine's drift.
    paired = statistics.median(
        t / a
        for t, a in zip(samples["accmt Trainer.fit"], samples["plain Accelerate"], strict=True)
    )
    print(f"tiny MLP, batch {BATCH}, AdamW, 1 thread; CPU time per step, median over {ROUNDS} "
          f"interleaved rounds of one {STEPS}-step epoch")  # fmt: skip
    for name, seconds in medians.items():
        print(f"  {name:<20} {seconds * 1e3:7.3f} ms/step")
    ratio = medians["accmt Trainer.fit"] / medians["plain Accelerate"]
    print(f"  ratio Trainer / plain Accelerate: {ratio:.3f} of medians, {paired:.3f} median of "
          "per-round ratios  (target <= 1.05)")  # fmt: skip
    print(f"  ratio plain Accelerate / plain PyTorch: "
          f"{medians['plain Accelerate'] / medians['plain PyTorch']:.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
