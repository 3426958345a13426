"""``Trainer.evaluate`` and ``Trainer.predict``: a job of their own on the module, every
sample once in dataset order on any number of processes, and predictions written in shards."""

from ._evaluate import evaluate
from ._job import Weights
from ._options import InferenceOptions
from ._predict import predict
from ._predictions import iter_predictions, load_predictions

__all__ = [
    "InferenceOptions",
    "Weights",
    "evaluate",
    "iter_predictions",
    "load_predictions",
    "predict",
]
