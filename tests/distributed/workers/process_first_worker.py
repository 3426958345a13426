"""Run by tests/distributed/test_process_first.py through a launcher: ``process_first_worker.py
OUT``. As a training script starts: ``with main_process_first():`` the main process prepares a
file the others read, before any Accelerator or process group exists and before torch is
imported; then a Trainer trains on the job's processes. Each process writes what it saw to
OUT/rank<R>.json."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from accmt_decorators import current_process, main_process_first


def prepare(out: Path) -> dict[str, object]:
    """What the README shows: the main process prepares the data, the others then read it."""
    with main_process_first():
        entered = time.time()
        prepared = out / "prepared.txt"
        if current_process().is_main_process:
            time.sleep(0.5)  # the others would read nothing if they came in now
            prepared.write_text("made by the main process")
        seen = prepared.read_text()
        left = time.time()
    return {"entered": entered, "left": left, "seen": seen}


def train(out: Path) -> dict[str, object]:
    import torch
    from torch.utils.data import TensorDataset

    from accmt_trainer import AcceleratorModule, HyperParameters, Trainer

    class Classifier(AcceleratorModule):
        def __init__(self) -> None:
            self.model = torch.nn.Linear(2, 3)

        def training_step(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
            return torch.nn.functional.cross_entropy(self.model(batch[0]), batch[1])

    generator = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(32, 2, generator=generator), torch.randint(0, 3, (32,)))
    hps = HyperParameters(epochs=1, batch_size=8, optimizer="SGD", optimizer_kwargs={"lr": 0.1})
    trainer = Trainer(hps, out / "run", log_with=None, progress_bar=False)
    module = Classifier()
    state = trainer.fit(module, data)
    return {
        "steps": state.global_step,
        "processes": trainer.accelerator.num_processes,
        "weights": [round(float(value), 6) for value in module.model.weight.detach().flatten()],
    }


def main(out: Path) -> None:
    torch_before = "torch" in sys.modules
    record: dict[str, object] = {"torch_before": torch_before, **prepare(out)}
    process = current_process()
    distributed = sys.modules["torch.distributed"]
    record.update(process=process._asdict(), backend=str(distributed.get_backend()))
    record.update(train(out))
    (out / f"rank{process.process_index}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
