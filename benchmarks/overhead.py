"""The Trainer's own cost per step, against a plain PyTorch loop and a plain Accelerate loop.

    ./hatchw run python benchmarks/overhead.py
    ./hatchw run python benchmarks/overhead.py --processes 2

The same tiny MLP, data (one shuffled DataLoader) and AdamW are trained by the three loops, in
turn, for ROUNDS rounds of one STEPS-step epoch. Each loop notes the time after every step
(the Trainer through a callback's on_after_training_step, which costs about a microsecond),
and a round's figure is the median step: set-up, the first steps and the machine's hiccups
drop out. Across rounds it prints the median and the minimum (the least disturbed round, as
timeit advises); the ratio of minimums is the Trainer's overhead over plain Accelerate. The
process is pinned to one core and one thread. Progress bar, trackers, checkpoints and model
saving are off: this measures the loop, not what it writes.

With ``--processes N`` it starts itself on N CPU processes through torchrun (gloo, one thread
each, not pinned) and compares the Trainer with a plain Accelerate loop there (DDP),
each process reading its share of the batches. On several processes the Trainer also agrees on
stopping at every optimizer step (one number all-reduced on the gloo group): its cost is the
Trainer's step with it against the Trainer's step with it switched off, and the exchange timed
alone.
"""

from __future__ import annotations

import itertools
import os
import statistics
import subprocess
import sys
import time
from typing import Any

import torch
import torch.distributed as dist
from accelerate import Accelerator
from accelerate.state import AcceleratorState
from torch.utils.data import DataLoader, TensorDataset

from accmt_callbacks import Callback
from accmt_trainer import AcceleratorModule, HyperParameters, Trainer
from accmt_trainer.fit._stop_agreement import StopAgreement

BATCH = 32
STEPS = 600
ROUNDS = int(os.environ.get("OVERHEAD_ROUNDS", "11"))


def data(steps: int) -> TensorDataset:
    generator = torch.Generator().manual_seed(0)
    n = steps * BATCH
    return TensorDataset(torch.randn(n, 32, generator=generator), torch.randint(0, 10, (n,)))


def mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))


def median_step(stamps: list[float]) -> float:
    return statistics.median(b - a for a, b in itertools.pairwise(stamps))


