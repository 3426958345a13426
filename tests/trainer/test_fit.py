"""Trainer.fit end to end on CPU: learning, hooks, accumulation, schedulers, several sets."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import TensorDataset

from accmt_callbacks import HOOKS, Callback
from accmt_metrics import Accuracy
from accmt_trainer import ExtendedAcceleratorModule, HyperParameters, Trainer
from accmt_trainer.runtime._accelerator import make_accelerator

from .conftest import Classifier, blobs


def hps(**changes: Any) -> HyperParameters:
    base: dict[str, Any] = {
        "epochs": 2,
        "batch_size": 16,
        "optimizer": "AdamW",
        "optimizer_kwargs": {"lr": 0.05},
    }
    return HyperParameters.from_dict({**base, **changes})


def trainer(tmp_path: Path, **options: Any) -> Trainer:
    options.setdefault("log_with", None)
    options.setdefault("progress_bar", False)
    options.setdefault("metrics", [Accuracy()])
    return Trainer(options.pop("hps", hps()), tmp_path / "run", **options)


class Recorder(Callback):
    """Records every hook the loop fires, with the counters at that moment."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def __getattribute__(self, name: str) -> Any:
        if name in HOOKS:
            events = object.__getattribute__(self, "events")
            return lambda *args: events.append(name)
        return object.__getattribute__(self, name)


def override_all(cls: type[Callback]) -> type[Callback]:
    # The handler dispatches only to hooks a class overrides; give the recorder all of them.
    for hook in HOOKS:
        setattr(cls, hook, lambda self, *args, _hook=hook: self.events.append(_hook))
    return cls


Recorder = override_all(Recorder)  # type: ignore[misc]


def test_learns_a_learnable_problem(tmp_path: Path) -> None:
    run = trainer(tmp_path, hps=hps(epochs=4), metrics=[Accuracy()], eval_when_start=True)
    history: list[dict[str, float]] = []

    class Keep(Callback):
        def on_evaluation_end(self) -> None:
            history.append(dict(self.state.additional_metrics["validation"]))

    run.callbacks.add(Keep())
    state = run.fit(Classifier(), blobs(384), blobs(192, seed=1))
    assert state.finished
    assert state.epoch == 4
    first, last = history[0], history[-1]
    assert last["loss"] < 0.5 * first["loss"]
    assert last["accuracy"] > 0.9 > first["accuracy"]
    assert state.best_valid_loss == pytest.approx(min(h["loss"] for h in history))
    assert math.isfinite(state.best_train_loss)


@pytest.mark.parametrize(("batches", "accumulation"), [(12, 1), (12, 4), (13, 4), (10, 3)])
def test_optimizer_steps_are_ceil_of_batches_over_accumulation(
    tmp_path: Path, batches: int, accumulation: int
) -> None:
    recorder = Recorder()
    run = trainer(
        tmp_path,
        hps=hps(epochs=2, batch_size=8),
        grad_accumulation_steps=accumulation,
        callbacks=[recorder],
    )
    state = run.fit(Classifier(), blobs(8 * batches))
    per_epoch = math.ceil(batches / accumulation)
    assert recorder.events.count("on_after_optimizer_step") == 2 * per_epoch
    assert recorder.events.count("on_before_zero_grad") == 2 * per_epoch
    assert recorder.events.count("on_before_backward") == 2 * batches
    assert state.global_step == 2 * per_epoch
    assert state.batch_iteration == 2 * batches


def test_partial_accumulation_window_is_applied_at_epoch_end(tmp_path: Path) -> None:
    # 5 batches with accumulation 4: the fifth batch's gradient must reach the weights.
    module = Classifier()
    seen: list[torch.Tensor] = []

    class Snapshot(Callback):
        def on_after_optimizer_step(self, optimizer: Any) -> None:
            seen.append(torch.cat([p.detach().flatten() for p in module.model.parameters()]))

    run = trainer(tmp_path, hps=hps(epochs=1, batch_size=8), grad_accumulation_steps=4)
    run.callbacks.add(Snapshot())
    run.fit(module, blobs(40))
    assert len(seen) == 2
    assert not torch.equal(seen[0], seen[1])


def test_hooks_fire_in_documented_order(tmp_path: Path) -> None:
    recorder = Recorder()
    run = trainer(tmp_path, hps=hps(epochs=1, batch_size=16), callbacks=[recorder])
    run.fit(Classifier(), blobs(32), blobs(16, seed=1))
    step = [
        "on_before_training_step",
        "on_before_backward",
        "on_after_backward",
        "on_before_optimizer_step",
        "on_after_optimizer_step",
        "on_before_zero_grad",
        "on_after_zero_grad",
        "on_after_training_step",
    ]
    evaluation = [
        "on_evaluation_start",
        "on_before_validation_step",
        "on_after_validation_step",
        "on_evaluation_end",
    ]
    expected = ["on_fit_start", "on_epoch_start", *step, *step, *evaluation, "on_epoch_end"]
    # The run's final checkpoint records that it finished.
    assert recorder.events == [*expected, "on_save_checkpoint", "on_fit_end"]


