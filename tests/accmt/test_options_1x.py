"""The Trainer options accmt 1.x had and 2.0 lacked: each does what 1.x's did, shown by a run."""

from __future__ import annotations

import inspect
import math
import re
import warnings
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import attrs
import pytest
import torch
from accelerate.tracking import GeneralTracker
from torch.utils.data import BatchSampler, SequentialSampler, default_collate

import accmt_trainer
from accmt import (
    AcceleratorModule,
    ArtifactNotFoundError,
    HyperParameters,
    Monitor,
    Trainer,
    TrainerConfigError,
)
from accmt_callbacks import Callback
from accmt_metrics import Accuracy
from accmt_trainer.runtime._accelerator import make_accelerator

from .conftest import Classifier, blobs

HPS = HyperParameters(epochs=2, batch_size=8, optimizer="AdamW", optimizer_kwargs={"lr": 0.05})


def trainer(tmp_path: Path, **options: Any) -> Trainer:
    options.setdefault("log_with", None)
    options.setdefault("progress_bar", False)
    options.setdefault("checkpoint_every", None)
    options.setdefault("metrics", [Accuracy()])
    return Trainer(options.pop("hps", HPS), tmp_path / "run", **options)


def logged_by(run: Trainer) -> list[dict[str, float]]:
    """What ``run`` gives its trackers, call by call."""
    logged: list[dict[str, float]] = []
    run.log = lambda values, step=None: logged.append(dict(values))  # type: ignore[method-assign]
    return logged


