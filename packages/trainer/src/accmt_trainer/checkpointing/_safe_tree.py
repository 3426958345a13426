"""State that is tensors and plain values, in a safetensors file: reading it runs no code.

The tensors go into the file as tensors; everything around them (dicts, lists, numbers,
strings, booleans, None) goes into its metadata as JSON, each tensor replaced by
``{"$tensor": "<key>"}``. Tuples come back as lists.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file

_TREE = "accmt.tree"
_PLAIN = (str, int, float, bool, type(None))


def check_tree(value: Any, where: str) -> None:
    """Raise TypeError naming the first value under ``where`` that is neither a tensor nor
    plain data (dicts with string keys, lists, tuples, numbers, strings, booleans, None)."""
    if isinstance(value, (torch.Tensor, *_PLAIN)):
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{where}: key {key!r} is not a string")
            check_tree(item, f"{where}[{key!r}]")
        return
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            check_tree(item, f"{where}[{index}]")
        return
    raise TypeError(f"{where} is a {type(value).__name__}, neither a tensor nor plain data")


def save_tree(path: str | os.PathLike[str], tree: Any) -> None:
    tensors: dict[str, torch.Tensor] = {}

    def encode(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            key = str(len(tensors))
            tensors[key] = value.detach().cpu().contiguous()
            return {"$tensor": key}
        if isinstance(value, Mapping):
            return {key: encode(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [encode(item) for item in value]
        return value

    metadata = {_TREE: json.dumps(encode(tree), allow_nan=True)}
    save_file(tensors, os.fspath(path), metadata=metadata)


def load_tree(path: str | os.PathLike[str]) -> Any:
    with safe_open(os.fspath(path), framework="pt") as file:
        metadata = file.metadata() or {}
        if _TREE not in metadata:
            raise ValueError(f"{path} is a safetensors file without accmt's state metadata")
        tensors = {key: file.get_tensor(key) for key in file.keys()}  # noqa: SIM118

    def decode(value: Any) -> Any:
        if isinstance(value, dict):
            if set(value) == {"$tensor"}:
                return tensors[value["$tensor"]]
            return {key: decode(item) for key, item in value.items()}
        if isinstance(value, list):
            return [decode(item) for item in value]
        return value

    return decode(json.loads(metadata[_TREE]))
