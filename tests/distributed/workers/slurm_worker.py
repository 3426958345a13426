"""Run by tests/distributed/test_slurm.py as ``srun --ntasks=2 python slurm_worker.py OUT``
would run it: two plain processes, no launcher, only SLURM's variables. Each process:

1. reads its place from SLURM's variables alone, without importing torch;
2. trains a Trainer, whose Accelerator forms the 2-process job from them (its group torn down
   when the fit ends: the fit made it);
3. goes back to the environment it started with (as a fresh task would see it), and enters
   ``main_process_first``, whose barrier forms the job again from SLURM's variables.

Each writes what it saw to OUT/rank<R>.json."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from accmt_decorators import current_process, main_process_first

TORCH_NAMES = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK")
THREADS = ("LOCAL_WORLD_SIZE", "OMP_NUM_THREADS")


def train(out: Path) -> dict[str, object]:
    import torch
    from torch.utils.data import TensorDataset

    from accmt_trainer import AcceleratorModule, HyperParameters, Trainer

    class Classifier(AcceleratorModule):
        def __init__(self) -> None:
            torch.manual_seed(0)
            self.model = torch.nn.Linear(2, 3)

        def training_step(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
            return torch.nn.functional.cross_entropy(self.model(batch[0]), batch[1])

    generator = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(32, 2, generator=generator), torch.randint(0, 3, (32,)))
    hps = HyperParameters(epochs=1, batch_size=8, optimizer="SGD", optimizer_kwargs={"lr": 0.1})
    trainer = Trainer(hps, out / "run", log_with=None, progress_bar=False, seed=0)
    module = Classifier()
    state = trainer.fit(module, data)
    return {
        "steps": state.global_step,
        "processes": trainer.accelerator.num_processes,
        "weights": [round(float(v), 6) for v in module.model.weight.detach().flatten()],
        "threads": torch.get_num_threads(),
        "group_left": torch.distributed.is_initialized(),
    }


def prepare(out: Path) -> dict[str, object]:
    with main_process_first():
        entered = time.time()
        prepared = out / "prepared.txt"
        if current_process().is_main_process:
            time.sleep(0.5)  # the other would read nothing if it came in now
            prepared.write_text("made by the main process")
        seen = prepared.read_text()
        left = time.time()
    distributed = sys.modules["torch.distributed"]
    return {
        "entered": entered,
        "left": left,
        "seen": seen,
        "process_after_barrier": current_process()._asdict(),
        "world_after_barrier": distributed.get_world_size(),
    }


def main(out: Path) -> None:
    started_with = dict(os.environ)
    record: dict[str, object] = {"process": current_process()._asdict()}
    record["torch_before"] = "torch" in sys.modules
    record.update(train(out))
    record["exported"] = {
        name: os.environ[name] for name in (*TORCH_NAMES, *THREADS) if name not in started_with
    }
    os.environ.clear()
    os.environ.update(started_with)
    record.update(prepare(out))
    rank = record["process"]["process_index"]  # type: ignore[index]
    (out / f"rank{rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
