"""The owners of one ``fit``, made from the Trainer's options around the run's state, and the
loop that drives them."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from accmt_callbacks import CallbackHandler

from ._best_models import BestModels, choose_rules, patience_per_rule, user_callbacks
from ._checkpoints import Checkpoints
from ._evaluation import Evaluation
from ._loop import LoopOptions, Owners, TrainingLoop
from ._manifest import run_facts
from ._nonfinite import NonFiniteGuard
from ._optimizer_step import OptimizerStep
from ._progress_bar import ProgressBar
from ._setup import Run

if TYPE_CHECKING:
    from accmt_state import TrainingState

    from ._module import AcceleratorModule
    from ._trainer import Trainer


def build_loop(
    trainer: Trainer,
    run: Run,
    module: AcceleratorModule,
    state: TrainingState,
    checkpoints: Checkpoints,
) -> TrainingLoop:
    """The owners of ``trainer``'s run around ``state``, and the loop that drives them. The
    loop's callbacks are the trainer's own, followed by one patience per saving rule that has
    one; they and the module are bound to this run."""
    accelerator = run.accelerator
    guard = NonFiniteGuard(trainer.on_nonfinite_loss, accelerator)
    rules = choose_rules(trainer.saving_rules, trainer.disable_model_saving, bool(run.val_loaders))
    best_models = BestModels(
        accelerator, run.model, state, rules, patience_per_rule(trainer.patience, rules),
        model_path=trainer.model_path, greater_is_better=_greater_is_better(run), guard=guard,
        max_shard_size=trainer.max_shard_size,
    )  # fmt: skip
    callbacks = CallbackHandler(
        [*user_callbacks(trainer.callbacks), *best_models.patience.values()]
    )
    module.accelerator, module.state, module.trainer = accelerator, state, trainer
    callbacks.bind(module=module, trainer=trainer, state=state)
    monitor, hps = trainer.monitor, trainer.hps
    optimizer_step = OptimizerStep(
        accelerator, run.model, run.optimizer, run.scheduler, callbacks, state,
        clip_grad=trainer.clip_grad, scheduler_per_epoch=hps.step_scheduler_per_epoch,
        skip_nonfinite=trainer.on_nonfinite_loss == "skip",
        grad_norm_every=trainer.log_every if monitor.grad_norm else None,
        options=trainer.step_options,
    )  # fmt: skip
    evaluation = Evaluation(
        accelerator, module, run.val_loaders, run.val_metrics, callbacks, state,
        monitor=monitor, log=trainer.log, options=trainer.evaluation_options,
    )  # fmt: skip
    owners = Owners(
        optimizer_step=optimizer_step, evaluation=evaluation, best_models=best_models,
        checkpoints=checkpoints, guard=guard,
        progress=ProgressBar(trainer.progress_bar, accelerator.is_main_process),
    )  # fmt: skip
    options = LoopOptions(
        epochs=run.epochs, log_every=trainer.log_every,
        evaluate_every_n_steps=trainer.evaluate_every_n_steps,
        evaluate_every_n_epochs=trainer.evaluate_every_n_epochs,
        eval_when_start=trainer.eval_when_start, eval_when_finish=trainer.eval_when_finish,
        checkpoint_schedule=trainer.checkpoint_schedule, monitor=monitor,
        train_batch_size=hps.train_batch_size,
    )  # fmt: skip
    return TrainingLoop(
        run, module, state, callbacks, owners, options, log=trainer.log,
        run_facts=run_facts(run, hps.train_batch_size),
    )  # fmt: skip


def _greater_is_better(run: Run) -> Callable[[str], bool]:
    directions = {m.name: bool(m.greater_is_better) for ms in run.val_metrics.values() for m in ms}
    return lambda metric: directions.get(metric, False)
