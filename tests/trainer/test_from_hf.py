"""AcceleratorModule.from_hf: a class name is looked up in transformers' own namespace, and
only a model class (with from_pretrained) is taken."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from accmt_trainer import AcceleratorModule

from ._tiny_gpt2 import save_tiny_gpt2

pytestmark = pytest.mark.transformers


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_gpt2(tmp_path_factory.mktemp("tiny-gpt2"))


def test_a_class_name_of_transformers_builds_the_module(tiny_gpt2: Path) -> None:
    import transformers

    module = AcceleratorModule.from_hf(tiny_gpt2, "AutoModelForCausalLM")
    assert isinstance(module.model, transformers.GPT2LMHeadModel)


@pytest.mark.parametrize(
    "name",
    [
        "NoSuchModel",
        "set_seed",  # a function of transformers
        "logging",  # a module of transformers
        "os.path",
        "_LazyModule",
        "__class__",
        "this",  # a module of the standard library that prints when imported
    ],
)
def test_a_name_that_is_no_model_class_of_transformers_is_refused(
    tiny_gpt2: Path, name: str
) -> None:
    imported = set(sys.modules)
    message = rf"from_hf\(type={re.escape(repr(name))}\): transformers has no such class"
    with pytest.raises(ValueError, match=message):
        AcceleratorModule.from_hf(tiny_gpt2, name)
    assert "this" not in set(sys.modules) - imported
