"""accmt 1.x-style training scripts run unchanged through 'accmt launch', on 1 and on 2
processes. On each number of processes one launch runs the programs in turn
(workers/one_x_in_turn.py), each into a folder of its own; from_hf's has a launch of its own
(it needs transformers, and its tests are marked so)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.trainer._tiny_gpt2 import save_tiny_gpt2

from ._launch import WORKERS, read_ranks
from .test_cli_launch import accmt

pytestmark = pytest.mark.distributed


def launch(worker: str, out: Path, nproc: int, *args: str) -> list[dict[str, Any]]:
    """Run workers/<worker> unchanged through 'accmt launch --cpu -N nproc'; what each process
    wrote."""
    done = accmt("launch", "--cpu", "-N", str(nproc), str(WORKERS / worker), str(out), *args)
    assert done.returncode == 0, done.stderr[-4000:]
    return read_ranks(out, nproc)


ONE_X_STATE = Path(__file__).parents[1] / "state" / "fixtures" / "accmt1_state.json"
FORMS = ["steps", "ratio", "range", "list"]
# The options program first: it counts the DeprecationWarnings its 1.x spellings raise.
IN_TURN = [
    "one_x_options.py",
    "one_x_classifier.py",
    ":".join(["one_x_curriculum.py", *FORMS]),
    f"one_x_module.py:{ONE_X_STATE}",
]


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, int], list[dict[str, Any]]]:
    """What each process of a program wrote, from the one launch on ``nproc`` processes that
    ran every program of IN_TURN (launched when a test first asks)."""
    launches: dict[int, tuple[Path, subprocess.CompletedProcess[str]]] = {}

    def records(program: str, nproc: int) -> list[dict[str, Any]]:
        if nproc not in launches:
            out = tmp_path_factory.mktemp(f"one_x_{nproc}")
            worker = str(WORKERS / "one_x_in_turn.py")
            launches[nproc] = (
                out,
                accmt("launch", "--cpu", "-N", str(nproc), worker, str(out), *IN_TURN),
            )
        out, done = launches[nproc]
        assert done.returncode == 0, done.stderr[-4000:]
        return read_ranks(out / program, nproc)

    return records


@pytest.mark.parametrize("nproc", [1, 2])
def test_a_1x_classifier_with_a_1x_metric(ran: Callable[..., Any], nproc: int) -> None:
    records = ran("one_x_classifier", nproc)
    for record in records:
        assert (record["world"], record["finished"]) == (nproc, True)
        found = record["metrics"]["validation"]
        # The 1.x metric saw every validation sample once, padding dropped: its value is the
        # 1.x math over the whole set, to the bit, and the same on every process.
        assert found["accuracy"] == record["by_hand"]
        assert found["accuracy"] > 0.8
        assert record["metrics"] == records[0]["metrics"]


@pytest.mark.parametrize("nproc", [1, 2])
def test_a_1x_program_using_1x_s_trainer_options(ran: Callable[..., Any], nproc: int) -> None:
    records = ran("one_x_options", nproc)
    for record in records:
        assert (record["world"], record["finished"]) == (nproc, True)
        # sampler_val chose 101 samples: the 1.x metric of one argument, given alone, saw each
        # once (the padding of 2 processes dropped), through validation_step(self, batch).
        assert record["metrics"]["validation"]["accuracy"] == record["by_hand"]
        assert record["metrics"] == records[0]["metrics"]
        # Each 1.x spelling warned once, naming itself (gpu_utilization is a 2.x option now).
        assert record["warnings"] == sorted(
            [
                "Trainer options after model_path are keyword-only in accmt 2: write track_name",
                "Trainer(callback",
                "Trainer(collate_fn_train",
                "Trainer(collate_fn_val",
                "Trainer(enable_checkpointing",
                "Trainer(log_every",
                "Trainer(multiple_checkpoints",
                "Trainer(safe_mode",
                "Trainer(sampler_val",
            ]
        )
        assert record["train_losses_logged"] == 2  # log_every=-1: once per epoch
        # consolidate_metrics: the accuracy is logged as avg_accuracy only.
        accuracy = record["metrics"]["validation"]["accuracy"]
        assert record["avg_accuracy"][-1] == accuracy
        assert record["hidden"] == []
        assert record["hooks"] == {"before": 3, "after": 3}  # sanity check, two epochs
        assert record["checkpointing"] == {"use_reentrant": False}
        assert len(record["checkpoints"]) == 1  # multiple_checkpoints=False
        assert "model.safetensors.index.json" in record["best_model"]  # max_shard_size
    assert records[0]["artifact"]


@pytest.mark.parametrize("nproc", [1, 2])
def test_a_1x_curriculum_in_each_of_its_forms(ran: Callable[..., Any], nproc: int) -> None:
    # Steps 1-6 on the first dataset, 7-15 on the second, 16-20 on the third: every optimizer
    # step trained on its stage's samples only, whichever form described the stages.
    expected = {str(step): [0 if step <= 6 else 1 if step <= 15 else 2] for step in range(1, 21)}
    # Batches of 8, accumulation 2: each pass is an epoch. On one process a pass of the 48,
    # 120 and 40 samples is 3, 8 and 3 optimizer steps (2 passes each, the last cut short); on
    # two, each process's half is 2, 4 and 2 steps (3 passes each).
    passes = {1: 2 + 2 + 2, 2: 3 + 3 + 3}[nproc]
    for form in FORMS:  # one fit a form, in turn in one process
        for record in ran(f"one_x_curriculum/{form}", nproc):
            assert record["world"] == nproc, form
            assert record["stages_by_step"] == expected, form
            assert (record["global_step"], record["finished"]) == (20, True), form
            assert record["epochs"] == passes, form


@pytest.mark.parametrize("nproc", [1, 2])
def test_a_1x_extended_module_with_1x_helpers_metrics_and_state(
    ran: Callable[..., Any], nproc: int
) -> None:
    records = ran("one_x_module", nproc)
    for record in records:
        assert (record["world"], record["finished"]) == (nproc, True)
        # self.step() stepped the optimizer once a batch: 10 batches of 16, 3 epochs (per
        # process: 5 a epoch on 2).
        assert record["global_step"] == 3 * 10 // nproc
        found = record["metrics"]["validation"]
        # MetricParallel: exact over the whole set; MetricBatch: the mean over the batches one
        # process would see, padding dropped, whatever the number of processes.
        assert found["accuracy"] == record["accuracy_by_hand"] > 0.8
        assert found["batch_error"] == pytest.approx(record["batch_error_by_hand"], abs=1e-7)
        assert record["metrics"] == records[0]["metrics"]
        # len counts every parameter; freeze left only the head's 51 trainable.
        assert (record["len"], record["trainable_while_frozen"]) == (2 * 16 + 16 + 16 * 3 + 3, 51)
        assert (record["seed"], record["combined"]) == (0, {"a": 2})
        assert record["one_x_best_valid_loss"] == 0.4012  # 1.x kept it elsewhere; migrated
        assert "builds no Accelerator when imported" in record["dropped"]
        assert "trainer.accelerator" in record["dropped"]


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_gpt2(tmp_path_factory.mktemp("tiny-gpt2"))


@pytest.mark.transformers
@pytest.mark.parametrize("nproc", [1, 2])
def test_a_1x_from_hf_module(tmp_path: Path, nproc: int, tiny_gpt2: Path) -> None:
    records = launch("one_x_from_hf.py", tmp_path, nproc, str(tiny_gpt2))
    for record in records:
        assert (record["world"], record["finished"], record["model"]) == (
            nproc,
            True,
            "GPT2LMHeadModel",
        )
        # The validation loss is the model's own, averaged exactly over the set: the same on
        # every process, and well under a uniform guess over 32 tokens (ln 32 = 3.47).
        assert record["loss"] == records[0]["loss"] < 2.5
