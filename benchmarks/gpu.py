"""ms per step of accmt's Trainer.fit against a plain Accelerate loop on CUDA, bf16 and fp16.

./hatchw run python benchmarks/gpu.py [--width 4096] [--layers 8] [--batch 512] [--cpu-smoke]

It needs a CUDA GPU: without one it says so and exits (status 1). ``--cpu-smoke`` runs the same
flow on the CPU with tiny sizes, fp32 and bf16 (Accelerate does not autocast fp16 on the CPU),
DDP on two gloo processes: it checks the script, its figures mean nothing.

The model is a stack of ``--layers`` Linear(width, width) + GELU between a Linear(features,
width) and a Linear(width, classes), cross-entropy on random data made by the script (a
TensorDataset on the host, a small input so that the loader's copy is not what is timed), and
AdamW. The same model, data, optimizer and precision are trained for one epoch of ``--warmup``
+ ``--steps`` steps by (a) a plain Accelerate loop (``Accelerator(mixed_precision=...)``,
``prepare``, ``backward``, ``step``, ``zero_grad``) and (b) ``Trainer.fit``, in turn, for
``--repeats`` repeats each. A step's time is marginal: each loop synchronizes the GPU and notes
the time after its last warm-up step and after its last step, and divides by ``--steps`` (the
Trainer through a callback's on_after_training_step). So set-up, the first steps (allocator,
cuDNN/cuBLAS choices) and the end of fit drop out, and the GPU runs unsynchronized in between,
as in training: a loop that syncs every step shows in its figure. Printed: the median and the
minimum over repeats, the ratio accmt / plain of each, and the peak CUDA memory of each run
(``torch.cuda.max_memory_allocated``, its counter reset and the cache emptied before each run;
the median over repeats). bf16 is skipped, with the reason, where
``torch.cuda.is_bf16_supported()`` is False.

Checkpoint stall: benchmarks/checkpoint_io.py's measurement with the model and AdamW state on
the GPU (the same Linear stack, in fp32 as AMP keeps it): a synchronous Trainer checkpoint and
a background one (``checkpoint_async=True``), what each stalls the training thread, against a
bare ``torch.save`` of the model and optimizer state, in the temporary folder.

DDP: with two GPUs or more, the script runs itself again under ``python -m
torch.distributed.run --standalone --nproc_per_node 2`` (the same as ``torchrun``) and prints
the same per-step table for two processes, batch ``--batch`` on each (rank 0's peak memory);
with fewer it says that the DDP part was skipped. By hand: ``torchrun --standalone
--nproc_per_node 2 benchmarks/gpu.py --ddp-child``.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import torch

# (--width, --layers, --features, --classes, --batch, --warmup, --steps, --repeats,
# --checkpoint-repeats) on a GPU and in the CPU smoke run
SIZES = {
    "gpu": (4096, 8, 256, 1000, 512, 20, 200, 5, 5),
    "smoke": (64, 2, 16, 10, 8, 2, 6, 2, 2),
}
NAMES = (
    "width",
    "layers",
    "features",
    "classes",
    "batch",
    "warmup",
    "steps",
    "repeats",
    "checkpoint_repeats",
)
LOOPS = ("plain Accelerate", "accmt Trainer.fit")


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in NAMES:
        parser.add_argument(f"--{name.replace('_', '-')}", type=int)
    parser.add_argument("--cpu-smoke", action="store_true", help="tiny sizes on the CPU")
    parser.add_argument("--ddp-child", action="store_true", help="one process of the DDP part")
    args = parser.parse_args()
    if (args.warmup or 1) < 1 or (args.steps or 1) < 1:
        parser.error("--warmup and --steps take at least 1")
    for name, default in zip(NAMES, SIZES["smoke" if args.cpu_smoke else "gpu"], strict=True):
        if getattr(args, name) is None:
            setattr(args, name, default)
    return args


def synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def model(args: argparse.Namespace) -> torch.nn.Module:
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = [torch.nn.Linear(args.features, args.width)]
    for _ in range(args.layers):
        layers += [torch.nn.Linear(args.width, args.width), torch.nn.GELU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(args.width, args.classes))


def data(args: argparse.Namespace, world_size: int) -> torch.utils.data.TensorDataset:
    """Exactly ``warmup + steps`` batches of ``batch`` on each of ``world_size`` processes."""
    generator = torch.Generator().manual_seed(0)
    n = args.batch * world_size * (args.warmup + args.steps)
    features = torch.randn(n, args.features, generator=generator)
    return torch.utils.data.TensorDataset(
        features, torch.randint(0, args.classes, (n,), generator=generator)
    )


class Clock:
    """Synchronizes and notes the time after the last warm-up step and after the last step."""

    def __init__(self, warmup: int, steps: int) -> None:
        self.marks = (warmup, warmup + steps)
        self.steps = steps
        self.step = 0
        self.stamps: list[float] = []

    def tick(self) -> None:
        self.step += 1
        if self.step in self.marks:
            synchronize()
            self.stamps.append(time.perf_counter())

    def seconds_per_step(self) -> float:
        assert self.step == self.marks[1], f"{self.step} steps, not {self.marks[1]}"
        return (self.stamps[1] - self.stamps[0]) / self.steps


def plain_accelerate(args: argparse.Namespace, precision: str, dataset: Any, folder: str) -> float:
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=args.cpu_smoke, mixed_precision=precision)
    optimizer = torch.optim.AdamW((net := model(args)).parameters(), lr=1e-4)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch, shuffle=True)
    net, optimizer, loader = accelerator.prepare(net, optimizer, loader)
    clock = Clock(args.warmup, args.steps)
    for features, labels in loader:
        loss = torch.nn.functional.cross_entropy(net(features), labels)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        clock.tick()
    return clock.seconds_per_step()


def accmt_trainer(args: argparse.Namespace, precision: str, dataset: Any, folder: str) -> float:
    from accmt_callbacks import Callback
    from accmt_trainer import AcceleratorModule, HyperParameters, Trainer

    class Module(AcceleratorModule):
        def __init__(self) -> None:
            self.model = model(args)

        def training_step(self, batch: Any) -> torch.Tensor:
            features, labels = batch
            return torch.nn.functional.cross_entropy(self.model(features), labels)

    class Ticks(Callback):
        def __init__(self, clock: Clock) -> None:
            self.clock = clock

        def on_after_training_step(self) -> None:
            self.clock.tick()

    clock = Clock(args.warmup, args.steps)
    hps = {"epochs": 1, "batch_size": args.batch, "optimizer": "AdamW"}
    trainer = Trainer(
        HyperParameters.from_dict({**hps, "optimizer_kwargs": {"lr": 1e-4}}),
        folder,
        log_with=None,
        progress_bar=False,
        cpu=args.cpu_smoke,
        mixed_precision=precision,
        checkpoint_every=None,
        disable_model_saving=True,
        eval_when_finish=False,
        log_every=10**9,
        callbacks=[Ticks(clock)],
    )
    trainer.fit(Module(), dataset)
    return clock.seconds_per_step()


def run_once(
    loop: Callable[[argparse.Namespace, str, Any, str], float],
    args: argparse.Namespace,
    precision: str,
    dataset: Any,
    folder: str,
) -> tuple[float, float]:
    """(seconds per step, peak CUDA memory in MiB, NaN on the CPU) of one run of ``loop``."""
    from accelerate.state import AcceleratorState

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    seconds = loop(args, precision, dataset, folder)
    AcceleratorState._reset_state(reset_partial_state=True)
    peak = torch.cuda.max_memory_allocated() / 2**20 if torch.cuda.is_available() else float("nan")
    return seconds, peak


def precisions(args: argparse.Namespace, main: bool) -> list[str]:
    """The precisions to run; the main process says why bf16 or fp16 is left out."""
    if args.cpu_smoke:
        reason = "fp16 skipped: Accelerate does not autocast fp16 on the CPU; fp32 ('no') instead"
        chosen = ["no", "bf16"]
    elif torch.cuda.is_bf16_supported():
        reason, chosen = "", ["bf16", "fp16"]
    else:
        reason = f"bf16 skipped: torch.cuda.is_bf16_supported() is False on {device_name()}"
        chosen = ["fp16"]
    if main and reason:
        print(f"  {reason}")
    return chosen


def device_name() -> str:
    if torch.cuda.is_available():
        return torch.cuda.get_device_name()
    return "CPU (smoke run: the figures mean nothing)"


def per_step(args: argparse.Namespace, world_size: int, main: bool, folder: str) -> None:
    """The table of ms per step and peak memory, each precision, both loops interleaved;
    ``folder``: the Trainer's, the same on every process."""
    if main:
        print(
            f"{world_size} process(es) on {device_name()}: {args.layers} x Linear({args.width}) "
            f"+ GELU, {args.features} features in, {args.classes} classes, batch {args.batch} "
            f"per process, AdamW; {args.steps} steps timed after {args.warmup}, "
            f"{args.repeats} interleaved repeats"
        )
    chosen = precisions(args, main)
    dataset = data(args, world_size)
    loops = dict(zip(LOOPS, (plain_accelerate, accmt_trainer), strict=True))
    if main:
        print(f"  {'precision':<9} {'loop':<19} {'median':>10} {'minimum':>10} {'peak memory':>12}")
    for precision in chosen:
        for loop in loops.values():  # warm-up: imports, CUDA context, first-call costs
            run_once(loop, args, precision, dataset, folder)
        seconds: dict[str, list[float]] = {name: [] for name in loops}
        peaks: dict[str, list[float]] = {name: [] for name in loops}
        for _ in range(args.repeats):
            for name, loop in loops.items():
                step, peak = run_once(loop, args, precision, dataset, folder)
                seconds[name].append(step)
                peaks[name].append(peak)
        if not main:
            continue
        memory = {name: statistics.median(values) for name, values in peaks.items()}
        for name in loops:
            print(
                f"  {precision:<9} {name:<19} {statistics.median(seconds[name]) * 1e3:7.3f} ms "
                f"{min(seconds[name]) * 1e3:7.3f} ms "
                + ("n/a (CPU)" if args.cpu_smoke else f"{memory[name]:8.0f} MiB").rjust(12)
            )
        accmt, plain = seconds[LOOPS[1]], seconds[LOOPS[0]]
        memory_ratio = memory[LOOPS[1]] / memory[LOOPS[0]]
        ratios = (
            f"  {precision:<9} {'ratio accmt / plain':<19} "
            f"{statistics.median(accmt) / statistics.median(plain):8.3f}x  "
            f"{min(accmt) / min(plain):8.3f}x "
        )
        print(ratios.rstrip() if args.cpu_smoke else f"{ratios}{memory_ratio:10.3f}x")