class Recording(Classifier):
    """Records each training loss and the size of each batch it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.losses: list[float] = []
        self.train_sizes: list[int] = []
        self.val_sizes: list[int] = []

    def training_step(self, batch: Any) -> torch.Tensor:
        loss = super().training_step(batch)
        self.losses.append(float(loss.detach()))
        self.train_sizes.append(len(batch[1]))
        return loss

    def validation_step(self, key: str, batch: Any) -> dict[str, Any]:
        self.val_sizes.append(len(batch[1]))
        return super().validation_step(key, batch)


# ---------------------------------------------------------------------------- log_every


@pytest.mark.parametrize("spelling", ["epoch", -1])
def test_log_every_epoch_logs_each_epoch_s_mean_loss_once(tmp_path: Path, spelling: Any) -> None:
    module = Recording()
    deprecated = r"log_every=\.\.\.\) with -1 .* use Trainer\(log_every='epoch'\)"
    with pytest.deprecated_call(match=deprecated) if spelling == -1 else nullcontext():
        run = trainer(tmp_path, log_every=spelling)
    logged = logged_by(run)
    run.fit(module, blobs(40))  # 5 batches an epoch, 2 epochs
    losses = [values["train/loss"] for values in logged if "train/loss" in values]
    assert losses == pytest.approx(
        [math.fsum(module.losses[:5]) / 5, math.fsum(module.losses[5:]) / 5], rel=1e-6
    )


def test_log_every_rejects_other_words(tmp_path: Path) -> None:
    with pytest.raises(TrainerConfigError, match=r"log_every=\.\.\.\): expected .* or 'epoch'"):
        trainer(tmp_path, log_every="step")


# --------------------------------------------------------------- gradient checkpointing


class Checkpointed(torch.nn.Sequential):
    def __init__(self) -> None:
        super().__init__(torch.nn.Linear(2, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
        self.enabled_with: list[Any] = []

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs: Any = None) -> None:
        self.enabled_with.append(gradient_checkpointing_kwargs)


def test_gradient_checkpointing_is_enabled_on_the_model_before_training(tmp_path: Path) -> None:
    module = Recording()
    module.model = model = Checkpointed()
    seen: list[int] = []
    module.training_step = lambda batch: (
        seen.append(len(model.enabled_with)),  # type: ignore
        Classifier.training_step(module, batch),
    )[1]
    run = trainer(
        tmp_path,
        gradient_checkpointing=True,
        gradient_checkpointing_kwargs={"use_reentrant": False},
    )
    run.fit(module, blobs(16))
    assert model.enabled_with == [{"use_reentrant": False}]
    assert seen
    assert set(seen) == {1}


def test_gradient_checkpointing_off_by_default_and_kwargs_default_to_none(tmp_path: Path) -> None:
    module = Recording()
    module.model = model = Checkpointed()
    trainer(tmp_path).fit(module, blobs(16))
    assert model.enabled_with == []
    module.model = model = Checkpointed()
    trainer(tmp_path / "b", gradient_checkpointing=True).fit(module, blobs(16))
    assert model.enabled_with == [None]  # the model's own default


def test_gradient_checkpointing_on_a_model_without_it_names_the_class(tmp_path: Path) -> None:
    run = trainer(tmp_path, gradient_checkpointing=True)
    module = Recording()
    with pytest.raises(
        TrainerConfigError, match=r"Sequential has no gradient_checkpointing_enable"
    ):
        run.fit(module, blobs(16))
    assert module.losses == []


# --------------------------------------------------------------------------- set_to_none


class GradsAfterZeroing(Callback):
    def __init__(self) -> None:
        self.grads: list[torch.Tensor | None] = []

    def on_after_zero_grad(self, optimizer: Any) -> None:
        self.grads.append(self.module.model[0].weight.grad)


@pytest.mark.parametrize("set_to_none", [True, False])
def test_set_to_none_reaches_zero_grad(tmp_path: Path, set_to_none: bool) -> None:
    seen = GradsAfterZeroing()
    trainer(tmp_path, set_to_none=set_to_none, callbacks=[seen]).fit(Recording(), blobs(16))
    assert len(seen.grads) == 4
    if set_to_none:
        assert all(grad is None for grad in seen.grads)
    else:
        assert all(grad is not None and not grad.any() for grad in seen.grads)


# ------------------------------------------------------------------- samplers, collates


class FirstOf(torch.utils.data.Sampler[int]):
    def __init__(self, count: int) -> None:
        self.count = count

    def __iter__(self) -> Any:
        return iter(range(self.count))

    def __len__(self) -> int:
        return self.count


def test_batch_samplers_make_the_batches_of_their_loaders(tmp_path: Path) -> None:
    module = Recording()
    train, val = blobs(20), blobs(12, seed=1)
    run = trainer(
        tmp_path,
        batch_sampler=BatchSampler(SequentialSampler(train), 6, drop_last=False),
        val_batch_sampler=BatchSampler(SequentialSampler(val), 5, drop_last=False),
    )
    run.fit(module, train, val)
    assert module.train_sizes == [6, 6, 6, 2] * 2  # not HPS's batch size of 8
    assert module.val_sizes[-3:] == [5, 5, 2]


def test_val_sampler_chooses_the_validation_samples(tmp_path: Path) -> None:
    module = Recording()
    run = trainer(tmp_path, val_sampler=FirstOf(10), sanity_check=False)
    run.fit(module, blobs(16), blobs(40, seed=1))
    assert sum(module.val_sizes) == 10 * 2  # two evaluations of the first 10 samples


def test_a_sampler_and_a_batch_sampler_together_are_refused(tmp_path: Path) -> None:
    data = blobs(8)
    with pytest.raises(TrainerConfigError, match=r"Trainer\(sampler=\.\.\., batch_sampler="):
        trainer(tmp_path, sampler=FirstOf(4), batch_sampler=BatchSampler(FirstOf(4), 2, False))
    with pytest.raises(TrainerConfigError, match=r"Trainer\(val_sampler=\.\.\., val_batch_s"):
        trainer(
            tmp_path,
            val_sampler=FirstOf(4),
            val_batch_sampler=BatchSampler(SequentialSampler(data), 2, False),
        )


def tagged(tag: str) -> Any:
    def collate(samples: list[Any]) -> Any:
        features, labels = default_collate(samples)
        return features, labels, tag

    return collate


class Tags(Classifier):
    def __init__(self) -> None:
        super().__init__()
        self.tags: dict[str, set[str]] = {"train": set(), "val": set()}

    def training_step(self, batch: Any) -> torch.Tensor:
        self.tags["train"].add(batch[2])
        return super().training_step(batch[:2])

    def validation_step(self, key: str, batch: Any) -> dict[str, Any]:
        self.tags["val"].add(batch[2])
        return super().validation_step(key, batch[:2])


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"collate_fn": tagged("a")}, {"train": {"a"}, "val": {"a"}}),
        (
            {"collate_fn": tagged("a"), "val_collate_fn": tagged("v")},
            {"train": {"a"}, "val": {"v"}},
        ),
    ],
)
def test_val_collate_fn_collates_validation_batches(
    tmp_path: Path, options: dict[str, Any], expected: dict[str, set[str]]
) -> None:
    module = Tags()
    trainer(tmp_path, **options).fit(module, blobs(16), blobs(8, seed=1))
    assert module.tags == expected


def test_1x_collate_fn_train_alone_leaves_validation_to_pytorch_s_default(tmp_path: Path) -> None:
    module = Tags()
    with pytest.warns(DeprecationWarning, match="collate_fn_train"):
        run = trainer(tmp_path, collate_fn_train=tagged("a"))
    with pytest.raises(IndexError):  # the default collate gives (features, labels) only
        run.fit(module, blobs(16), blobs(8, seed=1))


# -------------------------------------------------------------------- batch placement


class Moved:
    """A batch that records whether Accelerate moved it (``send_to_device`` calls ``to``)."""

    def __init__(self, features: torch.Tensor, labels: torch.Tensor) -> None:
        self.features, self.labels, self.moved = features, labels, False

    def to(self, device: Any, non_blocking: bool = False) -> Moved:
        moved = Moved(self.features.to(device), self.labels.to(device))
        moved.moved = True
        return moved


class Placement(Classifier):
    def __init__(self) -> None:
        super().__init__()
        self.moved: set[tuple[str, bool]] = set()

    def collate_fn(self, samples: list[Any]) -> Moved:
        return Moved(*default_collate(samples))

    def training_step(self, batch: Moved) -> torch.Tensor:
        self.moved.add(("train", batch.moved))
        return super().training_step((batch.features, batch.labels))

    def validation_step(self, key: str, batch: Moved) -> dict[str, Any]:
        self.moved.add(("val", batch.moved))
        return super().validation_step(key, (batch.features, batch.labels))


@pytest.mark.parametrize("placement", [True, False])
def test_batch_device_placement_false_leaves_batches_where_they_are(
    tmp_path: Path, placement: bool
) -> None:
    module = Placement()
    run = trainer(tmp_path, batch_device_placement=placement)
    run.fit(module, blobs(16), blobs(8, seed=1))
    assert module.moved == {("train", placement), ("val", placement)}


# ------------------------------------------------------------------------ best models


def test_max_shard_size_shards_the_best_model(tmp_path: Path) -> None:
    run = trainer(tmp_path, max_shard_size=200)  # the model is about 400 bytes
    run.fit(Recording(), blobs(16), blobs(8, seed=1))
    saved = sorted(path.name for path in (run.model_path / "best_valid_loss").iterdir())
    shards = [name for name in saved if name.startswith("model-")]
    assert len(shards) > 1
    assert "model.safetensors.index.json" in saved
    whole = trainer(tmp_path / "whole")
    whole.fit(Recording(), blobs(16), blobs(8, seed=1))
    assert (whole.model_path / "best_valid_loss" / "model.safetensors").is_file()


@pytest.mark.parametrize("size", ["ten gigs", -1, True])
def test_a_bad_max_shard_size_is_named(tmp_path: Path, size: Any) -> None:
    with pytest.raises(TrainerConfigError, match=r"Trainer\(max_shard_size=\.\.\.\)"):
        trainer(tmp_path, max_shard_size=size)


# --------------------------------------------------------------------------- compile


def test_compile_kwargs_reach_accelerate_s_dynamo_plugin(tmp_path: Path) -> None:
    run = trainer(
        tmp_path, compile=True, compile_kwargs={"mode": "max-autotune", "fullgraph": True}
    )
    plugin = make_accelerator(run.accelerator_options, run.logging_options).state.dynamo_plugin
    assert (plugin.mode, plugin.fullgraph) == ("max-autotune", True)
    assert str(plugin.backend).lower().endswith("inductor")


def test_unknown_compile_kwargs_are_named(tmp_path: Path) -> None:
    with pytest.raises(TrainerConfigError, match=r"compile_kwargs=.*no 'mood'.*'mode'"):
        trainer(tmp_path, compile=True, compile_kwargs={"mood": "fast"})


# ------------------------------------------------------------- metric consolidation


def consolidated_run(tmp_path: Path, sets: int, **options: Any) -> tuple[Trainer, list[Any]]:
    run = trainer(tmp_path, hps=HyperParameters(epochs=1, batch_size=8), **options)
    logged = logged_by(run)
    val = {f"set{i}": blobs(16, seed=i + 1) for i in range(sets)}
    run.fit(Recording(), blobs(16), val if sets > 1 else val["set0"])
    return run, [values for values in logged if "train/loss" not in values]


def test_consolidate_metrics_logs_the_mean_under_its_name_and_hides_what_it_took(
    tmp_path: Path,
) -> None:
    run, logged = consolidated_run(
        tmp_path, 2, consolidate_metrics={"average_accuracy": lambda k: k.startswith("accuracy")}
    )
    results = run.state.additional_metrics
    expected = (results["set0"]["accuracy"] + results["set1"]["accuracy"]) / 2
    assert logged[-1] == pytest.approx(
        {
            "set0/loss": results["set0"]["loss"],
            "set1/loss": results["set1"]["loss"],
            "average_accuracy": expected,
        }
    )
    # The state keeps every value: consolidation is about logging only.
    assert set(results["set0"]) == {"loss", "accuracy"}


def test_report_all_metrics_and_additional_consolidation(tmp_path: Path) -> None:
    run, logged = consolidated_run(
        tmp_path,
        2,
        consolidate_metrics={"loss": lambda k: k.startswith("valid_loss__")},
        additional_metric_consolidation=lambda values: {"max_loss": max(values["loss"])},
        report_all_metrics=True,
    )
    results = run.state.additional_metrics
    losses = [results["set0"]["loss"], results["set1"]["loss"]]
    assert logged[-1] == pytest.approx(
        {
            "set0/loss": losses[0],
            "set1/loss": losses[1],
            "set0/accuracy": results["set0"]["accuracy"],
            "set1/accuracy": results["set1"]["accuracy"],
            "loss": sum(losses) / 2,
            "max_loss": max(losses),
        }
    )


def test_with_one_set_1x_names_have_no_suffix(tmp_path: Path) -> None:
    run, logged = consolidated_run(
        tmp_path, 1, consolidate_metrics={"acc": lambda k: k == "accuracy"}
    )
    assert logged[-1] == pytest.approx(
        {
            "validation/loss": run.state.additional_metrics["validation"]["loss"],
            "acc": run.state.additional_metrics["validation"]["accuracy"],
        }
    )


def test_a_consolidation_that_takes_nothing_fails_before_training(tmp_path: Path) -> None:
    module = Recording()
    run = trainer(tmp_path, consolidate_metrics={"acc": lambda k: k == "accuracy"})
    with pytest.raises(TrainerConfigError, match=r"'acc' takes none of the logged values"):
        run.fit(module, blobs(16), {"a": blobs(8, seed=1), "b": blobs(8, seed=2)})
    assert module.losses == []


def test_bad_consolidation_options_are_named(tmp_path: Path) -> None:
    with pytest.raises(TrainerConfigError, match=r"consolidate_metrics=\.\.\.\): expected"):
        trainer(tmp_path, consolidate_metrics=["accuracy"])
    with pytest.raises(TrainerConfigError, match=r"additional_metric_consolidation=\.\.\.\)"):
        trainer(tmp_path, consolidate_metrics={}, additional_metric_consolidation="max")


# ----------------------------------------------------------- optimizer maintenance


class AdamSteps(Callback):
    """The Adam step count of the first weight, before each optimizer step (0: fresh)."""

    def __init__(self) -> None:
        self.counts: list[int] = []

    def on_before_optimizer_step(self, optimizer: Any) -> None:
        state = optimizer.state.get(self.module.model[0].weight, {})
        self.counts.append(int(state["step"]) if "step" in state else 0)


@pytest.mark.parametrize(("every", "counts"), [(None, [0, 1, 2, 3, 4, 5]), (2, [0, 1] * 3)])
def test_reset_optimizer_every_n_steps_clears_its_state(
    tmp_path: Path, every: int | None, counts: list[int]
) -> None:
    seen = AdamSteps()
    hps = HyperParameters(epochs=2, batch_size=8, optimizer="Adam")
    trainer(tmp_path, hps=hps, reset_optimizer_every_n_steps=every, callbacks=[seen]).fit(
        Recording(), blobs(24)
    )
    assert seen.counts == counts


def test_cleanup_cache_every_n_steps_clears_the_device_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from accelerate.utils import memory

    calls: list[int] = []
    module = Recording()
    monkeypatch.setattr(
        memory,
        "clear_device_cache",
        lambda garbage_collection=False: calls.append(len(module.losses)),
    )
    trainer(tmp_path, cleanup_cache_every_n_steps=2).fit(module, blobs(40))  # 10 steps
    assert calls == [2, 4, 6, 8, 10]  # after the steps that end with these batches


@pytest.mark.parametrize("option", ["reset_optimizer_every_n_steps", "cleanup_cache_every_n_steps"])
def test_bad_step_counts_are_named(tmp_path: Path, option: str) -> None:
    with pytest.raises(TrainerConfigError, match=rf"Trainer\({option}=\.\.\.\)"):
        trainer(tmp_path, **{option: 0})


# ------------------------------------------------------------------------ module hooks


class Hooked(Recording):
    def __init__(self) -> None:
        super().__init__()
        self.events: list[str] = []

    def before_eval(self) -> None:
        self.events.append("before")

    def after_eval(self) -> None:
        self.events.append("after")

    def validation_step(self, key: str, batch: Any) -> dict[str, Any]:
        self.events.append("step")
        return super().validation_step(key, batch)


@pytest.mark.parametrize("hooks", [True, False])
def test_module_hooks_surround_each_evaluation(tmp_path: Path, hooks: bool) -> None:
    module = Hooked()
    trainer(tmp_path, module_hooks=hooks).fit(module, blobs(16), blobs(16, seed=1))
    # The sanity check's batch, then one evaluation per epoch of two batches each.
    run = ["step"] + ["step", "step"] * 2
    if hooks:
        assert (
            module.events == ["before", "step", "after"] + ["before", "step", "step", "after"] * 2
        )
    else:
        assert module.events == run


def test_the_hooks_are_documented_no_ops_of_every_module() -> None:
    module = AcceleratorModule()
    assert module.before_eval() is None
    assert module.after_eval() is None


# ---------------------------------------------------------------------------- trackers


def test_tracker_config_and_init_kwargs_reach_tensorboard(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = trainer(
        tmp_path,
        log_with="tensorboard",
        track_name="t",
        additional_tracker_config={"dataset": "blobs", "nested": {"k": 1}},
        tracker_init_kwargs={"tensorboard": {"filename_suffix": ".accmt"}},
    )
    run.fit(Recording(), blobs(16))
    folder = run.logging_options.logging_dir / "t"
    # The configuration is in the run's own events (the text "hparams"), in no folder of its own.
    assert [path for path in folder.iterdir() if path.is_dir()] == []
    logged = EventAccumulator(str(folder))
    logged.Reload()
    (hparams,) = logged.Tensors("hparams/text_summary")
    text = hparams.tensor_proto.string_val[0].decode()
    assert "| dataset | blobs |" in text
    assert "| nested.k | 1 |" in text
    assert "| epochs | 2 |" in text
    events = list(folder.glob("events.out.tfevents.*"))
    assert events
    assert all(path.name.endswith(".accmt") for path in events)


def test_init_kwargs_for_a_tracker_the_run_does_not_use_are_a_warning(tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match=r"no tracker named 'mlflow'.*unused"):
        trainer(tmp_path, tracker_init_kwargs={"mlflow": {"run_name": "x"}})
    with pytest.raises(TrainerConfigError, match=r"tracker_init_kwargs=\.\.\.\): expected"):
        trainer(tmp_path, log_with="tensorboard", tracker_init_kwargs={"tensorboard": 3})


# --------------------------------------------------------------------------- artifacts


class LogsArtifacts(Callback):
    def __init__(self, file: Path, folder: Path) -> None:
        self.file, self.folder = file, folder

    def on_fit_end(self) -> None:
        self.trainer.log_artifact(self.file)
        self.trainer.log_artifacts(self.folder)


def artifacts(tmp_path: Path) -> tuple[Path, Path]:
    file, folder = tmp_path / "notes.txt", tmp_path / "plots"
    file.write_text("notes")
    folder.mkdir()
    (folder / "a.txt").write_text("a")
    return file, folder


def test_artifacts_without_an_artifact_store_are_copied_next_to_the_logs(tmp_path: Path) -> None:
    file, folder = artifacts(tmp_path)
    run = trainer(
        tmp_path, log_with="tensorboard", track_name="t", callbacks=[LogsArtifacts(file, folder)]
    )
    run.fit(Recording(), blobs(16))
    copied = run.logging_options.logging_dir / "t" / "artifacts"
    assert (copied / "notes.txt").read_text() == "notes"
    assert (copied / "plots" / "a.txt").read_text() == "a"


class StoresArtifacts(GeneralTracker):
    """A tracker with an artifact store, as Accelerate's MLflow tracker has."""

    name = "stores"
    requires_logging_directory = False

    def __init__(self) -> None:
        super().__init__()
        self.stored: list[tuple[str, str]] = []

    @property
    def tracker(self) -> Any:
        return self

    def log(self, values: dict[str, Any], step: int | None = None, **kwargs: Any) -> None:
        pass

    def log_artifact(self, local_path: str) -> None:
        self.stored.append(("file", local_path))

    def log_artifacts(self, local_dir: str) -> None:
        self.stored.append(("folder", local_dir))


