"""accmt-trainer's Trainer takes its own options only: a former option name is a
TrainerConfigError that says what to write instead and that the accmt package still takes it;
any other unknown name is a TypeError with the closest options."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest

from accmt_trainer import HyperParameters, Monitor, Trainer, TrainerConfigError
from accmt_trainer.config._former_options import FORMER_OPTIONS

HPS = HyperParameters(epochs=1, batch_size=4)


@pytest.mark.parametrize(
    ("name", "value", "instead"),
    [
        ("callback", object(), r"callbacks=\[\.\.\.\]"),
        ("sampler_train", None, r"sampler=\.\.\."),
        ("sampler_val", None, r"val_sampler=\.\.\."),
        ("batch_sampler_val", None, r"val_batch_sampler=\.\.\."),
        ("collate_fn_train", None, r"collate_fn=\.\.\."),
        ("collate_fn_val", None, r"val_collate_fn=\.\.\."),
        ("enable_checkpointing", False, r"checkpoint_every=None"),
        ("multiple_checkpoints", False, r"max_checkpoints=N"),
        ("safe_mode", True, r"has no counterpart: remove it"),
        ("track_with", "tensorboard", r"log_with=\.\.\."),
        ("run_name", "x", r"tracker_init_kwargs=\{'mlflow': \{'run_name': \.\.\.\}\}"),
    ],
)
def test_a_former_option_names_what_to_write_and_that_accmt_takes_it(
    tmp_path: Path, name: str, value: Any, instead: str
) -> None:
    with pytest.raises(TrainerConfigError) as caught:
        Trainer(HPS, tmp_path, **{name: value})
    message = str(caught.value)
    assert message.startswith(f"Trainer({name}=...) is a former spelling")
    assert re.search(instead, message), message
    assert "accmt package's Trainer (from accmt import Trainer) still accepts it" in message


def test_every_former_option_is_refused_and_none_is_an_option() -> None:
    options = inspect.signature(Trainer).parameters
    assert not set(FORMER_OPTIONS) & set(options)
    for name in FORMER_OPTIONS:
        with pytest.raises(TrainerConfigError, match="former spelling"):
            Trainer(HPS, "unused", **{name: None})


def test_an_unknown_name_is_a_type_error_with_the_closest_options(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'no_such_option'$"):
        Trainer(HPS, tmp_path, no_such_option=1)
    with pytest.raises(TypeError, match=r"'max_checkpoint'; did you mean max_checkpoints"):
        Trainer(HPS, tmp_path, max_checkpoint=2)


def test_positional_options_are_refused_by_python(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="positional argument"):
        Trainer(HPS, tmp_path, "track")  # type: ignore[misc]


def test_the_signature_is_the_trainer_s_own() -> None:
    parameters = inspect.signature(Trainer).parameters
    assert list(parameters)[:2] == ["hps_config", "model_path"]
    assert "callback" not in parameters
    assert "callbacks" in parameters


def test_monitor_takes_its_own_flags_only() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'checkpoint'"):
        Monitor(checkpoint=True)  # type: ignore[call-arg]
