"""The meta-package re-exports the framework and keeps accmt 1.x's documented import paths."""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import subprocess
import sys

import pytest

# accmt 1.x's documented public names, by module, that 2.x keeps.
ONE_X_NAMES = {
    "accmt": [
        "Trainer",
        "AcceleratorModule",
        "ExtendedAcceleratorModule",
        "HyperParameters",
        "Optimizer",
        "Scheduler",
        "Monitor",
        "Callback",
        "on_main_process",
        "on_last_process",
        "on_local_main_process",
        "on_local_process",
        "on_process",
        "set_seed",
    ],
    "accmt.states": ["TrainingState"],
    "accmt.callbacks": ["Callback"],
    "accmt.decorators": [
        "on_main_process",
        "on_last_process",
        "on_local_main_process",
        "on_local_process",
        "on_process",
    ],
    "accmt.metrics": ["Metric"],
    "accmt.hyperparameters": ["HyperParameters", "Optimizer", "Scheduler"],
    "accmt.monitor": ["Monitor"],
    "accmt.modules": ["AcceleratorModule", "ExtendedAcceleratorModule"],
    "accmt.trainer": ["Trainer"],
    "accmt.curriculum": ["RangeCurriculum", "RatioCurriculum", "StepsCurriculum"],
}

# What the 2.x issue asks `from accmt import ...` to offer besides.
TWO_X_NAMES = ["TrainingState", "Metric", "Accuracy", "CallbackHandler", "current_process"]


@pytest.mark.parametrize(
    ("module", "name"), [(m, n) for m, names in ONE_X_NAMES.items() for n in names]
)
def test_one_x_public_name_imports(module: str, name: str) -> None:
    assert getattr(importlib.import_module(module), name) is not None


@pytest.mark.parametrize("name", TWO_X_NAMES)
def test_two_x_names_are_at_the_top(name: str) -> None:
    import accmt

    assert name in accmt.__all__
    assert getattr(accmt, name) is not None


def test_all_names_resolve_and_are_the_parts_own_objects() -> None:
    import accmt
    import accmt_metrics
    import accmt_trainer

    missing = [name for name in accmt.__all__ if not hasattr(accmt, name)]
    assert missing == []
    assert accmt.CheckpointError is accmt_trainer.CheckpointError
    assert accmt.Accuracy is accmt_metrics.Accuracy


ONE_X_CLASSES = {
    "Trainer": ["accmt", "accmt.trainer"],
    "HyperParameters": ["accmt", "accmt.hyperparameters"],
    "Monitor": ["accmt", "accmt.monitor"],
    "AcceleratorModule": ["accmt", "accmt.modules"],
    "ExtendedAcceleratorModule": ["accmt", "accmt.modules"],
    "HyperParameterSearch": ["accmt", "accmt.hp_search"],
    "RatioCurriculum": ["accmt", "accmt.curriculum"],
}
# The part each subclasses: accmt-trainer's, unless named here.
PART = {"HyperParameterSearch": "accmt_search"}


@pytest.mark.parametrize("name", ONE_X_CLASSES)
def test_the_classes_that_take_1x_calls_win_for_their_names(name: str) -> None:
    import accmt._one_x

    part = importlib.import_module(PART.get(name, "accmt_trainer"))
    one_x = getattr(accmt._one_x, name)
    assert issubclass(one_x, getattr(part, name))
    assert one_x is not getattr(part, name)
    for module in ONE_X_CLASSES[name]:
        assert getattr(importlib.import_module(module), name) is one_x, module
    assert name in accmt.__all__


def test_this_is_accmt_two_not_an_installed_one_x() -> None:
    import accmt

    assert accmt.__version__ == importlib.metadata.version("accmt")
    assert accmt.__version__.startswith("2.")
    assert "packages/accmt" in accmt.__file__.replace("\\", "/")


def test_import_builds_no_accelerator_and_no_process_group() -> None:
    # accmt 1.x made a global Accelerator on import; 2.x must leave Accelerate untouched.
    code = (
        "import accmt, accelerate.state as s, torch.distributed as d\n"
        "print(bool(s.PartialState._shared_state), d.is_initialized(),\n"
        "      'accelerator' in vars(accmt))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False", "False"]


@pytest.mark.parametrize(
    ("module", "name", "replacement"),
    [
        ("accmt", "accelerator", "trainer.accelerator"),
        ("accmt", "allow_tf32", "torch.backends.cuda.matmul.allow_tf32"),
        ("accmt", "precision", "Trainer(mixed_precision=...)"),
        ("accmt", "IS_GPU", "torch.cuda.is_available()"),
        ("accmt", "tqdm", "from tqdm.auto import tqdm"),
        ("accmt.utils", "MASTER_PROCESS", "accmt.current_process()"),
        ("accmt.utils", "gather", "gather_for_metrics"),
        ("accmt.utils", "prepare_dataframe", "split_between_processes"),
    ],
)
def test_deliberate_drops_fail_at_import_naming_the_replacement(
    module: str, name: str, replacement: str
) -> None:
    with pytest.raises(ImportError) as caught:
        exec(f"from {module} import {name}", {})
    assert f"{module}.{name} was accmt 1.x's" in str(caught.value)
    assert replacement in str(caught.value)
    with pytest.raises(ImportError, match=re.escape(replacement)):
        getattr(importlib.import_module(module), name)


def test_other_missing_names_are_plain_attribute_errors() -> None:
    import accmt

    assert not hasattr(accmt, "no_such_name")
    with pytest.raises(ImportError, match="cannot import name 'no_such_name'"):
        exec("from accmt import no_such_name", {})
    # Submodules still import through the fallback.
    exec("from accmt import utils, metrics", {})
