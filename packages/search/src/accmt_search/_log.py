"""The one logger of accmt-search, ``accmt_search``: trial lines, waits, the summary, warnings."""

from __future__ import annotations

import logging

logger = logging.getLogger("accmt_search")
