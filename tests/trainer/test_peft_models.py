"""A PEFT model's best models are PEFT adapter folders: ``PeftModel.from_pretrained(base,
folder)`` loads them and gives the trained model's logits at its best evaluation;
``evaluate(weights=<rule>)`` loads them into the module's PEFT model; ``save_merged`` writes the
merged full model in ``merged/``, which transformers' ``from_pretrained`` loads. Bad input is
named before the first step, and a model that is not PEFT never imports peft."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from accmt_callbacks import Callback
from accmt_trainer import AcceleratorModule, HyperParameters, Trainer, TrainerConfigError
from accmt_trainer.checkpointing._weights import load_weights

from ._tiny_gpt2 import batched, padded_sequences, tiny_gpt2

# peft is imported by the tests themselves: the minimums run, which has no peft, leaves them out.
pytestmark = pytest.mark.peft

RULE = "best_valid_loss"
PROBE = batched(padded_sequences(seed=7))  # a fixed input whose logits are compared


def lora(seed: int = 0, r: int = 4) -> Any:
    """LoRA adapters (initialised from ``seed``) on the tiny GPT-2, whose frozen base is the
    same every time."""
    import peft

    config = peft.LoraConfig(
        r=r, target_modules=["c_attn"], fan_in_fan_out=True, task_type="CAUSAL_LM"
    )
    torch.manual_seed(seed)
    return peft.get_peft_model(tiny_gpt2(), config)


def logits(model: Any) -> torch.Tensor:
    training = model.training
    model.eval()
    with torch.no_grad():
        out = model(input_ids=PROBE["input_ids"], attention_mask=PROBE["attention_mask"]).logits
    model.train(training)
    return out.detach().clone()


class CausalLM(AcceleratorModule):
    def __init__(self, model: Any) -> None:
        self.model = model

    def training_step(self, batch: Any) -> torch.Tensor:
        loss: torch.Tensor = self.model(**batch).loss
        return loss

    def validation_step(self, key: str, batch: Any) -> dict[str, Any]:
        return {"loss": self.model(**batch).loss}


class LogitsAtEachEvaluation(Callback):
    """The PEFT model's logits on the probe after each evaluation, by global step."""

    def __init__(self) -> None:
        self.seen: dict[int, torch.Tensor] = {}

    def on_evaluation_end(self) -> None:
        assert self.state is not None
        self.seen[self.state.global_step] = logits(self.module.model)


