"""Best models: each saving rule writes the model, the state and the values that earned it,
only when it improves; best values and patience carry over a resume; patience ends a run."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from accmt_callbacks import Callback
from accmt_state import TrainingState
from accmt_trainer import Trainer, TrainerConfigError

from .conftest import Classifier, blobs
from .test_checkpoints import (
    CrashAt,
    Crashed,
    OnResume,
    crash,
    fit,
    folders,
    hps,
    make,
    same_weights,
    saved,
    weights,
)

# What each evaluation reports, by evaluation: every value a multiple of 1/8, exact in floats.
LOSS = {"set_a": [1.0, 0.75, 0.875, 0.5, 0.625], "set_b": [1.0, 0.75, 0.625, 0.75, 1.0]}
ACCURACY = {"set_a": [0.25, 0.5, 0.75, 0.625, 0.875], "set_b": [0.5, 0.5, 0.75, 0.875, 0.625]}
# The mean training loss of each epoch.
TRAIN_LOSS = [0.75, 0.875, 0.5, 0.5, 0.625]

# rule -> (saving_above, saving_below, the evaluations or epoch ends at which it saves)
RULES: dict[str, tuple[float | None, float | None, list[tuple[str, int]]]] = {
    # Mean validation loss 1, .75, .75, .625, .8125: improves at 0, 1 and 3.
    "best_valid_loss": (None, None, [("eval", 0), ("eval", 1), ("eval", 3)]),
    # The same value, saved only below 0.7.
    "valid_loss": (None, 0.7, [("eval", 3)]),
    # Mean accuracy .375, .5, .75, .75, .75: an equal value is no improvement.
    "accuracy": (None, None, [("eval", 0), ("eval", 1), ("eval", 2)]),
    # set_a's accuracy, saved only above 0.6.
    "accuracy@set_a": (0.6, None, [("eval", 2), ("eval", 4)]),
    # Both must improve on the values of the last save.
    "accuracy@set_a/accuracy@set_b": (None, None, [("eval", 0), ("eval", 2)]),
    "best_train_loss": (None, None, [("epoch", 0), ("epoch", 2)]),
}
BEST = {
    "best_valid_loss": 0.625,
    "valid_loss": 0.625,
    "accuracy": 0.75,
    "accuracy@set_a": 0.875,
    "accuracy@set_a/accuracy@set_b::accuracy@set_a": 0.75,
    "accuracy@set_a/accuracy@set_b::accuracy@set_b": 0.75,
    "best_train_loss": 0.5,
}


class Scripted(Classifier):
    """Trains for real, but reports scripted values, so that which evaluation improves which
    rule is known in advance."""

    def training_step(self, batch: Any) -> torch.Tensor:
        loss = super().training_step(batch)
        # The real loss's gradient, the scripted loss's value.
        return loss - loss.detach() + TRAIN_LOSS[self.state.epoch]

    def validation_step(self, key: str, batch: Any) -> dict[str, Any]:
        _, labels = batch
        evaluation = self.state.evaluations_done
        wrong = round((1 - ACCURACY[key][evaluation]) * len(labels))
        predictions = labels.clone()
        predictions[:wrong] = (labels[:wrong] + 1) % 3
        return {"loss": torch.tensor(LOSS[key][evaluation]), "accuracy": (predictions, labels)}


def scripted_trainer(path: Path, **options: Any) -> Trainer:
    trainer = make(path, hps=hps(epochs=5), seed=5, **options)
    for rule, (above, below, _) in RULES.items():
        trainer.register_model_saving(rule, saving_above=above, saving_below=below)
    return trainer


def scripted_fit(trainer: Trainer) -> TrainingState:
    # 32 samples: 2 steps an epoch; each validation set is one batch of 8.
    sets = {"set_a": blobs(8, seed=1), "set_b": blobs(8, seed=2)}
    return fit(trainer, Scripted(), blobs(32), sets)


def folder(path: Path, rule: str) -> Path:
    return path / rule.replace("/", "__")


class Watch(Callback):
    """Notes which rule folders were written at each evaluation and each epoch's end, with the
    model's weights and the reported metrics at that moment."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seen: dict[str, str | None] = {}
        self.writes: dict[str, list[tuple[str, int]]] = {rule: [] for rule in RULES}
        self.weights: dict[tuple[str, int], dict[str, torch.Tensor]] = {}
        self.metrics: dict[tuple[str, int], dict[str, Any]] = {}

    def _state_text(self, rule: str) -> str | None:
        state = folder(self.path, rule) / "state.json"
        return state.read_text() if state.exists() else None

    def on_fit_start(self) -> None:
        self.seen = {rule: self._state_text(rule) for rule in RULES}

    def _look(self, moment: tuple[str, int]) -> None:
        assert self.state is not None
        self.weights[moment] = weights(self.module)
        self.metrics[moment] = copy.deepcopy(self.state.additional_metrics)
        for rule in RULES:
            text = self._state_text(rule)
            if text != self.seen[rule]:
                self.writes[rule].append(moment)
                self.seen[rule] = text

    def on_evaluation_end(self) -> None:
        assert self.state is not None
        self._look(("eval", self.state.evaluations_done - 1))

    def on_epoch_end(self) -> None:
        assert self.state is not None
        self._look(("epoch", self.state.epoch))


