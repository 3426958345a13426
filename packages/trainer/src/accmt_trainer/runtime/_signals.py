"""Signals during ``fit``: SIGTERM, SIGINT and the requeue signal (SLURM's warning signal,
SIGUSR1 by default) are a stop request, so the run checkpoints and ends cleanly; and the exit
status that tells a batch script a run stopped this way from a finished one.

The first stop signal a process receives asks the run to stop. Repeats never lose the stop's
checkpoint: under SLURM a process can get SIGTERM twice at once (from slurmstepd and from a
launcher that forwards it), so a repeated SIGTERM or requeue signal is ignored, with a line. A
SIGINT after the first stop signal is a person pressing Ctrl-C again: it raises
KeyboardInterrupt at once, as Python's own handler does.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from .._errors import TrainerConfigError
from ..console import logger

if TYPE_CHECKING:
    from accmt_state import TrainingState

EXIT_RESUMABLE = 75
"""The exit status of a run a signal stopped, checkpointed and to be resumed: sysexits.h's
EX_TEMPFAIL ("try again later"). Not 0 (finished), 1 (failed), nor 128 + the signal's number
(what a shell reports for a process the signal killed, with no checkpoint made)."""

REQUEUE_SIGNALS = ("SIGUSR1", "SIGUSR2", "SIGTERM", "SIGHUP")
"""The signals ``requeue_signal`` may name: those ``accmt launch`` forwards to its workers
that no person types (SIGINT is Ctrl-C, whose second press ends a run at once)."""


def exit_status(state: TrainingState) -> int:
    """The exit status a training script ends with, given the state ``fit`` returned:
    :data:`EXIT_RESUMABLE` (75) when a signal stopped the run before its end (it is
    checkpointed; run the script again, or requeue the job, to resume it), else 0 (finished,
    or stopped by a request such as patience's). ``sys.exit(exit_status(trainer.fit(...)))``."""
    return EXIT_RESUMABLE if state.stop_signal is not None and not state.finished else 0


def requeue_signal_name(value: object) -> str | None:
    """``Trainer(requeue_signal=...)`` checked: a name (``"SIGUSR1"``, ``"USR1"``), a number or
    a ``signal.Signals``, as the signal's full name; None stays None."""
    if value is None:
        return None
    name = None
    if isinstance(value, int) and not isinstance(value, bool):
        with contextlib.suppress(ValueError):
            name = signal.Signals(value).name
    elif isinstance(value, str):
        name = value.upper() if value.upper().startswith("SIG") else f"SIG{value.upper()}"
    if name not in REQUEUE_SIGNALS:
        raise TrainerConfigError(
            f"Trainer(requeue_signal={value!r}): the signal SLURM sends before a job's end "
            f"must be one of {', '.join(REQUEUE_SIGNALS)} (a name, with or without SIG, or a "
            "number), or None for none"
        )
    return name


class StopSignals:
    """The signals that ask one run to stop, and the first of them this process received.

    While :meth:`catching` runs, SIGTERM, SIGINT and ``requeue_signal`` call ``request_stop``
    instead of ending the process (the first of them; see the module for repeats)."""

    def __init__(
        self, request_stop: Callable[[str], None], *, requeue_signal: str | None = None
    ) -> None:
        self._request_stop = request_stop
        self.requeue_signal = None if requeue_signal is None else signal.Signals[requeue_signal]
        """The signal that also requeues the job (SLURM's warning signal), or None."""
        self.first: signal.Signals | None = None
        """The first stop signal this process received while catching (None: none came)."""
        self._repeated: set[signal.Signals] = set()

    @property
    def caught(self) -> tuple[signal.Signals, ...]:
        """The signals :meth:`catching` turns into a stop request."""
        extra = () if self.requeue_signal is None else (self.requeue_signal,)
        return tuple(dict.fromkeys((signal.SIGTERM, signal.SIGINT, *extra)))

    @contextlib.contextmanager
    def catching(self, enabled: bool) -> Iterator[None]:
        """While the block runs, the stop signals ask the run to stop; the previous handlers
        are back afterwards. Only the main thread can catch them (elsewhere: nothing)."""
        if not enabled or threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self._note) for sig in self.caught}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _note(self, signum: int, frame: object) -> None:
        received = signal.Signals(signum)
        if self.first is None:
            self.first = received
            self._request_stop(f"received {received.name}")
            return
        if received == signal.SIGINT:
            raise KeyboardInterrupt  # Ctrl-C again: end now, without the stop's checkpoint
        if received not in self._repeated:  # one line per signal, however many come
            self._repeated.add(received)
            logger.warning(
                "received %s again: ignored, the stop asked by %s goes on and writes its "
                "checkpoint (Ctrl-C or SIGKILL ends the process at once)",
                received.name,
                self.first.name,
            )


def stop_on_signals(
    request_stop: Callable[[str], None], enabled: bool
) -> contextlib.AbstractContextManager[None]:
    """While the block runs, SIGTERM and SIGINT call ``request_stop`` instead of killing the
    process (a repeated SIGTERM is ignored, a second SIGINT raises KeyboardInterrupt); the
    previous handlers are back afterwards. Only the main thread can catch them."""
    return StopSignals(request_stop).catching(enabled)