def trainer(path: Path, **options: Any) -> Trainer:
    hps = HyperParameters(epochs=3, batch_size=4, optimizer="AdamW", optimizer_kwargs={"lr": 3e-1})
    return Trainer(hps, path, log_with=None, progress_bar=False, cpu=True, **options)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One LoRA run evaluated after every step, its best model saved with its merged model, and
    the logits seen at each evaluation."""
    from accelerate.state import AcceleratorState

    path = tmp_path_factory.mktemp("lora")
    seen = LogitsAtEachEvaluation()
    run = trainer(path, save_merged=True, callbacks=[seen], evaluate_every_n_steps=1)
    module = CausalLM(lora())
    data = padded_sequences()
    run.fit(module, data, padded_sequences(seed=3))
    AcceleratorState._reset_state(reset_partial_state=True)
    return {"path": path, "seen": seen.seen, "trainer": run, "module": module}


def test_the_best_model_is_an_adapter_folder_that_peft_loads(trained: dict[str, Any]) -> None:
    folder = trained["path"] / RULE
    names = {path.name for path in folder.iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors", "state.json"} <= names
    assert "model.safetensors" not in names  # not the whole model: the adapters
    assert json.loads((folder / "metrics.json").read_text())["rule"] == RULE
    step = json.loads((folder / "state.json").read_text())["global_step"]
    seen = trained["seen"]
    # The best evaluation is not the last one (the learning rate is high enough to overshoot).
    assert step in seen
    assert step < max(seen)
    import peft

    loaded = peft.PeftModel.from_pretrained(tiny_gpt2(), folder)
    difference = (logits(loaded) - seen[step]).abs().max()
    assert difference <= 1e-5, difference
    # The frozen base is not the trained one: the adapters alone give these logits.
    assert (logits(tiny_gpt2()) - seen[step]).abs().max() > 1e-3


def test_evaluate_of_the_rule_equals_evaluating_what_peft_loads(trained: dict[str, Any]) -> None:
    run, module = trained["trainer"], trained["module"]
    test = padded_sequences(seed=11)
    best = run.evaluate(module, test, weights=RULE)
    import peft

    loaded = CausalLM(peft.PeftModel.from_pretrained(tiny_gpt2(), trained["path"] / RULE))
    theirs = run.evaluate(loaded, test)
    assert best["loss"] == pytest.approx(theirs["loss"], abs=1e-6), (best, theirs)
    # The weights stay loaded in the module's own PEFT model: the best, not the last.
    assert (logits(module.model) - logits(loaded.model)).abs().max() <= 1e-6
    assert (logits(module.model) - trained["seen"][max(trained["seen"])]).abs().max() > 1e-3


def test_the_merged_model_loads_with_transformers(trained: dict[str, Any]) -> None:
    import peft
    import transformers

    folder = trained["path"] / RULE
    merged = transformers.GPT2LMHeadModel.from_pretrained(folder / "merged")
    assert not hasattr(merged, "peft_config")
    adapters = peft.PeftModel.from_pretrained(tiny_gpt2(), folder)
    difference = (logits(merged) - logits(adapters)).abs().max()
    assert difference <= 1e-5, difference


def test_load_weights_refuses_an_adapter_for_a_model_that_is_not_peft(
    trained: dict[str, Any],
) -> None:
    with pytest.raises(TrainerConfigError, match="holds a PEFT adapter"):
        load_weights(tiny_gpt2(), trained["path"] / RULE)


def test_load_weights_refuses_an_adapter_of_another_shape(trained: dict[str, Any]) -> None:
    with pytest.raises(TrainerConfigError, match="does not fit"):
        load_weights(lora(r=8), trained["path"] / RULE)


def untouched(path: Path) -> bool:
    return not path.exists() or not any(path.iterdir())


def test_save_merged_is_refused_for_a_model_that_is_not_peft(tmp_path: Path) -> None:
    run = trainer(tmp_path / "run", save_merged=True)
    with pytest.raises(TrainerConfigError, match=r"save_merged=True.*not a PEFT model"):
        run.fit(CausalLM(tiny_gpt2()), padded_sequences())
    assert run.state.global_step == 0
    assert untouched(tmp_path / "run")


def test_a_peft_model_that_trains_nothing_is_refused(tmp_path: Path) -> None:
    model = lora()
    model.requires_grad_(False)
    run = trainer(tmp_path / "run")
    with pytest.raises(TrainerConfigError, match="no trainable parameter"):
        run.fit(CausalLM(model), padded_sequences())
    assert run.state.global_step == 0
    assert untouched(tmp_path / "run")


def test_a_trained_parameter_peft_would_not_save_is_refused(tmp_path: Path) -> None:
    model = lora()
    model.base_model.model.transformer.ln_f.weight.requires_grad_(True)
    run = trainer(tmp_path / "run")
    with pytest.raises(TrainerConfigError, match=r"transformer\.ln_f\.weight.*modules_to_save"):
        run.fit(CausalLM(model), padded_sequences())
    assert untouched(tmp_path / "run")


PLAIN_RUN = """
import sys
import torch
from accmt_trainer import AcceleratorModule, HyperParameters, Trainer

class Regression(AcceleratorModule):
    def __init__(self):
        self.model = torch.nn.Linear(2, 1)

    def training_step(self, batch):
        return torch.nn.functional.mse_loss(self.model(batch[0]), batch[1])

    def validation_step(self, key, batch):
        return {"loss": torch.nn.functional.mse_loss(self.model(batch[0]), batch[1])}

data = torch.utils.data.TensorDataset(torch.randn(16, 2), torch.randn(16, 1))
hps = HyperParameters(epochs=1, batch_size=8, optimizer="SGD", optimizer_kwargs={"lr": 0.1})
trainer = Trainer(hps, sys.argv[1], log_with=None, progress_bar=False, cpu=True)
module = Regression()
trainer.fit(module, data, data)
trainer.evaluate(module, data, weights="best_valid_loss")
print(sorted(name for name in sys.modules if name.split(".")[0] == "peft"))
"""


def test_a_model_that_is_not_peft_never_imports_peft(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PLAIN_RUN, str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-1] == "[]", done.stdout
    assert (tmp_path / "run" / RULE / "model.safetensors").is_file()
