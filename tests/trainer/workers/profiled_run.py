"""A profiled fit whose steps give ``num_items``, and readers of what it wrote.

``profiled_run.py FOLDER START STOP`` (alone, or under torchrun): one epoch of 64 samples in
batches of 8, with ``profile_steps=(START, STOP)`` and ``Monitor(throughput=True)``, logging
every 2 optimizer steps. Each process writes ``FOLDER/items_<process>.json``, its
batches' items in order; the main process writes ``FOLDER/logs.json``, each log's step and
values. The traces go to ``FOLDER/logs/run/profile``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import TensorDataset

from accmt_trainer import AcceleratorModule, HyperParameters, Monitor, Trainer

BATCH = 8


def blobs(n: int) -> TensorDataset:
    """Three Gaussian blobs (as the tests' conftest makes them)."""
    generator = torch.Generator().manual_seed(0)
    centres = torch.tensor([[2.0, 0.0], [-2.0, 1.0], [0.0, -2.5]])
    labels = torch.randint(0, 3, (n,), generator=generator)
    return TensorDataset(centres[labels] + 0.6 * torch.randn(n, 2, generator=generator), labels)


class CountedItems(AcceleratorModule):
    """A loss summed over the samples whose label is not 0 (a different number in each batch,
    given as a tensor), noting each batch's items and when its step started."""

    def __init__(self) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(
            torch.nn.Linear(2, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)
        )
        self.batches: list[tuple[float, int]] = []  # (start time, items)

    def training_step(self, batch: Any) -> dict[str, Any]:
        started = time.perf_counter()
        features, labels = batch
        counted = labels != 0
        losses = torch.nn.functional.cross_entropy(self.model(features), labels, reduction="none")
        self.batches.append((started, int(counted.sum())))
        time.sleep(0.002)  # a window lasts milliseconds, well above the clock's resolution
        return {"loss": (losses * counted).sum(), "num_items": counted.sum()}


def profiled_fit(
    folder: Path,
    steps: tuple[int, int] | None,
    module: AcceleratorModule | None = None,
    logged: list[dict[str, Any]] | None = None,
    **options: Any,
) -> Trainer:
    """One epoch of 64 samples in batches of 8 (8 optimizer steps on one process, 4 on two),
    profiled over ``steps``; the logging folder is ``folder/logs``, the run's name ``run``.
    ``logged`` gets each training log's values and step (the trackers get them too)."""
    hps = HyperParameters(epochs=1, batch_size=BATCH, optimizer="SGD", optimizer_kwargs={"lr": 0.1})
    quiet = {"log_with": None, "progress_bar": False, "cpu": True, "checkpoint_every": None}
    trainer = Trainer(
        hps,
        folder / "model",
        track_name="run",
        logging_dir=folder / "logs",
        disable_model_saving=True,
        profile_steps=steps,
        **{**quiet, **options},
    )
    if logged is not None:
        send = trainer.log

        def log(values: Any, step: int | None = None) -> None:
            if "train/loss" in values:
                logged.append({"step": trainer.state.global_step, **values})
            send(values, step)

        trainer.log = log  # type: ignore[method-assign]
    trainer.fit(module or CountedItems(), blobs(64))
    return trainer


def traces(folder: Path) -> list[Path]:
    """The traces a profiled fit in ``folder`` wrote, by name."""
    return sorted((folder / "logs" / "run" / "profile").glob("*.pt.trace.json"))


def optimizer_steps_in(trace: Path) -> dict[str, Any]:
    """Read as a Chrome trace (JSON with ``traceEvents``): how many optimizer steps ran in it
    (torch's optimizers mark each ``Optimizer.step#<class>.step``), and the profiler's step
    marks (``ProfilerStep#<n>``)."""
    events = json.loads(trace.read_text())["traceEvents"]
    complete = [event for event in events if event.get("ph") == "X"]
    names = [event["name"] for event in complete]
    assert all(isinstance(event["ts"], (int, float)) for event in complete)
    return {
        "optimizer": sum(name.startswith("Optimizer.step#") for name in names),
        "marked": sorted(name for name in names if name.startswith("ProfilerStep#")),
    }


def main() -> None:
    folder, start, stop = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    module, logged = CountedItems(), []
    options = {"monitor": Monitor(throughput=True), "log_every": 2}
    trainer = profiled_fit(folder, (start, stop), module, logged, **options)
    rank = trainer.accelerator.process_index
    (folder / f"items_{rank}.json").write_text(json.dumps([items for _, items in module.batches]))
    if rank == 0:
        (folder / "logs.json").write_text(json.dumps(logged))


if __name__ == "__main__":
    main()
