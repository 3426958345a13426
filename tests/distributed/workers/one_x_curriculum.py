"""A training script with accmt 1.x's curriculum learning, unchanged: accmt.curriculum's
StepsCurriculum, RatioCurriculum and RangeCurriculum, and Trainer.fit given a list of
(max_step, dataset) stages, each with max_steps in the HyperParameters as 1.x required. The
four describe the same stages (steps 1-6 on the first dataset, 7-15 on the second, 16-20 on the
third); the command line names the forms, fitted one after another in the same job (each fit
a fresh Trainer and module). Run by tests/distributed/test_one_x_programs.py through 'accmt
launch'; each process writes which stage's samples each optimizer step trained on to
<out>/<form>/rank<N>.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import TensorDataset

from accmt import AcceleratorModule, HyperParameters, Trainer
from accmt.curriculum import RangeCurriculum, RatioCurriculum, StepsCurriculum
from accmt.utils import set_seed


class StagedModule(AcceleratorModule):
    def __init__(self) -> None:
        self.model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 3))
        self.stages_by_step = {}

    def training_step(self, batch):  # type: ignore[no-untyped-def]
        x, y, stage = batch
        step = self.state.global_step + 1
        self.stages_by_step.setdefault(step, set()).update(stage.tolist())
        return F.cross_entropy(self.model(x), y)


def blobs(n: int, seed: int, stage: int) -> TensorDataset:
    generator = torch.Generator().manual_seed(seed)
    centres = torch.tensor([[2.0, 0.0], [-2.0, 1.0], [0.0, -2.5]])
    labels = torch.randint(0, 3, (n,), generator=generator)
    features = centres[labels] + torch.randn(n, 2, generator=generator)
    return TensorDataset(features, labels, torch.full((n,), stage))


def curricula():  # type: ignore[no-untyped-def]
    easy, medium, hard = blobs(48, 1, 0), blobs(120, 2, 1), blobs(40, 3, 2)
    steps = StepsCurriculum()
    steps.add(easy, 6)
    steps.add(medium, 9, {"shuffle": False})
    steps.add(hard, -1)
    ratios = RatioCurriculum()
    ratios.add(easy, 0.3)
    ratios.add(medium, 0.45)
    ratios.add(hard, -1)
    ranges = RangeCurriculum()
    ranges.add(easy, range(6))
    ranges.add(medium, range(6, 15))
    ranges.add(hard, range(15, 20))
    listed = [(6, easy), (15, medium, {"shuffle": False}), (-1, hard)]
    return {"steps": steps, "ratio": ratios, "range": ranges, "list": listed}


def fit(out: Path, form: str) -> None:
    set_seed(0)
    module = StagedModule()
    trainer = Trainer(
        hps_config=HyperParameters(
            epochs=1, max_steps=20, batch_size=8, optimizer="AdamW", optim_kwargs={"lr": 0.01}
        ),
        model_path=str(out / "model"),
        grad_accumulation_steps=2,
        log_with=None,
    )
    state = trainer.fit(module, curricula()[form])
    record = {
        "world": trainer.accelerator.num_processes,
        "rank": trainer.accelerator.process_index,
        "stages_by_step": {str(k): sorted(v) for k, v in module.stages_by_step.items()},
        "global_step": state.global_step,
        "epochs": state.epoch,
        "finished": state.finished,
    }
    (out / f"rank{record['rank']}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    for form in sys.argv[2:]:
        fit(Path(sys.argv[1]) / form, form)
