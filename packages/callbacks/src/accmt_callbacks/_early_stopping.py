"""EarlyStopping: stop when a validation metric has not improved for a number of evaluations."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal

from ._callback import Callback
from ._errors import (
    CallbackNotBoundError,
    CallbackStateError,
    CallbackTypeError,
    CallbackValueError,
    MonitoredMetricError,
)

if TYPE_CHECKING:
    from accmt_state import TrainingState


class EarlyStopping(Callback):
    """Ask the loop to stop once ``monitor`` has not improved for ``patience`` evaluations.

    It reads the monitored value at every ``on_evaluation_end`` from
    ``state.additional_metrics`` (validation set name -> metric name -> value):

    - ``monitor="accuracy"`` names a metric of the only validation set; with several sets it
      is an error, since it is ambiguous.
    - ``monitor="accuracy@valid"`` names the metric ``accuracy`` of the set ``valid`` (the
      text after the last ``@``).

    ``mode="min"`` counts a value as an improvement when it is below the best so far by more
    than ``min_delta``; ``mode="max"``, when above it by more than ``min_delta``. A NaN or
    infinite value is never an improvement. After ``patience`` evaluations in a row without
    one, it calls ``request_stop`` with a reason.

    The best value and the count of evaluations without improvement are in ``state_dict``, so
    patience carries over a checkpoint and resume; the patience left is mirrored into
    ``state.patience_left[monitor]``. Its ``state_key`` is ``"EarlyStopping[<monitor>]"``, so
    that one handler can hold one per monitored metric.
    """

    def __init__(
        self,
        monitor: str = "loss",
        mode: Literal["min", "max"] = "min",
        patience: int = 3,
        min_delta: float = 0.0,
    ) -> None:
        metric, at, on_set = _split_monitor(monitor) if isinstance(monitor, str) else ("", "", "")
        if not metric or (at and not on_set):
            raise CallbackValueError(
                f"EarlyStopping: monitor must name a metric, as in 'loss' or 'loss@valid', "
                f"got {monitor!r}"
            )
        if mode not in ("min", "max"):
            raise CallbackValueError(f"EarlyStopping: mode must be 'min' or 'max', got {mode!r}")
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 1:
            raise CallbackValueError(
                f"EarlyStopping: patience must be an int of 1 or more, got {patience!r}"
            )
        if (
            isinstance(min_delta, bool)
            or not isinstance(min_delta, (int, float))
            or not math.isfinite(min_delta)
            or min_delta < 0
        ):
            raise CallbackValueError(
                f"EarlyStopping: min_delta must be a finite number of 0 or more, got {min_delta!r}"
            )
        self.monitor = monitor
        self.mode = mode
        self.patience = patience
        self.min_delta = float(min_delta)
        self.best: float | None = None
        """The best value seen so far (None before the first finite one)."""
        self.wait = 0
        """Evaluations in a row without improvement."""

    def __repr__(self) -> str:
        return (
            f"EarlyStopping(monitor={self.monitor!r}, mode={self.mode!r}, "
            f"patience={self.patience}, min_delta={self.min_delta})"
        )

    @property
    def state_key(self) -> str:
        """``"EarlyStopping[<monitor>]"``: one stateful entry per monitored metric."""
        return f"{type(self).__qualname__}[{self.monitor}]"

    @property
    def patience_left(self) -> int:
        """Evaluations without improvement still allowed before a stop is requested."""
        return max(self.patience - self.wait, 0)

    def on_fit_start(self) -> None:
        """Publish the patience left in ``state.patience_left[monitor]``."""
        self._mirror()

    def on_evaluation_end(self) -> None:
        """Read the monitored value, update best and wait, and request a stop when due."""
        value = self.monitored_value()
        self.record(value, improved=self._improves(value))

    def record(self, value: float | None, *, improved: bool) -> None:
        """Count one judgement of the monitored value: an improvement resets the wait (and
        makes ``value`` the best), anything else adds one; a stop is requested once the wait
        reaches ``patience``. ``on_evaluation_end`` calls it; a loop that judges improvement
        itself (the accmt Trainer's ``patience``, with its saving rules) calls it directly."""
        if improved:
            self.best = value
            self.wait = 0
        else:
            self.wait += 1
        self._mirror()
        if self.wait >= self.patience:
            best = "none finite" if self.best is None else f"{self.best:g}"
            self.request_stop(
                f"{type(self).__qualname__}: {self.monitor} has not improved for {self.wait} "
                "evaluation(s) "
                f"(mode={self.mode!r}, min_delta={self.min_delta:g}, best {best})"
            )

    def monitored_value(self) -> float:
        """The monitored metric in ``state.additional_metrics``, as a float.

        Raises MonitoredMetricError (a ValueError) naming the validation sets or metrics that
        exist when the monitor does not resolve to one of them.
        """
        metrics = self._bound_state().additional_metrics
        name, _, wanted_set = _split_monitor(self.monitor)
        if not metrics:
            raise MonitoredMetricError(
                f"EarlyStopping({self.monitor!r}): state.additional_metrics is empty at "
                "on_evaluation_end; the loop writes each validation set's metrics there before "
                "firing it"
            )
        if not wanted_set:
            if len(metrics) > 1:
                raise MonitoredMetricError(
                    f"EarlyStopping({self.monitor!r}): there are several validation sets "
                    f"({_names(metrics)}); name one, as in monitor="
                    f"{name + '@' + next(iter(metrics))!r}"
                )
            wanted_set = next(iter(metrics))
        elif wanted_set not in metrics:
            raise MonitoredMetricError(
                f"EarlyStopping({self.monitor!r}): no validation set {wanted_set!r}; the sets "
                f"are {_names(metrics)}"
            )
        values = metrics[wanted_set]
        if name not in values:
            raise MonitoredMetricError(
                f"EarlyStopping({self.monitor!r}): validation set {wanted_set!r} has no metric "
                f"{name!r}; its metrics are {_names(values)}"
            )
        try:
            return float(values[name])
        except (TypeError, ValueError):
            raise CallbackTypeError(
                f"EarlyStopping({self.monitor!r}): the value of {name!r} in validation set "
                f"{wanted_set!r} is not a number: {values[name]!r}"
            ) from None

    def state_dict(self) -> dict[str, Any]:
        """The best value so far and the count of evaluations without improvement."""
        return {"best": self.best, "wait": self.wait}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``best`` and ``wait``; raises CallbackStateError (an ``accmt_state.StateError``)
        on bad values."""
        best, wait = state.get("best"), state.get("wait")
        if best is not None and (isinstance(best, bool) or not isinstance(best, (int, float))):
            raise CallbackStateError(
                f"{self.state_key}: 'best' must be a number or null, got {best!r}"
            )
        if isinstance(wait, bool) or not isinstance(wait, int) or wait < 0:
            raise CallbackStateError(
                f"{self.state_key}: 'wait' must be an int of 0 or more, got {wait!r}"
            )
        self.best = None if best is None else float(best)
        self.wait = wait
        if self.state is not None:
            self._mirror()

    def _improves(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        if self.best is None:
            return True
        if self.mode == "min":
            return value < self.best - self.min_delta
        return value > self.best + self.min_delta

    def _mirror(self) -> None:
        state = self._bound_state()
        state.patience_left = {**state.patience_left, self.monitor: self.patience_left}

    def _bound_state(self) -> TrainingState:
        if self.state is None:
            raise CallbackNotBoundError(
                "EarlyStopping has no state: add it to a CallbackHandler and bind the handler "
                "(handler.bind(state=...)) before firing hooks"
            )
        return self.state


def _split_monitor(monitor: str) -> tuple[str, str, str]:
    """(metric, "@" or "", validation set or ""): the set is the text after the last "@"."""
    if "@" not in monitor:
        return monitor, "", ""
    return monitor.rpartition("@")


def _names(mapping: dict[str, Any]) -> str:
    return ", ".join(repr(key) for key in mapping) or "(none)"
