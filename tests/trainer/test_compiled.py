"""A compiled run (``compile=True``) loads anywhere: its best models hold the model's own names
(no ``_orig_mod.``), load into an uncompiled model and back, give the same evaluation and
predictions, and its checkpoints resume with and without ``compile``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file

from accmt_metrics import Accuracy
from accmt_trainer import HyperParameters, Trainer, load_weights
from accmt_trainer.runtime._accelerator import own_model

from .conftest import Classifier, blobs

VALIDATION = blobs(16, seed=1)


class Predicts(Classifier):
    def predict_step(self, batch: Any) -> torch.Tensor:
        return self.model(batch[0])


def trainer(folder: Path, compiled: bool, epochs: int = 2) -> Trainer:
    hps = HyperParameters(
        epochs=epochs, batch_size=8, optimizer="SGD", optimizer_kwargs={"lr": 0.1}
    )
    run = Trainer(
        hps, folder, compile=compiled, metrics=Accuracy(), log_with=None, progress_bar=False
    )
    run.register_model_saving("best_valid_loss")
    return run


def weights(run: Trainer) -> dict[str, torch.Tensor]:
    model = own_model(run.model)
    return {name: value.detach().clone() for name, value in model.state_dict().items()}


def same(found: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> bool:
    return found.keys() == expected.keys() and all(
        torch.equal(found[name], expected[name]) for name in expected
    )


@pytest.fixture(scope="module")
def compiled_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, torch.Tensor]]:
    folder = tmp_path_factory.mktemp("compiled") / "run"
    run = trainer(folder, compiled=True)
    run.fit(Predicts(), blobs(32), VALIDATION)
    return folder, weights(run)


def test_a_compiled_run_s_best_model_has_the_model_s_own_names(
    compiled_run: tuple[Path, dict[str, torch.Tensor]],
) -> None:
    folder, _ = compiled_run
    saved = load_file(folder / "best_valid_loss" / "model.safetensors")
    assert sorted(saved) == sorted(Classifier().model.state_dict())


def test_it_loads_into_an_uncompiled_model_and_a_compiled_one(
    compiled_run: tuple[Path, dict[str, torch.Tensor]],
) -> None:
    folder, trained = compiled_run
    plain = Classifier().model
    load_weights(plain, folder / "best_valid_loss")
    assert same(plain.state_dict(), trained)  # the last evaluation was the best here
    compiled = torch.compile(Classifier().model)
    load_weights(compiled, folder / "best_valid_loss")
    assert same(compiled._orig_mod.state_dict(), trained)


def test_weights_saved_with_compile_s_names_load_too(tmp_path: Path) -> None:
    model = Classifier().model
    named = {f"_orig_mod.{name}": value for name, value in model.state_dict().items()}
    save_file(named, tmp_path / "model.safetensors")
    fresh = Classifier(dropout=0.0).model
    torch.nn.init.zeros_(fresh[0].weight)
    load_weights(fresh, tmp_path / "model.safetensors")
    assert same(fresh.state_dict(), model.state_dict())


def test_evaluate_and_predict_give_the_same_with_and_without_compile(
    compiled_run: tuple[Path, dict[str, torch.Tensor]], tmp_path: Path
) -> None:
    folder, _ = compiled_run
    outputs = {}
    for compiled in (True, False):
        run = trainer(folder if compiled else tmp_path / "plain", compiled)
        module = Predicts()
        best = folder / "best_valid_loss"
        found = run.evaluate(module, VALIDATION, weights=best)
        outputs[compiled] = (found, run.predict(module, VALIDATION, weights=best))
    (evaluated, predicted), (plain_evaluated, plain_predicted) = outputs[True], outputs[False]
    # Inductor's kernels are not eager's: the same weights, other roundings.
    assert evaluated == pytest.approx(plain_evaluated, rel=1e-5)
    torch.testing.assert_close(predicted, plain_predicted, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("first", [True, False], ids=["compiled then not", "plain then compiled"])
def test_a_checkpoint_resumes_with_or_without_compile(tmp_path: Path, first: bool) -> None:
    folder = tmp_path / "run"
    one = trainer(folder, compiled=first, epochs=1)
    one.fit(Predicts(), blobs(32), VALIDATION)
    finished = weights(one)
    # Resumed at its end: nothing to train, the model as the run left it.
    again = trainer(folder, compiled=not first, epochs=1)
    module = Predicts()
    again.fit(module, blobs(32), VALIDATION)
    assert same(weights(again), finished)
    # And on to a second epoch from there.
    more = trainer(folder, compiled=not first, epochs=2)
    state = more.fit(Predicts(), blobs(32), VALIDATION)
    assert (state.epoch, state.global_step, state.finished) == (2, 8, True)
