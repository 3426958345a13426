"""How long a Trainer checkpoint takes to save and to load, next to a bare torch.save and
torch.load of the same model and optimizer state dicts, for an MLP of about 100 MB.

./hatchw run python benchmarks/checkpoint_io.py

With AdamW's two moments the state is about three times the model. The checkpoint's save is
all of it: Accelerate's save_state (model, optimizer, scheduler, RNGs), the TrainingState,
callback states and loss windows, a sha256 of every file for the manifest, the rename and the
pointer. Its load is what a resume does before training on: choose the newest checkpoint and
verify its manifest (reading and hashing every file), check it fits the run, read the
TrainingState, callback states and loss windows, and Accelerate's load_state. The bare
baseline writes and reads ``{"model": ..., "optimizer": ...}`` and loads both state dicts.
Neither side fsyncs the large files; both leave them in the page cache.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import torch
from _timing import interleaved_medians, median_seconds
from torch.utils.data import TensorDataset

from accmt_trainer import AcceleratorModule, HyperParameters, Trainer
from accmt_trainer._checkpoints import _inventory

REPEATS = 5
WIDTH = 2560
LAYERS = 4  # 4 x (2560 x 2560 + 2560) float32 parameters: 105 MB


class Mlp(AcceleratorModule):
    def __init__(self) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(*(torch.nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS)))

    def training_step(self, batch: Any) -> torch.Tensor:
        (features,) = batch
        loss: torch.Tensor = self.model(features).square().mean()
        return loss


def trained(folder: Path) -> Trainer:
    """A Trainer after one AdamW step (so the optimizer holds its moments) and its checkpoint."""
    hps = HyperParameters.from_dict(
        {"epochs": 1, "batch_size": 8, "optimizer": "AdamW", "optimizer_kwargs": {"lr": 1e-4}}
    )
    trainer = Trainer(
        hps, folder, log_with=None, progress_bar=False, cpu=True, max_checkpoints=2,
        disable_model_saving=True,
    )  # fmt: skip
    trainer.fit(Mlp(), TensorDataset(torch.randn(8, WIDTH)))
    return trainer


def checkpoint_save(trainer: Trainer) -> None:
    trainer._last_checkpoint = None  # the same moment again: write it anyway
    trainer._checkpoint()


def checkpoint_load(trainer: Trainer) -> None:
    found = trainer._find_checkpoint()
    assert found is not None
    trainer._load_checkpoint_state(found[0])
    trainer.accelerator.load_state(str(found[0] / "accelerate"))


def bare_save(trainer: Trainer, path: Path) -> None:
    model = trainer.accelerator.unwrap_model(trainer.model)
    state = {"model": model.state_dict(), "optimizer": trainer.optimizer.state_dict()}
    torch.save(state, path)


def bare_load(trainer: Trainer, path: Path) -> None:
    state = torch.load(path)
    trainer.accelerator.unwrap_model(trainer.model).load_state_dict(state["model"])
    trainer.optimizer.load_state_dict(state["optimizer"])


def size_mb(path: Path) -> float:
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files) / 1e6


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        trainer = trained(Path(tmp) / "run")
        bare = Path(tmp) / "bare.pt"
        bare_save(trainer, bare)
        saves = interleaved_medians(
            {
                "Trainer checkpoint": lambda: checkpoint_save(trainer),
                "torch.save": lambda: bare_save(trainer, bare),
            },
            REPEATS,
        )
        loads = interleaved_medians(
            {
                "Trainer resume load": lambda: checkpoint_load(trainer),
                "torch.load": lambda: bare_load(trainer, bare),
            },
            REPEATS,
        )
        newest = trainer._checkpoints.complete()[-1]
        sizes = (size_mb(newest), size_mb(bare))
        hashing = median_seconds(lambda: _inventory(newest), REPEATS)
    model_mb = sum(p.numel() * p.element_size() for p in trainer.model.parameters()) / 1e6
    print(f"MLP of {model_mb:.0f} MB with AdamW; checkpoint {sizes[0]:.0f} MB on disk, "
          f"torch.save file {sizes[1]:.0f} MB")  # fmt: skip
    print(f"median of {REPEATS} interleaved runs each")
    for kind, medians in (("save", saves), ("load", loads)):
        (ours, ours_s), (bare_name, bare_s) = medians.items()
        print(f"  {kind}: {ours:<20} {ours_s * 1000:8.0f} ms   {bare_name:<11} "
              f"{bare_s * 1000:8.0f} ms   ratio {ours_s / bare_s:5.2f}x")  # fmt: skip
    print(f"  of which the sha256 of every file (once in a save, once in a load): "
          f"{hashing * 1000:.0f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
