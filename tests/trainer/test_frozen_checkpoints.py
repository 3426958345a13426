"""Checkpoints hold what trains: a parameter frozen for the whole fit is described in
``frozen.json`` (name, shape, dtype, digest), not written; a resume and ``load_weights`` check
the model's frozen weights against it before anything is loaded or moved; a parameter that
trained at some checkpoint is written from then on; a model with nothing frozen checkpoints as
it always did. (SIGKILL and resume through torchrun: tests/distributed/test_frozen_resume.py.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
import xxhash
from safetensors.torch import load_file

from accmt_callbacks import Callback
from accmt_trainer import CheckpointError, Trainer, TrainerConfigError, load_weights
from accmt_trainer.checkpointing._frozen import FROZEN, describe_tensor, read_frozen
from accmt_trainer.checkpointing._manifest import inventory, verify
from accmt_trainer.runtime._accelerator import own_model

from .conftest import Classifier, blobs
from .test_checkpoints import crash, fit, folders, make

FROZEN_NAMES = {"0.weight", "0.bias"}
TRAINED_NAMES = {"3.weight", "3.bias"}


class FrozenBase(Classifier):
    """The classifier with its first layer frozen (``shift`` moves that layer's bias: another
    base); the optimizer is given every parameter, so that one unfrozen later trains."""

    def __init__(self, shift: float = 0.0) -> None:
        super().__init__()
        self.model[0].requires_grad_(False)
        with torch.no_grad():
            self.model[0].bias[0] += shift

    def get_optimizer(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.model.parameters(), lr=0.05)


class Unfreeze(Callback):
    """Trains the first layer from optimizer step ``step`` + 1 on."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_before_training_step(self, batch: Any) -> None:
        if self.state.global_step >= self.step:
            own_model(self.trainer.model)[0].requires_grad_(True)


class Steps(Callback):
    """Counts the training steps a fit takes."""

    def __init__(self) -> None:
        self.taken = 0

    def on_after_training_step(self) -> None:
        self.taken += 1


def run(path: Path, **options: Any) -> Trainer:
    options.setdefault("checkpoint_every", "2 steps")
    options.setdefault("ema_decay", 0.5)
    return make(path, **options)


def final(trainer: Trainer) -> dict[str, torch.Tensor]:
    weights = {k: v.detach().clone() for k, v in own_model(trainer.model).state_dict().items()}
    averaged = trainer.averaged_weights() or {}
    weights.update({f"average/{name}": value.clone() for name, value in averaged.items()})
    return weights


