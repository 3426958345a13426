"""How long a Trainer checkpoint takes to save and to load, next to a bare torch.save /
torch.load and Accelerate's save_state / load_state of the same state, for about 100 MB and
about 1 GB of model plus AdamW state; and what a background checkpoint costs the training
thread.

./hatchw run python benchmarks/checkpoint_io.py

The checkpoint's save is all of it: Accelerate's save_state (model, optimizer, RNGs), the
TrainingState, callback states, loss windows, the xxh3 digest of every file for the manifest,
the rename and the pointer. Its load is what a resume does before training: choose the newest
checkpoint and verify it (digests and kinds of every file), read the state and the parts, and
Accelerate's load_state. The bare baseline writes and reads ``{"model", "optimizer"}``
(``weights_only=True``) and loads both state dicts. None of them fsyncs the large files;
each save starts after an ``os.sync()``, untimed, so that the kernel's writeback of the
previous save's gigabyte does not land on whichever save comes next.
A background save (``checkpoint_async=True``) stalls the caller only for a copy of the state
into CPU memory; the extra memory is that copy, measured as the process's RSS growth.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import torch
from _timing import interleaved_samples
from accelerate import Accelerator
from accelerate.state import AcceleratorState

from accmt_callbacks import CallbackHandler
from accmt_state import TrainingState
from accmt_trainer._checkpoints import Checkpoints

SIZES = {"~100 MB": (1536, 4, 5), "~1 GB": (2560, 13, 7)}  # width, layers, repeats
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
    def __init__(self, width: int, layers: int, folder: Path) -> None:
        torch.manual_seed(0)
        self.accelerator = Accelerator(cpu=True)
        model = torch.nn.Sequential(*(torch.nn.Linear(width, width) for _ in range(layers)))
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        self.model, self.optimizer = self.accelerator.prepare(model, optimizer)
        self.model(torch.randn(2, width)).square().mean().backward()
        self.optimizer.step()
        self.state = TrainingState()
        self.callbacks = CallbackHandler()
        self.callbacks.bind(state=self.state)
        self.folder = folder
        self.run = {"world_size": 1, "train_batch_size": 8, "grad_accumulation_steps": 1,
                    "batches_per_epoch": 1, "format": 2, "versions": {}}  # fmt: skip
        self.index = 0
        self._checkpoints: dict[bool, Checkpoints] = {}
        self.state_mb = sum(
            t.numel() * t.element_size()
            for t in [*self.model.state_dict().values(),
                      *(v for s in self.optimizer.state_dict()["state"].values()
                        for v in s.values() if isinstance(v, torch.Tensor))]
        ) / 1e6  # fmt: skip

    def checkpoints(self, background: bool) -> Checkpoints:
        # One per mode, as in a run: a background one reuses its copy's buffers.
        if background not in self._checkpoints:
            self._checkpoints[background] = Checkpoints(
                self.folder / "checkpoints", self.accelerator, max_checkpoints=2,
                background=background,
            )  # fmt: skip
        return self._checkpoints[background]

    def save(self, background: bool) -> tuple[float, float, float]:
        """(seconds until the caller may train on, seconds until the checkpoint is in place,
        MB of RSS the process grew by while the write was in flight)"""
        checkpoints = self.checkpoints(background)
        self.index += 1
        before = rss_mb()
        start = time.perf_counter()
        checkpoints.save(self.index, self.run, self.state, self.callbacks, {"window": {}},
                         snapshot_of=([self.model], self.optimizer, None))  # fmt: skip
        stalled = time.perf_counter() - start
        grown = rss_mb() - before
        checkpoints.wait()
        return stalled, time.perf_counter() - start, grown

    def load(self) -> None:
        checkpoints = self.checkpoints(False)
        folder = checkpoints.find(None, self.run)
        assert folder is not None
        checkpoints.load(folder, self.run)
        checkpoints.load_rest(folder, self.callbacks)
        checkpoints.load_accelerate(folder)

    def torch_save(self) -> None:
        model = self.accelerator.unwrap_model(self.model)
        state = {"model": model.state_dict(), "optimizer": self.optimizer.state_dict()}
        torch.save(state, self.folder / "bare.pt")

    def torch_load(self) -> None:
        state = torch.load(self.folder / "bare.pt", weights_only=True)
        self.accelerator.unwrap_model(self.model).load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])

    def accelerate_save(self) -> None:
        self.accelerator.save_state(str(self.folder / "accelerate"))

    def accelerate_load(self) -> None:
        self.accelerator.load_state(str(self.folder / "accelerate"))


def measure(label: str, width: int, layers: int, repeats: int, place: str | None) -> None:
    with tempfile.TemporaryDirectory(dir=place) as tmp:
        setup = Setup(width, layers, Path(tmp))
        setup.torch_save()
        setup.accelerate_save()
        setup.save(background=False)
        saves = interleaved_samples({
            "accmt checkpoint": lambda: setup.save(background=False),
            "torch.save": setup.torch_save,
            "Accelerate save_state": setup.accelerate_save,
        }, repeats, before=os.sync)  # fmt: skip
        loads = interleaved_samples({
            "accmt resume load": setup.load,
            "torch.load": setup.torch_load,
            "Accelerate load_state": setup.accelerate_load,
        }, repeats)  # fmt: skip
        stalls, totals, growth = [], [], []
        for _ in range(repeats):
            os.sync()
            stalled, total, grown = setup.save(background=True)
            stalls.append(stalled)
            totals.append(total)
            growth.append(grown)
        held = tensor_mb(setup.checkpoints(True)._buffers)
        AcceleratorState._reset_state(reset_partial_state=True)
    print(f"{label} in {PLACES[place]}: model + AdamW state {setup.state_mb:.0f} MB; "
          f"{repeats} interleaved runs")  # fmt: skip
    print(f"  {'':<27} {'median':>8}  {'ratio':>11}  {'fastest':>8}  {'ratio':>11}")
    for kind, results, bare in (("save", saves, "torch.save"), ("load", loads, "torch.load")):
        for name, seconds in results.items():
            print(f"  {kind} {name:<22} {_ms(seconds, statistics.median, results[bare])}  "
                  f"{_ms(seconds, min, results[bare])}")  # fmt: skip
    bare_save = saves["torch.save"]
    print(f"  {'async save: training stalls':<27} {_ms(stalls, statistics.median, bare_save)}  "
          f"{_ms(stalls, min, bare_save)}; the write ends after "
          f"{statistics.median(totals) * 1e3:.0f} ms")  # fmt: skip
    extra = max(growth)
    print(
        f"  async save: extra CPU memory {held:.0f} MB = {held / setup.state_mb:.2f}x the state "
        f"(the copy it keeps); the process grew by at most {extra:.0f} MB while a write ran"
    )


def _ms(seconds: list[float], pick: Callable[[list[float]], float], bare: list[float]) -> str:
    """``pick`` of ``seconds`` in ms, and its ratio to the same ``pick`` of ``bare``."""
    return f"{pick(seconds) * 1e3:6.0f} ms  {pick(seconds) / pick(bare):5.2f}x torch"


def main() -> None:
    torch.set_num_threads(2)
    places = [None]
    if Path("/dev/shm").is_dir() and shutil.disk_usage("/dev/shm").free > 6e9:
        places.append("/dev/shm")
    for place in places:
        for label, (width, layers, repeats) in SIZES.items():
            measure(label, width, layers, repeats, place)


if __name__ == "__main__":
    main()
