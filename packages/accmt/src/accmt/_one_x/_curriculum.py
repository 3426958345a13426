"""accmt 1.x's ``RatioCurriculum``: accmt-trainer's, except that a last ``-1`` stage after
ratios that already add up to 1 is taken, as 1.x took it, and trains no step."""

from __future__ import annotations

import math
from typing import Any

import accmt_trainer

_LAST = -1
# accmt-trainer's RatioCurriculum counts float sums within this of 1 as 1 (0.1 + 0.2 + 0.7)
# and refuses a -1 after them; the same bound here takes exactly the stages it refuses.
_WHOLE = 1 - 1e-9


class RatioCurriculum(accmt_trainer.RatioCurriculum):
    """accmt-trainer's :class:`~accmt_trainer.RatioCurriculum` with 1.x's ``-1``: the share
    left, even none. 1.x gave ``-1`` ``1 - sum(ratios)``; after ratios that add up to 1 that
    is 0, a stage that counts in ``len()`` and in the stage index a finished run ends on, but
    trains no step (2.x refuses it, as it says nothing a user meant to train)."""

    def add(
        self, dataset: Any, ratio: float, dataloader_kwargs: dict[str, Any] | None = None
    ) -> None:
        """Train on ``dataset`` for ``ratio`` of ``max_steps`` (``-1``: the share left, last
        only, which may be none)."""
        if ratio == _LAST and not self._after_last() and math.fsum(self.ratios) >= _WHOLE:
            self._append(dataset, dataloader_kwargs)  # checks the dataset and its kwargs
            self.ratios.append(float(_LAST))
            return
        super().add(dataset, ratio, dataloader_kwargs)

    def stages(self, max_steps: int | None) -> list[tuple[int, Any, dict[str, Any]]]:
        """accmt-trainer's stages, without a last stage that has no share: it would train no
        step, and the Trainer's stages each train at least one."""
        if not self._ends_with_no_share():
            return super().stages(max_steps)
        trained = accmt_trainer.RatioCurriculum()
        for dataset, ratio, kwargs in zip(
            self.data[:-1], self.ratios[:-1], self.dataloader_kwargs[:-1], strict=True
        ):
            trained.add(dataset, ratio, kwargs)
        return trained.stages(max_steps)

    def _after_last(self) -> bool:
        return bool(self.ratios) and self.ratios[-1] == _LAST

    def _ends_with_no_share(self) -> bool:
        return self._after_last() and math.fsum(self.ratios[:-1]) >= _WHOLE
