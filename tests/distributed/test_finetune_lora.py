"""The fine-tuning guide's script (examples/finetune_lora.py, shown whole in
docs/guides/fine-tuning.md) unchanged on 1 process, then on 2 CPU processes through
``accmt launch --cpu -N 2``, which resumes the first run's checkpoint and trains one epoch more:
the pretrained model written to a folder and read back with ``from_pretrained``, LoRA with
gradient checkpointing, the best adapter evaluated, the merged model loaded by transformers
alone and generating, on 8 help pages (two runs, about 40 s here)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = [pytest.mark.distributed, pytest.mark.peft]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "finetune_lora.py"
ACCMT = str(Path(sys.executable).parent / "accmt")
OPTIONS = ["--texts", "8"]
# The lines the script says once the run is over, by the main process alone.
RESULTS = ("test perplexity of the best adapter:", "best adapter:", "generated:")


def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=environment)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    return done


def results(stdout: str) -> list[str]:
    return [line.split(":")[0] + ":" for line in stdout.splitlines() if line.startswith(RESULTS)]


def test_the_guides_script_on_one_then_two_processes(tmp_path: Path) -> None:
    from peft import PeftModel
    from transformers import GPT2LMHeadModel

    output = tmp_path / "lora"
    one = run([sys.executable, str(EXAMPLE), *OPTIONS, "--epochs", "1", "--output", str(output)])
    assert results(one.stdout) == list(RESULTS), one.stdout
    assert "starting afresh" in one.stderr
    # The only progress bar is the Trainer's (none here: stderr is no terminal).
    assert "Writing model shards" not in one.stderr
    best = output / "best_valid_loss"
    assert (best / "adapter_config.json").is_file()
    assert not (best / "model.safetensors").exists()  # the adapters, not the whole model

    two = [ACCMT, "launch", "--cpu", "-N", "2", str(EXAMPLE), *OPTIONS, "--epochs", "2"]
    resumed = run([*two, "--output", str(output)])
    assert f"resuming {output} from checkpoint_000001 (made on 1 process)" in resumed.stderr
    assert results(resumed.stdout) == list(RESULTS), resumed.stdout  # once: the main process
    assert resumed.stdout.count("training chunks") == 1

    # What the run saved loads without accmt: the adapters onto the pretrained model, and the
    # merged model, which give the same logits.
    ids = torch.arange(2, 34).reshape(2, 16)
    pretrained = GPT2LMHeadModel.from_pretrained(output / "pretrained")
    adapted = PeftModel.from_pretrained(pretrained, best)
    merged = GPT2LMHeadModel.from_pretrained(best / "merged")
    with torch.no_grad():
        difference = (adapted.eval()(ids).logits - merged.eval()(ids).logits).abs().max()
    assert difference <= 1e-5, difference
