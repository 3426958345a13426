"""Checkpoints hold what trains: a parameter frozen (``requires_grad=False``) for the whole fit
so far is not written, only described.

When the fit starts, every frozen parameter's name, shape, dtype and the xxh3-128 digest of its
full tensor (as the manifest digests files) are taken once. A checkpoint leaves those
parameters out of the model's weights and lists them in ``frozen.json``; a parameter whose
``requires_grad`` was True at any checkpoint of the fit is written from then on. A resume
checks the model's frozen weights against the list before anything is loaded or moved
(:meth:`FrozenWeights.check`), and loads the checkpoint's weights with exactly the listed
parameters missing (:meth:`FrozenWeights.loading`). A model with nothing frozen checkpoints as
it always did: no ``frozen.json``, every parameter written.

Accelerate's ``save_state`` writes every parameter; its save pre-hook takes the frozen ones out
of the state dicts it is about to write, and its load pre-hook loads the models here, through
safetensors' own ``load_model``, allowing the listed names (and only them) to be missing.
Parameters are found by identity, so the names Accelerate's wrappers and torch.compile add to a
state dict's keys do not matter. The background snapshot takes them out before its copy.

Under FSDP2, Accelerate's ``save_state`` and ``load_state`` take the model's state dict
through torch's ``get_model_state_dict``/``set_model_state_dict`` with options of their own
(torch's ``ignore_frozen_params`` is not among them, and there is no hook before the model is
written), so the model itself is told instead, for the length of the call: a state-dict
post-hook on it leaves the frozen parameters out of every state dict it makes (what is
written, sharded or gathered whole, and what DCP is asked to read back), and a
``load_state_dict`` post-hook allows exactly the listed ones missing. The frozen shards stay
as the prepared model holds them, their full tensors checked by digest first. Not under FSDP1
nor DeepSpeed, whose sharded paths are their own: such a model is checkpointed whole, as
before (``Checkpoints.start`` makes no ``FrozenWeights`` for it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import torch
import xxhash
from accelerate import Accelerator
from accelerate.utils import SAFE_WEIGHTS_NAME, DistributedType
from safetensors.torch import load_model

from accmt_state import read_json

from .._errors import CheckpointError
from ..runtime import own_model

FROZEN = "frozen.json"
"""A checkpoint's list of the parameters it does not hold: name -> shape, dtype, digest."""


@attrs.frozen(kw_only=True)
class FrozenTensor:
    """What a frozen parameter is checked by: its shape, dtype and full tensor's digest."""

    shape: tuple[int, ...]
    dtype: str
    xxh3_128: str

    def to_json(self) -> dict[str, Any]:
        return {"shape": list(self.shape), "dtype": self.dtype, "xxh3_128": self.xxh3_128}

    def differs(self, other: FrozenTensor) -> str | None:
        """What differs from ``other`` (the checkpoint's), or None."""
        if self.shape != other.shape:
            return f"its shape is {list(self.shape)}, the checkpoint's {list(other.shape)}"
        if self.dtype != other.dtype:
            return f"its dtype is {self.dtype}, the checkpoint's {other.dtype}"
        if self.xxh3_128 != other.xxh3_128:
            return "its values differ from the checkpoint's (xxh3-128 digest)"
        return None


def describe_tensor(tensor: torch.Tensor) -> FrozenTensor:
    """The shape, dtype and digest of ``tensor``'s full values (a DTensor is gathered whole
    first, a collective every process takes part in)."""
    full = getattr(tensor, "full_tensor", None)
    whole: torch.Tensor = full() if callable(full) else tensor
    data = whole.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8)
    digest = xxhash.xxh3_128()
    digest.update(data.numpy().data)  # the bytes in place, not copied
    dtype = str(whole.dtype).removeprefix("torch.")
    return FrozenTensor(shape=tuple(whole.shape), dtype=dtype, xxh3_128=digest.hexdigest())


def read_frozen(folder: Path) -> dict[str, FrozenTensor]:
    """The parameters the checkpoint in ``folder`` does not hold (none without ``frozen.json``)."""
    path = folder / FROZEN
    if not path.is_file():
        return {}
    data = read_json(path)
    try:
        listed = data["parameters"]
        return {
            str(name): FrozenTensor(
                shape=tuple(int(size) for size in entry["shape"]),
                dtype=str(entry["dtype"]),
                xxh3_128=str(entry["xxh3_128"]),
            )
            for name, entry in listed.items()
        }
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise CheckpointError(
            f"{path}: expected {{'parameters': {{name: {{shape, dtype, xxh3_128}}}}}}: {error!r}"
        ) from None


def first_difference(
    parameters: Mapping[str, torch.Tensor],
    saved: Mapping[str, FrozenTensor],
    *,
    known: Mapping[str, FrozenTensor] | None = None,
) -> str | None:
    """How the first of the ``saved`` frozen parameters that ``parameters`` (by name) lack, or
    hold with another shape, dtype or values, differs; None when none does. ``known``: digests
    already taken, by name."""
    for name, expected in saved.items():
        parameter = parameters.get(name)
        if parameter is None:
            return f"the parameter {name!r} is not in the model"
        found = (known or {}).get(name) or describe_tensor(parameter)
        differs = found.differs(expected)
        if differs is not None:
            return f"the parameter {name!r}: {differs}"
    return None


