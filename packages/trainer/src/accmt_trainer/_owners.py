"""The owners of one ``fit``, each made from its own options object, around the run's state,
and the loop that drives them."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._best_models import BestModels, choose_rules
from ._checkpoints import Checkpoints
from ._evaluation import Evaluation
from ._loop import Owners, TrainingLoop
from ._nonfinite import NonFiniteGuard
from ._optimizer_step import OptimizerStep
from ._progress_bar import ProgressBar
from ._setup import Run

if TYPE_CHECKING:
    from collections.abc import Mapping

    from accmt_state import TrainingState

    from ._module import AcceleratorModule
    from ._trainer import Trainer


def build_loop(
    trainer: Trainer,
    run: Run,
    module: AcceleratorModule,
    state: TrainingState,
    checkpoints: Checkpoints,
    run_facts: Mapping[str, Any],
) -> TrainingLoop:
    """The owners of ``trainer``'s run around ``state``, and the loop that drives them with
    the trainer's callbacks; the callbacks and the module are bound to this run."""
    accelerator, callbacks = run.accelerator, trainer.callbacks
    module.accelerator, module.state, module.trainer = accelerator, state, trainer
    callbacks.bind(module=module, trainer=trainer, state=state)
    step_options, logging = trainer.step_options, trainer.logging_options
    guard = NonFiniteGuard(step_options.on_nonfinite_loss, accelerator)
    best_models = BestModels(
        accelerator,
        run.model,
        state,
        choose_rules(
            trainer.saving_rules,
            trainer.best_model_options.disable_model_saving,
            bool(run.val_loaders),
        ),
        trainer.best_model_options,
        model_path=trainer.model_path,
        greater_is_better=_greater_is_better(run),
        guard=guard,
        request_stop=callbacks.request_stop,
    )
    optimizer_step = OptimizerStep(
        accelerator,
        run.model,
        run.optimizer,
        run.scheduler,
        callbacks,
        state,
        step_options,
        scheduler_per_epoch=trainer.hps.step_scheduler_per_epoch,
        grad_norm_every=logging.log_every if logging.monitor.grad_norm else None,
    )
    evaluation = Evaluation(
        accelerator,
        module,
        run.val_loaders,
        run.val_metrics,
        callbacks,
        state,
        monitor=logging.monitor,
        log=trainer.log,
        options=trainer.evaluation_options,
    )
    owners = Owners(
        optimizer_step=optimizer_step,
        evaluation=evaluation,
        best_models=best_models,
        checkpoints=checkpoints,
        guard=guard,
        progress=ProgressBar(logging.progress_bar, accelerator.is_main_process),
    )
    return TrainingLoop(
        run,
        module,
        state,
        callbacks,
        owners,
        evaluation=trainer.evaluation_options,
        logging=logging,
        checkpoint_schedule=trainer.checkpoint_options.schedule,
        log=trainer.log,
        run_facts=run_facts,
    )


def _greater_is_better(run: Run) -> Callable[[str], bool]:
    directions = {m.name: bool(m.greater_is_better) for ms in run.val_metrics.values() for m in ms}
    return lambda metric: directions.get(metric, False)
