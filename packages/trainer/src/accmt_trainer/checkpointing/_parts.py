"""What one process writes into a checkpoint and reads back from it, and the copy of it that a
background write takes.

A synchronous checkpoint writes from the live objects: Accelerate's ``save_state``, then this
package's parts. A background (``checkpoint_async``) checkpoint first copies all of it into CPU
memory at the checkpoint's moment, the RNG states included, and writes the copy from a thread
through Accelerate's own ``save_accelerator_state``, so the files are the same either way.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Protocol

import attrs
import numpy as np
import torch
from accelerate import Accelerator
from accelerate.checkpointing import save_accelerator_state
from accelerate.utils import RNG_STATE_NAME

from accmt_callbacks import CallbackHandler
from accmt_state import TrainingState, read_json, write_json

from .._errors import CheckpointError, TrainerConfigError
from ._frozen import FROZEN, FrozenWeights
from ._safe_tree import check_tree, load_tree, save_tree


class Checkpointable(Protocol):
    """An object ``Trainer.register_for_checkpointing`` takes."""

    def state_dict(self) -> Mapping[str, Any]: ...

    def load_state_dict(self, state: Mapping[str, Any], /) -> Any: ...


TRACKER_RUNS = "trackers.json"
"""The tracker runs (``{tracker name: run id}``) that a resume continues."""


@attrs.define
class Parts:
    """This package's files of one checkpoint: the state, the callbacks, the registered
    objects and the tracker runs (written by the main process), and each process's own part."""

    state: TrainingState
    callbacks: Mapping[str, Any]
    losses: Mapping[str, Any]
    """This process's training loss windows."""
    objects: list[Mapping[str, Any]]
    tracker_runs: Mapping[str, str] = attrs.field(factory=dict)
    frozen: Mapping[str, Any] | None = None
    """``frozen.json``: the parameters left out, described (None: every one is written)."""
    stream: Mapping[str, Any] | None = None
    """This process's place in the training stream (its loader's state), where the stream
    resumes from its own place; None where it does not."""

    @classmethod
    def of(
        cls,
        state: TrainingState,
        callbacks: CallbackHandler,
        losses: Mapping[str, Any],
        objects: Sequence[Checkpointable],
        tracker_runs: Mapping[str, str],
        *,
        copy: bool,
        frozen: Mapping[str, Any] | None = None,
        stream: Mapping[str, Any] | None = None,
    ) -> Parts:
        runs = dict(tracker_runs)
        if not copy:
            states = [o.state_dict() for o in objects]
            return cls(state, callbacks.state_dict(), losses, states, runs, frozen, stream)
        return cls(
            TrainingState.from_dict(state.to_dict()),
            cpu_copy(callbacks.state_dict()),
            cpu_copy(losses),
            [cpu_copy(o.state_dict()) for o in objects],
            runs,
            frozen,
            cpu_copy(stream),
        )

    def write(self, folder: Path, accelerator: Accelerator) -> None:
        save_tree(_losses_file(folder, accelerator.process_index), self.losses)
        if self.stream is not None:
            save_tree(_stream_file(folder, accelerator.process_index), self.stream)
        if accelerator.is_main_process:
            # Not fsynced: the manifest's digests catch a file a power cut left short.
            self.state.save(folder / "state.json", durable=False)
            write_json(folder / "callbacks.json", self.callbacks, durable=False)
            write_json(folder / TRACKER_RUNS, self.tracker_runs, durable=False)
            if self.frozen is not None:
                write_json(folder / FROZEN, self.frozen, durable=False)
            for index, state in enumerate(self.objects):
                save_tree(folder / f"object_{index}.safetensors", state)


def _losses_file(folder: Path, rank: int) -> Path:
    return folder / f"process_{rank}.safetensors"


def read_losses(folder: Path, rank: int) -> dict[str, Any]:
    """Process ``rank``'s training loss windows in the checkpoint in ``folder``."""
    losses: dict[str, Any] = load_tree(_losses_file(folder, rank))
    return losses


def _stream_file(folder: Path, rank: int) -> Path:
    return folder / f"stream_{rank}.safetensors"


# Where accmt-trainer 2.x before per-process places wrote a one-process run's stream place:
# Accelerate's save_state, which names one file for every process.
_ACCELERATE_PLACE = Path("accelerate") / "dl_state_dict.bin"


def read_stream_place(folder: Path, rank: int, made_on: int) -> dict[str, Any]:
    """Process ``rank``'s place in the training stream in the checkpoint in ``folder``, made
    on ``made_on`` processes: its own file, or for a checkpoint of one process written before
    those, Accelerate's (read with ``weights_only=True``). CheckpointError when it has none."""
    own = _stream_file(folder, rank)
    if own.exists():
        place: dict[str, Any] = load_tree(own)
        return place
    if made_on == 1 and (folder / _ACCELERATE_PLACE).exists():
        former: dict[str, Any] = torch.load(folder / _ACCELERATE_PLACE, weights_only=True)
        return former
    raise CheckpointError(
        f"{own} is missing: the checkpoint holds no place of process {rank} in the training "
        "stream, which this run resumes from each process's own place (an accmt-trainer that "
        "read streams again on several processes made it). Resume from a checkpoint made at "
        "an epoch's end (resume=<index>), or pass resume=False to start afresh"
    )


def read_callback_states(folder: Path) -> Any:
    """The callbacks' states (``CallbackHandler.load_state_dict`` takes them)."""
    return read_json(folder / "callbacks.json")


def load_objects(folder: Path, objects: Sequence[Checkpointable]) -> None:
    """Each object given to ``register_for_checkpointing``, in order, from its file."""
    for index, target in enumerate(objects):
        path = folder / f"object_{index}.safetensors"
        if not path.exists():
            raise CheckpointError(
                f"{path} is missing: the checkpoint holds fewer registered objects than the "
                f"{len(objects)} given to register_for_checkpointing"
            )
        target.load_state_dict(load_tree(path))


