"""PrintLogger: print evaluation metrics, and optionally the training loss, on the main process."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from accmt_decorators import on_main_process

from ._callback import Callback
from ._errors import CallbackValueError

if TYPE_CHECKING:
    from torch import Tensor

    from accmt_state import TrainingState


@on_main_process
def _print_line(line: str) -> None:
    print(line, flush=True)


def _format(value: Any) -> str:
    if isinstance(value, (bool, int, str)):
        return str(value)
    try:
        return f"{float(value):.6g}"
    except (TypeError, ValueError):
        return str(value)


class PrintLogger(Callback):
    """Print each evaluation's metrics, and optionally the training loss, on the main process.

    At ``on_evaluation_end`` it prints one line per validation set, from
    ``state.additional_metrics``::

        epoch 1 step 120 | valid: accuracy=0.91 loss=0.2734

    With ``every_n_steps=n`` it also prints, at the ``on_after_training_step`` where
    ``state.global_step`` (the optimizer step) first reaches a multiple of ``n``, the loss last
    passed to ``on_before_backward``::

        epoch 1 step 100 | train: loss=0.3012

    "step" is ``state.global_step``. Only the main process prints
    (``accmt_decorators.on_main_process``, decided at each call).
    """

    def __init__(self, every_n_steps: int | None = None) -> None:
        if every_n_steps is not None and (
            isinstance(every_n_steps, bool)
            or not isinstance(every_n_steps, int)
            or every_n_steps < 1
        ):
            raise CallbackValueError(
                f"PrintLogger: every_n_steps must be None or an int of 1 or more, got "
                f"{every_n_steps!r}"
            )
        self.every_n_steps = every_n_steps
        self._loss: Any = None
        self._printed_step: int | None = None

    def __repr__(self) -> str:
        return f"PrintLogger(every_n_steps={self.every_n_steps!r})"

    def on_before_backward(self, loss: Tensor) -> None:
        """Keep the loss for the next training line (read only when one is printed)."""
        if self.every_n_steps is not None:
            self._loss = loss

    def on_after_training_step(self) -> None:
        """Print the training loss once per ``every_n_steps`` optimizer steps."""
        state = self.state
        if self.every_n_steps is None or state is None:
            return
        step = state.global_step
        if step and step % self.every_n_steps == 0 and step != self._printed_step:
            self._printed_step = step
            loss = "n/a" if self._loss is None else _format(self._loss)
            _print_line(f"{_where(state)} | train: loss={loss}")

    def on_evaluation_end(self) -> None:
        """Print every validation set's metrics from ``state.additional_metrics``."""
        state = self.state
        if state is None:
            return
        for name, metrics in state.additional_metrics.items():
            values = " ".join(f"{metric}={_format(value)}" for metric, value in metrics.items())
            _print_line(f"{_where(state)} | {name}: {values}")


def _where(state: TrainingState) -> str:
    return f"epoch {state.epoch} step {state.global_step}"