def checkpoint_stall(args: argparse.Namespace) -> None:
    from checkpoint_io import measure

    size = f"{args.layers} x Linear({args.width})"
    where = "CPU" if args.cpu_smoke else "GPU"
    measure(
        f"{size}, state on the {where}",
        args.width,
        args.layers,
        args.checkpoint_repeats,
        None,
        args.cpu_smoke,
    )


def ddp(args: argparse.Namespace) -> None:
    """Runs the per-step table again on two processes, where there are two GPUs (or, in the
    smoke run, two CPU processes)."""
    if not args.cpu_smoke and torch.cuda.device_count() < 2:
        print(
            f"DDP part skipped: it needs 2 GPUs, torch.cuda.device_count() is "
            f"{torch.cuda.device_count()}"
        )
        return
    if torch.cuda.is_available():
        torch.cuda.empty_cache()  # this process keeps its context on GPU 0, not its cache
    sizes = [f"--{name.replace('_', '-')}={getattr(args, name)}" for name in NAMES]
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node"]
    command += ["2", __file__, "--ddp-child", *sizes, *(["--cpu-smoke"] * args.cpu_smoke)]
    print("DDP: python", " ".join(command[1:]), flush=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run(command, check=True, env=env)


def main() -> None:
    args = arguments()
    if not args.cpu_smoke and not torch.cuda.is_available():
        sys.exit(
            "benchmarks/gpu.py needs a CUDA GPU, and torch.cuda.is_available() is False here "
            f"(torch {torch.__version__}). `python benchmarks/gpu.py --cpu-smoke` runs the same "
            "flow on the CPU with tiny sizes, to check the script."
        )
    if args.cpu_smoke:
        torch.set_num_threads(1)
    logging.getLogger("accmt_trainer").setLevel(logging.WARNING)  # no "starting afresh" lines
    if args.ddp_child:
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        # One folder for the processes of this launch: torchrun's run id, else its agent's pid.
        run = os.environ.get("TORCHELASTIC_RUN_ID") or str(os.getppid())
        folder = os.path.join(tempfile.gettempdir(), f"accmt-gpu-benchmark-{run}")
        first = os.environ.get("RANK", "0") == "0"
        per_step(args, int(os.environ.get("WORLD_SIZE", "1")), first, folder)
        if torch.distributed.is_initialized():
            torch.distributed.barrier()
        if first:
            shutil.rmtree(folder, ignore_errors=True)
        return
    with tempfile.TemporaryDirectory() as folder:
        per_step(args, 1, True, folder)
    checkpoint_stall(args)
    ddp(args)


if __name__ == "__main__":
    main()
