"""What a resume costs: the time from a process's start to its first new optimizer step, against
the position it resumes at, on 1 and 2 processes, and against the checkpoint's size.

    ./hatchw run python benchmarks/resume.py [--positions 0,1000,10000] [--repeats 3]
        [--counts 1,2] [--sizes 1,100,400] [--parts stream,size]

The stream is the one a new user trains on: ``datasets``' ``Dataset.to_iterable_dataset
(num_shards=8).map(...)`` of plain rows, its ``map`` making each sample's 16 features (the
tokenising of a real pipeline, cheap here so that the figures show the resume rather than the
work per sample). It is trained on side by side in two forms: as it is (a stream that keeps its
place: ``state_dict``), and wrapped in an ``IterableDataset`` without state, which a resume
reads again from the start, skipping the batches already trained on (the replay). For each
number of processes and form, one run trains to the largest position with a checkpoint every
``--positions``' step; each resume starts a fresh copy of that run's folder from the checkpoint
at a position (``Trainer(resume=<its number>)``), times its first new step (from the launch,
and from the ``fit`` call: the interpreter's start and the imports, the same in every run, are
most of the first and most of its noise), counts the samples
each process's ``map`` made, and ends there (``os._exit``: what comes after is not a resume's
cost). Position 0 is a fresh start, the floor: the interpreter, the imports, building the
Trainer and the data, and one step. Each figure is the median of ``--repeats`` runs, the
positions taken in turn in each round.

The size part resumes a 1-process run from its checkpoint at step 10 for models of ``--sizes``
MB of float32 weights (AdamW's two moments triple the checkpoint), on a map-style dataset: the
checkpoint is verified (every file's digest) and read before the first step, so this time
grows with the size; the line the resume prints says how many bytes it verified and read.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

HERE = Path(__file__).resolve()
BATCH = 8
FEATURES = 16
SHARDS = 8
SIZE_STEPS = 10
# The counter of samples the stream's map made in this process, and when fit was called (the
# child's only state).
MADE = [0]
FIT_CALLED = [0.0]


class FirstStep(NamedTuple):
    """What one run reported: seconds from its launch and from its fit call to its first new
    step (the slowest process's), each process's samples made, and its resume line."""

    launch: float
    fit: float
    made: list[int]
    line: str


def features(row: dict[str, Any]) -> dict[str, Any]:
    MADE[0] += 1
    x = row["x"]
    return {"features": [((x * (k + 3)) % 97) / 97 for k in range(FEATURES)], "label": x % 4}


def stream(samples: int, keeps_place: bool) -> Any:
    import datasets
    from torch.utils.data import IterableDataset

    rows = datasets.Dataset.from_dict({"x": list(range(samples))})
    kept = rows.to_iterable_dataset(num_shards=SHARDS).map(features, remove_columns=["x"])
    if keeps_place:
        return kept

    class WithoutState(IterableDataset[Any]):
        """The same samples, in the same order, from a stream with no state_dict."""

        def __iter__(self) -> Iterator[Any]:
            return iter(kept)

    return WithoutState()


def collate(samples: list[dict[str, Any]]) -> Any:
    import torch

    return (
        torch.tensor([sample["features"] for sample in samples]),
        torch.tensor([sample["label"] for sample in samples]),
    )


def child(options: argparse.Namespace) -> None:
    """One run of the benchmark, on this process (torchrun starts one per process)."""
    import torch
    from torch.utils.data import TensorDataset

    from accmt_callbacks import Callback
    from accmt_trainer import AcceleratorModule, HyperParameters, Trainer

    report = Path(options.report)

    class Classifier(AcceleratorModule):
        def __init__(self) -> None:
            torch.manual_seed(0)
            self.model = torch.nn.Sequential(
                torch.nn.Linear(FEATURES, options.width),
                torch.nn.ReLU(),
                torch.nn.Linear(options.width, 4),
            )

        def training_step(self, batch: Any) -> Any:
            inputs, labels = batch
            return torch.nn.functional.cross_entropy(self.model(inputs), labels)

    class FirstNewStep(Callback):
        """Times the run's first optimizer step, writes what this process made, and ends."""

        def on_after_training_step(self) -> None:
            if not options.first_step_only:
                return
            rank = int(os.environ.get("RANK", "0"))
            now = time.time()
            figures = {"launch": now - options.started, "fit": now - FIT_CALLED[0], "made": MADE[0]}
            (report / f"rank{rank}.json").write_text(json.dumps(figures))
            os._exit(0)

    if options.size:
        generator = torch.Generator().manual_seed(0)
        data: Any = TensorDataset(
            torch.randn(BATCH * 2 * SIZE_STEPS, FEATURES, generator=generator),
            torch.randint(0, 4, (BATCH * 2 * SIZE_STEPS,), generator=generator),
        )
        collate_fn = None
    else:
        samples = (options.max_steps + 2) * BATCH * options.processes
        data, collate_fn = stream(samples, options.mode == "state"), collate
    hps = HyperParameters(
        epochs=1, max_steps=options.max_steps, batch_size=BATCH, optimizer="AdamW"
    )
    trainer = Trainer(
        hps,
        options.folder,
        cpu=True,
        collate_fn=collate_fn,
        shuffle_train=False if options.size else None,
        log_with=None,
        progress_bar=False,
        checkpoint_every=options.checkpoint_every,
        resume=options.resume,
        disable_model_saving=True,
        eval_when_finish=False,
        sanity_check=False,
        callbacks=[FirstNewStep()],
        seed=0,
    )
    FIT_CALLED[0] = time.time()
    trainer.fit(Classifier(), data)


def launch(processes: int, arguments: list[str]) -> subprocess.CompletedProcess[str]:
    """Runs this script as a child on ``processes`` processes (torchrun for more than one)."""
    if processes == 1:
        command = [sys.executable, str(HERE)]
    else:
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={processes}",
            str(HERE),
        ]
    arguments = [*arguments, "--processes", str(processes), "--started", str(time.time())]
    return subprocess.run(
        [*command, "--child", *arguments], capture_output=True, text=True, check=True
    )


