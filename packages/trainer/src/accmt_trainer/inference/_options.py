"""What ``Trainer.evaluate`` and ``predict`` are told, made once when the Trainer is made."""

from __future__ import annotations

from pathlib import Path

import attrs

from ..config import HyperParameters
from ..data import LoaderOptions
from ..evaluation import EvaluationOptions
from ..runtime import AcceleratorOptions, LoggingOptions


@attrs.frozen(kw_only=True)
class InferenceOptions:
    """The Trainer's options that evaluating and predicting read: the batch size, where best
    models lie (``model_path``), how the Accelerator and loaders are made, the metrics, and
    where values are logged."""

    hps: HyperParameters
    model_path: Path
    accelerator_options: AcceleratorOptions
    loader_options: LoaderOptions
    evaluation_options: EvaluationOptions
    logging_options: LoggingOptions
