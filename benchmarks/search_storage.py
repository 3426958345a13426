"""Where a search trial's overhead goes: optuna's storage calls, and what a report costs.

    ./hatchw run python benchmarks/search_storage.py [--trials 7]

``benchmarks/search.py`` measures a trial against a plain ``Trainer.fit``; this script says
where the difference goes, on the same digits trial (10 epochs, an evaluation and a report
after each, the default SQLite study in a temporary folder).

1. Storage calls. Each ``RDBStorage`` method that writes or reads the study is timed during a
   search of one configuration (no pruner): calls a trial, median milliseconds a call, and
   milliseconds a trial, split by who made the call: optuna itself (its ask, report and tell,
   the sampler's reads, the heartbeats of ``Study.optimize``) or the search's own code. Then
   both against a plain ``Trainer.fit`` of the same configuration, timed here: optuna's share
   alone is what any search through optuna's storage pays for a trial.
2. One report, three ways, on one trial of that study: back to back (warm caches); after 45
   training steps of the digits model (one epoch, as in a trial); and the cost of a trial's
   reports to a loop of 4 x (45 steps + report), made on the training thread or handed to a
   background thread while training goes on. Medians of interleaved rounds.

One thread; no trackers, no plots, no progress bars.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import optuna
import torch
from optuna.storages import RDBStorage
from search import Classifier, digits, plain_fits, search_trials

from accmt_search._study import make_storage
from accmt_trainer import HyperParameters

# The backend methods optuna's cache in front of RDBStorage calls (the private ones are where
# it asks the database: new trials, parameters, the study's trials).
TIMED = (
    "_create_new_trial",
    "_set_trial_param",
    "set_trial_intermediate_value",
    "set_trial_user_attr",
    "set_trial_state_values",
    "get_trial",
    "_get_trials",
    "record_heartbeat",
    "_get_stale_trial_ids",
)
HPS = HyperParameters(
    epochs=10, batch_size=(32, 512), optimizer="AdamW", optimizer_kwargs={"lr": 3e-3}
)


Calls = dict[tuple[str, str], list[float]]
ORIGINS = ("optuna", "search")


# Frames passed over to find who made a storage call: optuna's storage layers, its
# experimental-API wrapper, and the accessors the search reads and writes the study through.
PASSED_OVER = ("/optuna/storages/", "/optuna/_experimental.py")
ACCESSORS = ("get_trials", "_get_trials", "set_user_attr")


def origin() -> str:
    """Who made a storage call: the search's own code, straight or through optuna's
    ``get_trials`` and ``set_user_attr``; or optuna (its ask, report and tell, the sampler's
    reads, and the heartbeats and stale-trial checks of ``Study.optimize``)."""
    frame: Any = sys._getframe(2)
    while frame is not None and (
        any(part in frame.f_code.co_filename for part in PASSED_OVER)
        or frame.f_code.co_name in ACCESSORS
    ):
        frame = frame.f_back
    ours = frame is not None and "accmt_search" in frame.f_code.co_filename
    return "search" if ours else "optuna"


@contextlib.contextmanager
def timing(calls: Calls) -> Iterator[None]:
    """Wrap each of ``TIMED`` on ``RDBStorage`` to note its seconds in ``calls``, by caller."""
    originals = {name: getattr(RDBStorage, name) for name in TIMED}

    def timed(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                calls[name, origin()].append(time.perf_counter() - start)

        return wrapper

    for name, method in originals.items():
        setattr(RDBStorage, name, timed(name, method))
    try:
        yield
    finally:
        for name, method in originals.items():
            setattr(RDBStorage, name, method)


def storage_calls(data: Any, root: Path, trials: int) -> None:
    print(f"== optuna storage calls during a search of {trials + 1} digits trials (10 epochs)")
    calls: Calls = collections.defaultdict(list)
    with timing(calls):
        search_trials(data, root / "calls", HPS, {"hidden": 128}, trials)
    print(f"{'call':>30}  {'by':>6}  {'calls/trial':>11}  {'ms/call':>7}  {'ms/trial':>8}")
    totals = dict.fromkeys(ORIGINS, 0.0)
    for name in TIMED:
        for by in ORIGINS:
            seconds = calls.get((name, by))
            if not seconds:
                continue
            per_trial = 1000 * sum(seconds) / (trials + 1)
            totals[by] += per_trial
            print(
                f"{name:>30}  {by:>6}  {len(seconds) / (trials + 1):>11.1f}  "
                f"{1000 * statistics.median(seconds):>7.2f}  {per_trial:>8.2f}"
            )
    for by in ORIGINS:
        print(f"{'all of them':>30}  {by:>6}  {'':>11}  {'':>7}  {totals[by]:>8.2f}")
    fits = plain_fits(data, root / "plain", HPS, {"hidden": 128}, 5)
    fit = statistics.median(wall for wall, _ in fits)
    print(
        f"a plain Trainer.fit of the configuration: {fit:.3f} s; 5% of it is "
        f"{50 * fit:.1f} ms. Storage calls a trial: optuna's {totals['optuna']:.1f} ms "
        f"({100 * totals['optuna'] / 1000 / fit:.1f}% of the fit), the search's "
        f"{totals['search']:.1f} ms ({100 * totals['search'] / 1000 / fit:.1f}%)"
    )


class Training:
    """The digits model's training steps, as a trial takes them (batch 32, AdamW)."""

    def __init__(self) -> None:
        torch.manual_seed(0)
        self.model = Classifier(hidden=128).model
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=3e-3)
        self.inputs, self.targets = torch.randn(32, 64), torch.randint(0, 10, (32,))

    def steps(self, count: int) -> None:
        for _ in range(count):
            loss = torch.nn.functional.cross_entropy(self.model(self.inputs), self.targets)
            loss.backward()
            self.optimizer.step()
            self.optimizer.zero_grad()


