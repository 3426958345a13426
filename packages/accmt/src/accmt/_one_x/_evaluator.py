"""accmt 1.x's ``Evaluator``, on accmt-trainer's ``Trainer.evaluate``: every sample once on
any number of processes, where 1.x evened out the last batches by repeating samples."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import Dataset

import accmt_trainer
from accmt_decorators import current_process
from accmt_metrics import Metric
from accmt_state import write_json
from accmt_trainer import TrainerConfigError

from ._module import takes_the_batch_alone


class Evaluator:
    """Evaluate a module on a dataset, as accmt 1.x did: ``Evaluator(metrics, batch_size=...)
    .evaluate(module, dataset, eval_logic_fn_name="test_step", results_output="results.json")``.

    ``num_workers=None`` means no worker processes (1.x started one per process). 1.x's
    ``prepare_batch`` and ``enable_prepare_logging`` concern DeepSpeed, whose sharded models
    accmt 2 does not evaluate yet; they are accepted and do nothing.
    """

    def __init__(
        self,
        metrics: Metric | list[Metric] | None = None,
        compile: bool = False,
        batch_size: int = 1,
        device_placement: bool = True,
        num_workers: int | None = None,
        pin_memory: bool = True,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        prepare_batch: bool = True,
        enable_prepare_logging: bool = False,
    ) -> None:
        self.metrics = (
            [] if metrics is None else metrics if isinstance(metrics, list) else [metrics]
        )
        self.options: dict[str, Any] = {
            "compile": compile,
            "batch_device_placement": device_placement,
            "dataloader_num_workers": num_workers or 0,
            "dataloader_pin_memory": pin_memory and torch.cuda.is_available(),
            "val_collate_fn": collate_fn,
        }
        self.hps = accmt_trainer.HyperParameters(batch_size=batch_size)

    def evaluate(
        self,
        module: accmt_trainer.AcceleratorModule,
        dataset: Dataset[Any],
        eval_logic_fn_name: str = "test_step",
        results_output: str | os.PathLike[str] | None = "results.json",
    ) -> dict[str, float]:
        """The loss (when the step returns one) and the metrics of ``module`` over ``dataset``,
        through its method ``eval_logic_fn_name`` (given the batch, or the set's name and the
        batch); written as JSON to ``results_output`` by the main process unless it is None."""
        step = getattr(module, eval_logic_fn_name, None)
        if not callable(step):
            raise TrainerConfigError(
                f"Evaluator.evaluate: {type(module).__name__} has no method {eval_logic_fn_name!r}"
            )
        with tempfile.TemporaryDirectory(prefix="accmt-evaluator-") as unused:
            trainer = accmt_trainer.Trainer(
                self.hps, unused, metrics=self.metrics, log_with=None, **self.options
            )
            results = trainer.evaluate(_NamedStep(module, eval_logic_fn_name), dataset)
        if results_output is not None and current_process().is_main_process:
            write_json(Path(results_output), results)
        return results


class _NamedStep(accmt_trainer.AcceleratorModule):
    """The user's module seen through one of its methods as ``test_step``. What
    ``Trainer.evaluate`` sets on it (the prepared model, the accelerator) reaches the user's
    module, which the method reads."""

    _FORWARDED = ("model", "accelerator", "trainer", "state", "run_handle")

    def __init__(self, module: accmt_trainer.AcceleratorModule, name: str) -> None:
        object.__setattr__(self, "module", module)
        object.__setattr__(self, "name", name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.module, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._FORWARDED:
            setattr(self.module, name, value)
        else:
            object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if name in self._FORWARDED:
            delattr(self.module, name)
        else:
            object.__delattr__(self, name)

    def test_step(self, key: str, batch: Any) -> Any:
        step = getattr(self.module, self.name)
        return step(batch) if takes_the_batch_alone(step, bound=True) else step(key, batch)

    def before_eval(self) -> None:
        self.module.before_eval()

    def after_eval(self) -> None:
        self.module.after_eval()
