"""accmt-search on scikit-learn's digits: what pruning saves, and what the search costs a trial.

    ./hatchw run python benchmarks/search.py [--trials 24] [--epochs 10] [--seeds 3]

1. Pruning. The same seeded search (TPE; learning rate 1e-5..1e-1 on a log scale, batch size,
   hidden size, dropout; EPOCHS epochs a trial, maximising validation accuracy) runs twice per
   seed: with the default pruner (median, from the second evaluation, after 3 trials) and with
   none. Printed side by side: optimizer steps trained by all trials, and the best validation
   accuracy of a completed trial; then the medians over seeds. Goal: pruning saves at least
   40% of the steps, with a best accuracy within 0.5 points.
2. Overhead. One configuration, trained by a plain ``Trainer.fit`` (module built, Trainer made,
   fit) and as every trial of a search whose space has that one configuration, in turn, in one
   process. A trial's time runs from its start to the next trial's start (ask, sampling,
   training with a report to the study after each epoch, tell, bookkeeping). Medians over
   blocks, the first of each kind dropped (warm-up). Two sizes of model: a small MLP whose
   epoch takes tens of milliseconds (where the study's SQLite commits show), and a wide one
   whose epoch takes about a second. Goal: under 5%.

One thread; no trackers, no plots, no progress bars.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import optuna
import torch
from accelerate.state import AcceleratorState
from sklearn.datasets import load_digits
from torch.utils.data import TensorDataset

from accmt_metrics import Accuracy
from accmt_search import HyperParameterSearch
from accmt_trainer import AcceleratorModule, HyperParameters, Trainer

OPTIONS: dict[str, Any] = {"log_with": None, "progress_bar": False, "seed": 0}


def digits() -> tuple[TensorDataset, TensorDataset]:
    images, labels = load_digits(return_X_y=True)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(0))
    features = torch.tensor(images, dtype=torch.float32)[order] / 16.0
    targets = torch.tensor(labels, dtype=torch.long)[order]
    cut = int(0.8 * len(targets))
    return TensorDataset(features[:cut], targets[:cut]), TensorDataset(
        features[cut:], targets[cut:]
    )


class Classifier(AcceleratorModule):
    def __init__(self, hidden: int = 128, dropout: float = 0.0, layers: int = 1) -> None:
        blocks: list[torch.nn.Module] = []
        width = 64
        for _ in range(layers):
            blocks += [torch.nn.Linear(width, hidden), torch.nn.ReLU(), torch.nn.Dropout(dropout)]
            width = hidden
        self.model = torch.nn.Sequential(*blocks, torch.nn.Linear(width, 10))

    def training_step(self, batch: Any) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(self.model(batch[0]), batch[1])

    def validation_step(self, key: str, batch: Any) -> dict[str, Any]:
        logits = self.model(batch[0])
        loss = torch.nn.functional.cross_entropy(logits, batch[1])
        return {"loss": loss, "accuracy": (logits.argmax(dim=-1), batch[1])}


def accuracy(metrics: Any) -> float:
    return float(metrics["validation"]["accuracy"])


def reset() -> None:
    AcceleratorState._reset_state(reset_partial_state=True)


# ------------------------------------------------------------------------------ pruning


def search_once(data: Any, folder: Path, trials: int, epochs: int, seed: int, prune: bool) -> Any:
    search = HyperParameterSearch(
        Classifier, *data, metrics=[Accuracy()], output_dir=folder, **{**OPTIONS, "seed": seed}
    )
    search.set_space({
        "epochs": epochs,
        "learning_rate": {"type": "float", "low": 1e-5, "high": 1e-1, "log": True},
        "train_batch_size": [32, 64, 128],
        "eval_batch_size": 512,
        "module.hidden": {"type": "int", "low": 16, "high": 256, "log": True},
        "module.dropout": {"type": "float", "low": 0.0, "high": 0.5},
    })  # fmt: skip
    pruner = None if prune else optuna.pruners.NopPruner()
    with contextlib.redirect_stdout(io.StringIO()):  # each search's table of best trials
        result = search.optimize(accuracy, "maximize", n_trials=trials, pruner=pruner,
                                 plots=False, progress_bar=False)  # fmt: skip
    assert search.study is not None
    steps = sum(t.user_attrs["accmt_search"]["optimizer_steps"] for t in search.study.trials)
    pruned = sum(t.state == optuna.trial.TrialState.PRUNED for t in search.study.trials)
    reset()
    return steps, result.value, pruned


def pruning(data: Any, root: Path, trials: int, epochs: int, seeds: int) -> None:
    print(f"== pruning: {trials} trials of {epochs} epochs, per seed", flush=True)
    print(f"{'seed':>4}  {'steps pruned':>12}  {'steps full':>10}  {'saved':>6}  "
          f"{'best acc pruned':>15}  {'best acc full':>13}  {'gap (points)':>12}  "
          "pruned trials")  # fmt: skip
    saved, gaps = [], []
    for seed in range(seeds):
        with_pruning = search_once(data, root / f"pruned_{seed}", trials, epochs, seed, True)
        without = search_once(data, root / f"full_{seed}", trials, epochs, seed, False)
        saved.append(1 - with_pruning[0] / without[0])
        gaps.append(100 * (without[1] - with_pruning[1]))
        print(f"{seed:>4}  {with_pruning[0]:>12}  {without[0]:>10}  {saved[-1]:>6.1%}  "
              f"{with_pruning[1]:>15.4f}  {without[1]:>13.4f}  {gaps[-1]:>12.2f}  "
              f"{with_pruning[2]}/{trials}", flush=True)  # fmt: skip
    print(f"median: steps saved {statistics.median(saved):.1%} (goal >= 40%), best accuracy "
          f"{statistics.median(gaps):.2f} points below without pruning (goal <= 0.5)")  # fmt: skip


# ----------------------------------------------------------------------------- overhead


def plain_fit(data: Any, folder: Path, hps: HyperParameters, module: dict[str, Any]) -> float:
    start = time.perf_counter()
    torch.manual_seed(0)
    trainer = Trainer(hps, folder, metrics=[Accuracy()], disable_model_saving=True,
                      max_checkpoints=1, **OPTIONS)  # fmt: skip
    trainer.fit(Classifier(**module), *data)
    shutil.rmtree(folder / "checkpoints", ignore_errors=True)
    elapsed = time.perf_counter() - start
    reset()
    return elapsed


def search_trials(
    data: Any, folder: Path, hps: HyperParameters, module: dict[str, Any], trials: int
) -> list[float]:
    """Each trial's time, from its start to the next one's start."""
    search = HyperParameterSearch(
        Classifier, *data, metrics=[Accuracy()], output_dir=folder, **OPTIONS
    )
    search.set_space({
        "epochs": hps.epochs,
        "batch_size": hps.batch_size,
        "learning_rate": {"type": "categorical", "choices": [hps.optimizer_kwargs["lr"]]},
        **{f"module.{name}": value for name, value in module.items()},
    })  # fmt: skip
    with contextlib.redirect_stdout(io.StringIO()):
        search.optimize(accuracy, "maximize", n_trials=trials, pruner=optuna.pruners.NopPruner(),
                        plots=False, progress_bar=False)  # fmt: skip
    assert search.study is not None
    starts = [t.datetime_start.timestamp() for t in search.study.trials]  # type: ignore[union-attr]
    # The last trial runs until optimize's loop sees the study full (before the CSV and table).
    last = search.study.trials[-1].datetime_complete.timestamp()  # type: ignore[union-attr]
    reset()
    return [b - a for a, b in zip(starts, [*starts[1:], last], strict=True)]


def overhead(data: Any, root: Path, name: str, epochs: int, module: dict[str, Any]) -> None:
    hps = HyperParameters(epochs=epochs, batch_size=(32, 512), optimizer="AdamW",
                          optimizer_kwargs={"lr": 3e-3})  # fmt: skip
    plain: list[float] = []
    trials: list[float] = []
    for block in range(3):
        plain += [plain_fit(data, root / f"plain_{name}", hps, module) for _ in range(3)]
        trials += search_trials(data, root / f"search_{name}_{block}", hps, module, 4)[1:]
    plain = plain[1:]
    fit, trial = statistics.median(plain), statistics.median(trials)
    print(f"{name:>6}  {epochs:>6}  {fit:>12.3f}  {trial:>13.3f}  {trial / fit - 1:>+9.1%}  "
          f"{(trial - fit) * 1000 / epochs:>22.1f}", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=24)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    data = digits()
    root = Path(tempfile.mkdtemp(prefix="accmt-search-bench-"))
    try:
        pruning(data, root, args.trials, args.epochs, args.seeds)
        print("== overhead: a search trial against a plain Trainer.fit of the same configuration")
        print(f"{'model':>6}  {'epochs':>6}  {'plain fit s':>12}  {'search trial s':>13}  "
              f"{'overhead':>9}  {'extra ms per epoch':>22}")  # fmt: skip
        overhead(data, root, "small", 5, {"hidden": 128})
        overhead(data, root, "wide", 3, {"hidden": 1024, "layers": 3})
        print("goal: overhead < 5%")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
