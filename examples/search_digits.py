"""Search a digit classifier's hyperparameters with accmt-search, on scikit-learn's digits.

    python examples/search_digits.py                    # one process; run it again to continue
    torchrun --nproc_per_node 2 examples/search_digits.py --output runs/search_digits_2p
    optuna-dashboard sqlite:///runs/search_digits/study.db    # watch the study live

Each trial builds a fresh model with the sampled hidden size and dropout, trains it with the
sampled learning rate, batch size and schedule in ``<output>/trial_<number>/``, and reports its
validation accuracy after every epoch; the median pruner stops trials that fall behind. The
study lives in ``<output>/study.db``: kill the search and start it again, and it finishes the
trials left (a cut-off trial resumes from its checkpoint). At the end, ``<output>`` holds
``trials.csv``, ``best_hps.yaml`` (for ``Trainer``) and ``plots/``.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

import torch
from train_digits import digits  # the same data and split as the Trainer's example

from accmt import AcceleratorModule, Accuracy, HyperParameterSearch, on_main_process


class DigitClassifier(AcceleratorModule):
    def __init__(self, hidden: int = 128, dropout: float = 0.1) -> None:
        self.model = torch.nn.Sequential(
            torch.nn.Linear(64, hidden),
            torch.nn.ReLU(),
            torch.nn.Dropout(dropout),
            torch.nn.Linear(hidden, 10),
        )

    def training_step(self, batch: Any) -> torch.Tensor:
        images, labels = batch
        return torch.nn.functional.cross_entropy(self.model(images), labels)

    def validation_step(self, key: str, batch: Any) -> dict[str, Any]:
        images, labels = batch
        logits = self.model(images)
        loss = torch.nn.functional.cross_entropy(logits, labels)
        return {"loss": loss, "accuracy": (logits.argmax(dim=-1), labels)}


@on_main_process
def report(result: Any) -> None:
    # The search has logged the table of the best trials; what to do with the best.
    print(f"best validation accuracy: {result.value:.4f} (trial {result.trial_number})")
    module = ", ".join(f"{name}={value:.3g}" for name, value in result.module_kwargs.items())
    hps = result.output_dir / "best_hps.yaml"
    print(f"train it again: Trainer('{hps}', ...) on DigitClassifier({module})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=Path("runs/search_digits"))
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--epochs", type=int, default=8)
    args = parser.parse_args()
    # The search logs its table of the best trials at INFO, on the "accmt_search" logger.
    logging.basicConfig(format="%(message)s")
    logging.getLogger("accmt_search").setLevel(logging.INFO)

    train, valid = digits()
    search = HyperParameterSearch(
        DigitClassifier, train, valid, metrics=[Accuracy()], output_dir=args.output, seed=0
    )
    # The same space could come from a YAML file's search: section, or a space(trial) function.
    search.set_space(
        {
            "epochs": args.epochs,
            "optimizer": "AdamW",
            "optimizer_kwargs.lr": {"type": "float", "low": 1e-4, "high": 3e-2, "log": True},
            "optimizer_kwargs.weight_decay": {"type": "float", "low": 0.0, "high": 0.05},
            # (train, evaluation) batch sizes, stored in the study by their labels.
            "batch_size": {
                "type": "categorical",
                "choices": {"32": [32, 256], "64": [64, 256], "128": [128, 256]},
            },
            "scheduler": {
                "type": "categorical",
                "choices": ["LinearWithWarmup", "CosineWithWarmup"],
            },
            "scheduler_kwargs.warmup_ratio": 0.1,
            "module.hidden": {"type": "int", "low": 32, "high": 256, "step": 32},
            "module.dropout": {"type": "float", "low": 0.0, "high": 0.5},
        }
    )
    result = search.optimize(
        lambda metrics: metrics["validation"]["accuracy"], "maximize", n_trials=args.trials
    )
    report(result)


if __name__ == "__main__":
    main()
