"""How long a Trainer checkpoint stalls training and takes to save and to load, next to a bare
torch.save (with and without an fsync) / torch.load and Accelerate's save_state / load_state of
the same state, for about 100 MB, the 6 layers of 2048x2048 of issue 27 (about 300 MB) and about
1 GB of model plus AdamW state; and what a background checkpoint costs the training thread.

./hatchw run python benchmarks/checkpoint_io.py [small] [issue] [large]   (default: all three)

The checkpoint's save is all of it: Accelerate's save_state (model, optimizer, RNGs), the
TrainingState, callback states, loss windows, then its commit: the xxh3 digest of every file for
the manifest and the rename into place (on the training loop's path), then the fsync of every
file and folder, the durable pointer and the removal of the oldest checkpoint
(max_checkpoints=2), which run in the background writer. A synchronous checkpoint stalls
training for the files, the digests and the rename (the background writer's part is waited for
by the next checkpoint); its stall is compared with a bare torch.save and with a bare torch.save
followed by an fsync of its file, the floor of a durable save. Its load is what a resume does
before training: choose the newest checkpoint and verify it (digests and kinds of every file),
read the state and the parts, and Accelerate's load_state. The bare baseline writes and reads
``{"model", "optimizer"}`` (``weights_only=True``) over the same file, and loads both state
dicts; "torch.save, new file" writes a new file each time and removes the one before last, as a
checkpoint must (it cannot overwrite the one it may fall back to, and two are kept): the floor
of a checkpoint on a disk. Each save starts after an ``os.sync()``, untimed, so that the
kernel's writeback of the previous save does not land on whichever save comes next, and after
the previous checkpoint's commit: checkpoints further apart than a commit takes.
A background save (``checkpoint_async=True``) stalls the caller only for a copy of the state
into CPU memory; the extra memory is that copy, measured as the process's RSS growth.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import torch
from _timing import interleaved_samples
from accelerate import Accelerator
from accelerate.state import AcceleratorState

import accmt_trainer.checkpointing._commit as commit
from accmt_callbacks import CallbackHandler
from accmt_state import TrainingState
from accmt_trainer.checkpointing._checkpoints import CheckpointOptions, Checkpoints
from accmt_trainer.checkpointing._parts import load_accelerate_state, read_callback_states
from accmt_trainer.checkpointing._run_facts import RunFacts

# name: (label, width, layers, repeats)
SIZES = {
    "small": ("~100 MB", 1536, 4, 5),
    "issue": ("6 x 2048x2048 (issue 27)", 2048, 6, 7),
    "large": ("~1 GB", 2560, 13, 7),
}
# What a checkpoint does, timed where it runs: Accelerate's save_state on the training thread,
# the commit's steps in the background writer.
PHASES = {
    "inventory": "digests",
    "sync_tree": "fsync",
    "write_json": "manifest + pointer",
    "retain": "removal of the oldest",
}
# The disk is what a run writes to, and on a shared machine its writeback swings from run to
# run; memory (tmpfs) leaves out the disk and shows what each way of saving costs by itself.
PLACES = {None: "the temporary folder (disk)", "/dev/shm": "/dev/shm (memory)"}


def tensor_mb(value: Any) -> float:
    """MB of the tensors in ``value``, at any depth (attrs classes, mappings, sequences, state
    dicts)."""
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size() / 1e6
    if isinstance(value, Mapping):
        return sum(tensor_mb(item) for item in value.values())
    if isinstance(value, (list, tuple)):
        return sum(tensor_mb(item) for item in value)
    if attrs.has(type(value)):
        return sum(tensor_mb(getattr(value, field.name)) for field in attrs.fields(type(value)))
    if callable(getattr(value, "state_dict", None)):  # a frozen optimizer or scheduler state
        return tensor_mb(value.state_dict())
    return 0.0


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Setup:
    def __init__(self, width: int, layers: int, folder: Path, cpu: bool = True) -> None:
        torch.manual_seed(0)
        self.accelerator = Accelerator(cpu=cpu)
        model = torch.nn.Sequential(*(torch.nn.Linear(width, width) for _ in range(layers)))
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        self.model, self.optimizer = self.accelerator.prepare(model, optimizer)
        self.model(torch.randn(2, width, device=self.accelerator.device)).square().mean().backward()
        self.optimizer.step()
        self.state = TrainingState()
        self.callbacks = CallbackHandler()
        self.callbacks.bind(state=self.state)
        self.folder = folder
        self.run = RunFacts(
            world_size=1,
            train_batch_size=8,
            grad_accumulation_steps=1,
            batches_per_epoch=1,
            order_batches=1,
        )
        self.index = 0
        self.bare_index = 0
        self._checkpoints: dict[bool, Checkpoints] = {}
        self.phases: dict[bool, list[dict[str, float]]] = {False: [], True: []}
        self._phase: dict[str, float] | None = None  # the parts of the save under way
        self._time(self.accelerator, "save_state", "Accelerate save_state")
        for name, label in PHASES.items():
            self._time(commit, name, label)
        self.state_mb = tensor_mb(self.model.state_dict()) + tensor_mb(
            self.optimizer.state_dict()["state"]
        )

    def checkpoints(self, background: bool) -> Checkpoints:
        # One per mode, as in a run: a background one reuses its copy's buffers.
        if background not in self._checkpoints:
            folder = self.folder / "checkpoints"
            options = CheckpointOptions(max_checkpoints=2, checkpoint_async=background)
            self._checkpoints[background] = Checkpoints(folder, self.accelerator, options)
        return self._checkpoints[background]

    def _time(self, owner: Any, name: str, label: str) -> None:
        """Adds each call's seconds of ``owner.name`` to this save's phases, by thread."""
        original = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                main = threading.current_thread() is threading.main_thread()
                key = f"{'training thread' if main else 'background'}: {label}"
                if self._phase is not None:
                    self._phase[key] = self._phase.get(key, 0.0) + time.perf_counter() - start

        setattr(owner, name, timed)

    def save(self, background: bool) -> tuple[float, float, float]:
        """(seconds until the caller may train on, seconds until the checkpoint is in place,
        MB of RSS the process grew by while the write was in flight)"""
        checkpoints = self.checkpoints(background)
        self.index += 1
        self._phase = {}
        before = rss_mb()
        start = time.perf_counter()
        snapshot_of = ([self.model], self.optimizer, None)
        checkpoints.save(
            self.index,
            self.run,
            self.state,
            self.callbacks,
            {"window": {}, "epoch": {}},
            snapshot_of=snapshot_of,
        )
        stalled = time.perf_counter() - start
        grown = rss_mb() - before
        checkpoints.wait()
        total = time.perf_counter() - start
        self.phases[background].append(self._phase)
        self._phase = None
        return stalled, total, grown

    def load(self) -> None:
        checkpoints = self.checkpoints(False)
        # What a resume reads: the state and losses (Checkpoints.start), then the callbacks'
        # states and Accelerate's (fit/_resume.py's Resume.restore, without a run around it).
        folder = checkpoints.start(self.run).folder
        assert folder is not None
        self.callbacks.load_state_dict(read_callback_states(folder))
        load_accelerate_state(self.accelerator, folder)

    def torch_save(self) -> None:
        model = self.accelerator.unwrap_model(self.model)
        state = {"model": model.state_dict(), "optimizer": self.optimizer.state_dict()}
        torch.save(state, self.folder / "bare.pt")

    def torch_save_new_file(self) -> None:
        """torch.save into a new file, the one before last removed: a checkpoint's floor, which
        cannot overwrite the checkpoint it may have to fall back to, and keeps two."""
        self.bare_index += 1
        path = self.folder / f"bare_{self.bare_index}.pt"
        model = self.accelerator.unwrap_model(self.model)
        torch.save({"model": model.state_dict(), "optimizer": self.optimizer.state_dict()}, path)
        (self.folder / f"bare_{self.bare_index - 2}.pt").unlink(missing_ok=True)

    def torch_save_synced(self) -> None:
        self.torch_save()
        descriptor = os.open(self.folder / "bare.pt", os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)

    def torch_load(self) -> None:
        state = torch.load(self.folder / "bare.pt", weights_only=True)
        self.accelerator.unwrap_model(self.model).load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])

    def accelerate_save(self) -> None:
        self.accelerator.save_state(str(self.folder / "accelerate"))

    def accelerate_load(self) -> None:
        self.accelerator.load_state(str(self.folder / "accelerate"))


def measure(
    label: str, width: int, layers: int, repeats: int, place: str | None, cpu: bool = True
) -> None:
    """Prints the figures of one size in one place; ``cpu=False``: the model and optimizer state
    on the GPU (benchmarks/gpu.py), so that a save copies it to the host first."""
    with tempfile.TemporaryDirectory(dir=place) as tmp:
        setup = Setup(width, layers, Path(tmp), cpu)
        setup.torch_save()
        setup.accelerate_save()
        setup.save(background=False)
        setup.phases[False].clear()
        stalls: dict[bool, list[float]] = {False: [], True: []}

        def checkpoint() -> None:
            stalls[False].append(setup.save(background=False)[0])

        saves = interleaved_samples(
            {
                "accmt checkpoint": checkpoint,
                "torch.save": setup.torch_save,
                "torch.save + fsync": setup.torch_save_synced,
                "torch.save, new file": setup.torch_save_new_file,
                "Accelerate save_state": setup.accelerate_save,
            },
            repeats,
            before=os.sync,
        )
        loads = interleaved_samples(
            {
                "accmt resume load": setup.load,
                "torch.load": setup.torch_load,
                "Accelerate load_state": setup.accelerate_load,
            },
            repeats,
        )
        totals, growth = [], []
        for _ in range(repeats):
            os.sync()
            stalled, total, grown = setup.save(background=True)
            stalls[True].append(stalled)
            totals.append(total)
            growth.append(grown)
        held = tensor_mb(setup.checkpoints(True)._buffers)
        AcceleratorState._reset_state(reset_partial_state=True)
    print(
        f"{label} in {PLACES[place]}: model + AdamW state {setup.state_mb:.0f} MB; "
        f"{repeats} interleaved runs"
    )
    print(f"  {'':<37} {'median':>8}  {'ratio':>17}  {'fastest':>8}  {'ratio':>17}")
    rows = [
        ("save", "accmt checkpoint, until in place", saves["accmt checkpoint"], saves),
        *(("save", name, seconds, saves) for name, seconds in saves.items() if "accmt" not in name),
        *(("load", name, seconds, loads) for name, seconds in loads.items()),
    ]
    for kind, name, seconds, results in rows:
        bare = results["torch.save" if kind == "save" else "torch.load"]
        print(
            f"  {kind} {name:<32} {_ms(seconds, statistics.median, bare)}  "
            f"{_ms(seconds, min, bare)}".rstrip()
        )
    for background, mode in ((False, "sync"), (True, "async")):
        floors = (
            ("torch.save", "torch"),
            ("torch.save + fsync", "torch+fsync"),
            ("torch.save, new file", "torch new"),
        )
        for floor, short in floors:
            bare = saves[floor]
            print(
                f"  {mode + ' save: training stalls':<37} "
                f"{_ms(stalls[background], statistics.median, bare, short)}  "
                f"{_ms(stalls[background], min, bare, short)}".rstrip()
            )
    print(f"  async save: the write ends after {statistics.median(totals) * 1e3:.0f} ms")
    extra = max(growth)
    print(
        f"  async save: extra CPU memory {held:.0f} MB = {held / setup.state_mb:.2f}x the state "
        f"(the copy it keeps); the process grew by at most {extra:.0f} MB while a write ran"
    )
    phases = setup.phases[False]
    names = sorted({name for phase in phases for name in phase}, key=lambda n: n.startswith("b"))
    where = ", ".join(
        f"{name} {statistics.median(phase.get(name, 0.0) for phase in phases) * 1e3:.0f} ms"
        for name in names
    )
    print(f"  sync save, medians of its parts: {where}")


def _ms(
    seconds: list[float],
    pick: Callable[[list[float]], float],
    bare: list[float],
    floor: str = "torch",
) -> str:
    """``pick`` of ``seconds`` in ms, and its ratio to the same ``pick`` of ``bare``."""
    return f"{pick(seconds) * 1e3:6.0f} ms  {pick(seconds) / pick(bare):5.2f}x {floor:<11}"


def main() -> None:
    torch.set_num_threads(2)
    places: list[str | None] = [None]
    if Path("/dev/shm").is_dir() and shutil.disk_usage("/dev/shm").free > 6e9:
        places.append("/dev/shm")
    chosen = sys.argv[1:] or list(SIZES)
    for place in places:
        for name in chosen:
            label, width, layers, repeats = SIZES[name]
            measure(label, width, layers, repeats, place)


if __name__ == "__main__":
    main()
