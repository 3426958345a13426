"""accmt-search on scikit-learn's digits: what pruning saves, and what the search costs a trial.

    ./hatchw run python benchmarks/search.py [--trials 24] [--epochs 10] [--seeds 3]

1. Pruning. The same seeded search (TPE; learning rate 1e-5..1e-1 on a log scale, batch size,
   hidden size, dropout; EPOCHS epochs a trial, maximising validation accuracy) runs per seed
   with no pruner, with the search's default pruner (median, from the second evaluation,
   after 3 trials) and with optuna's HyperbandPruner (optuna's advice for TPE). Printed side by
   side: optimizer steps trained by all trials, and the best validation accuracy of a completed
   trial (360 validation images: one image is 0.28 points); then the medians over seeds. Goal:
   pruning saves at least 40% of the steps, with a best accuracy within 0.5 points.
2. Overhead. One configuration, trained by a plain ``Trainer.fit`` (module built, Trainer made,
   fit) and as a trial of a search whose space holds only that configuration, one after the
   other, ROUNDS times, in one process (each round runs the search to one more trial). A
   trial's time runs from optuna's ask to its tell: sampling, the module and fit, a report to
   the study after each epoch, the record. Also printed: the part of that time spent outside
   the module and fit. Medians, the first round dropped (warm-up). Two sizes of model: a small
   MLP whose epoch takes tens of milliseconds (where the study's SQLite commits show), and a
   wide one whose epoch takes about a second. Goal: under 5%.

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
ROUNDS = 9


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


def pruners(epochs: int) -> dict[str, optuna.pruners.BasePruner | None]:
    """The pruners compared with none: the search's default, and optuna's advice for TPE."""
    return {
        "median (default)": None,
        "hyperband": optuna.pruners.HyperbandPruner(
            min_resource=1, max_resource=epochs, reduction_factor=3
        ),
    }


def search_once(
    data: Any, folder: Path, trials: int, epochs: int, seed: int, pruner: Any
) -> tuple[int, float, int]:
    """(optimizer steps of all trials, best accuracy of a completed trial, trials pruned)."""
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
    print(f"{'seed':>4}  {'pruner':>16}  {'steps':>6}  {'steps unpruned':>14}  {'saved':>6}  "
          f"{'best acc':>8}  {'unpruned':>8}  {'gap (points)':>12}  pruned trials")  # fmt: skip
    saved: dict[str, list[float]] = {name: [] for name in pruners(epochs)}
    gaps: dict[str, list[float]] = {name: [] for name in pruners(epochs)}
    for seed in range(seeds):
        nop = optuna.pruners.NopPruner()
        full = search_once(data, root / f"full_{seed}", trials, epochs, seed, nop)
        for index, (name, pruner) in enumerate(pruners(epochs).items()):
            run = search_once(data, root / f"pruned_{seed}_{index}", trials, epochs, seed, pruner)
            saved[name].append(1 - run[0] / full[0])
            gaps[name].append(100 * (full[1] - run[1]))
            print(f"{seed:>4}  {name:>16}  {run[0]:>6}  {full[0]:>14}  {saved[name][-1]:>6.1%}  "
                  f"{run[1]:>8.4f}  {full[1]:>8.4f}  {gaps[name][-1]:>12.2f}  "
                  f"{run[2]}/{trials}", flush=True)  # fmt: skip
    for name in saved:
        print(f"median over seeds, {name}: steps saved {statistics.median(saved[name]):.1%} "
              f"(goal >= 40%), best accuracy {statistics.median(gaps[name]):.2f} points below "
              "the unpruned search's (goal <= 0.5)")  # fmt: skip


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


def one_configuration(
    data: Any, folder: Path, hps: HyperParameters, module: dict[str, Any]
) -> HyperParameterSearch:
    """A search whose every trial trains ``hps`` and ``module`` (a space of one choice)."""
    search = HyperParameterSearch(
        Classifier, *data, metrics=[Accuracy()], output_dir=folder, **OPTIONS
    )
    search.set_space({
        "epochs": hps.epochs,
        "batch_size": hps.batch_size,
        "learning_rate": {"type": "categorical", "choices": [hps.optimizer_kwargs["lr"]]},
        **{f"module.{name}": value for name, value in module.items()},
    })  # fmt: skip
    return search


def next_trial(search: HyperParameterSearch, trials: int) -> tuple[float, float]:
    """Run the search to ``trials`` trials (one more), and return the new trial's time from
    ask to tell, and the part of it spent outside the trial's module building and fit."""
    with contextlib.redirect_stdout(io.StringIO()):
        search.optimize(accuracy, "maximize", n_trials=trials, pruner=optuna.pruners.NopPruner(),
                        plots=False, progress_bar=False)  # fmt: skip
    assert search.study is not None
    trial = search.study.trials[-1]
    assert trial.datetime_start is not None
    assert trial.datetime_complete is not None
    window = (trial.datetime_complete - trial.datetime_start).total_seconds()
    reset()
    return window, window - trial.user_attrs["accmt_search"]["seconds"]


def overhead(data: Any, root: Path, name: str, epochs: int, module: dict[str, Any]) -> None:
    """Plain fits and search trials one after the other, ROUNDS times; the first of each kind
    is dropped (warm-up)."""
    hps = HyperParameters(epochs=epochs, batch_size=(32, 512), optimizer="AdamW",
                          optimizer_kwargs={"lr": 3e-3})  # fmt: skip
    search = one_configuration(data, root / f"search_{name}", hps, module)
    plain, trials, outside = [], [], []
    for round_ in range(ROUNDS):
        plain.append(plain_fit(data, root / f"plain_{name}", hps, module))
        window, beside = next_trial(search, round_ + 1)
        trials.append(window)
        outside.append(beside)
    fit, trial = statistics.median(plain[1:]), statistics.median(trials[1:])
    print(f"{name:>6}  {epochs:>6}  {fit:>11.3f}  {trial:>14.3f}  {trial / fit - 1:>+9.1%}  "
          f"{1000 * statistics.median(outside[1:]):>24.1f}", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=24)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--part", choices=["all", "pruning", "overhead"], default="all")
    args = parser.parse_args()
    torch.set_num_threads(1)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    data = digits()
    root = Path(tempfile.mkdtemp(prefix="accmt-search-bench-"))
    try:
        if args.part in ("all", "pruning"):
            pruning(data, root, args.trials, args.epochs, args.seeds)
        if args.part == "pruning":
            return
        print("== overhead: a search trial against a plain Trainer.fit of the same configuration")
        print(f"{'model':>6}  {'epochs':>6}  {'plain fit s':>11}  {'search trial s':>14}  "
              f"{'overhead':>9}  {'ms outside module+fit':>24}")  # fmt: skip
        overhead(data, root, "small", 5, {"hidden": 128})
        overhead(data, root, "wide", 3, {"hidden": 1024, "layers": 3})
        print("goal: overhead < 5%")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
