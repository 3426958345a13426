"""One background thread writing one checkpoint at a time."""

from __future__ import annotations

import threading
from collections.abc import Callable


class BackgroundWriter:
    """Runs one write at a time in a thread; :meth:`wait` joins it and re-raises its error.

    The next write, the end of ``fit``, a signal's stop and an exception all wait for the
    write in flight, so at most one exists and none is lost.
    """

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def start(self, write: Callable[[], None]) -> None:
        self.wait()

        def run() -> None:
            try:
                write()
            except BaseException as error:  # re-raised in the training thread by wait()
                self._error = error

        self._thread = threading.Thread(target=run, name="accmt-checkpoint", daemon=False)
        self._thread.start()

    def wait(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
        error, self._error = self._error, None
        if error is not None:
            raise error