def test_scheduler_hooks_and_length(tmp_path: Path) -> None:
    recorder = Recorder()
    lrs: list[float] = []

    class LearningRates(Callback):
        def on_after_scheduler_step(self, scheduler: Any) -> None:
            lrs.append(scheduler.get_last_lr()[0])

    config = hps(
        epochs=3,
        batch_size=8,
        scheduler="LinearWithWarmup",
        scheduler_kwargs={"num_warmup_steps": 2},
    )
    run = trainer(tmp_path, hps=config, grad_accumulation_steps=2, callbacks=[recorder])
    run.callbacks.add(LearningRates())
    run.fit(Classifier(), blobs(8 * 7))
    optimizer_steps = 3 * math.ceil(7 / 2)
    assert recorder.events.count("on_after_scheduler_step") == optimizer_steps
    # Sized to the real number of optimizer steps: it reaches 0 exactly on the last one.
    assert lrs[-1] == 0.0
    assert all(lr > 0 for lr in lrs[:-1])


def test_several_validation_sets_with_their_own_metrics(tmp_path: Path) -> None:
    run = trainer(
        tmp_path,
        hps=hps(epochs=3),
        metrics={"easy": [Accuracy()], "hard": [Accuracy()]},
    )
    hard = blobs(96, seed=2)
    hard.tensors[1].copy_(torch.roll(hard.tensors[1], 1))  # mislabelled: accuracy stays low
    state = run.fit(Classifier(), blobs(384), {"easy": blobs(96, seed=1), "hard": hard})
    results = state.additional_metrics
    assert set(results) == {"easy", "hard"}
    assert set(results["easy"]) == {"loss", "accuracy"}
    assert results["easy"]["accuracy"] > 0.9
    assert results["hard"]["accuracy"] < 0.6


def test_unknown_metric_name_in_validation_step_is_named(tmp_path: Path) -> None:
    run = trainer(tmp_path, metrics=[])
    with pytest.raises(ValueError, match=r"returned 'accuracy'.*no metric of that name"):
        run.fit(Classifier(), blobs(32), blobs(16))


@pytest.mark.parametrize(
    ("error", "hook"),
    [
        (
            torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
            "on_cuda_out_of_memory",
        ),
        (RuntimeError("boom"), "on_runtime_error"),
        (KeyboardInterrupt(), "on_keyboard_interrupt"),
        (ValueError("bad"), "on_exception"),
    ],
)
def test_exceptions_are_dispatched_then_reraised(
    tmp_path: Path, error: BaseException, hook: str
) -> None:
    recorder = Recorder()

    class Failing(Classifier):
        def training_step(self, batch: Any) -> torch.Tensor:
            if self.state.batch_iteration == 2:
                raise error
            return super().training_step(batch)

    with pytest.raises(type(error)):
        trainer(tmp_path, callbacks=[recorder]).fit(Failing(), blobs(64))
    assert recorder.events[-1] == hook
    assert "on_fit_end" not in recorder.events


def test_callback_stop_request_ends_the_run(tmp_path: Path) -> None:
    class StopAtThree(Callback):
        def on_after_training_step(self) -> None:
            if self.state.global_step == 3:
                self.trainer.should_stop = True

    recorder = Recorder()
    run = trainer(tmp_path, hps=hps(epochs=5), callbacks=[StopAtThree(), recorder])
    state = run.fit(Classifier(), blobs(160))
    assert state.global_step == 3
    assert recorder.events[-1] == "on_fit_end"


def test_max_steps_caps_the_run(tmp_path: Path) -> None:
    state = trainer(tmp_path, hps=hps(epochs=10, max_steps=5)).fit(Classifier(), blobs(64))
    assert state.global_step == 5
    assert state.finished


class GanLike(ExtendedAcceleratorModule):
    """Does its own backward and steps, as a GAN's two-optimizer step would."""

    def __init__(self) -> None:
        self.inner = Classifier()
        self.model = self.inner.model

    def training_step(self, batch: Any) -> torch.Tensor:
        loss = self.inner.loss_fn(self.model(batch[0]), batch[1])
        self.backward(loss)
        self.step_optimizer()
        self.step_scheduler()
        self.zero_grad()
        return loss


def test_extended_module_with_accumulation(tmp_path: Path) -> None:
    recorder = Recorder()
    run = trainer(
        tmp_path,
        hps=hps(epochs=2, batch_size=8),
        grad_accumulation_steps=3,
        callbacks=[recorder],
    )
    state = run.fit(GanLike(), blobs(8 * 7))
    assert recorder.events.count("on_after_optimizer_step") == 2 * math.ceil(7 / 3)
    assert state.global_step == 2 * math.ceil(7 / 3)


