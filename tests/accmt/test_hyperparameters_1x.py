"""HyperParameters takes accmt 1.9.5.1's constructor as it was, and the 1.x spellings that its
dict and YAML readers take."""

from __future__ import annotations

import inspect
from typing import Any

import attrs
import pytest
import torch

from accmt import HyperParameters, HyperParametersError

# accmt 1.9.5.1's HyperParameters.__init__, in order: (name, default, a value a 1.x program
# passes, the 2.x field it lands in, what that field then holds).
ONE_X_SIGNATURE: list[tuple[str, Any, Any, str, Any]] = [
    ("epochs", 1, 4, "epochs", 4),
    ("max_steps", None, 50, "max_steps", 50),
    ("batch_size", 1, (16, 32), "batch_size", (16, 32)),
    ("optimizer", "SGD", torch.optim.AdamW, "optimizer", "AdamW"),
    ("optim_kwargs", None, {"lr": "1e-3"}, "optimizer_kwargs", {"lr": 1e-3}),
    ("scheduler", None, "LinearLR", "scheduler", "LinearLR"),
    ("scheduler_kwargs", None, {"start_factor": 0.5}, "scheduler_kwargs", {"start_factor": 0.5}),
    ("step_scheduler_per_epoch", False, True, "step_scheduler_per_epoch", True),
]


def test_the_signature_is_1x_with_its_defaults() -> None:
    parameters = inspect.signature(HyperParameters).parameters
    for name, default, *_ in ONE_X_SIGNATURE:
        assert name in parameters, name
        assert parameters[name].default == default, name
    positional = [
        p.name for p in parameters.values() if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    ]
    one_x_order = [name.replace("optim_kwargs", "optimizer_kwargs") for name, *_ in ONE_X_SIGNATURE]
    assert positional == one_x_order


def test_the_constructor_defaults_are_the_fields_defaults() -> None:
    parameters = inspect.signature(HyperParameters).parameters
    for field in attrs.fields(HyperParameters):
        default = (
            field.default.factory() if isinstance(field.default, attrs.Factory) else field.default
        )
        assert parameters[field.name].default in (default, None), field.name
        assert getattr(HyperParameters(), field.name) == default, field.name


@pytest.mark.parametrize(("name", "default", "value", "field", "kept"), ONE_X_SIGNATURE)
def test_each_1x_keyword_lands_in_its_field(
    name: str, default: Any, value: Any, field: str, kept: Any
) -> None:
    # scheduler_kwargs are the arguments of a scheduler, which must then be named.
    extra = {"scheduler": "LinearLR"} if name == "scheduler_kwargs" else {}
    hps = HyperParameters(**{name: value}, **extra)
    assert getattr(hps, field) == kept
    assert getattr(HyperParameters(**({name: default} if default is not None else {})), field) == (
        getattr(HyperParameters(), field)
    )


def test_a_1x_positional_call_fills_the_same_fields() -> None:
    values = [value for _, _, value, _, _ in ONE_X_SIGNATURE]
    hps = HyperParameters(*values)
    assert {field: getattr(hps, field) for *_, field, _ in ONE_X_SIGNATURE} == {
        field: kept for *_, field, kept in ONE_X_SIGNATURE
    }


def test_the_dict_layout_spellings_are_constructor_spellings() -> None:
    by_dict = HyperParameters.from_dict(
        {
            "hps": {
                "epochs": 2,
                "optim": {"type": "AdamW", "lr": 1e-3},
                "scheduler": {"type": "StepLR", "step_size": 3},
            }
        }
    )
    assert (
        HyperParameters(
            epochs=2,
            optim={"type": "AdamW", "lr": 1e-3},
            scheduler={"type": "StepLR", "step_size": 3},
        )
        == by_dict
    )
    flat = HyperParameters(
        epochs=2,
        optim="AdamW",
        optim_kwargs={"lr": 1e-3},
        scheduler="StepLR",
        scheduler_kwargs={"step_size": 3},
    )
    assert flat == by_dict
    nested = HyperParameters(
        epochs=2,
        optimizer={"type": "AdamW", "lr": 1e-3},
        scheduler={"type": "StepLR", "step_size": 3},
    )
    assert nested == by_dict


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"optim_kwargs": {"lr": 1.0}, "optimizer_kwargs": {"lr": 2.0}}, "optim_kwargs"),
        ({"optim": "Adam", "optimizer": "AdamW"}, "optim"),
        ({"optimizer": {"type": "AdamW", "lr": 1.0}, "optimizer_kwargs": {"lr": 2.0}}, "optimizer"),
        (
            {"scheduler": {"type": "StepLR", "step_size": 1}, "scheduler_kwargs": {"step_size": 2}},
            "scheduler",
        ),
    ],
)
def test_the_same_thing_given_twice_is_an_error_naming_it(kwargs: dict[str, Any], key: str) -> None:
    with pytest.raises(HyperParametersError, match="given twice") as caught:
        HyperParameters(**kwargs)
    assert caught.value.key.startswith(key)


def test_errors_name_the_key_as_the_program_wrote_it() -> None:
    with pytest.raises(HyperParametersError) as caught:
        HyperParameters(optimizer="AdamW", optim_kwargs={"lrr": 1e-3})
    assert caught.value.key == "optim_kwargs.lrr"
    assert "did you mean 'lr'" in str(caught.value)
    with pytest.raises(HyperParametersError) as caught:
        HyperParameters(optim={"lr": 1e-3})
    assert caught.value.key == "optim.type"
