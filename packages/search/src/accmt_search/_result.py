"""What ``optimize`` returns: the best trial's value, parameters and configuration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from accmt_trainer.integration import HyperParameters


@attrs.frozen
class SearchResult:
    """The study's best trial, the same on every process.

    - ``value``: its objective (the last evaluation's ``best_metric_fn``).
    - ``params``: its parameters as the study stores them (a choice given as a mapping is stored
      by its label).
    - ``hps``: the :class:`HyperParameters` it trained with; ``hps.to_yaml(path)`` writes it
      for a ``Trainer`` to train it again (``optimize`` writes it to ``best_hps.yaml`` in the
      output folder).
    - ``module_kwargs``: the keyword arguments it gave ``get_module_fn``.
    - ``trial_number``: its number in the study; it trained in ``output_dir/folder``.
    - ``finished``: trials finished (complete, pruned, or failed by their own error).
    - ``interrupted``: True when a signal ended the search before ``n_trials`` finished; run
      ``optimize`` again to continue.
    """

    value: float
    params: dict[str, Any]
    hps: HyperParameters
    module_kwargs: dict[str, Any]
    trial_number: int
    folder: str
    output_dir: Path
    finished: int
    interrupted: bool = False