def reports(root: Path, rounds: int) -> None:
    print("== one report (trial.report) to the search's SQLite study")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # heartbeats outside Study.optimize
        storage = make_storage(None, root / "reports", None, None)
        trial = optuna.create_study(storage=storage, study_name="reports").ask()
    training, steps = Training(), iter(range(10**9))
    warm, cold = [], []
    for _ in range(rounds * 4):
        start = time.perf_counter()
        trial.report(0.5, next(steps))
        warm.append(time.perf_counter() - start)
        training.steps(45)
        start = time.perf_counter()
        trial.report(0.5, next(steps))
        cold.append(time.perf_counter() - start)
    print(
        f"  back to back: {1000 * statistics.median(warm):.2f} ms; after 45 training steps: "
        f"{1000 * statistics.median(cold):.2f} ms"
    )
    background = ThreadPoolExecutor(max_workers=1)

    def loop(how: str) -> None:
        pending: Future[None] | None = None
        for _ in range(4):
            training.steps(45)
            if how == "on the training thread":
                trial.report(0.5, next(steps))
            elif how == "on a background thread":
                if pending is not None:
                    pending.result()
                pending = background.submit(trial.report, 0.5, next(steps))
        if pending is not None:
            pending.result()

    hows = ("no report", "on the training thread", "on a background thread")
    seconds: dict[str, list[float]] = {how: [] for how in hows}
    for _ in range(rounds):
        for how in hows:
            start = time.perf_counter()
            loop(how)
            seconds[how].append(time.perf_counter() - start)
    background.shutdown()
    base = statistics.median(seconds["no report"])
    for how in hows:
        median = statistics.median(seconds[how])
        print(
            f"  4 x (45 steps + report), report {how:>24}: {1000 * median:7.1f} ms "
            f"({1000 * (median - base) / 4:+.2f} ms a report)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    torch.set_num_threads(1)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    root = Path(tempfile.mkdtemp(prefix="accmt-search-storage-"))
    try:
        storage_calls(digits(), root, args.trials)
        reports(root, args.rounds)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