def load_accelerate_state(
    accelerator: Accelerator, folder: Path, frozen: FrozenWeights | None = None
) -> None:
    """Model, optimizer, scheduler, scaler, RNGs (and a stateful loader's place) through
    Accelerate's load_state, which reads them with ``weights_only=True``; the parameters the
    checkpoint left out (``frozen``, checked by ``Checkpoints.start``) stay as they are."""
    try:
        with frozen.loading(accelerator, folder) if frozen is not None else nullcontext():
            accelerator.load_state(str(folder / "accelerate"))
    except Exception as error:
        raise CheckpointError(f"{folder / 'accelerate'} cannot be loaded: {error}") from error


def read_tracker_runs(folder: Path) -> dict[str, str]:
    """The tracker runs the checkpoint in ``folder`` continues."""
    path = folder / TRACKER_RUNS
    runs = read_json(path)
    if not isinstance(runs, dict) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in runs.items()
    ):
        raise CheckpointError(f"{path}: expected {{tracker name: run id}}, got {runs!r}")
    return runs


def check_checkpointable(obj: Any) -> None:
    """Refuse, at registration, an object whose state cannot be written without pickle."""
    name = type(obj).__name__
    for method in ("state_dict", "load_state_dict"):
        if not callable(getattr(obj, method, None)):
            raise TrainerConfigError(
                f"register_for_checkpointing({name}): it has no {method}(); an object is "
                "checkpointed through state_dict() and load_state_dict(state)"
            )
    try:
        check_tree(obj.state_dict(), f"{name}.state_dict()")
    except TypeError as error:
        raise TrainerConfigError(
            f"register_for_checkpointing: {error}. A checkpoint holds tensors and plain values "
            "only (dicts with string keys, lists, numbers, strings, booleans, None), so that "
            "loading it runs no code"
        ) from None


class _Frozen:
    """Stands for an optimizer, scheduler or scaler: its state as it was at the snapshot."""

    def __init__(self, state: Any) -> None:
        self._state = state

    def state_dict(self) -> Any:
        return self._state


@attrs.define
class AccelerateSnapshot:
    """What ``save_state`` would write for a plain (single-device or DDP) run, copied to CPU."""

    weights: list[dict[str, torch.Tensor]]
    optimizer: _Frozen
    scheduler: _Frozen | None
    scaler: _Frozen | None
    rng: dict[str, Any]
    step: int

    @classmethod
    def take(
        cls,
        accelerator: Accelerator,
        models: Sequence[torch.nn.Module],
        optimizer: Any,
        scheduler: Any,
        reuse: AccelerateSnapshot | None = None,
        frozen: FrozenWeights | None = None,
    ) -> AccelerateSnapshot:
        """The copy; ``reuse``, a snapshot whose write has ended, lends its buffers, so that
        later checkpoints copy into memory already mapped instead of faulting in new pages.
        The parameters ``frozen`` leaves out are neither copied nor written."""
        scaler = accelerator.scaler
        old = reuse or cls([], _Frozen(None), None, None, {}, 0)
        states = [accelerator.get_state_dict(m) for m in models]
        if frozen is not None:
            states = [
                frozen.without_frozen(accelerator.unwrap_model(m), state)
                for m, state in zip(models, states, strict=True)
            ]
        weights = [
            cpu_copy(state, old.weights[i] if i < len(old.weights) else None)
            for i, state in enumerate(states)
        ]
        return cls(
            weights=weights,
            optimizer=_Frozen(cpu_copy(optimizer.state_dict(), old.optimizer.state_dict())),
            scheduler=None if scheduler is None else _Frozen(cpu_copy(scheduler.state_dict())),
            scaler=None if scaler is None else _Frozen(cpu_copy(scaler.state_dict())),
            rng=rng_states(),
            step=accelerator.step,
        )

    def write(self, folder: Path, accelerator: Accelerator) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        save_accelerator_state(
            str(folder),
            self.weights,
            [self.optimizer],
            [] if self.scheduler is None else [self.scheduler],
            [],
            accelerator.process_index,
            self.step,
            self.scaler,
            save_on_each_node=accelerator.project_configuration.save_on_each_node,
        )
        # save_accelerator_state took the RNG states of this moment, not of the snapshot's.
        states = {"step": self.step, **self.rng}
        torch.save(states, folder / f"{RNG_STATE_NAME}_{accelerator.process_index}.pkl")


def rng_states() -> dict[str, Any]:
    """The generators' states, under the keys Accelerate's ``load_state`` restores."""
    states: dict[str, Any] = {
        "random_state": random.getstate(),
        "numpy_random_seed": np.random.get_state(),
        "torch_manual_seed": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        states["torch_cuda_manual_seed"] = torch.cuda.get_rng_state_all()
    return states


def cpu_copy(value: Any, into: Any = None) -> Any:
    """``value`` with every tensor copied to CPU memory, at any depth; a tensor of ``into``
    at the same place, of the same shape and type, is written over instead of allocated."""
    if isinstance(value, torch.Tensor):
        if (
            isinstance(into, torch.Tensor)
            and into.shape == value.shape
            and into.dtype == value.dtype
        ):
            return into.copy_(value.detach())
        return value.detach().to("cpu", copy=True)
    if isinstance(value, Mapping):
        old = into if isinstance(into, Mapping) else {}
        return {key: cpu_copy(item, old.get(key)) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        olds = list(into) if isinstance(into, (list, tuple)) else []
        items = [cpu_copy(item, olds[i] if i < len(olds) else None) for i, item in enumerate(value)]
        return type(value)(items)
    return value