def resume_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("resuming")]
    return lines[-1] if lines else "(no resume line)"


def first_step(processes: int, source: Path, arguments: list[str]) -> FirstStep:
    """A fresh copy of ``source`` resumed (or started) with ``arguments``, to its first new
    step."""
    with tempfile.TemporaryDirectory() as scratch:
        folder, report = Path(scratch) / "run", Path(scratch) / "report"
        report.mkdir()
        if source.exists():
            shutil.copytree(source, folder)
        run = launch(
            processes,
            [*arguments, "--folder", str(folder), "--report", str(report), "--first-step-only"],
        )
        figures = [json.loads(path.read_text()) for path in sorted(report.glob("rank*.json"))]
        if len(figures) != processes:
            raise RuntimeError(f"{len(figures)} of {processes} processes reported:\n{run.stderr}")
        return FirstStep(
            max(figure["launch"] for figure in figures),
            max(figure["fit"] for figure in figures),
            [figure["made"] for figure in figures],
            resume_line(run.stderr),
        )


def stream_part(positions: list[int], repeats: int, counts: list[int]) -> None:
    every, last = positions[1], positions[-1]
    print(
        f"Stream resume: a datasets stream ({SHARDS} shards, .map), batch {BATCH} per process; "
        f"seconds to the first new step from the launch and from the fit call (medians of "
        f"{repeats}), and the samples each process's map made"
    )
    print(f"{'processes':>9}  {'stream':<22}{'position':>9}{'launch':>8}{'fit':>8}  samples made")
    for processes in counts:
        for mode, label in (("state", "keeps its place"), ("replay", "without state (replay)")):
            with tempfile.TemporaryDirectory() as scratch:
                trained = Path(scratch) / "trained"
                common = ["--mode", mode, "--max-steps", str(last + 1)]
                # One step beyond the last position, so that its checkpoint is a run that
                # has not finished, resumed with the settings it was made with.
                checkpoints = ["--checkpoint-every", f"{every} steps", "--folder", str(trained)]
                launch(processes, [*common, *checkpoints])
                # The positions taken in turn, each round, so that the machine's noise hits
                # them alike.
                samples: dict[int, list[FirstStep]] = {position: [] for position in positions}
                for _ in range(repeats):
                    for position in positions:
                        resume = ["--resume", str(position // every)] if position else []
                        source = trained if position else Path(scratch) / "none"
                        run = first_step(processes, source, [*common, *resume])
                        samples[position].append(run)
                for position, runs in samples.items():
                    launched = statistics.median(run.launch for run in runs)
                    fit = statistics.median(run.fit for run in runs)
                    print(
                        f"{processes:>9}  {label:<22}{position:>9}{launched:>8.2f}{fit:>8.2f}  "
                        f"{runs[0].made}",
                        flush=True,
                    )
                print(f"{'':>11}{samples[last][0].line}")


def size_part(sizes: list[int], repeats: int) -> None:
    print(
        f"\nCheckpoint size: 1 process, a model of N MB of float32 weights (AdamW), resumed "
        f"from its checkpoint at step {SIZE_STEPS}, beside a fresh start: seconds from the fit "
        f"call to the first new step (medians of {repeats})"
    )
    print(f"{'weights MB':>10}{'checkpoint MB':>15}{'fresh':>8}{'resume':>8}{'extra':>8}")
    for size in sizes:
        # Two layers of FEATURES x width and width x 4 float32 weights.
        width = max(1, size * 1_000_000 // 4 // (FEATURES + 4))
        common = ["--size", "--width", str(width), "--max-steps", str(SIZE_STEPS + 1)]
        with tempfile.TemporaryDirectory() as scratch:
            trained = Path(scratch) / "trained"
            checkpoints = ["--checkpoint-every", f"{SIZE_STEPS} steps", "--folder", str(trained)]
            launch(1, [*common, *checkpoints])
            (resumed_from,) = trained.rglob("checkpoint_000001")
            stored = sum(path.stat().st_size for path in resumed_from.rglob("*") if path.is_file())
            fresh, resumed = [], []
            for _ in range(repeats):
                fresh.append(first_step(1, Path(scratch) / "none", common).fit)
                resumed.append(first_step(1, trained, [*common, "--resume", "1"]).fit)
            fresh_s, resumed_s = statistics.median(fresh), statistics.median(resumed)
            print(
                f"{size:>10}{stored / 1e6:>15.0f}{fresh_s:>8.2f}{resumed_s:>8.2f}"
                f"{resumed_s - fresh_s:>8.2f}",
                flush=True,
            )


def numbers(value: str) -> list[int]:
    return [int(item) for item in value.split(",")]


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--positions", type=numbers, default=[0, 1000, 10000])
    parser.add_argument("--sizes", type=numbers, default=[1, 100, 400])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--counts", type=numbers, default=[1, 2], help="numbers of processes")
    parser.add_argument("--parts", default="stream,size")
    # The child's options.
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--mode", choices=("state", "replay"), default="state")
    parser.add_argument("--size", action="store_true")
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--max-steps", type=int, default=1)
    parser.add_argument("--checkpoint-every", default=None)
    parser.add_argument("--resume", type=int, default=False)
    parser.add_argument("--folder", default="")
    parser.add_argument("--report", default="")
    parser.add_argument("--first-step-only", action="store_true")
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--started", type=float, default=0.0)
    return parser.parse_args()


def main() -> None:
    options = parse()
    if options.child:
        child(options)
        return
    positions = options.positions
    if positions[0] != 0 or len(positions) < 2 or any(p % positions[1] for p in positions):
        raise SystemExit("--positions: 0 first, then multiples of the second (its checkpoints)")
    if "stream" in options.parts:
        stream_part(positions, options.repeats, options.counts)
    if "size" in options.parts:
        size_part(options.sizes, options.repeats)


if __name__ == "__main__":
    main()
