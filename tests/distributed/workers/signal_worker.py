"""Run by tests/distributed/test_launch_signals.py through ``accmt launch``:
``signal_worker.py OUT``. Each process writes its pid to OUT/pid_rank<R>, trains a long run
(slowly, so that the test's signal comes in the middle of it), marks OUT/ready_rank<R> once
it has made a few optimizer steps, and at the end writes OUT/result_rank<R>.json: what ``fit``
returned. The script ends as a plain script does; the launcher's exit status says the rest."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from _toy import Classifier, blobs

from accmt_callbacks import Callback
from accmt_trainer import HyperParameters, Trainer, exit_status


class Slowly(Callback):
    """Marks the process ready after optimizer step 2, then takes its time over each step."""

    def __init__(self, out: Path, rank: int) -> None:
        self.ready = out / f"ready_rank{rank}"

    def on_after_training_step(self) -> None:
        if self.state.global_step >= 2 and not self.ready.exists():
            self.ready.touch()
        time.sleep(0.05)


def main(out: Path) -> None:
    rank = int(os.environ["RANK"])
    (out / f"pid_rank{rank}").write_text(str(os.getpid()))
    hps = HyperParameters(epochs=50, batch_size=8, optimizer="AdamW", optimizer_kwargs={"lr": 0.01})
    trainer = Trainer(
        hps,
        out / "run",
        seed=3,
        log_with=None,
        progress_bar=False,
        callbacks=[Slowly(out, rank)],
    )
    state = trainer.fit(Classifier(hidden=8), blobs(64))
    result = {
        "global_step": state.global_step,
        "finished": state.finished,
        "stop_signal": state.stop_signal,
        "stop_reason": state.stop_reason,
        "exit_status": exit_status(state),
    }
    (out / f"result_rank{rank}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
