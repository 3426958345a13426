"""Schema evolution: accmt 1.x files migrate forward; newer or unknown data is refused unless
loaded leniently; the current format is frozen by a golden file."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from accmt_state import SCHEMA_VERSION, StateError, TrainingState, register_migration, write_json

FIXTURES = Path(__file__).parent / "fixtures"


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
    assert (state.samples_seen_in_epoch, state.sampler_seed) == (0, None)
    assert state.schema_version == SCHEMA_VERSION


def test_early_accmt_1x_state_json_without_late_fields_loads() -> None:
    data = json.loads((FIXTURES / "accmt1_early_state.json").read_text(encoding="utf-8"))
    assert {"model_savings", "best_valid_loss", "train_dataloader_idx"}.isdisjoint(data)
    state = TrainingState.load(FIXTURES / "accmt1_early_state.json")
    assert state.global_step == 500
    assert (state.model_savings, state.best_valid_loss, state.train_dataloader_idx) == (
        {},
        math.inf,
        0,
    )


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
    TrainingState.load(path).save(path)
    data = json.loads(path.read_text())
    assert data["schema_version"] == SCHEMA_VERSION
    assert data["best_train_loss"] == {"$numberDouble": "Infinity"}
    assert TrainingState.load(path) == TrainingState.load(path)


def test_an_explicit_version_1_file_migrates_and_v1_core_fields_stay_required() -> None:
    data = json.loads((FIXTURES / "accmt1_early_state.json").read_text(encoding="utf-8"))
    assert TrainingState.from_dict({**data, "schema_version": 1}).global_step == 500
    del data["global_step"]
    with pytest.raises(StateError, match=r"required field missing @ \$\.global_step"):
        TrainingState.from_dict(data)
    with pytest.raises(StateError, match=r"required field missing @ \$\.epoch"):
        TrainingState.from_dict({})


def test_the_current_format_is_frozen() -> None:
    # If this fails, the file format changed: bump SCHEMA_VERSION and register a migration.
    golden = FIXTURES / "v2_state.json"
    state = TrainingState.load(golden)
    assert state.samples_seen_in_epoch == 4096
    assert state.sampler_seed == 1234
    assert state.additional_metrics["validation"]["perplexity"] == math.inf
    assert state.model_savings["accuracy"] == -math.inf
    assert state.additional_metrics["validation"]["confusion"] == [[5, 1], [0, 7]]
    assert json.loads(golden.read_text()) == state.to_dict()


def test_golden_file_is_rewritten_byte_for_byte(tmp_path: Path) -> None:
    golden = FIXTURES / "v2_state.json"
    TrainingState.load(golden).save(tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == golden.read_bytes()


def newer(**extra: Any) -> dict[str, Any]:
    return {**TrainingState(global_step=9).to_dict(), "schema_version": SCHEMA_VERSION + 1, **extra}


@pytest.mark.parametrize(
    ("data", "refusal"),
    [
        (newer(), r"schema 3 is newer .* lenient=True .* @ \$\.schema_version"),
        (newer(grad_scale=1.0), r"schema 3 is newer"),
        ({**TrainingState().to_dict(), "grad_scale": 1.0}, r"unknown fields 'grad_scale' .* @ \$"),
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
    with pytest.raises(ValueError, match="would never run"):
        register_migration(SCHEMA_VERSION)
    with pytest.raises(ValueError, match="between 1 and"):
        register_migration(0)
    with pytest.raises(TypeError):
        register_migration("1")  # type: ignore[arg-type]


def test_migrations_run_in_order_one_version_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # Pretend a schema 3 exists, to see the registered steps chain from a 1.x file.
    from accmt_state import _migrations

    monkeypatch.setattr(_migrations, "SCHEMA_VERSION", 3)
    monkeypatch.setattr(_migrations, "_MIGRATIONS", dict(_migrations._MIGRATIONS))
    seen: list[int] = []

    @register_migration(2)
    def rename_global_step(data: dict[str, Any]) -> dict[str, Any]:
        seen.append(data["schema_version"])
        steps = data.pop("global_step")
        return {**data, "optimizer_steps": steps}

    data = json.loads((FIXTURES / "accmt1_state.json").read_text(encoding="utf-8"))
    migrated = _migrations.migrate(data)
    assert seen == [2]
    assert migrated["schema_version"] == 3
    assert migrated["optimizer_steps"] == 765
    assert "global_step" not in migrated
    assert migrated["batches_seen_in_epoch"] == 130  # the 1 -> 2 step ran first
    assert "schema_version" not in data  # the caller's data is left alone
