"""How long saving and loading a TrainingState takes, with 1,000 metric entries.

./hatchw run python benchmarks/state_io.py

Save is the whole atomic, durable write (temporary file, fsync, rename, fsync of the folder),
so on a real disk it is mostly the disk's fsync; to_dict and from_dict are the converter alone.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from _timing import median_seconds

from accmt_state import TrainingState

REPEATS = 50
DATASETS = 10
METRICS_PER_DATASET = 100


def big_state() -> TrainingState:
    metrics = {
        f"dataset_{d}": {f"metric_{m}": (d * 1000 + m) / 7 for m in range(METRICS_PER_DATASET)}
        for d in range(DATASETS)
    }
    return TrainingState(global_step=12345, epoch=3, additional_metrics=metrics)


def main() -> None:
    state = big_state()
    data = state.to_dict()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "state.json"
        state.save(path)
        timings = {
            "save (atomic, fsynced)": median_seconds(lambda: state.save(path), REPEATS),
            "load": median_seconds(lambda: TrainingState.load(path), REPEATS),
            "to_dict": median_seconds(state.to_dict, REPEATS),
            "from_dict": median_seconds(lambda: TrainingState.from_dict(data), REPEATS),
        }
        size = path.stat().st_size
    entries = DATASETS * METRICS_PER_DATASET
    print(f"TrainingState with {entries} metric entries, {size / 1024:.0f} KiB on disk")
    print(f"median of {REPEATS} runs each")
    for name, seconds in timings.items():
        print(f"  {name:<24} {seconds * 1000:8.2f} ms")


if __name__ == "__main__":
    main()