def test_teacher_stays_frozen_in_eval_mode(tmp_path: Path) -> None:
    class Distilled(Classifier):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(1)
            self.teacher = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Dropout(0.5))

        def training_step(self, batch: Any) -> torch.Tensor:
            assert self.teacher is not None
            assert not self.teacher.training
            with torch.no_grad():
                target = self.teacher(batch[0]).softmax(-1)
            return torch.nn.functional.cross_entropy(self.model(batch[0]), target)

    module = Distilled()
    assert module.teacher is not None
    before = [p.clone() for p in module.teacher.parameters()]
    trainer(tmp_path).fit(module, blobs(64))
    assert all(torch.equal(a, b) for a, b in zip(before, module.teacher.parameters(), strict=True))


def test_bad_options_are_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"grad_accumulation_steps=.*got 0"):
        Trainer(hps(), tmp_path, grad_accumulation_steps=0)
    with pytest.raises(ValueError, match=r"clip_grad=.*got -1"):
        Trainer(hps(), tmp_path, clip_grad=-1)
    with pytest.raises(ValueError, match=r"mixed_precision=.*got 'fp12'"):
        Trainer(hps(), tmp_path, mixed_precision="fp12")
    with pytest.raises(ValueError, match=r"no validation set named \['nope'\]"):
        trainer(tmp_path, metrics={"nope": [Accuracy()]}).fit(Classifier(), blobs(32), blobs(8))


def test_tensorboard_logs_are_written(tmp_path: Path) -> None:
    run = trainer(tmp_path, log_with="tensorboard", metrics=[Accuracy()])
    run.fit(Classifier(), blobs(64), blobs(32, seed=1))
    assert list((tmp_path / "run" / "logs").rglob("events.out.tfevents.*"))


def test_clip_grad_bounds_the_update(tmp_path: Path) -> None:
    norms: list[float] = []

    class Norms(Callback):
        def on_before_optimizer_step(self, optimizer: Any) -> None:
            grads = [p.grad.flatten() for p in self.module.model.parameters()]
            norms.append(float(torch.cat(grads).norm()))

    run = trainer(tmp_path, hps=hps(epochs=1), clip_grad=0.01, callbacks=[Norms()])
    run.fit(Classifier(), TensorDataset(100 * torch.randn(64, 2), torch.randint(0, 3, (64,))))
    assert max(norms) <= 0.01 + 1e-6


def test_mixed_precision_reaches_accelerate(tmp_path: Path) -> None:
    module = Classifier()
    dtypes: list[torch.dtype] = []
    # Accelerate casts the model's outputs back to float32; inside, layers run in bfloat16.
    module.model[0].register_forward_hook(lambda layer, inputs, out: dtypes.append(out.dtype))
    run = trainer(tmp_path, hps=hps(epochs=1), mixed_precision="bf16", cpu=True)
    run.fit(module, blobs(64))
    assert run.accelerator.mixed_precision == "bf16"
    assert dtypes
    assert set(dtypes) == {torch.bfloat16}


def test_compile_asks_accelerate_for_inductor(tmp_path: Path) -> None:
    # Compiling itself takes minutes on this CPU; that the option reaches Accelerate's dynamo
    # plugin is what the Trainer owns.
    compiled = trainer(tmp_path, compile=True)
    accelerator = make_accelerator(compiled.accelerator_options, compiled.logging_options)
    assert str(accelerator.state.dynamo_plugin.backend).lower().endswith("inductor")


def test_monitor_logs_what_it_is_asked(tmp_path: Path) -> None:
    from accmt_trainer import Monitor

    logged: list[dict[str, float]] = []
    run = trainer(
        tmp_path,
        hps=hps(epochs=1),
        log_every=2,
        monitor=Monitor(
            learning_rate=True,
            grad_norm=True,
            throughput=True,
            memory=True,
            additional_metrics=False,
        ),
    )
    run.log = lambda values, step=None: logged.append(dict(values))  # type: ignore[method-assign]
    run.fit(Classifier(), blobs(64), blobs(32, seed=1))
    training = [values for values in logged if "train/loss" in values]
    assert len(training) == 2  # 4 optimizer steps, a log every 2
    expected = {
        "train/loss",
        "train/epoch",
        "train/lr",
        "train/grad_norm",
        "train/samples_per_second",
        "train/memory_gib",
    }
    assert set(training[0]) == expected
    assert all(values["train/samples_per_second"] > 0 for values in training)
    evaluation = [values for values in logged if "validation/loss" in values]
    assert evaluation
    assert all("validation/accuracy" not in values for values in evaluation)
