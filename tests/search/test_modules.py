"""accmt_search's modules import one another one way only; its exceptions are in _errors; its
logger is made in _log only."""

from __future__ import annotations

import logging
from pathlib import Path

import accmt_search
from accmt_search._log import logger
from tests.callbacks._modules import circles, exceptions_outside_errors, import_graph

FOLDER = Path(accmt_search.__file__).parent


def test_no_import_circle() -> None:
    assert circles(import_graph(FOLDER)) == []


def test_every_exception_class_is_in_errors() -> None:
    assert exceptions_outside_errors("accmt_search") == []


def test_the_logger_is_made_in_one_module() -> None:
    assert logger is logging.getLogger("accmt_search")
    spelled = sorted(
        path.name for path in FOLDER.glob("*.py") if '"accmt_search")' in path.read_text()
    )
    assert spelled == ["_log.py"]