def test_artifacts_go_to_a_tracker_that_stores_them(tmp_path: Path) -> None:
    file, folder = artifacts(tmp_path)
    store = StoresArtifacts()
    run = trainer(tmp_path, log_with=[store], callbacks=[LogsArtifacts(file, folder)])
    run.fit(Recording(), blobs(16))
    assert store.stored == [("file", str(file)), ("folder", str(folder))]
    assert not (
        run.logging_options.logging_dir / run.logging_options.track_name / "artifacts"
    ).exists()


def test_artifacts_without_a_running_tracker_are_a_warning(tmp_path: Path) -> None:
    file, _ = artifacts(tmp_path)
    run = trainer(tmp_path, log_with=None)
    with pytest.warns(UserWarning, match=r"log_artifact\(.*notes.txt'\): no tracker is running"):
        run.log_artifact(file)
    run.fit(Recording(), blobs(16))
    with pytest.warns(UserWarning, match="no tracker is running"):
        run.log_artifacts(tmp_path)
    assert not run.logging_options.logging_dir.exists()


def test_a_missing_artifact_is_named(tmp_path: Path) -> None:
    run = trainer(tmp_path, log_with="tensorboard")

    class Missing(Callback):
        def on_fit_start(self) -> None:
            self.trainer.log_artifact(tmp_path / "nope.txt")

    run.callbacks.add(Missing())
    with pytest.raises(ArtifactNotFoundError, match=r"nope\.txt does not exist"):
        run.fit(Recording(), blobs(16))


