"""accmt-search on scikit-learn's digits: what pruning saves, and what the search costs a trial.

    ./hatchw run python benchmarks/search.py [--trials 24] [--epochs 10] [--seeds 5]

1. Pruning. The same seeded search (TPE; 10 epochs of batch 32 a trial, as the digits example
   trains; learning rate 1e-5..1e-1 and weight decay 1e-6..1e-1 on a log scale, hidden size,
   dropout; maximising validation accuracy, evaluated after each epoch) runs per seed with no
   pruner, with the search's default pruner (median, from the second evaluation, after 3
   trials) and with optuna's HyperbandPruner (optuna's advice for TPE). The batch size is fixed
   so that a trial's optimizer steps count its training, not which batch size TPE drew (one
   draw of 128 instead of 32 moves the total by a quarter of a trial). Printed side by side:
   optimizer steps trained by all trials, and the best validation accuracy of a completed
   trial (360 validation images: one image is 0.28 points); then the medians over seeds.
   Goal: pruning saves at least 40% of the steps, with a best accuracy within 0.5 points.
2. Overhead. One configuration of that search, trained by plain ``Trainer.fit`` calls (seed,
   Trainer, fit, checkpoints removed) and as the trials of a search whose space holds only that
   configuration (no pruner), in alternating rounds (the first dropped). A search trial costs
   the time from the start of one trial to the start of the next, inside one ``optimize``
   call: sampling, the module and fit, a report to the study after each evaluation, the
   record, and the loop's look at the study before the next trial (marked by the sampler's
   ``before_trial``, which optuna's ask calls). Ratios are medians of the rounds' own ratios
   (each round's median trial over its median fit), of wall time and of the process's CPU
   time (which leaves out the time other work on a shared machine held the core); "ms/trial"
   is the wall ratio's excess times the plain fit. Also printed: what each search pays once
   (opening the study, the end's table and CSV), which is not per trial. Two sizes: the
   pruning search's trial (hidden 128, 10 epochs) and a wide model (3 x 1024) of 3 epochs.
   Goal: under 5% per trial.

One thread; no trackers, no plots, no progress bars.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
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
    search.set_space(
        {
            "epochs": epochs,
            "batch_size": [32, 512],
            "optimizer": "AdamW",
            "optimizer_kwargs.lr": {"type": "float", "low": 1e-5, "high": 1e-1, "log": True},
            "optimizer_kwargs.weight_decay": {
                "type": "float",
                "low": 1e-6,
                "high": 1e-1,
                "log": True,
            },
            "module.hidden": {"type": "int", "low": 16, "high": 256, "log": True},
            "module.dropout": {"type": "float", "low": 0.0, "high": 0.5},
        }
    )
    with contextlib.redirect_stdout(io.StringIO()):  # each search's table of best trials
        result = search.optimize(
            accuracy, "maximize", n_trials=trials, pruner=pruner, plots=False, progress_bar=False
        )
    assert search.study is not None
    steps = sum(t.user_attrs["accmt_search"]["optimizer_steps"] for t in search.study.trials)
    pruned = sum(t.state == optuna.trial.TrialState.PRUNED for t in search.study.trials)
    reset()
    return steps, result.value, pruned


def pruning(data: Any, root: Path, trials: int, epochs: int, seeds: int) -> None:
    print(f"== pruning: {trials} trials of {epochs} epochs (batch 32), per seed", flush=True)
    print(
        f"{'seed':>4}  {'pruner':>16}  {'steps':>6}  {'steps unpruned':>14}  {'saved':>6}  "
        f"{'best acc':>8}  {'unpruned':>8}  {'gap (points)':>12}  pruned trials"
    )
    saved: dict[str, list[float]] = {name: [] for name in pruners(epochs)}
    gaps: dict[str, list[float]] = {name: [] for name in pruners(epochs)}
    for seed in range(seeds):
        nop = optuna.pruners.NopPruner()
        full = search_once(data, root / f"full_{seed}", trials, epochs, seed, nop)
        for index, (name, pruner) in enumerate(pruners(epochs).items()):
            run = search_once(data, root / f"pruned_{seed}_{index}", trials, epochs, seed, pruner)
            saved[name].append(1 - run[0] / full[0])
            gaps[name].append(100 * (full[1] - run[1]))
            print(
                f"{seed:>4}  {name:>16}  {run[0]:>6}  {full[0]:>14}  {saved[name][-1]:>6.1%}  "
                f"{run[1]:>8.4f}  {full[1]:>8.4f}  {gaps[name][-1]:>12.2f}  "
                f"{run[2]}/{trials}",
                flush=True,
            )
    for name in saved:
        step_goal = "met" if statistics.median(saved[name]) >= 0.4 else "NOT met"
        gap_goal = "met" if statistics.median(gaps[name]) <= 0.5 else "NOT met"
        print(
            f"median over {seeds} seeds, {name}: steps saved {statistics.median(saved[name]):.1%}"
            f" (goal >= 40%: {step_goal}); best accuracy {statistics.median(gaps[name]):.2f} "
            f"points below the unpruned search's (goal <= 0.5: {gap_goal}); worst seed "
            f"{min(saved[name]):.1%} saved, {max(gaps[name]):.2f} points below"
        )


# ----------------------------------------------------------------------------- overhead


def plain_fits(
    data: Any, folder: Path, hps: HyperParameters, module: dict[str, Any], count: int
) -> list[tuple[float, float]]:
    """(wall, CPU) seconds of each of ``count`` plain fits: seed, Trainer, fit, checkpoints
    removed."""
    seconds = []
    for _ in range(count):
        start = clocks()
        torch.manual_seed(0)
        trainer = Trainer(
            hps,
            folder,
            metrics=[Accuracy()],
            disable_model_saving=True,
            max_checkpoints=1,
            **OPTIONS,
        )
        trainer.fit(Classifier(**module), *data)
        shutil.rmtree(folder / "checkpoints", ignore_errors=True)
        seconds.append(since(start))
    reset()
    return seconds


def clocks() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def since(start: tuple[float, float]) -> tuple[float, float]:
    now = clocks()
    return now[0] - start[0], now[1] - start[1]


class MarkingSampler(optuna.samplers.TPESampler):
    """TPE that notes the clocks as each trial starts (optuna's ask calls ``before_trial``)."""

    def __init__(self) -> None:
        super().__init__(seed=0)
        self.marks: list[tuple[float, float]] = []

    def before_trial(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        self.marks.append(clocks())
        super().before_trial(study, trial)


def one_configuration(
    data: Any, folder: Path, hps: HyperParameters, module: dict[str, Any]
) -> HyperParameterSearch:
    """A search whose every trial trains ``hps`` and ``module`` (a space of one choice)."""
    search = HyperParameterSearch(
        Classifier, *data, metrics=[Accuracy()], output_dir=folder, **OPTIONS
    )
    search.set_space(
        {
            "epochs": hps.epochs,
            "batch_size": hps.batch_size,
            "optimizer": hps.optimizer,
            "optimizer_kwargs.lr": {"type": "categorical", "choices": [hps.optimizer_kwargs["lr"]]},
            **{f"module.{name}": value for name, value in module.items()},
        }
    )
    return search


def search_trials(
    data: Any, folder: Path, hps: HyperParameters, module: dict[str, Any], count: int
) -> tuple[list[tuple[float, float]], float]:
    """One ``optimize`` call of ``count + 1`` trials: the (wall, CPU) seconds from each trial's
    start to the next one's (``count`` of them), and the wall seconds the call spent before its
    first trial and after its last one (paid once a search)."""
    search = one_configuration(data, folder, hps, module)
    sampler = MarkingSampler()
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        search.optimize(
            accuracy,
            "maximize",
            n_trials=count + 1,
            sampler=sampler,
            pruner=optuna.pruners.NopPruner(),
            plots=False,
            progress_bar=False,
        )
    wall = time.perf_counter() - start
    assert search.study is not None
    last = search.study.trials[-1]
    assert last.datetime_start is not None
    assert last.datetime_complete is not None
    marks = sampler.marks
    cycles = [(b[0] - a[0], b[1] - a[1]) for a, b in itertools.pairwise(marks)]
    last_trial = (last.datetime_complete - last.datetime_start).total_seconds()
    inside = marks[-1][0] - marks[0][0] + last_trial
    reset()
    return cycles, wall - inside


def overhead(
    data: Any, root: Path, name: str, size: tuple[int, dict[str, Any]], rounds: int, count: int
) -> None:
    """Plain fits and search trials in alternating rounds (``count`` of each a round); the
    first round is dropped (warm-up). A ratio is the median over rounds of each round's own
    ratio, so that the load of other work, which changes from minute to minute on a shared
    machine, weighs on both sides of it alike. The CPU time of the process is printed too:
    it leaves out the time other processes held the core."""
    epochs, module = size
    hps = HyperParameters(
        epochs=epochs, batch_size=(32, 512), optimizer="AdamW", optimizer_kwargs={"lr": 3e-3}
    )
    fits: list[float] = []
    ratios: dict[int, list[float]] = {0: [], 1: []}  # wall, CPU
    once: list[float] = []
    for round_ in range(rounds):
        plain = plain_fits(data, root / f"plain_{name}", hps, module, count)
        cycles, outside = search_trials(data, root / f"search_{name}_{round_}", hps, module, count)
        if round_ > 0:
            fits += [fit[0] for fit in plain]
            for clock, found in ratios.items():
                trial = statistics.median(cycle[clock] for cycle in cycles)
                found.append(trial / statistics.median(fit[clock] for fit in plain))
            once.append(outside)
    fit = statistics.median(fits)
    wall, cpu = statistics.median(ratios[0]), statistics.median(ratios[1])
    print(
        f"{name:>6}  {epochs:>6}  {fit:>11.3f}  {wall:>10.3f}  {1000 * (wall - 1) * fit:>+8.1f}  "
        f"{min(ratios[0]):.2f}..{max(ratios[0]):.2f}  {cpu:>9.3f}  "
        f"{min(ratios[1]):.2f}..{max(ratios[1]):.2f}  {statistics.median(once):>8.3f}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=24)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=5)
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
        print(
            "== overhead: a search trial against a plain Trainer.fit of the same "
            "configuration; ratio: median over rounds of each round's ratio"
        )
        print(
            f"{'model':>6}  {'epochs':>6}  {'plain fit s':>11}  {'wall ratio':>10}  "
            f"{'ms/trial':>8}  {'rounds':>10}  {'CPU ratio':>9}  {'rounds':>10}  "
            f"{'s/search':>8}"
        )
        overhead(data, root, "digits", (10, {"hidden": 128}), rounds=9, count=3)
        overhead(data, root, "wide", (3, {"hidden": 1024, "layers": 3}), rounds=5, count=2)
        print("goal: ratio < 1.05")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
