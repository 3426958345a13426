"""Schema evolution: accmt 1.x files migrate forward; newer or unknown data is refused unless
loaded leniently; the current format is frozen by a golden file."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import attrs
import pytest

from accmt_state import SCHEMA_VERSION, StateError, TrainingState, register_migration, write_json

FIXTURES = Path(__file__).parent / "fixtures"
REMOVED_IN_SCHEMA_3 = ("samples_seen_in_epoch", "sampler_seed")


def assert_schema_3_fields(state: TrainingState, stage: int = 0) -> None:
    """A state migrated from a file older than schema 3: the fields schema 3 dropped are gone,
    the fields it added take the values the migration gives them, and the stage index is the
    one the file had (schema 3 dropped it, schema 4 reads it again)."""
    for name in REMOVED_IN_SCHEMA_3:
        assert not hasattr(state, name), name
        assert name not in state.to_dict(), name
    assert state.last_evaluation_step is None
    assert state.skipped_steps == 0
    assert state.train_dataloader_idx == stage
    assert (state.stop_reason, state.stop_signal) == (None, None)
    assert state.schema_version == SCHEMA_VERSION == 5


def test_accmt_1x_state_json_loads(tmp_path: Path) -> None:
    # Written by accmt 1.x: json.dump(asdict(state), indent=4, ensure_ascii=False), so it holds
    # bare Infinity and NaN, and -1 for a saving rule without patience.
    assert "Infinity" in (FIXTURES / "accmt1_state.json").read_text(encoding="utf-8")
    state = TrainingState.load(FIXTURES / "accmt1_state.json")
    assert (state.batch_iteration, state.global_step, state.train_step, state.epoch) == (
        1530,
        765,
        130,
        3,
    )
    assert state.evaluations_done == 6
    assert state.num_checkpoints_made == 4
    assert state.best_train_loss == math.inf
    assert state.best_valid_loss == 0.4012
    assert state.additional_metrics["validation"]["accuracy"] == 0.8734
    assert math.isnan(state.additional_metrics["test_ñandú"]["f1"])
    assert state.model_savings == {"best_valid_loss": 0.4012, "accuracy": 0.8801}
    assert state.patience_left == {"best_valid_loss": 2}  # -1 meant "no patience"
    assert state.batches_seen_in_epoch == 130  # 1.x resumed by skipping train_step batches
    assert_schema_3_fields(state)  # 1 -> 2 -> 3 -> 4 -> 5


def test_early_accmt_1x_state_json_without_late_fields_loads() -> None:
    data = json.loads((FIXTURES / "accmt1_early_state.json").read_text(encoding="utf-8"))
    assert {"model_savings", "best_valid_loss", "train_dataloader_idx"}.isdisjoint(data)
    state = TrainingState.load(FIXTURES / "accmt1_early_state.json")
    assert state.global_step == 500
    assert (state.model_savings, state.best_valid_loss) == ({}, math.inf)
    assert_schema_3_fields(state)


def test_accmt_1_9_state_json_keeps_best_valid_loss_from_its_validation_set() -> None:
    # accmt 1.9.5.1 kept no top-level best_valid_loss: it sat in additional_metrics["0"].
    data = json.loads((FIXTURES / "accmt1_9_state.json").read_text(encoding="utf-8"))
    assert "best_valid_loss" not in data
    assert data["additional_metrics"]["0"]["best_valid_loss"] == 0.3122
    state = TrainingState.load(FIXTURES / "accmt1_9_state.json")
    assert state.best_valid_loss == 0.3122
    assert state.best_train_loss == 0.2875
    assert state.additional_metrics["0"]["accuracy"] == 0.9124
    assert state.patience_left == {}


def test_with_several_1x_validation_sets_best_valid_loss_is_their_mean() -> None:
    data = json.loads((FIXTURES / "accmt1_9_state.json").read_text(encoding="utf-8"))
    data["additional_metrics"] = {
        "a": {"valid_loss": 0.5, "best_valid_loss": 0.25},
        "b": {"valid_loss": 0.9, "best_valid_loss": 0.75},
        "c": {"valid_loss": 0.1},  # a set no saving rule watched
    }
    assert TrainingState.from_dict(data).best_valid_loss == 0.5
    data["additional_metrics"] = {"a": {"valid_loss": 0.5}}  # no rule kept a best
    assert TrainingState.from_dict(data).best_valid_loss == math.inf


def test_a_migrated_file_is_saved_as_the_current_schema(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    shutil.copy(FIXTURES / "accmt1_state.json", path)
    migrated = TrainingState.load(FIXTURES / "accmt1_state.json")  # the 1.x file, untouched
    TrainingState.load(path).save(path)
    data = json.loads(path.read_text())
    assert data["schema_version"] == SCHEMA_VERSION
    assert data["best_train_loss"] == {"$numberDouble": "Infinity"}
    assert set(REMOVED_IN_SCHEMA_3).isdisjoint(data)
    assert (data["last_evaluation_step"], data["skipped_steps"]) == (None, 0)
    assert data["train_dataloader_idx"] == 0
    # Read back, the saved file is the state its 1.x original migrates to, field for field
    # (the one NaN, which equals nothing, checked as NaN on both sides, then set aside).
    reloaded = TrainingState.load(path)
    for state in (reloaded, migrated):
        assert math.isnan(state.additional_metrics["test_ñandú"].pop("f1"))
    assert reloaded == migrated


def test_a_1x_file_keeps_the_stage_index_1x_wrote() -> None:
    # 1.x's train_dataloader_idx was the index in its list of (max_step, dataset) stages.
    data = json.loads((FIXTURES / "accmt1_state.json").read_text(encoding="utf-8"))
    assert TrainingState.from_dict({**data, "train_dataloader_idx": 2}).train_dataloader_idx == 2
    with pytest.raises(StateError, match=r"must be >= 0, got -1 @ \$\.train_dataloader_idx"):
        TrainingState.from_dict({**data, "train_dataloader_idx": -1})


def test_an_explicit_version_1_file_migrates_and_v1_core_fields_stay_required() -> None:
    data = json.loads((FIXTURES / "accmt1_early_state.json").read_text(encoding="utf-8"))
    assert TrainingState.from_dict({**data, "schema_version": 1}).global_step == 500
    del data["global_step"]
    with pytest.raises(StateError, match=r"required field missing @ \$\.global_step"):
        TrainingState.from_dict(data)
    with pytest.raises(StateError, match=r"required field missing @ \$\.epoch"):
        TrainingState.from_dict({})


def test_a_schema_2_file_migrates_dropping_the_unread_fields() -> None:
    v2 = FIXTURES / "v2_state.json"
    data = json.loads(v2.read_text(encoding="utf-8"))
    assert data["schema_version"] == 2
    assert (data["samples_seen_in_epoch"], data["sampler_seed"]) == (4096, 1234)
    assert data["train_dataloader_idx"] == 1
    assert {"last_evaluation_step", "skipped_steps"}.isdisjoint(data)
    state = TrainingState.load(v2)
    assert_schema_3_fields(state, stage=1)  # the stage index survives 2 -> 3 -> 4 -> 5
    assert state.batches_seen_in_epoch == 64  # the resume position survives
    assert state.additional_metrics["validation"]["perplexity"] == math.inf
    assert state.model_savings["accuracy"] == -math.inf
    assert state.additional_metrics["validation"]["confusion"] == [[5, 1], [0, 7]]
    assert state.patience_left == {"best_valid_loss": 3}
    # Every other field is carried over unchanged: the golden file is this same run.
    golden = TrainingState.load(FIXTURES / "v4_state.json")
    assert attrs.evolve(state, last_evaluation_step=1000, skipped_steps=3) == golden
    assert TrainingState.from_dict(data) == state
    assert data["schema_version"] == 2  # the caller's data is left alone
    assert data["sampler_seed"] == 1234


def test_the_steps_from_2_set_the_new_fields_and_keep_the_rest() -> None:
    from accmt_state import _migrations

    data = json.loads((FIXTURES / "v2_state.json").read_text(encoding="utf-8"))
    migrated = _migrations.migrate(data)
    assert set(migrated) == set(data) - set(REMOVED_IN_SCHEMA_3) | {
        "last_evaluation_step",
        "skipped_steps",
        "stop_reason",
        "stop_signal",
    }
    assert migrated == {
        **{k: v for k, v in data.items() if k not in REMOVED_IN_SCHEMA_3},
        "last_evaluation_step": None,
        "skipped_steps": 0,
        "stop_reason": None,
        "stop_signal": None,
        "schema_version": 5,
    }
    # A schema-2 file that lacks a field (they had defaults) still migrates: stage 0.
    del data["sampler_seed"], data["train_dataloader_idx"]
    assert _migrations.migrate(data) == {**migrated, "train_dataloader_idx": 0}


def test_a_schema_3_file_gets_stage_0_and_keeps_everything_else() -> None:
    data = json.loads((FIXTURES / "v3_state.json").read_text(encoding="utf-8"))
    assert data["schema_version"] == 3
    assert "train_dataloader_idx" not in data
    state = TrainingState.from_dict(data)
    assert state.train_dataloader_idx == 0
    golden = TrainingState.load(FIXTURES / "v4_state.json")
    assert state == attrs.evolve(golden, train_dataloader_idx=0)
    with pytest.raises(StateError, match=r"required field missing @ \$\.skipped_steps"):
        TrainingState.from_dict({k: v for k, v in data.items() if k != "skipped_steps"})
    with pytest.raises(StateError, match=r"unknown fields 'samples_seen_in_epoch'"):
        TrainingState.from_dict({**data, "samples_seen_in_epoch": 4096})


def test_a_schema_4_file_says_nothing_stopped_it_and_keeps_everything_else() -> None:
    data = json.loads((FIXTURES / "v4_state.json").read_text(encoding="utf-8"))
    assert data["schema_version"] == 4
    assert {"stop_reason", "stop_signal"}.isdisjoint(data)
    state = TrainingState.from_dict(data)
    golden = TrainingState.load(FIXTURES / "v5_state.json")
    assert state == attrs.evolve(golden, stop_reason=None, stop_signal=None)
    with pytest.raises(StateError, match=r"required field missing @ \$\.train_dataloader_idx"):
        TrainingState.from_dict({k: v for k, v in data.items() if k != "train_dataloader_idx"})


def test_a_schema_5_file_is_not_migrated_and_needs_every_field() -> None:
    data = json.loads((FIXTURES / "v5_state.json").read_text(encoding="utf-8"))
    with pytest.raises(StateError, match=r"required field missing @ \$\.stop_signal"):
        TrainingState.from_dict({k: v for k, v in data.items() if k != "stop_signal"})
    with pytest.raises(StateError, match=r"expected an integer, got a boolean .*train_dataloader"):
        TrainingState.from_dict({**data, "train_dataloader_idx": True})
    with pytest.raises(StateError, match=r"@ \$\.stop_reason"):
        TrainingState.from_dict({**data, "stop_reason": 15})


def test_the_current_format_is_frozen() -> None:
    # If this fails, the file format changed: bump SCHEMA_VERSION and register a migration.
    golden = FIXTURES / "v5_state.json"
    state = TrainingState.load(golden)
    assert state.schema_version == SCHEMA_VERSION == 5
    assert (state.last_evaluation_step, state.skipped_steps) == (1000, 3)
    assert (state.stop_reason, state.stop_signal) == ("received SIGUSR1", "SIGUSR1")
    assert state.train_dataloader_idx == 1
    assert state.batches_seen_in_epoch == 64
    assert state.additional_metrics["validation"]["perplexity"] == math.inf
    assert state.model_savings["accuracy"] == -math.inf
    assert state.additional_metrics["validation"]["confusion"] == [[5, 1], [0, 7]]
    assert json.loads(golden.read_text()) == state.to_dict()


def test_golden_file_is_rewritten_byte_for_byte(tmp_path: Path) -> None:
    golden = FIXTURES / "v5_state.json"
    TrainingState.load(golden).save(tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == golden.read_bytes()


def newer(**extra: Any) -> dict[str, Any]:
    return {**TrainingState(global_step=9).to_dict(), "schema_version": SCHEMA_VERSION + 1, **extra}


@pytest.mark.parametrize(
    ("data", "refusal"),
    [
        (newer(), r"schema 6 is newer .* \(5\); .* lenient=True .* @ \$\.schema_version"),
        (newer(grad_scale=1.0), r"schema 6 is newer"),
        ({**TrainingState().to_dict(), "grad_scale": 1.0}, r"unknown fields 'grad_scale' .* @ \$"),
        (
            {**TrainingState(global_step=9).to_dict(), "sampler_seed": 1234},
            r"unknown fields 'sampler_seed' .* @ \$",
        ),
    ],
)
def test_newer_or_unknown_data_is_refused_by_default_and_loads_leniently(
    tmp_path: Path, data: dict[str, Any], refusal: str
) -> None:
    path = tmp_path / "state.json"
    write_json(path, data)
    with pytest.raises(StateError, match=refusal):
        TrainingState.load(path)
    with pytest.warns(UserWarning, match="loaded leniently") as warned:
        state = TrainingState.load(path, lenient=True)
    assert str(path) in str(warned[0].message)
    assert warned[0].filename == __file__  # the warning points at the caller
    assert state.global_step == data["global_step"]
    assert state.schema_version == SCHEMA_VERSION


def test_lenient_loading_still_refuses_bad_known_fields() -> None:
    with pytest.raises(StateError, match=r"@ \$\.epoch"):
        TrainingState.from_dict(newer(epoch=-1, grad_scale=1.0), lenient=True)


def test_lenient_loading_of_a_clean_file_does_not_warn(recwarn: pytest.WarningsRecorder) -> None:
    TrainingState.from_dict(TrainingState().to_dict(), lenient=True)
    assert len(recwarn) == 0


def test_register_migration_guards_its_registry() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_migration(1)(lambda data: data)
    with pytest.raises(ValueError, match="already registered: _drop_unread_fields"):
        register_migration(2)(lambda data: data)
    with pytest.raises(ValueError, match="already registered: _stage_index"):
        register_migration(3)(lambda data: data)
    with pytest.raises(ValueError, match="already registered: _stop_fields"):
        register_migration(4)(lambda data: data)
    with pytest.raises(ValueError, match="would never run"):
        register_migration(SCHEMA_VERSION)
    with pytest.raises(ValueError, match="between 1 and"):
        register_migration(0)
    with pytest.raises(TypeError):
        register_migration("1")  # type: ignore[arg-type]


def test_migrations_run_in_order_one_version_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # Pretend a schema 6 exists, to see the registered steps chain from a 1.x file.
    from accmt_state import _migrations

    monkeypatch.setattr(_migrations, "SCHEMA_VERSION", 6)
    monkeypatch.setattr(_migrations, "_MIGRATIONS", dict(_migrations._MIGRATIONS))
    seen: list[dict[str, Any]] = []

    @register_migration(5)
    def rename_global_step(data: dict[str, Any]) -> dict[str, Any]:
        seen.append(dict(data))
        steps = data.pop("global_step")
        return {**data, "optimizer_steps": steps}

    data = json.loads((FIXTURES / "accmt1_state.json").read_text(encoding="utf-8"))
    migrated = _migrations.migrate(data)
    assert [step["schema_version"] for step in seen] == [5]
    assert seen[0]["batches_seen_in_epoch"] == 130  # the 1 -> 2 step ran first
    assert seen[0]["skipped_steps"] == 0  # then the 2 -> 3 step
    assert seen[0]["train_dataloader_idx"] == 0  # then the 3 -> 4 step
    assert seen[0]["stop_signal"] is None  # then the 4 -> 5 step
    assert set(REMOVED_IN_SCHEMA_3).isdisjoint(seen[0])
    assert migrated["schema_version"] == 6
    assert migrated["optimizer_steps"] == 765
    assert "global_step" not in migrated
    assert migrated["batches_seen_in_epoch"] == 130
    assert migrated["last_evaluation_step"] is None
    assert "schema_version" not in data  # the caller's data is left alone
    assert data["train_dataloader_idx"] == 0
