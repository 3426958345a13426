"""A progress bar over trials, on the main process, when stderr is a terminal."""

from __future__ import annotations

import sys

from tqdm.auto import tqdm


class TrialProgress:
    """Trials finished out of n_trials, with the best value so far."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.bar = tqdm(
            total=total,
            desc="trials",
            unit="trial",
            disable=not (enabled and sys.stderr.isatty()),
            dynamic_ncols=True,
        )

    def show(self, finished: int, best: float | None) -> None:
        self.bar.n = min(finished, int(self.bar.total or finished))
        if best is not None:
            self.bar.set_postfix(best=f"{best:.5g}", refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        self.bar.close()