def assert_same(found: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    assert found.keys() == expected.keys()
    for name, value in expected.items():
        assert torch.equal(found[name], value), name


def saved_names(checkpoint: Path) -> set[str]:
    return set(load_file(checkpoint / "accelerate" / "model.safetensors"))


def snapshot(folder: Path) -> dict[str, Any]:
    """Every file under ``folder`` with its size and digest."""
    return {name: (entry.size, entry.xxh3_128) for name, entry in inventory(folder).items()}


@pytest.mark.parametrize("background", [False, True], ids=["sync", "async"])
def test_a_checkpoint_holds_no_frozen_parameter(tmp_path: Path, background: bool) -> None:
    module = FrozenBase()
    base = {name: value.clone() for name, value in module.model.state_dict().items()}
    fit(run(tmp_path, checkpoint_async=background), module)
    checkpoint = folders(tmp_path)[-1]
    assert saved_names(checkpoint) == TRAINED_NAMES
    frozen = json.loads((checkpoint / FROZEN).read_text())["parameters"]
    assert set(frozen) == FROZEN_NAMES
    for name in FROZEN_NAMES:
        tensor = base[name]
        assert frozen[name]["shape"] == list(tensor.shape)
        assert frozen[name]["dtype"] == "float32"
        digest = xxhash.xxh3_128(tensor.numpy().tobytes()).hexdigest()
        assert frozen[name]["xxh3_128"] == digest
    # frozen.json is listed like every file; the weight average holds only what trains.
    assert FROZEN in verify(checkpoint).files
    assert len(load_file(checkpoint / "object_0.safetensors")) == len(TRAINED_NAMES)


def test_nothing_frozen_checkpoints_as_before(tmp_path: Path) -> None:
    fit(run(tmp_path))
    checkpoint = folders(tmp_path)[-1]
    files = {str(p.relative_to(checkpoint)) for p in checkpoint.rglob("*") if p.is_file()}
    assert files == {
        "accelerate/model.safetensors",
        "accelerate/optimizer.bin",
        "accelerate/random_states_0.pkl",
        "callbacks.json",
        "manifest.json",
        "object_0.safetensors",
        "process_0.safetensors",
        "state.json",
        "trackers.json",
    }
    assert saved_names(checkpoint) == FROZEN_NAMES | TRAINED_NAMES
    assert len(load_file(checkpoint / "object_0.safetensors")) == 4


@pytest.mark.parametrize("background", [False, True], ids=["sync", "async"])
def test_a_crashed_run_resumes_to_the_uninterrupted_weights(
    tmp_path: Path, background: bool
) -> None:
    whole = run(tmp_path / "whole", checkpoint_async=background)
    fit(whole, FrozenBase())
    crash(tmp_path / "crashed", 5, module=FrozenBase(), checkpoint_every="2 steps", ema_decay=0.5)
    assert FROZEN in {p.name for p in folders(tmp_path / "crashed")[-1].iterdir()}
    resumed = run(tmp_path / "crashed", checkpoint_async=background)
    fit(resumed, FrozenBase())
    assert resumed.state.global_step == whole.state.global_step == 12
    assert_same(final(resumed), final(whole))


def test_a_different_base_is_refused_before_anything_is_trained_or_moved(tmp_path: Path) -> None:
    crash(tmp_path, 5, module=FrozenBase(), checkpoint_every="2 steps", ema_decay=0.5)
    before = snapshot(tmp_path / "checkpoints")
    steps = Steps()
    # resume=1 would move checkpoint_000002 aside once the run's checks passed.
    trainer = run(tmp_path, resume=1, callbacks=[steps])
    with pytest.raises(CheckpointError, match=r"'0\.bias'.*values differ"):
        fit(trainer, FrozenBase(shift=0.25))
    assert steps.taken == 0
    assert snapshot(tmp_path / "checkpoints") == before
    assert [p.name for p in folders(tmp_path)] == ["checkpoint_000001", "checkpoint_000002"]


def test_a_parameter_unfrozen_mid_fit_is_written_from_then_on(tmp_path: Path) -> None:
    whole = run(tmp_path / "whole", callbacks=[Unfreeze(3)], ema_decay=None)
    fit(whole, FrozenBase())
    first, second, *_ = folders(tmp_path / "whole")
    assert saved_names(first) == TRAINED_NAMES
    assert set(read_frozen(first)) == FROZEN_NAMES
    assert saved_names(second) == FROZEN_NAMES | TRAINED_NAMES
    assert not (second / FROZEN).exists()
    # It trained from step 4 on: not the base any more.
    assert describe_tensor(own_model(whole.model)[0].weight) != read_frozen(first)["0.weight"]
    # Resumed from before the unfreezing (the base checked and kept) and from after it (the
    # first layer loaded): the uninterrupted run's weights, bit for bit.
    for step in (3, 5):
        crashed = tmp_path / f"crashed_{step}"
        crash(
            crashed, step, module=FrozenBase(), callbacks=[Unfreeze(3)], checkpoint_every="2 steps"
        )
        resumed = run(crashed, callbacks=[Unfreeze(3)], ema_decay=None)
        fit(resumed, FrozenBase())
        assert_same(final(resumed), final(whole))


def test_load_weights_loads_what_trains_and_refuses_another_base(tmp_path: Path) -> None:
    trainer = run(tmp_path)
    fit(trainer, FrozenBase())
    trained = final(trainer)
    checkpoint = folders(tmp_path)[-1]
    fresh = FrozenBase()
    assert load_weights(fresh, checkpoint) == checkpoint / "accelerate" / "model.safetensors"
    for name, value in fresh.model.state_dict().items():
        assert torch.equal(value, trained[name]), name
    other = FrozenBase(shift=1.0)
    untouched = {name: value.clone() for name, value in other.model.state_dict().items()}
    with pytest.raises(TrainerConfigError, match=r"'0\.bias'.*values differ"):
        load_weights(other, checkpoint)
    assert_same(dict(other.model.state_dict()), untouched)
    # evaluate(weights=<a checkpoint>) loads the same way.
    evaluated = trainer.evaluate(FrozenBase(), blobs(16, seed=1), weights=str(checkpoint))
    assert evaluated == trainer.evaluate(fresh, blobs(16, seed=1))
    with pytest.raises(TrainerConfigError, match=r"'0\.bias'"):
        trainer.evaluate(other, blobs(16, seed=1), weights=str(checkpoint))


# ------------------------------------------------------------------------ a LoRA model


class LoRA(Classifier):
    """A GPT-2 of 2 layers x 128 made from its config (no download), LoRA r=8 on ``c_attn``
    through PEFT: 8,192 trainable parameters over a frozen base of 1.8 MB."""

    def __init__(self) -> None:
        import peft
        import transformers

        config = transformers.GPT2Config(
            vocab_size=512, n_positions=16, n_embd=128, n_layer=2, n_head=2, use_cache=False
        )
        torch.manual_seed(0)
        lora = peft.LoraConfig(
            r=8, target_modules=["c_attn"], task_type="CAUSAL_LM", fan_in_fan_out=True
        )
        self.model = peft.get_peft_model(transformers.GPT2LMHeadModel(config), lora)

    def training_step(self, batch: Any) -> torch.Tensor:
        ids = batch[0]
        loss: torch.Tensor = self.model(input_ids=ids, labels=ids).loss
        return loss


def token_rows(n: int) -> torch.utils.data.TensorDataset:
    generator = torch.Generator().manual_seed(3)
    return torch.utils.data.TensorDataset(torch.randint(0, 512, (n, 16), generator=generator))


@pytest.mark.peft  # the minimums run, which has no peft, leaves it out
def test_a_lora_checkpoint_holds_the_adapters_and_resumes_exactly(tmp_path: Path) -> None:
    module = LoRA()
    parameters = dict(module.model.named_parameters())
    trainable = {name for name, p in parameters.items() if p.requires_grad}
    trainable_bytes = sum(p.nbytes for p in parameters.values() if p.requires_grad)
    assert trainable
    assert all("lora_" in name for name in trainable)
    whole = run(tmp_path / "whole", ema_decay=None, metrics=[])
    fit(whole, module, token_rows(64))
    checkpoint = folders(tmp_path / "whole")[-1]
    held = saved_names(checkpoint)
    assert held
    assert all("lora_" in name for name in held)
    assert set(read_frozen(checkpoint)) == set(parameters) - trainable
    size = sum(p.stat().st_size for p in checkpoint.rglob("*") if p.is_file())
    assert size <= 4 * trainable_bytes + (1 << 20), size
    # Killed after a checkpoint and resumed: the adapters of the uninterrupted run, bit for bit.
    crashed = tmp_path / "crashed"
    crash(crashed, 5, module=LoRA(), train=token_rows(64), checkpoint_every="2 steps", metrics=[])
    resumed = run(crashed, ema_decay=None, metrics=[])
    fit(resumed, LoRA(), token_rows(64))
    assert_same(final(resumed), final(whole))


def test_a_compiled_run_leaves_the_base_out_and_resumes_without_compile(tmp_path: Path) -> None:
    crash(tmp_path, 5, module=FrozenBase(), checkpoint_every="2 steps", compile=True)
    checkpoint = folders(tmp_path)[-1]
    assert saved_names(checkpoint) == TRAINED_NAMES
    assert set(read_frozen(checkpoint)) == FROZEN_NAMES
    resumed = run(tmp_path, ema_decay=None)
    fit(resumed, FrozenBase())
    assert resumed.state.global_step == 12
    base = FrozenBase().model[0]
    assert torch.equal(own_model(resumed.model)[0].weight, base.weight)
    assert describe_tensor(own_model(resumed.model)[3].weight) != describe_tensor(
        FrozenBase().model[3].weight
    )
