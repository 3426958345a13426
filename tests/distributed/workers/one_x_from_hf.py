"""A training script as accmt 1.x's README writes one for a transformers model, unchanged:
``AcceleratorModule.from_hf(name, "GPT2LMHeadModel")`` (here the folder of a tiny GPT-2 the
test saved, as nothing may be downloaded), whose steps return the model's loss. Run by
tests/distributed/test_one_x_programs.py through 'accmt launch': ``one_x_from_hf.py OUT MODEL``;
each process writes its result to <out>/rank<N>.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from torch.utils.data import Dataset

from accmt import AcceleratorModule, HyperParameters, Trainer
from accmt.utils import set_seed


class Tokens(Dataset):  # type: ignore[type-arg]
    """Sequences that repeat a short pattern: a causal model learns them in a few steps."""

    def __init__(self, n: int) -> None:
        starts = torch.randint(0, 8, (n, 1), generator=torch.Generator().manual_seed(n))
        self.ids = (starts + torch.arange(12)) % 32

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[index], "labels": self.ids[index]}


if __name__ == "__main__":
    out, model_folder = Path(sys.argv[1]), sys.argv[2]
    set_seed(0)
    module = AcceleratorModule.from_hf(model_folder, "GPT2LMHeadModel")
    trainer = Trainer(
        hps_config=HyperParameters(
            epochs=3, batch_size=8, optimizer="AdamW", optim_kwargs={"lr": 0.01}
        ),
        model_path=str(out / "model"),
        log_with=None,
    )
    state = trainer.fit(module, Tokens(64), Tokens(24))
    record = {
        "world": trainer.accelerator.num_processes,
        "rank": trainer.accelerator.process_index,
        "model": type(trainer.accelerator.unwrap_model(trainer.model)).__name__,
        "loss": state.additional_metrics["validation"]["loss"],
        "finished": state.finished,
    }
    (out / f"rank{record['rank']}.json").write_text(json.dumps(record))
