"""What only packages built on accmt-trainer use (``accmt_trainer.integration``) does not reach
``accmt``'s user-facing names through its star import of ``accmt_trainer``."""

from __future__ import annotations

import accmt
import accmt_trainer.integration

INTERNAL = ["ProcessGroupScope", "check_writable", "stop_on_signals", "use_cpu"]


def test_the_internal_names_are_not_in_accmt_s_all() -> None:
    assert set(INTERNAL) <= set(accmt_trainer.integration.__all__)
    assert [name for name in INTERNAL if name in accmt.__all__] == []
