"""PEFT models: best models saved as PEFT adapter folders, loaded back, merged on request.

A PEFT model is recognised by what it has (``peft_config`` and ``save_pretrained``), so that
nothing imports peft unless the model is one. Its best model is what PEFT's own
``save_pretrained`` writes (``adapter_config.json``, ``adapter_model.safetensors``; an adapter
other than ``default`` in a folder of its name), which ``PeftModel.from_pretrained(base,
folder)`` loads; with ``save_merged``, the merged full model (``merge_and_unload`` on a copy)
is written beside it in ``merged/``, which transformers' ``from_pretrained`` loads. Only
safetensors are read back, so loading runs no code.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from safetensors.torch import load_file

from .._errors import TrainerConfigError
from ..runtime import own_model, shards_the_model

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
MERGED = "merged"
"""The folder, inside a best model's, of the merged full model (``save_merged``)."""
DEFAULT = "default"
"""PEFT's default adapter name: saved at the folder's root, the others in subfolders."""


def is_peft_model(model: torch.nn.Module) -> bool:
    """Whether ``model`` (the user's own, unwrapped) is a PEFT model: it has ``peft_config``
    and ``save_pretrained``."""
    return hasattr(model, "peft_config") and callable(getattr(model, "save_pretrained", None))


def is_adapter_folder(path: Path) -> bool:
    """Whether ``path`` is a folder PEFT's ``save_pretrained`` wrote."""
    return (path / ADAPTER_CONFIG).is_file()


def check_peft_model(model: torch.nn.Module, accelerator: Accelerator, save_merged: bool) -> None:
    """Before a fit prepares ``model``: a PEFT model whose adapters train nothing is refused, and
    so are a trainable parameter PEFT would not save and ``save_merged`` where there is no
    adapter to merge, or it cannot be merged."""
    own: Any = own_model(model)
    if not is_peft_model(own):
        if save_merged:
            raise TrainerConfigError(
                f"Trainer(save_merged=True): {type(own).__name__} is not a PEFT model (one with "
                "peft_config and save_pretrained, as peft.get_peft_model makes); there is no "
                "adapter to merge. Leave save_merged off"
            )
        return
    trainable = [name for name, parameter in own.named_parameters() if parameter.requires_grad]
    if not trainable:
        raise TrainerConfigError(
            f"Trainer.fit: the PEFT model {type(own).__name__} has no trainable parameter (its "
            "adapters are frozen: inference mode, or requires_grad=False); make the adapter "
            "trainable (get_peft_model, or PeftModel.from_pretrained(..., is_trainable=True))"
        )
    outside = _not_saved(own, trainable)
    if outside:
        raise TrainerConfigError(
            f"Trainer.fit: {outside[0]!r} of the PEFT model trains but belongs to no adapter "
            f"({list(own.peft_config)}), so PEFT's save_pretrained would leave it out of the "
            "best model; "
            "name its module in the PEFT config's modules_to_save, or freeze it"
        )
    if save_merged:
        if not callable(getattr(own, "merge_and_unload", None)):
            raise TrainerConfigError(
                f"Trainer(save_merged=True): {type(own).__name__} has no merge_and_unload, so "
                "its adapters cannot be merged into the base model; leave save_merged off"
            )
        if shards_the_model(accelerator):
            raise TrainerConfigError(
                f"Trainer(save_merged=True): the model is split across processes "
                f"({accelerator.distributed_type}) and cannot be merged as it trains; merge the "
                "best adapter after the run (PeftModel.from_pretrained(base, folder)"
                ".merge_and_unload())"
            )


def _not_saved(model: Any, trainable: list[str]) -> list[str]:
    """The trainable parameters that PEFT's ``save_pretrained`` leaves out: those of no adapter
    (a PEFT module keeps an adapter's tensors under its name) and not in what it saves (a
    LoRA ``bias="all"`` saves the base's biases)."""
    from peft import get_peft_model_state_dict

    adapters = {str(name) for name in model.peft_config}
    saved = {key for a in adapters for key in get_peft_model_state_dict(model, adapter_name=a)}
    return [name for name in trainable if not adapters & set(name.split(".")) and name not in saved]


def save_adapter(
    model: torch.nn.Module,
    folder: Path,
    accelerator: Accelerator,
    *,
    merged: bool,
    max_shard_size: int | str,
) -> None:
    """Write ``model``'s adapters (``model`` as prepared) into ``folder`` with PEFT's own
    ``save_pretrained`` (the main process), and with ``merged`` the merged full model into
    ``folder/merged``. Every process calls it: a model split across processes is gathered."""
    # Gathering a sharded model is a collective: every process takes part.
    gathered = accelerator.get_state_dict(model) if shards_the_model(accelerator) else None
    if not accelerator.is_main_process:
        return
    own: Any = own_model(model)
    extra = {} if gathered is None else {"state_dict": gathered}
    own.save_pretrained(str(folder), safe_serialization=True, **extra)
    if merged:
        full = copy.deepcopy(own).merge_and_unload()
        with _no_progress_bar():  # the Trainer's bar is the run's only one
            full.save_pretrained(
                str(folder / MERGED), safe_serialization=True, max_shard_size=max_shard_size
            )


@contextlib.contextmanager
def _no_progress_bar() -> Iterator[None]:
    """transformers' bar of the shards it writes, left out (PEFT brings transformers)."""
    from transformers.utils import logging

    transformers_logging: Any = logging  # its switches are untyped
    shown = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            transformers_logging.enable_progress_bar()


def load_adapter(model: torch.nn.Module, folder: Path, call: str) -> list[Path]:
    """Load the adapters saved in ``folder`` by ``save_pretrained`` into ``model``'s (the user's
    own PEFT model) of the same names: exactly the tensors each adapter has, by name and shape.
    Returns the files read; ``call`` names the caller in errors."""
    if not is_peft_model(model):
        raise TrainerConfigError(
            f"{call}({str(folder)!r}): the folder holds a PEFT adapter, and "
            f"{type(model).__name__} is not a PEFT model; load it into one "
            "(peft.PeftModel.from_pretrained(base, folder))"
        )
    from peft import get_peft_model_state_dict, set_peft_model_state_dict

    peft_model: Any = model
    names = [str(name) for name in peft_model.peft_config]
    found = {name: _weights_of(folder, name) for name in names}
    found = {name: path for name, path in found.items() if path.is_file()}
    if not found:
        raise TrainerConfigError(
            f"{call}({str(folder)!r}): no {ADAPTER_WEIGHTS} for the model's adapters {names} "
            f"(the 'default' one at the folder's root, another in a folder of its name)"
        )
    for name, path in found.items():
        tensors = load_file(path)
        expected = get_peft_model_state_dict(model, adapter_name=name).keys()
        missing, unexpected = sorted(expected - tensors.keys()), sorted(tensors.keys() - expected)
        if missing or unexpected:
            raise TrainerConfigError(
                f"{call}({str(folder)!r}): the adapter {name!r} does not fit "
                f"{type(model).__name__}'s: missing {missing[:5]}, unexpected {unexpected[:5]}"
            )
        try:
            set_peft_model_state_dict(model, tensors, adapter_name=name)
        except RuntimeError as error:  # a shape that differs (another rank, say)
            raise TrainerConfigError(
                f"{call}({str(folder)!r}): the adapter {name!r} does not fit "
                f"{type(model).__name__}'s: {error}"
            ) from error
    return list(found.values())


def _weights_of(folder: Path, adapter: str) -> Path:
    return (folder if adapter == DEFAULT else folder / adapter) / ADAPTER_WEIGHTS
