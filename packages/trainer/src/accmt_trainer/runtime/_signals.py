"""SIGTERM and SIGINT during ``fit``: a stop request, so the run checkpoints and ends cleanly."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def stop_on_signals(request_stop: Callable[[str], None], enabled: bool) -> Iterator[None]:
    """While the block runs, SIGTERM and SIGINT call ``request_stop`` instead of killing the
    process; the previous handlers are back afterwards. Only the main thread can catch them."""
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return

    def note(signum: int, frame: object) -> None:
        request_stop(f"received {signal.Signals(signum).name}")

    previous = {sig: signal.signal(sig, note) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
