"""FSDP asked for on the CPU: Accelerate does not shard there, and fit says so. (FSDP2 runs,
killed and resumed, are tests/distributed/test_fsdp.py's.)"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from accmt_trainer import HyperParameters, Trainer

from .conftest import Classifier, blobs

HPS = HyperParameters(epochs=1, batch_size=8)


def fit(folder: Path) -> None:
    trainer = Trainer(
        HPS, folder, checkpoint_every=None, log_with=None, progress_bar=False, cpu=True
    )
    trainer.fit(Classifier(), blobs(16))


def test_fsdp_asked_for_on_the_cpu_warns_that_accelerate_did_not_shard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    monkeypatch.setenv("FSDP_VERSION", "2")
    # Accelerate's plugin writes this one into the environment: undone after the test.
    monkeypatch.setenv("FSDP_CPU_RAM_EFFICIENT_LOADING", "False")
    with pytest.warns(
        UserWarning,
        match=r"FSDP was asked for \(ACCELERATE_USE_FSDP\), but "
        r"Accelerate ran a single process on the CPU \(NO\)",
    ):
        fit(tmp_path / "run")


def test_without_fsdp_nothing_is_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ACCELERATE_USE_FSDP", raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit(tmp_path / "run")
    assert not [w for w in caught if "FSDP" in str(w.message)]
