"""Loading saved weights into a model: the inverse of what the Trainer writes.

A best model's folder (``model_path/<rule>``, from ``register_model_saving``) holds Accelerate's
``save_model`` output, or a PEFT model's adapters (``_adapters.py``); a checkpoint keeps the
same under ``accelerate/``, less the parameters frozen for its whole fit, which its
``frozen.json`` describes (``_frozen``): those the model must already hold, checked by digest.
Only safetensors are read, so loading runs no code.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from safetensors.torch import load_file

from .._errors import TrainerConfigError
from ..runtime import own_model
from ._adapters import is_adapter_folder, load_adapter
from ._frozen import first_difference, read_frozen

if TYPE_CHECKING:
    from .._module import AcceleratorModule

WEIGHTS = "model.safetensors"
SHARDED_WEIGHTS = "model.safetensors.index.json"


def load_weights(target: AcceleratorModule | torch.nn.Module, path: str | os.PathLike[str]) -> Path:
    """Load the weights saved at ``path`` into ``target`` (a module's ``model``, or a model).

    ``path`` is a best model's folder (``model_path/best_valid_loss``), a checkpoint's folder
    (``model_path/checkpoints/checkpoint_000003``), or a ``.safetensors`` file or sharded index.
    Every parameter and buffer must match by name and shape. A checkpoint holds what trains:
    the parameters frozen for its whole fit (a LoRA model's base, say) are not in it but listed
    in its ``frozen.json`` with their digests, and the model's own must be those, checked
    before anything is loaded (a different base is refused, naming the parameter); the rest is
    loaded from the checkpoint. Works with or without a Trainer, on a model wrapped by
    Accelerate or not. A PEFT adapter folder (a PEFT model's best model) loads into the adapters
    of the same names of ``target``'s PEFT model. Returns the file that was read (an adapter
    folder's first).
    """
    model = target if isinstance(target, torch.nn.Module) else target.model
    if is_adapter_folder(Path(path)):
        return load_adapter(own_model(model), Path(path), "load_weights")[0]
    source = weights_file(Path(path))
    own = own_model(model)
    frozen = read_frozen(source.parent.parent) if source.parent.name == "accelerate" else {}
    parameters = {_uncompiled(name): p for name, p in own.named_parameters()}
    differs = first_difference(parameters, frozen)
    if differs is not None:
        raise TrainerConfigError(
            f"load_weights({str(path)!r}): the checkpoint does not hold the weights that were "
            f"frozen in its fit, and this model's differ: {differs}; load it into the model its "
            "fit started from"
        )
    try:
        _load(own, _tensors(source), frozen=frozen.keys())
    except RuntimeError as error:
        raise TrainerConfigError(
            f"load_weights({str(path)!r}): the saved weights do not fit "
            f"{type(model).__name__}: {error}"
        ) from error
    return source


def _load(
    model: torch.nn.Module, tensors: dict[str, torch.Tensor], frozen: Collection[str] = ()
) -> None:
    """Every parameter and buffer of ``model`` from ``tensors``, by name and shape. A name
    missing from ``tensors`` is allowed only where the model ties it to one they hold (an LM
    head tied to its embedding): safetensors stores a tied tensor once, and Accelerate's
    save_model drops the other names; or where it is one of the ``frozen`` names (a
    checkpoint's, checked by digest), or tied to one. Names are matched without
    torch.compile's ``_orig_mod`` (a compiled model's weights load into the model, and back)."""
    names = {_uncompiled(name): name for name in model.state_dict()}
    tensors = {names.get(_uncompiled(key), key): value for key, value in tensors.items()}
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    aliases = _aliases(model)
    held = tensors.keys() | {names.get(name, name) for name in frozen}
    untied = [name for name in missing if not aliases[name] & held]
    if untied or unexpected:
        raise RuntimeError(f"missing {untied}, unexpected {list(unexpected)}")


def _uncompiled(name: str) -> str:
    """``name`` without the ``_orig_mod`` parts torch.compile's wrapper adds."""
    return ".".join(part for part in name.split(".") if part != "_orig_mod")


def _aliases(model: torch.nn.Module) -> dict[str, set[str]]:
    """Each name of the model's state, and the names of those sharing its storage."""
    by_storage: dict[tuple[int, int], set[str]] = {}
    for name, tensor in model.state_dict(keep_vars=True).items():
        # An empty tensor has no storage to share: it is its own.
        where = (tensor.data_ptr(), tensor.nbytes) if tensor.nbytes else (id(tensor), 0)
        by_storage.setdefault(where, set()).add(name)
    return {name: names for names in by_storage.values() for name in names}


def _tensors(source: Path) -> dict[str, torch.Tensor]:
    """Every tensor of a safetensors file, or of all the shards of an index: a strict load must
    see the whole model at once (Accelerate 1.2's load_checkpoint_in_model loads a sharded model
    shard by shard, and a strict load of one shard misses the others' keys)."""
    if not source.name.endswith(".index.json"):
        return load_file(source)
    shards = set(json.loads(source.read_text())["weight_map"].values())
    return {
        name: tensor
        for shard in sorted(shards)
        for name, tensor in load_file(source.parent / shard).items()
    }


def weights_file(path: Path) -> Path:
    """The safetensors file (or sharded index) that holds the model saved at ``path``."""
    if path.is_file():
        if path.name.endswith(".safetensors"):
            return path
        if path.name.endswith(".safetensors.index.json"):
            return _checked_index(path)
        raise TrainerConfigError(
            f"load_weights({str(path)!r}): not a .safetensors file or index; only safetensors "
            "are read (they run no code)"
        )
    folder = path / "accelerate" if (path / "accelerate").is_dir() else path
    if (folder / WEIGHTS).is_file():
        return folder / WEIGHTS
    if (folder / SHARDED_WEIGHTS).is_file():
        return _checked_index(folder / SHARDED_WEIGHTS)
    what = "no such folder" if not path.exists() else f"it holds no {WEIGHTS} or {SHARDED_WEIGHTS}"
    raise TrainerConfigError(
        f"load_weights({str(path)!r}): {what}; give a best model's folder "
        "(model_path/<rule>), a checkpoint's folder or a .safetensors file"
    )


def _checked_index(index: Path) -> Path:
    """A sharded index whose shards are safetensors files beside it."""
    try:
        shards = set(json.loads(index.read_text())["weight_map"].values())
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise TrainerConfigError(f"load_weights: {index} is not a sharded index: {error}") from None
    for shard in sorted(shards):
        if (
            not isinstance(shard, str)
            or Path(shard).name != shard
            or not shard.endswith(".safetensors")
        ):
            raise TrainerConfigError(
                f"load_weights: {index} names the shard {shard!r}; shards must be .safetensors "
                "files in the same folder"
            )
    return index
