"""Trainer.predict's throughput, against a plain Accelerate inference loop.

    ./hatchw run python benchmarks/predict.py             # one process
    torchrun --nproc_per_node 2 benchmarks/predict.py     # two (gloo on the CPU)

Both run the same MLP over the same SAMPLES samples in batches of BATCH and end with every
sample's logits, in dataset order, on every process. The plain loop is Accelerate's documented
one: ``prepare``, then ``gather_for_metrics`` of each batch's logits and one ``torch.cat``.
``Trainer.predict`` makes its own Accelerator each call (a user's call pays for it too). The
two are timed in turn for ROUNDS rounds; the figures are medians, and the ratio is samples per
second of predict over the plain loop's (at least 0.95 is the goal). Pinned to one thread.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from typing import Any

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset

from accmt_trainer import AcceleratorModule, HyperParameters, Trainer

SAMPLES = 40_000
BATCH = 256
ROUNDS = 9


def data() -> TensorDataset:
    generator = torch.Generator().manual_seed(0)
    return TensorDataset(torch.randn(SAMPLES, 64, generator=generator))


def mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))


class Predictor(AcceleratorModule):
    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model

    def predict_step(self, batch: Any) -> torch.Tensor:
        logits: torch.Tensor = self.model(batch[0])
        return logits


def plain_accelerate(accelerator: Accelerator, model: torch.nn.Module, dataset: Any) -> Any:
    prepared = accelerator.prepare_model(model, evaluation_mode=True)
    loader = accelerator.prepare_data_loader(DataLoader(dataset, batch_size=BATCH))
    outputs = []
    with torch.no_grad():
        for (features,) in loader:
            outputs.append(accelerator.gather_for_metrics(prepared(features)))
    return torch.cat(outputs)


def main() -> None:
    torch.set_num_threads(1)
    dataset, model = data(), mlp()
    accelerator = Accelerator(cpu=True)
    hps = HyperParameters(batch_size=BATCH)
    with tempfile.TemporaryDirectory() as folder:
        trainer = Trainer(hps, folder, log_with=None, progress_bar=False, cpu=True)
        module = Predictor(model)
        runs = {
            "plain Accelerate": lambda: plain_accelerate(accelerator, model, dataset),
            "Trainer.predict": lambda: trainer.predict(module, dataset),
        }
        same = torch.equal(runs["plain Accelerate"]().cpu(), runs["Trainer.predict"]())
        seconds: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(ROUNDS):
            for name, run in runs.items():
                start = time.perf_counter()
                run()
                seconds[name].append(time.perf_counter() - start)
    if accelerator.is_main_process:
        print(f"{accelerator.num_processes} process(es), {SAMPLES} samples, batch {BATCH}")
        print(f"same outputs: {same}")
        medians = {name: statistics.median(values) for name, values in seconds.items()}
        for name, median in medians.items():
            print(f"{name:>17}: {median * 1e3:8.1f} ms median, {SAMPLES / median:10.0f} samples/s")
        ratio = medians["plain Accelerate"] / medians["Trainer.predict"]
        print(f"predict throughput / plain Accelerate: {ratio:.3f}x (goal: at least 0.95x)")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
