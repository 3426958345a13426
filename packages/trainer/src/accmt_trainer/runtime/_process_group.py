"""A run leaves the process group as it found it: it tears down only what it created.

Accelerate's ``end_training`` finishes the trackers and destroys the default process group,
whoever made it: after it, a gather fails and a second ``fit`` in the same job cannot start. A
:class:`ProcessGroupScope` notes whether a ``torch.distributed`` group exists when it is entered
(the user's, a search's, a previous Accelerator's). On exit it finishes the trackers of the
Accelerators it owns, and destroys the group only if the group appeared inside the block (with
what torch keeps of it: :func:`forget_sharding_specs`); then it resets Accelerate's per-process
state, so that the next ``Accelerator`` (or ``PartialState``) in this process makes a new group.
Off rank 0, the teardown returns once rank 0's store server has closed (:class:`_StoreClosing`),
so that the next group cannot meet at the closing one.
"""

from __future__ import annotations

import contextlib
import os
import socket
from types import TracebackType

import torch.distributed
from accelerate import Accelerator
from accelerate.state import AcceleratorState

from ._fsdp import forget_sharding_specs


def group_exists() -> bool:
    """Whether this process has an initialised default ``torch.distributed`` group."""
    return bool(torch.distributed.is_available() and torch.distributed.is_initialized())


class ProcessGroupScope:
    """Tears down, on exit, what was made inside the block, and only that."""

    def __init__(self) -> None:
        self.found = group_exists()
        self.owned: list[Accelerator] = []

    def own(self, accelerator: Accelerator) -> Accelerator:
        """An Accelerator made inside the block, and read after it (a Trainer's
        ``accelerator``). Its trackers finish on exit, and it keeps answering its process index
        and number of processes once Accelerate's shared state is reset."""
        self.owned.append(accelerator)
        return accelerator

    @property
    def created(self) -> bool:
        """Whether a group exists now that did not when the scope was entered."""
        return not self.found and group_exists()

    def __enter__(self) -> ProcessGroupScope:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            for accelerator in self.owned:
                # The trackers' half of Accelerator.end_training.
                for tracker in accelerator.trackers:
                    tracker.finish()
        finally:
            if self.created:
                self._tear_down(ended_well=kind is None)

    def _tear_down(self, ended_well: bool) -> None:
        if ended_well:
            # Every process ends the block together; after an error, the others may never come.
            with _StoreClosing() as closing:
                torch.distributed.barrier()
                _destroy_default_group()
                closing.wait()
        else:
            _destroy_default_group()
        forget_sharding_specs()
        for accelerator in self.owned:
            # AcceleratorState shares one dict between its instances (Accelerate's singleton):
            # this Accelerator's own copy outlives the reset below.
            accelerator.state.__dict__ = dict(accelerator.state.__dict__)
        # Accelerate has no public way to forget its per-process state.
        AcceleratorState._reset_state(reset_partial_state=True)


def _destroy_default_group() -> None:
    """``destroy_process_group``, keeping torch's count of the groups made so far.

    torch names the default group after that count, which ``destroy_process_group`` sets back
    to 0: a group made again in this job would reuse the first one's keys in the launcher's
    store (torchrun keeps one for the whole job), and gloo could read a peer's stale address and
    wait for it forever. Every process made the same groups in the same order, so they agree on
    the count kept, and the next group gets keys of its own.
    """
    world = torch.distributed.distributed_c10d._world
    count = world.group_count
    torch.distributed.destroy_process_group()
    world.group_count = count


class _StoreClosing:
    """Waits, in a process other than rank 0, until rank 0's store server has closed.

    Unless torchelastic's agent holds it, the job's TCP store is served by rank 0 and closes
    with its group. The next group of this job (a second fit, a search's next trial) meets at
    the same address: a process that went on at once would connect to the old server while it
    closed, and lose the connection in its next ``init_process_group`` ("Failed to recv, got 0
    bytes"). A connection of our own, opened before the barrier and so to the old server, ends
    when that server closes; it never sends, so the server has nothing to answer. (A wait on
    the store itself would end the same way, with a stack trace printed by torch.)
    """

    _LONGEST = 10.0  # seconds; rank 0 destroys its group right after the barrier

    def __enter__(self) -> _StoreClosing:
        self.connection: socket.socket | None = None
        address, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
        agent_holds_it = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == str(True)
        if address and port and not agent_holds_it and torch.distributed.get_rank() != 0:
            with contextlib.suppress(OSError):
                self.connection = socket.create_connection((address, int(port)), self._LONGEST)
        return self

    def wait(self) -> None:
        if self.connection is not None:
            with contextlib.suppress(OSError):  # a timeout included: then go on as before
                self.connection.recv(1)  # b"" once the server has closed the connection

    def __exit__(self, *exc_info: object) -> None:
        if self.connection is not None:
            self.connection.close()
