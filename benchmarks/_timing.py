"""Small helpers shared by the benchmark scripts: medians over repeated, interleaved runs."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable


def median_seconds(run: Callable[[], object], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def interleaved_samples(
    runs: dict[str, Callable[[], object]],
    repeats: int,
    before: Callable[[], object] | None = None,
) -> dict[str, list[float]]:
    """Wall times of each run, the runs taken in turn so that noise hits all alike;
    ``before``, untimed, ahead of each run."""
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            if before is not None:
                before()
            start = time.perf_counter()
            run()
            samples[name].append(time.perf_counter() - start)
    return samples


def interleaved_medians(
    runs: dict[str, Callable[[], object]],
    repeats: int,
    before: Callable[[], object] | None = None,
) -> dict[str, float]:
    """Median wall time of each run of :func:`interleaved_samples`."""
    samples = interleaved_samples(runs, repeats, before)
    return {name: statistics.median(values) for name, values in samples.items()}


def python_command(code: str) -> Callable[[], object]:
    """A fresh interpreter running ``code``, with bytecode caching on.

    An installed package has its bytecode compiled at install; an editable one only once
    Python may write ``__pycache__``, which PYTHONDONTWRITEBYTECODE (set on this project's
    machines) forbids. So it is unset for the child, and a first run warms the cache.
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def run() -> None:
        subprocess.run([sys.executable, "-c", code], check=True, env=env)

    run()
    return run