def plain_torch(steps: int) -> float:
    model = mlp()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loader = DataLoader(data(steps), batch_size=BATCH, shuffle=True)
    stamps = []
    for features, labels in loader:
        loss = torch.nn.functional.cross_entropy(model(features), labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        stamps.append(time.perf_counter())
    return median_step(stamps)


def plain_torch_items(steps: int) -> float:
    """The token-weighted loss by hand: the batch's summed loss over its counted items."""
    model = mlp()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loader = DataLoader(data(steps), batch_size=BATCH, shuffle=True)
    stamps = []
    for features, labels in loader:
        summed = torch.nn.functional.cross_entropy(model(features), labels, reduction="sum")
        (summed / (labels >= 0).sum()).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        stamps.append(time.perf_counter())
    return median_step(stamps)


def plain_accelerate(steps: int) -> float:
    accelerator = Accelerator(cpu=True)
    model = mlp()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loader = DataLoader(data(steps), batch_size=BATCH, shuffle=True)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    stamps = []
    for features, labels in loader:
        loss = torch.nn.functional.cross_entropy(model(features), labels)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        stamps.append(time.perf_counter())
    AcceleratorState._reset_state(reset_partial_state=True)
    return median_step(stamps)


class Module(AcceleratorModule):
    def __init__(self) -> None:
        self.model = mlp()

    def training_step(self, batch: Any) -> torch.Tensor:
        features, labels = batch
        return torch.nn.functional.cross_entropy(self.model(features), labels)


class SummedModule(Module):
    """The token-weighted path: the loss summed over the batch, with its number of items."""

    def training_step(self, batch: Any) -> dict[str, Any]:
        features, labels = batch
        loss = torch.nn.functional.cross_entropy(self.model(features), labels, reduction="sum")
        return {"loss": loss, "num_items": (labels >= 0).sum()}


class StepClock(Callback):
    """Notes the time after each step, as the plain loops do at the end of theirs."""

    def __init__(self) -> None:
        self.stamps: list[float] = []

    def on_after_training_step(self) -> None:
        self.stamps.append(time.perf_counter())


def accmt_trainer(steps: int, module: type[Module] = Module, **options: Any) -> float:
    hps = HyperParameters.from_dict(
        {"epochs": 1, "batch_size": BATCH, "optimizer": "AdamW", "optimizer_kwargs": {"lr": 1e-3}}
    )
    clock = StepClock()
    trainer = Trainer(
        hps,
        "/tmp/accmt-overhead",
        log_with=None,
        progress_bar=False,
        cpu=True,
        checkpoint_every=None,
        disable_model_saving=True,
        eval_when_finish=False,
        log_every=10**9,
        callbacks=[clock],
        **options,
    )
    trainer.fit(module(), data(steps))
    AcceleratorState._reset_state(reset_partial_state=True)
    return median_step(clock.stamps)


def main() -> None:
    torch.set_num_threads(1)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
    loops = {
        "plain PyTorch": plain_torch,
        "plain PyTorch num_items": plain_torch_items,
        "plain Accelerate": plain_accelerate,
        "accmt Trainer.fit": accmt_trainer,
        "accmt num_items": lambda steps: accmt_trainer(steps, SummedModule),
        "accmt ema_decay": lambda steps: accmt_trainer(steps, ema_decay=0.999),
    }
    samples: dict[str, list[float]] = {name: [] for name in loops}
    for loop in loops.values():  # warm-up: imports, allocator, first-call costs
        loop(50)
    for _ in range(ROUNDS):
        for name, loop in loops.items():
            samples[name].append(loop(STEPS))
    print(
        f"tiny MLP, batch {BATCH}, AdamW, 1 thread on 1 core; median step of each "
        f"{STEPS}-step epoch, over {ROUNDS} interleaved rounds"
    )
    print(f"  {'':<24} {'median':>9} {'minimum':>9}")
    for name, values in samples.items():
        print(f"  {name:<24} {statistics.median(values) * 1e3:6.3f} ms {min(values) * 1e3:6.3f} ms")
    trainer, accelerate = samples["accmt Trainer.fit"], samples["plain Accelerate"]
    torch_loop = samples["plain PyTorch"]
    print(
        f"  ratio Trainer / plain Accelerate: {min(trainer) / min(accelerate):.3f} of minimums, "
        f"{statistics.median(trainer) / statistics.median(accelerate):.3f} of medians  "
        "(target <= 1.0)"
    )
    # The Trainer calls the torch optimizer inside Accelerate's wrapper where the wrapper would
    # only call it, so plain PyTorch is the floor it is measured against too.
    print(
        f"  ratio Trainer / plain PyTorch: {min(trainer) / min(torch_loop):.3f} of minimums, "
        f"{statistics.median(trainer) / statistics.median(torch_loop):.3f} of medians"
    )
    print(
        "  ratio plain Accelerate / plain PyTorch: "
        f"{min(accelerate) / min(torch_loop):.3f} of minimums"
    )
    # A summed loss with num_items: the window's gradients rescaled on the device at each step.
    summed, average = samples["accmt num_items"], samples["accmt ema_decay"]
    print(
        f"  ratio token-weighted (num_items) / plain Trainer: {min(summed) / min(trainer):.3f} "
        f"of minimums, {statistics.median(summed) / statistics.median(trainer):.3f} of medians"
        "  (target <= 1.03)"
    )
    # The floor: what counting the items and dividing costs a plain PyTorch loop.
    by_hand = samples["plain PyTorch num_items"]
    floor = min(by_hand) / min(torch_loop)
    print(
        f"  floor, the same by hand in plain PyTorch: {floor:.3f} of minimums; "
        f"accmt's own part: {min(summed) / min(trainer) - floor:+.3f}"
    )
    cost = (statistics.median(average) - statistics.median(trainer)) * 1e6
    print(
        f"  ema_decay: {cost:+.1f} us a step (medians), "
        f"{min(average) / min(trainer):.3f} of the plain Trainer's minimum"
    )


def stop_exchange(steps: int) -> float:
    """What the Trainer's stop agreement adds to each step on several processes: one int32
    all-reduced (max) on the gloo group, as fit/_stop_agreement.py does."""
    stamps = []
    for _ in range(steps):
        flag = torch.zeros(1, dtype=torch.int32)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        bool(flag.item())
        stamps.append(time.perf_counter())
    return median_step(stamps)


def trainer_without_agreement(steps: int) -> float:
    """The Trainer with its stop agreement switched off (a stop asked on one process would
    then hang the job): what the agreement costs is the difference. For this measure only."""
    exchange = StopAgreement.exchange
    StopAgreement.exchange = lambda self: self.agreed  # type: ignore[method-assign]
    try:
        return accmt_trainer(steps)
    finally:
        StopAgreement.exchange = exchange  # type: ignore[method-assign]


def several_processes(processes: int) -> None:
    """Run under torchrun by ``--processes N``: the Trainer and plain Accelerate (DDP), each
    process reading its share of the same batches, in interleaved rounds; rank 0 prints."""
    rank = int(os.environ["RANK"])
    # Not pinned to a core each: gloo's own threads would then wait on the training thread.
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    steps = STEPS * processes  # the batches of the whole set: STEPS each process
    loops = {
        "plain Accelerate (DDP)": plain_accelerate,
        "accmt Trainer.fit": accmt_trainer,
        "accmt, no stop agreement": trainer_without_agreement,
        "stop exchange alone": stop_exchange,
    }
    samples: dict[str, list[float]] = {name: [] for name in loops}
    for loop in loops.values():
        loop(50 * processes)
    for _ in range(ROUNDS):
        for name, loop in loops.items():
            samples[name].append(loop(steps if loop is not stop_exchange else STEPS))
    if rank == 0:
        _print_several(processes, samples)
    dist.destroy_process_group()


def _print_several(processes: int, samples: dict[str, list[float]]) -> None:
    print(
        f"tiny MLP, batch {BATCH} per process, AdamW, {processes} processes (gloo, 1 thread "
        f"each); median step of each {STEPS}-step epoch, over {ROUNDS} interleaved rounds"
    )
    print(f"  {'':<24} {'median':>9} {'minimum':>9}")
    for name, values in samples.items():
        print(f"  {name:<24} {statistics.median(values) * 1e3:6.3f} ms {min(values) * 1e3:6.3f} ms")
    trainer, accelerate = samples["accmt Trainer.fit"], samples["plain Accelerate (DDP)"]
    without, exchange = samples["accmt, no stop agreement"], samples["stop exchange alone"]
    print(
        f"  ratio Trainer / plain Accelerate: {min(trainer) / min(accelerate):.3f} of minimums, "
        f"{statistics.median(trainer) / statistics.median(accelerate):.3f} of medians"
    )
    cost = statistics.median(trainer) - statistics.median(without)
    print(
        f"  stop agreement: {cost * 1e6:+.1f} us a step (medians, Trainer with and without), "
        f"{cost / statistics.median(accelerate):+.3f} of plain Accelerate's median step; the "
        f"exchange alone {statistics.median(exchange) * 1e6:.1f} us"
    )


if __name__ == "__main__":
    if "--processes" not in sys.argv[1:]:
        main()
    elif "RANK" in os.environ:
        several_processes(int(sys.argv[sys.argv.index("--processes") + 1]))
    else:
        count = sys.argv[sys.argv.index("--processes") + 1]
        launcher = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={count}"]
        subprocess.run([*launcher, __file__, "--processes", count], check=True)