def expected_values(rule: str, moment: tuple[str, int]) -> dict[str, float]:
    kind, index = moment
    if kind == "epoch":
        return {"train_loss": TRAIN_LOSS[index]}
    if "loss" in rule:
        return {"valid_loss": (LOSS["set_a"][index] + LOSS["set_b"][index]) / 2}
    if "@" not in rule:
        return {"accuracy": (ACCURACY["set_a"][index] + ACCURACY["set_b"][index]) / 2}
    return {part: ACCURACY[part.split("@")[1]][index] for part in rule.split("/")}


def test_each_rule_saves_its_best_model_only_when_it_improves(tmp_path: Path) -> None:
    watch = Watch(tmp_path)
    state = scripted_fit(scripted_trainer(tmp_path, callbacks=[watch]))
    assert state.evaluations_done == 5
    assert {rule: watch.writes[rule] for rule in RULES} == {
        rule: moments for rule, (_, _, moments) in RULES.items()
    }
    assert state.model_savings == pytest.approx(BEST)
    for rule, (_, _, moments) in RULES.items():
        best = moments[-1]
        where = folder(tmp_path, rule)
        assert json.loads((where / "metrics.json").read_text()) == {
            "rule": rule,
            "values": pytest.approx(expected_values(rule, best)),
        }
        # The values that earned it are the ones the evaluation reported then.
        eval_index = best[1] if best[0] == "eval" else saved(where).evaluations_done - 1
        assert saved(where).additional_metrics == watch.metrics[("eval", eval_index)]
        assert same_weights(load_file(where / "model.safetensors"), watch.weights[best]), rule
    assert not list(tmp_path.glob(".tmp-*"))


