"""What a run shows a person: the one ``accmt_trainer`` logger and its lines (how an
evaluation reads), and the progress bar. Imports nothing else of accmt-trainer."""

from ._console import console_lines, evaluation_postfix, logger, metrics_line, processes
from ._progress_bar import ProgressBar, shows_progress

__all__ = [
    "ProgressBar",
    "console_lines",
    "evaluation_postfix",
    "logger",
    "metrics_line",
    "processes",
    "shows_progress",
]
