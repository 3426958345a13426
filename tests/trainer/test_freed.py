"""A finished run holds no reference cycle: once ``fit`` (then ``evaluate`` and ``predict``)
returned and the script drops the Trainer and the module, they and the model are freed at once,
with the cycle collector off from the process's first line (workers/freed.py). A Trainer kept
alive by a cycle would keep its DDP model and the process group it holds until the collector
runs, perhaps during interpreter shutdown."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import weakref
from pathlib import Path

WORKER = Path(__file__).parent / "workers" / "freed.py"
CASES = ["first fit", "tensorboard, asynchronous checkpoints", "manual steps, accumulation", "bf16"]


def test_a_dropped_trainer_frees_itself_the_module_and_the_model(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(WORKER), str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [line["case"] for line in lines] == CASES
    assert {line["case"]: line["alive"] for line in lines} == {case: [] for case in CASES}


def test_the_check_sees_an_object_a_cycle_keeps() -> None:
    class Node:
        pass

    gc.disable()
    try:
        node = Node()
        node.self = node  # type: ignore[attr-defined]
        reference = weakref.ref(node)
        del node
        assert reference() is not None
    finally:
        gc.enable()
