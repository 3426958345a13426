"""The cost of the Trainer's sanity check, as a fraction of one epoch of the digits example.

The sanity check runs ``validation_step`` and the metrics on one batch of each validation
set and checks every watched name before the first step. Its cost is the difference of the
time from ``fit`` to ``on_fit_start`` with it on and off, interleaved and taken as medians;
an epoch is timed from ``on_epoch_start`` to ``on_epoch_end`` (its evaluation included).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from accelerate.state import AcceleratorState

from accmt import Accuracy, Callback, HyperParameters, Trainer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from train_digits import DigitClassifier, digits

ROUNDS = 9


class Clock(Callback):
    def __init__(self) -> None:
        self.marks: dict[str, float] = {}

    def on_fit_start(self) -> None:
        self.marks["fit_start"] = time.perf_counter()

    def on_epoch_start(self) -> None:
        self.marks["epoch_start"] = time.perf_counter()

    def on_epoch_end(self) -> None:
        self.marks["epoch_end"] = time.perf_counter()


def one_epoch(sanity_check: bool, folder: Path) -> tuple[float, float]:
    """(seconds from fit to on_fit_start, seconds of the epoch)."""
    torch.manual_seed(0)
    clock = Clock()
    hps = HyperParameters(
        epochs=1, batch_size=(32, 256), optimizer="AdamW", optimizer_kwargs={"lr": 3e-3}
    )
    trainer = Trainer(
        hps,
        folder,
        metrics=[Accuracy()],
        callbacks=[clock],
        log_with=None,
        progress_bar=False,
        checkpoint_every=None,
        disable_model_saving=True,
        sanity_check=sanity_check,
        seed=0,
    )
    train, valid = digits()
    start = time.perf_counter()
    trainer.fit(DigitClassifier(), train, valid)
    AcceleratorState._reset_state(reset_partial_state=True)
    marks = clock.marks
    return marks["fit_start"] - start, marks["epoch_end"] - marks["epoch_start"]


def main() -> None:
    torch.set_num_threads(1)
    setup: dict[bool, list[float]] = {True: [], False: []}
    epochs: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(ROUNDS):
            for on in (True, False):
                before, epoch = one_epoch(on, Path(tmp) / f"run{index}{on}")
                setup[on].append(before)
                epochs.append(epoch)
    cost = statistics.median(setup[True]) - statistics.median(setup[False])
    epoch = statistics.median(epochs)
    print(f"digits example, 1 thread; median of {ROUNDS} interleaved runs each")
    print(
        f"  fit to on_fit_start, sanity check on    {statistics.median(setup[True]) * 1e3:8.1f} ms"
    )
    print(
        f"  fit to on_fit_start, sanity check off   {statistics.median(setup[False]) * 1e3:8.1f} ms"
    )
    print(f"  one epoch (45 steps and its evaluation) {epoch * 1e3:8.1f} ms")
    print(f"  sanity check: {cost * 1e3:.1f} ms = {cost / epoch:.3f} of one epoch")


if __name__ == "__main__":
    main()