# ----------------------------------------------------------------------------- Monitor


def test_monitor_takes_1x_s_utilization_flags_as_its_own() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # they are accmt 2 flags, not deprecated spellings
        monitor = Monitor(gpu_utilization=True, cpu_utilization=True)
    assert (monitor.gpu_utilization, monitor.cpu_utilization, monitor.memory) == (True, True, False)
    two_x = accmt_trainer.Monitor(gpu_utilization=True, cpu_utilization=True)
    assert attrs.asdict(monitor) == attrs.asdict(two_x)


def test_monitor_ignores_1x_s_checkpoint_flag_with_a_warning() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        monitor = Monitor(checkpoint=True, epoch=False)
    assert monitor == Monitor(epoch=False)
    assert len(caught) == 1
    assert caught[0].category is DeprecationWarning
    assert re.search(
        r"Monitor\(checkpoint=\.\.\.\) has no effect in accmt 2", str(caught[0].message)
    )
    assert (Path(caught[0].filename).name, caught[0].lineno) == (Path(__file__).name, line)


def test_monitor_keeps_its_2x_signature_and_refuses_other_names() -> None:
    assert "checkpoint" not in inspect.signature(Monitor).parameters
    assert "gpu_utilization" in inspect.signature(Monitor).parameters
    assert "memory" in inspect.signature(Monitor).parameters
    with pytest.raises(TypeError, match="unexpected keyword argument 'gpu_memory'"):
        Monitor(gpu_memory=True)  # type: ignore[call-arg]
