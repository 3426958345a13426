"""accmt 1.x's ``validation_step(self, batch)`` without the set's key, through ``accmt``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from accmt import HyperParameters, StepOutputError, Trainer, TrainerConfigError
from accmt_metrics import Accuracy
from tests.trainer.test_validation_outputs import by_hand

from .conftest import Classifier, blobs

HPS = HyperParameters(epochs=1, batch_size=8, optimizer="AdamW", optimizer_kwargs={"lr": 0.05})


def trainer(tmp_path: Path, **options: Any) -> Trainer:
    quiet: dict[str, Any] = {"log_with": None, "progress_bar": False, "checkpoint_every": None}
    return Trainer(HPS, tmp_path / "run", **{**quiet, **options})


# ------------------------------------------------------------ validation_step(batch)


class NoKey(Classifier):
    def validation_step(self, batch: Any) -> dict[str, Any]:  # type: ignore[override]
        return super().validation_step("validation", batch)


class KeyWithDefault(Classifier):
    def __init__(self) -> None:
        super().__init__()
        self.keys: set[str] = set()

    def validation_step(self, key: str, batch: Any = None) -> dict[str, Any]:
        self.keys.add(key)
        return super().validation_step(key, batch)


@pytest.mark.parametrize("as_dict", [False, True])
def test_validation_step_without_a_key_serves_one_set(tmp_path: Path, as_dict: bool) -> None:
    module, val = NoKey(), blobs(24, seed=1)
    state = trainer(tmp_path, metrics=[Accuracy()]).fit(
        module, blobs(16), {"only": val} if as_dict else val
    )
    name = "only" if as_dict else "validation"
    assert state.additional_metrics[name]["accuracy"] == pytest.approx(by_hand(module, val))


def test_validation_step_with_a_key_still_gets_it(tmp_path: Path) -> None:
    module = KeyWithDefault()
    trainer(tmp_path, metrics=[Accuracy()]).fit(
        module, blobs(16), {"a": blobs(8, seed=1), "b": blobs(8, seed=2)}
    )
    assert module.keys == {"a", "b"}


def test_validation_step_without_a_key_and_several_sets_is_named_before_training(
    tmp_path: Path,
) -> None:
    run = trainer(tmp_path)
    with pytest.raises(
        TrainerConfigError,
        match=r"NoKey.validation_step\(batch\) takes no key, "
        r"but there are 2 validation sets \['a', 'b'\]",
    ):
        run.fit(NoKey(), blobs(16), {"a": blobs(8, seed=1), "b": blobs(8, seed=2)})
    assert run.state.global_step == 0


def test_an_error_names_the_call_accmt_trainer_made(tmp_path: Path) -> None:
    # accmt-trainer calls validation_step(key, batch); accmt's adapter drops the key.
    class Bad(NoKey):
        def validation_step(self, batch: Any) -> Any:  # type: ignore[override]
            return "loss"

    with pytest.raises(
        StepOutputError, match=r"Bad.validation_step\('validation', batch\) returned str"
    ):
        trainer(tmp_path).fit(Bad(), blobs(16), blobs(8, seed=1))