class FrozenWeights:
    """The frozen parameters of one fit's model (the user's own, inside Accelerate's and
    torch.compile's wrappers), their digests taken once when it is made, and the names that
    have trained at some point of the fit (``requires_grad`` True at its start or at a
    checkpoint): those are written."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.parameters = dict(own_model(model).named_parameters())
        self.trained = {name for name, p in self.parameters.items() if p.requires_grad}
        self.digests = {
            name: describe_tensor(p) for name, p in self.parameters.items() if not p.requires_grad
        }
        self.saved: dict[str, FrozenTensor] = {}
        """The frozen parameters of the checkpoint the fit resumes (none: afresh)."""

    @property
    def frozen(self) -> dict[str, FrozenTensor]:
        """The parameters frozen for the whole fit so far: what a checkpoint leaves out."""
        return {n: d for n, d in self.digests.items() if n not in self.trained}

    def note_trainable(self) -> None:
        """At a checkpoint: a parameter that trains now is written from now on."""
        self.trained |= {name for name, p in self.parameters.items() if p.requires_grad}

    # ------------------------------------------------------------------------- resume

    def check(self, folder: Path) -> None:
        """Before anything is loaded or moved: the model's weights that the checkpoint in
        ``folder`` does not hold must be those it was made with. Raises CheckpointError naming
        the first that differs. From then on the fit goes on from the checkpoint's: what it
        wrote (a parameter frozen now included) has trained."""
        saved = read_frozen(folder)
        differs = first_difference(self.parameters, saved, known=self.digests)
        if differs is not None:
            raise CheckpointError(
                f"checkpoint {folder} does not hold the frozen weights it was made with, and "
                f"this model's differ: {differs}. Resume with the same base model (the weights "
                "that do not train), or start afresh with resume=False"
            )
        self.saved = saved
        self.trained |= self.parameters.keys() - saved.keys()

    @contextlib.contextmanager
    def loading(self, accelerator: Accelerator, folder: Path) -> Iterator[None]:
        """Around Accelerate's ``load_state`` of ``folder``: when the checkpoint left frozen
        parameters out, the models are loaded here, those parameters (and only they) allowed
        missing. Otherwise Accelerate loads them as it always does."""
        if not self.saved:
            yield
            return
        if accelerator.distributed_type == DistributedType.FSDP:
            with self._left_out_by_the_model(self.saved):
                yield
            return

        def load(models: list[torch.nn.Module], input_dir: str) -> None:
            for index, model in enumerate(models):
                name = SAFE_WEIGHTS_NAME.replace(".", f"_{index}.") if index else SAFE_WEIGHTS_NAME
                path = Path(input_dir) / name
                if not path.is_file():
                    raise CheckpointError(f"{path} is missing")
                allowed = self._keys_of(model, self.saved)
                missing, unexpected = load_model(model, path, strict=False)
                untold = sorted(set(missing) - allowed)
                if untold or unexpected:
                    raise CheckpointError(
                        f"{path} does not fit {type(model).__name__}: missing {untold}, "
                        f"unexpected {sorted(unexpected)}"
                    )
            models.clear()  # loaded: Accelerate loads the rest (optimizer, RNGs, ...)

        handle = accelerator.register_load_state_pre_hook(load)
        try:
            yield
        finally:
            handle.remove()

    # -------------------------------------------------------------------------- write

    def record(self) -> dict[str, Any] | None:
        """``frozen.json``'s content, or None when nothing is left out."""
        frozen = self.frozen
        if not frozen:
            return None
        return {"parameters": {name: d.to_json() for name, d in sorted(frozen.items())}}

    def without_frozen(
        self, module: torch.nn.Module, state: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        """``state`` (``module``'s state dict) with the frozen parameters taken out, in place."""
        for key in self._keys_of(module, self.frozen):
            state.pop(key, None)
        return state

    @contextlib.contextmanager
    def saving(self, accelerator: Accelerator) -> Iterator[None]:
        """Around Accelerate's ``save_state``: the frozen parameters are not written."""
        if not self.frozen:
            yield
            return
        if accelerator.distributed_type == DistributedType.FSDP:
            with self._left_out_by_the_model(self.frozen):
                yield
            return

        def drop(models: Sequence[torch.nn.Module], weights: list[Any], output_dir: str) -> None:
            for model, state in zip(models, weights, strict=False):
                self.without_frozen(model, state)

        handle = accelerator.register_save_state_pre_hook(drop)
        try:
            yield
        finally:
            handle.remove()

    def _keys_of(self, module: torch.nn.Module, names: Mapping[str, Any]) -> set[str]:
        """The keys of ``module``'s state dict that hold the parameters named ``names``."""
        wanted = {id(self.parameters[name]) for name in names if name in self.parameters}
        return {
            key for key, value in module.state_dict(keep_vars=True).items() if id(value) in wanted
        }

    @contextlib.contextmanager
    def _left_out_by_the_model(self, names: Mapping[str, Any]) -> Iterator[None]:
        """Under FSDP2: the parameters ``names`` are left out of the model's state dicts and
        allowed missing when one is loaded into it (torch's module hooks), for the length of
        the block."""
        model = self.model
        # Found again by identity: FSDP2 may have registered new parameter objects since.
        current = {id(p) for n, p in own_model(model).named_parameters() if n in names}
        keys = {k for k, v in model.state_dict(keep_vars=True).items() if id(v) in current}

        def leave_out(
            module: torch.nn.Module, state: dict[str, Any], prefix: str, local: Any
        ) -> None:
            for key in keys:
                state.pop(prefix + key, None)

        def allow_missing(module: torch.nn.Module, incompatible: Any) -> None:
            missing: list[str] = incompatible.missing_keys
            missing[:] = [key for key in missing if key not in keys]

        handles = [
            model.register_state_dict_post_hook(leave_out),  # type: ignore[no-untyped-call]
            model.register_load_state_dict_post_hook(allow_missing),  # type: ignore[no-untyped-call]
        ]
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()
