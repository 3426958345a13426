"""accmt 1.x's Trainer: accmt-trainer's :class:`~accmt_trainer.Trainer`, which it hands 2.x
options and data after translating 1.x's."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from torch.utils.data import Dataset

import accmt_trainer
from accmt_state import TrainingState

from ._module import check_one_set
from ._stages import listed_curriculum, meant_as_stages
from ._trainer_options import translate_1x_options


class Trainer(accmt_trainer.Trainer):
    """accmt-trainer's Trainer that also takes accmt 1.x's calls: its positional options and
    its keywords are translated, each with one DeprecationWarning naming the 2.x spelling (see
    the migration page). :meth:`fit` also takes 1.x's curriculum, a list of ``(max_step,
    dataset)`` stages, and a module whose ``validation_step`` takes the batch alone (with one
    validation set)."""

    def __init__(self, hps_config: Any, model_path: Any, *args: Any, **options: Any) -> None:
        translated = translate_1x_options(args, options, stacklevel=1)
        super().__init__(hps_config, model_path, **translated)

    def fit(
        self,
        module: accmt_trainer.AcceleratorModule,
        train_dataset: Any,
        val_dataset: Dataset[Any] | Mapping[str, Dataset[Any]] | None = None,
    ) -> TrainingState:
        """:meth:`accmt_trainer.Trainer.fit`; a list of ``(max_step, dataset)`` or ``(max_step,
        dataset, dataloader_kwargs)`` stages is trained as a curriculum (``-1`` for the last
        ends it at ``max_steps``), and a plain list of samples as one dataset."""
        if meant_as_stages(train_dataset):
            train_dataset = listed_curriculum(train_dataset, self.hps.max_steps)
        if isinstance(val_dataset, Mapping):
            check_one_set(module, [str(key) for key in val_dataset])
        return super().fit(module, train_dataset, val_dataset)


# inspect shows the 2.x signature (the 1.x options are not advertised).
functools.update_wrapper(Trainer.__init__, accmt_trainer.Trainer.__init__, assigned=())