def test_saving_rules_and_their_best_values_survive_a_resume(tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    expected = scripted_fit(scripted_trainer(reference))
    run = tmp_path / "run"
    # Dies on the first step of epoch 3, after three evaluations and their checkpoint.
    with pytest.raises(Crashed):
        scripted_fit(scripted_trainer(run, callbacks=[CrashAt(7)]))
    checkpoint = saved(folders(run)[-1])
    assert checkpoint.evaluations_done == 3
    watch, probe = Watch(run), OnResume()
    state = scripted_fit(scripted_trainer(run, callbacks=[watch, probe]))
    assert probe.resumed_at == (3, 6)
    restored = probe.seen[0]["restored"].model_savings
    # The best values after three evaluations; valid_loss has none yet (never below 0.7).
    after_three = {**BEST, "best_valid_loss": 0.75, "accuracy@set_a": 0.75}
    del after_three["valid_loss"]
    assert restored == checkpoint.model_savings == pytest.approx(after_three)
    # After the resume, only what improves on the restored best values is written.
    assert watch.writes == {
        rule: [moment for moment in moments if moment[1] >= 3]
        for rule, (_, _, moments) in RULES.items()
    }
    assert state.model_savings == expected.model_savings
    for rule in RULES:
        got, want = folder(run, rule), folder(reference, rule)
        assert (got / "metrics.json").read_text() == (want / "metrics.json").read_text()
        assert saved(got).evaluations_done == saved(want).evaluations_done
        assert saved(got).global_step == saved(want).global_step
        assert same_weights(
            load_file(got / "model.safetensors"), load_file(want / "model.safetensors")
        ), rule


# --------------------------------------------------------------------------------- patience

# With lr=0 the model never changes: the validation loss improves on the first evaluation
# only, and every later one counts against the patience.
FROZEN = hps(epochs=10, optimizer_kwargs={"lr": 0.0})


class Ends(Callback):
    def __init__(self) -> None:
        self.hooks: list[str] = []

    def on_fit_start(self) -> None:
        self.hooks.append("on_fit_start")

    def on_fit_end(self) -> None:
        self.hooks.append("on_fit_end")


def test_exhausted_patience_ends_the_run_cleanly(tmp_path: Path) -> None:
    ends = Ends()
    state = fit(
        make(tmp_path, hps=FROZEN, patience=2, callbacks=[ends]),
        train=blobs(32),
        val=blobs(16, seed=1),
    )
    # Evaluations 2 and 3 do not improve: the run ends after the third epoch.
    assert (state.epoch, state.global_step, state.evaluations_done) == (3, 6, 3)
    assert state.patience_left == {"best_valid_loss": 0}
    # Patience stopped it before its own end: the run is not finished, and says why.
    assert not state.finished
    assert ends.hooks == ["on_fit_start", "on_fit_end"]
    final = saved(folders(tmp_path)[-1])
    assert (final.global_step, final.finished) == (6, False)
    assert final.patience_left == {"best_valid_loss": 0}

    # Fit again: it continues from step 6, and the exhausted patience ends it at the next
    # evaluation that does not improve.
    later = Ends()
    again = fit(
        make(tmp_path, hps=FROZEN, patience=2, callbacks=[later]),
        train=blobs(32),
        val=blobs(16, seed=1),
    )
    assert later.hooks == ["on_fit_start", "on_fit_end"]
    assert (again.global_step, again.evaluations_done, again.finished) == (8, 4, False)


def test_patience_and_best_values_survive_a_resume(tmp_path: Path) -> None:
    options: dict[str, Any] = {"hps": FROZEN, "patience": 3, "train": blobs(32)}
    # Dies on the first step of epoch 2: the checkpoint holds 2 evaluations, patience 2 left.
    crash(tmp_path, 5, val=blobs(16, seed=1), **options)
    best_model = folder(tmp_path, "best_valid_loss") / "state.json"
    first_save = best_model.read_text()
    probe = OnResume()
    train = options.pop("train")
    state = fit(make(tmp_path, callbacks=[probe], **options), train=train, val=blobs(16, seed=1))
    assert probe.seen[0]["restored"].patience_left == {"best_valid_loss": 2}
    # Evaluations 3 and 4 use up the patience left: the run ends after the fourth epoch, as an
    # uninterrupted one would.
    assert (state.epoch, state.global_step, state.evaluations_done) == (4, 8, 4)
    assert state.patience_left == {"best_valid_loss": 0}
    # The first evaluation's best value held: no later one was saved as an improvement.
    assert best_model.read_text() == first_save
    assert TrainingState.load(best_model).evaluations_done == 1


def test_patience_per_rule_waits_for_the_rules_that_have_one(tmp_path: Path) -> None:
    trainer = make(tmp_path, hps=FROZEN, patience={"accuracy": 1})
    trainer.register_model_saving("best_valid_loss")
    trainer.register_model_saving("accuracy")
    state = fit(trainer, train=blobs(32), val=blobs(16, seed=1))
    assert state.patience_left == {"accuracy": 0}
    assert (state.evaluations_done, state.finished) == (2, False)


def test_patience_for_an_unknown_rule_is_named(tmp_path: Path) -> None:
    trainer = make(tmp_path, patience={"nope": 2})
    with pytest.raises(TrainerConfigError, match=r"no model saving rule named \['nope'\]"):
        fit(trainer, val=blobs(16, seed=1))
