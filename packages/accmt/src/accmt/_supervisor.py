"""``accmt launch``'s own process: it never leaves orphans, and its exit status says how the
workers ended.

Accelerate's launcher (and torch's elastic agent inside it) runs in a thread of this process,
so the signals stay with the main thread here: the agent installs no handler of its own (it
installs them only in the main thread), and ``accmt launch`` is the one that decides. The
workers are this process's children (the agent starts them). A signal the launcher gets
(SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2) is forwarded to each worker, as it came,
and the launcher goes on waiting until every worker has exited: under SLURM the job's end
then waits for the stop's checkpoint, and a worker never outlives its launcher.

- A worker in the launcher's own process group (Accelerate's one-process launch) is not
  forwarded SIGINT: a terminal's Ctrl-C reaches the whole foreground group, that worker
  included, and a second copy would read as a second Ctrl-C.
- A worker that starts after a signal (the job was still meeting) is sent that signal once.

The exit status: the workers' (the first failed one's; 128 + N for a worker ended by signal
N, as a shell says), or :data:`accmt_trainer.EXIT_RESUMABLE` (75) when a stop signal
(SIGTERM, SIGINT, SIGUSR1, SIGUSR2) reached the launcher and every worker then exited 0: the
Trainer checkpointed the stop, and running the command again resumes it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator

import psutil

FORWARDED = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)
"""What the launcher forwards to its workers rather than dying of."""

STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2)
"""The signals the Trainer turns into a checkpointed stop (SIGUSR1 and SIGUSR2: a requeue
signal); after one, workers that exit 0 were stopped, not finished."""

_THREAD_WARNING = "Failed to register signal handlers since torchelastic is running on a child"


class Forwarder:
    """The signals the launcher received, each sent on to every worker once."""

    def __init__(self) -> None:
        self.received: list[signal.Signals] = []
        self._sent: dict[tuple[int, float], int] = {}  # worker -> signals sent to it
        self._group = os.getpgid(0)
        self._forwarding = False

    def note(self, signum: int, frame: object) -> None:
        """The signal handler: keep the signal and forward it at once."""
        self.received.append(signal.Signals(signum))
        self.forward()

    def forward(self) -> None:
        """Send each worker the signals it has not had; a worker first seen after some came
        gets the first of them only (one stop request, not a second Ctrl-C)."""
        if self._forwarding:
            return  # a signal came during a pass: that pass sends it on before it ends
        self._forwarding = True
        try:
            done = 0
            while done < len(self.received):
                done = len(self.received)
                self._forward(self.received[:done])
        finally:
            self._forwarding = False

    def _forward(self, received: list[signal.Signals]) -> None:
        for worker in psutil.Process().children():
            with contextlib.suppress(psutil.Error, OSError):
                key = (worker.pid, worker.create_time())
                sent = self._sent.get(key)
                pending = received[:1] if sent is None else received[sent:]
                self._sent[key] = len(received)
                same_group = os.getpgid(worker.pid) == self._group
                for sig in pending:
                    if not (sig == signal.SIGINT and same_group):
                        worker.send_signal(sig)

    @property
    def stopped(self) -> bool:
        """Whether a stop signal reached the launcher."""
        return any(sig in STOPS for sig in self.received)


def supervise(launch: Callable[[], int]) -> int:
    """Run ``launch`` (which starts the workers as children of this process, waits for them
    and returns their exit status) with the signals forwarded; the exit status to end with."""
    if threading.current_thread() is not threading.main_thread():
        return launch()  # only the main thread can take signals: nothing to forward
    forwarder = Forwarder()
    outcome: list[int | BaseException] = []

    def run() -> None:
        try:
            outcome.append(launch())
        except BaseException as error:  # handed to the main thread
            outcome.append(error)

    thread = threading.Thread(target=run, name="accmt-launch")
    with _handlers(forwarder), _quiet_agent():
        thread.start()
        while thread.is_alive():
            thread.join(0.2)
            forwarder.forward()  # to a worker that started after a signal came
    _wait_for_workers()
    result = outcome[0]
    if isinstance(result, BaseException):
        raise result
    if result == 0 and forwarder.stopped:
        from accmt_trainer import EXIT_RESUMABLE

        return EXIT_RESUMABLE
    return result


def exit_status_of(error: BaseException) -> int:
    """The exit status a launch that raised ``error`` ends with: a failed worker's own, or
    128 + N for a worker ended by signal N; other errors are raised again."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    if isinstance(error, SystemExit):  # Accelerate's launcher exits on some failures
        code = error.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    if isinstance(error, subprocess.CalledProcessError):
        status = error.returncode
    elif isinstance(error, ChildFailedError):
        status = error.get_first_failure()[1].exitcode
    else:
        raise error
    return 128 - status if status < 0 else status or 1


@contextlib.contextmanager
def _handlers(forwarder: Forwarder) -> Iterator[None]:
    previous = {sig: signal.signal(sig, forwarder.note) for sig in FORWARDED}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class _NotInThread(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(_THREAD_WARNING)


@contextlib.contextmanager
def _quiet_agent() -> Iterator[None]:
    """torch's agent warns that, in a thread, it leaves the signals alone: here that is the
    point, so the warning is not shown."""
    logger = logging.getLogger("torch.distributed.elastic.multiprocessing.api")
    quiet = _NotInThread()
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


def _wait_for_workers() -> None:
    """Until no child of this process is left (the agent waits for its workers; this is for
    one it left behind)."""
    with contextlib.suppress(psutil.Error):
        psutil.wait_procs(psutil.Process().children())
