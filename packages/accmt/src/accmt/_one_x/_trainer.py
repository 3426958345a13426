"""accmt 1.x's Trainer: accmt-trainer's :class:`~accmt_trainer.Trainer`, which it hands 2.x
options and data after translating 1.x's."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from typing import Any

from torch.utils.data import Dataset

import accmt_trainer
from accmt_state import TrainingState
from accmt_trainer import TrainerConfigError

from ._module import AcceleratorModule, check_one_set
from ._stages import listed_curriculum, meant_as_stages
from ._trainer_options import translate_1x_options

HFModel = str | os.PathLike[str] | tuple[Any, ...]
"""accmt 1.x's transformers model as ``fit``'s module: a path, or ``(path, type)``."""


class Trainer(accmt_trainer.Trainer):
    """accmt-trainer's Trainer that also takes accmt 1.x's calls: its positional options and
    its keywords are translated, each with one DeprecationWarning naming the 2.x spelling (see
    the migration page). :meth:`fit` also takes 1.x's curriculum, a list of ``(max_step,
    dataset)`` stages, a module whose ``validation_step`` takes the batch alone (with one
    validation set), and a transformers model named by its path and class."""

    def __init__(self, hps_config: Any, model_path: Any, *args: Any, **options: Any) -> None:
        translated = translate_1x_options(args, options, stacklevel=1)
        super().__init__(hps_config, model_path, **translated)

    def log_artifacts(self, path: str | os.PathLike[str]) -> None:
        """accmt 1.x's name of :meth:`log_artifact`, which takes a file or a folder."""
        self.log_artifact(path)

    def fit(
        self,
        module: accmt_trainer.AcceleratorModule | HFModel,
        train_dataset: Any,
        val_dataset: Dataset[Any] | Mapping[str, Dataset[Any]] | None = None,
        **from_pretrained: Any,
    ) -> TrainingState:
        """:meth:`accmt_trainer.Trainer.fit`; a list of ``(max_step, dataset)`` or ``(max_step,
        dataset, dataloader_kwargs)`` stages is trained as a curriculum (``-1`` for the last
        ends it at ``max_steps``), and a plain list of samples as one dataset. After a
        curriculum's finished run, ``state.train_dataloader_idx`` is one past its last stage
        (the number of stages), as in 1.x; the checkpoint keeps the last stage's index.

        ``module`` may also be a transformers model, as in 1.x: its path (``AutoModel``) or
        ``(path, type)``, ``type`` a class or the name of one in transformers' namespace
        (``("gpt2-folder", "AutoModelForCausalLM")``); it is loaded by
        :meth:`AcceleratorModule.from_hf` with ``from_pretrained``'s keyword arguments, and
        its steps return the model's loss."""
        trained = _module(module, from_pretrained)
        if meant_as_stages(train_dataset):
            train_dataset = listed_curriculum(train_dataset, self.hps.max_steps)
        if isinstance(val_dataset, Mapping):
            check_one_set(trained, [str(key) for key in val_dataset])
        state = super().fit(trained, train_dataset, val_dataset)
        if isinstance(train_dataset, accmt_trainer.Curriculum) and state.finished:
            # 1.x counted each stage when it was done, so a finished run ended one past the
            # last (its own tests check `== len(curriculum)`); 2.x stays on the last stage.
            state.train_dataloader_idx = len(train_dataset)
        return state


def _module(module: Any, from_pretrained: dict[str, Any]) -> Any:
    """``module``, or the module ``from_hf`` makes of 1.x's ``path`` or ``(path, type)``."""
    path_like = (str, os.PathLike)
    if isinstance(module, path_like):
        module = (module,)
    if not isinstance(module, tuple):
        if from_pretrained:
            raise TrainerConfigError(
                f"Trainer.fit got {', '.join(sorted(from_pretrained))}: keyword arguments of "
                "from_pretrained, which need a model path or (path, type) as the module"
            )
        return module
    if not (1 <= len(module) <= 2 and isinstance(module[0], path_like)):
        raise TrainerConfigError(
            f"Trainer.fit: a module given as a tuple is accmt 1.x's (path, type) of a "
            f"transformers model, got {module!r}"
        )
    try:
        return AcceleratorModule.from_hf(*module, **from_pretrained)
    except ValueError as error:  # a type that is no class of transformers
        raise TrainerConfigError(f"Trainer.fit({module!r}, ...): {error}") from error


# inspect shows the 2.x signature (the 1.x options are not advertised).
functools.update_wrapper(Trainer.__init__, accmt_trainer.Trainer.__init__, assigned=())
