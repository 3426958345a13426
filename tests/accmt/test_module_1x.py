"""accmt 1.x's AcceleratorModule helpers: calling the module, its size, pad, freeze/unfreeze,
from_hf, and ExtendedAcceleratorModule.step."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import Dataset

from accmt import (
    AcceleratorModule,
    ExtendedAcceleratorModule,
    HyperParameters,
    Trainer,
    TrainerConfigError,
)
from tests.trainer._tiny_gpt2 import save_tiny_gpt2

from .conftest import blobs


class Linear(AcceleratorModule):
    def __init__(self) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))


def test_calling_the_module_runs_the_model_through_forward() -> None:
    module = Linear()
    x = torch.randn(5, 3)
    assert torch.equal(module(x), module.model(x))
    assert torch.equal(module.forward(x), module.model(x))

    class Doubled(Linear):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return 2 * self.model(x)

    assert torch.equal(Doubled()(x), 2 * module.model(x))


def test_len_counts_every_parameter_of_the_model_frozen_or_not() -> None:
    module = Linear()
    assert len(module) == (3 * 4 + 4) + (4 * 2 + 2)
    module.freeze(module.model[0])
    assert len(module) == 26


def test_freeze_and_unfreeze_a_submodule() -> None:
    module = Linear()
    module.freeze(module.model[0])
    assert [p.requires_grad for p in module.model.parameters()] == [False, False, True, True]
    module.unfreeze(module.model[0])
    assert all(p.requires_grad for p in module.model.parameters())


def test_pad_a_single_tensor_to_max_length_on_either_side() -> None:
    module = Linear()
    row = torch.tensor([[1, 2], [3, 4]])
    assert module.pad(row, 0, max_length=4).tolist() == [[1, 2, 0, 0], [3, 4, 0, 0]]
    assert module.pad(row, -1, max_length=3, side="left").tolist() == [[-1, 1, 2], [-1, 3, 4]]
    assert module.pad(torch.tensor(7), 0, max_length=2).tolist() == [7, 0]
    # A list of one tensor is a single tensor, as in 1.x: padded to max_length.
    assert module.pad([torch.tensor([1])], 0, max_length=3)[0].tolist() == [1, 0, 0]
    with pytest.raises(ValueError, match="max_length"):
        module.pad(row, 0)
    with pytest.raises(ValueError, match="does not truncate"):
        module.pad(row, 0, max_length=1)
    with pytest.raises(ValueError, match="side"):
        module.pad(row, 0, max_length=3, side="middle")  # type: ignore[arg-type]


def test_pad_several_tensors_to_the_longest_or_to_max_length() -> None:
    module = Linear()
    a, b = torch.tensor([1, 2, 3]), torch.tensor([4])
    longest = module.pad([a, b], 0)
    assert [t.tolist() for t in longest] == [[1, 2, 3], [4, 0, 0]]
    assert isinstance(module.pad((a, b), 0), tuple)
    assert module.pad([a, b], 9, padding="max_length", max_length=4, op="stack").tolist() == [
        [1, 2, 3, 9],
        [4, 9, 9, 9],
    ]
    assert module.pad([a, b], 0, op=lambda ts: torch.cat(ts)).tolist() == [1, 2, 3, 4, 0, 0]
    assert b.tolist() == [4]  # the given tensors are left as they were
    with pytest.raises(ValueError, match="needs max_length"):
        module.pad([a, b], 0, padding="max_length")


class TokenData(Dataset[dict[str, torch.Tensor]]):
    """Short token sequences that are their own labels, for a causal language model."""

    def __init__(self, n: int = 8, length: int = 6, vocabulary: int = 32) -> None:
        self.ids = torch.randint(
            0, vocabulary, (n, length), generator=torch.Generator().manual_seed(0)
        )

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[index], "labels": self.ids[index]}


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_gpt2(tmp_path_factory.mktemp("tiny-gpt2"))


@pytest.mark.transformers
def test_from_hf_builds_a_module_whose_steps_return_the_model_loss(tiny_gpt2: Path) -> None:
    import transformers

    module = AcceleratorModule.from_hf(tiny_gpt2, "GPT2LMHeadModel")
    assert isinstance(module, AcceleratorModule)
    assert isinstance(module.model, transformers.GPT2LMHeadModel)
    batch = {"input_ids": TokenData().ids[:2], "labels": TokenData().ids[:2]}
    expected = module.model(**batch).loss
    assert torch.equal(module.training_step(batch), expected)
    assert torch.equal(module.validation_step("validation", batch), expected)
    by_class = AcceleratorModule.from_hf(tiny_gpt2, transformers.GPT2LMHeadModel)
    assert torch.equal(by_class.training_step(batch), expected)
    # Without a type, 1.x's default: AutoModel (the bare model, which has no loss head).
    assert isinstance(AcceleratorModule.from_hf(tiny_gpt2).model, transformers.GPT2Model)
    with pytest.raises(ValueError, match="no such class"):
        AcceleratorModule.from_hf(tiny_gpt2, "NoSuchModel")


@pytest.mark.transformers
def test_a_from_hf_module_trains(tiny_gpt2: Path, tmp_path: Path) -> None:
    module = AcceleratorModule.from_hf(tiny_gpt2, "GPT2LMHeadModel")
    before = [p.detach().clone() for p in module.model.parameters()]
    hps = HyperParameters(epochs=1, batch_size=4, optimizer="AdamW", optimizer_kwargs={"lr": 1e-2})
    trainer = Trainer(hps, tmp_path, log_with=None, checkpoint_every=None, progress_bar=False)
    state = trainer.fit(module, TokenData(), TokenData(4))
    assert state.global_step == 2
    assert any(
        not torch.equal(a, b) for a, b in zip(before, module.model.parameters(), strict=True)
    )
    assert state.additional_metrics["validation"]["loss"] > 0


def quiet_trainer(folder: Path) -> Trainer:
    hps = HyperParameters(epochs=1, batch_size=4, optimizer="AdamW", optimizer_kwargs={"lr": 1e-2})
    return Trainer(hps, folder, log_with=None, checkpoint_every=None, progress_bar=False)


@pytest.mark.transformers
def test_fit_trains_a_transformers_model_given_as_path_and_class(tmp_path: Path) -> None:
    import transformers

    config = transformers.GPT2Config(vocab_size=32, n_positions=16, n_embd=16, n_layer=2, n_head=2)
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(config).save_pretrained(tmp_path / "gpt2")
    trainer = quiet_trainer(tmp_path / "run")
    state = trainer.fit((str(tmp_path / "gpt2"), "AutoModelForCausalLM"), TokenData())
    assert state.global_step == 2  # 8 samples in batches of 4
    assert math.isfinite(state.best_train_loss)
    trained = trainer.accelerator.unwrap_model(trainer.model)
    assert isinstance(trained, transformers.GPT2LMHeadModel)
    saved = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "gpt2")
    pairs = zip(saved.parameters(), trained.parameters(), strict=True)
    assert any(not torch.equal(before, after) for before, after in pairs)


@pytest.mark.transformers
@pytest.mark.parametrize("name", ["AutoModelForCausalLMM", "set_seed", "os.path"])
def test_fit_names_a_model_type_that_is_no_class_of_transformers(
    tiny_gpt2: Path, tmp_path: Path, name: str
) -> None:
    with pytest.raises(TrainerConfigError, match=rf"Trainer\.fit\(.*type='{name}'\): transformers"):
        quiet_trainer(tmp_path / "run").fit((str(tiny_gpt2), name), TokenData())
    assert not (tmp_path / "run").exists()  # refused before the run touched its folder


@pytest.mark.parametrize(
    ("module", "message"),
    [
        (("a", "b", "c"), r"a module given as a tuple is accmt 1\.x's \(path, type\).*got \('a'"),
        ((3, "AutoModel"), r"a module given as a tuple .* got \(3, 'AutoModel'\)"),
        ((), r"a module given as a tuple .* got \(\)"),
    ],
)
def test_fit_refuses_a_tuple_that_is_not_path_and_type(
    tmp_path: Path, module: Any, message: str
) -> None:
    with pytest.raises(TrainerConfigError, match=message):
        quiet_trainer(tmp_path / "run").fit(module, TokenData())


@pytest.mark.transformers
def test_a_path_alone_is_1x_s_auto_model_and_keywords_go_to_from_pretrained(
    tiny_gpt2: Path,
) -> None:
    import transformers

    from accmt._one_x._trainer import _module

    module = _module(tiny_gpt2, {"output_hidden_states": True})
    assert isinstance(module, AcceleratorModule)
    assert isinstance(module.model, transformers.GPT2Model)  # AutoModel, as in 1.x
    assert module.model.config.output_hidden_states


def test_from_pretrained_arguments_need_a_model_path(tmp_path: Path) -> None:
    with pytest.raises(TrainerConfigError, match=r"got revision: keyword arguments of from_pre"):
        quiet_trainer(tmp_path / "run").fit(Linear(), blobs(8), revision="main")


@pytest.mark.transformers
def test_from_hf_without_transformers_names_the_extra(
    tiny_gpt2: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # as if it were not installed
    with pytest.raises(ImportError, match=r"pip install 'accmt\[hf\]'"):
        AcceleratorModule.from_hf(tiny_gpt2)


class SteppedByHand(ExtendedAcceleratorModule):
    def __init__(self) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Linear(2, 3)

    def training_step(self, batch: Any) -> torch.Tensor:
        features, labels = batch
        loss = torch.nn.functional.cross_entropy(self.model(features), labels)
        self.backward(loss)
        self.step()
        self.zero_grad()
        return loss


def test_extended_module_step_steps_the_optimizer_then_the_scheduler(tmp_path: Path) -> None:
    hps = HyperParameters(
        epochs=1,
        batch_size=8,
        optimizer_kwargs={"lr": 0.5},
        scheduler="StepLR",
        scheduler_kwargs={"step_size": 1, "gamma": 0.5},
    )
    trainer = Trainer(hps, tmp_path, log_with=None, checkpoint_every=None, progress_bar=False)
    module = SteppedByHand()
    before = module.model.weight.detach().clone()
    state = trainer.fit(module, blobs(32))
    assert state.global_step == 4
    assert not torch.equal(before, module.model.weight)
    assert trainer.scheduler is not None
    assert trainer.scheduler.get_last_lr() == [0.5 * 0.5**4]
