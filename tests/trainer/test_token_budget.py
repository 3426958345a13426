"""``TokenBudgetBatchSampler``: no batch over ``max_tokens``, every sample once per epoch, a
multiple of the processes' number of batches dealt by Accelerate's own ``BatchSamplerShard``
with nothing repeated, the same length every epoch, a plan that is a function of (seed, epoch),
a resumed epoch's rest through Accelerate's ``skip_first_batches``, bad input named; and a fit
with it as the Trainer's ``batch_sampler``. (Two processes, killed and resumed:
tests/distributed/test_token_budget.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from accelerate import Accelerator
from accelerate.data_loader import BatchSamplerShard
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader

from accmt_trainer import (
    AcceleratorModule,
    HyperParameters,
    TokenBudgetBatchSampler,
    Trainer,
    TrainerConfigError,
)
from accmt_trainer.data._epoch_plan import epoch_batches
from accmt_trainer.data._token_budget import plan_budget
from tests.distributed.workers._sequences import Sequences, pad


def lengths_of(count: int, seed: int = 0, longest: int = 24) -> list[int]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(1, longest + 1, (count,), generator=generator).tolist()


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 40), min_size=1, max_size=80),
    extra=st.integers(0, 80),
    packed=st.booleans(),
    processes=st.integers(1, 3),
    epoch=st.integers(0, 3),
)
def test_every_process_gets_as_many_batches_within_budget_each_sample_once(
    lengths: list[int], extra: int, packed: bool, processes: int, epoch: int
) -> None:
    max_tokens = max(lengths) + extra
    sampler = TokenBudgetBatchSampler(lengths, max_tokens, packed=packed, seed=epoch)
    formed = len(sampler)
    if -(-formed // processes) * processes > len(lengths):
        # Every batch would have to hold one sample and still be too few.
        with pytest.raises(TrainerConfigError, match="cannot be split into a multiple"):
            sampler.set_num_processes(processes)
        return
    sampler.set_num_processes(processes)
    assert len(sampler) % processes == 0
    assert formed <= len(sampler) < formed + processes
    sampler.set_epoch(epoch)
    batches = list(sampler)
    assert len(batches) == len(sampler)
    assert all(sampler.cost(batch) <= max_tokens for batch in batches)
    assert sorted(index for batch in batches for index in batch) == list(range(len(lengths)))
    # Accelerate deals them round-robin; the Trainer prepares the loader without even_batches
    # (the plan is even already), and every process still gets as many batches.
    shards = [
        BatchSamplerShard(sampler, processes, rank, even_batches=False) for rank in range(processes)
    ]
    dealt = [list(shard) for shard in shards]
    assert {len(share) for share in dealt} == {len(sampler) // processes}
    assert [len(shard) for shard in shards] == [len(sampler) // processes] * processes
    read = sorted(index for share in dealt for batch in share for index in batch)
    assert read == list(range(len(lengths)))


@pytest.mark.parametrize("packed", [False, True])
def test_the_plan_is_a_function_of_seed_and_epoch_with_one_length(packed: bool) -> None:
    lengths = lengths_of(300)

    def plan(seed: int, epoch: int, shuffle: bool = True) -> list[list[int]]:
        sampler = TokenBudgetBatchSampler(lengths, 64, packed=packed, shuffle=shuffle, seed=seed)
        sampler.set_num_processes(2)
        sampler.set_epoch(epoch)
        return list(sampler)

    epochs = [plan(5, epoch) for epoch in range(3)]
    assert epochs[1] == plan(5, 1)
    assert epochs[0] != epochs[1] != epochs[2]
    assert plan(6, 1) != epochs[1]
    # The batches' number and costs are the epochs' own: the schedule sized before holds.
    costs = {
        tuple(sorted(TokenBudgetBatchSampler(lengths, 64, packed=packed).cost(b) for b in e))
        for e in epochs
    }
    assert len(costs) == 1
    # Within a batch the lengths are alike: little padding where padded.
    if not packed:
        padded = sum(max(lengths[i] for i in batch) * len(batch) for batch in epochs[0])
        assert padded < 1.1 * sum(lengths)
    # Without shuffle: one plan for every epoch, shortest batches first.
    assert plan(5, 0, shuffle=False) == plan(7, 2, shuffle=False)
    longest = [max(lengths[i] for i in batch) for batch in plan(5, 0, shuffle=False)]
    assert longest == sorted(longest)


def test_it_draws_from_no_global_rng() -> None:
    sampler = TokenBudgetBatchSampler(lengths_of(50), 40)
    before = torch.get_rng_state()
    list(sampler)
    assert torch.equal(torch.get_rng_state(), before)


def test_a_resumed_epoch_reads_the_rest_of_the_same_plan() -> None:
    """What the loop does after a resume: ``epoch_batches`` skips the epoch's first batches
    with Accelerate's ``skip_first_batches`` on the sampler."""
    lengths = lengths_of(60)
    accelerator = Accelerator(cpu=True)
    sampler = TokenBudgetBatchSampler(lengths, 48, seed=3)
    loader = accelerator.prepare(
        DataLoader(Sequences(lengths), batch_sampler=sampler, collate_fn=pad)
    )
    plan_budget(loader)
    whole = [b["index"].tolist() for b in epoch_batches(accelerator, loader, 2, 0)]
    rest = [b["index"].tolist() for b in epoch_batches(accelerator, loader, 2, 5)]
    assert len(whole) == len(loader)
    assert rest == whole[5:]
    assert [b["index"].tolist() for b in epoch_batches(accelerator, loader, 1, 0)] != whole


@pytest.mark.parametrize(
    ("lengths", "max_tokens", "message"),
    [
        ([3, 2, 0, 4], 8, r"lengths\[2\] is 0"),
        ([3, 2.5], 8, r"lengths\[1\] is 2.5"),
        ([3, True], 8, r"lengths\[1\] is True"),
        ("abc", 8, "one token count per sample"),
        ([], 8, "no samples"),
        ([3, 9, 4, 12], 8, r"sample 3 has 12 tokens.*2 of 4 samples are longer.*at least 12"),
        ([9, 12], 8, r"sample 1 has 12 tokens.*no sample fits: the shortest has 9"),
        ([3, 4], 8.0, "max_tokens=8.0"),
    ],
)
def test_bad_input_is_named(lengths: Any, max_tokens: Any, message: str) -> None:
    with pytest.raises(TrainerConfigError, match=message):
        TokenBudgetBatchSampler(lengths, max_tokens)


def test_a_plan_that_cannot_give_every_process_as_many_batches_is_refused() -> None:
    sampler = TokenBudgetBatchSampler([5, 5, 5], 5)
    with pytest.raises(TrainerConfigError, match="3 batches cannot be split into a multiple of 2"):
        sampler.set_num_processes(2)


class Counter(AcceleratorModule):
    """Mean-pooled embeddings to a regression; records each batch's indices per epoch."""

    def __init__(self) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(torch.nn.Embedding(32, 8), torch.nn.Linear(8, 1))
        self.read: list[tuple[int, list[int], int]] = []

    def training_step(self, batch: Any) -> torch.Tensor:
        ids = batch["input_ids"]
        self.read.append((self.state.epoch, batch["index"].tolist(), ids.numel()))
        pooled = self.model[0](ids).mean(1)
        return (self.model[1](pooled).squeeze(-1) - (ids > 0).sum(1).float() / 10).pow(2).mean()


def trainer(tmp_path: Path, sampler: TokenBudgetBatchSampler, **options: Any) -> Trainer:
    hps = HyperParameters(epochs=2, batch_size=1, optimizer_kwargs={"lr": 0.01})
    quiet = {"log_with": None, "progress_bar": False, "checkpoint_every": None, "cpu": True}
    return Trainer(hps, tmp_path / "run", batch_sampler=sampler, **{**quiet, **options})


def test_a_fit_reads_every_sample_once_per_epoch_in_batches_within_budget(
    tmp_path: Path,
) -> None:
    lengths = lengths_of(40, seed=1)
    sampler = TokenBudgetBatchSampler(lengths, 60, seed=2)
    module = Counter()
    state = trainer(tmp_path, sampler, collate_fn=pad).fit(module, Sequences(lengths))
    assert state.global_step == 2 * len(sampler)
    for epoch in (0, 1):
        batches = [(indices, tokens) for e, indices, tokens in module.read if e == epoch]
        assert sorted(i for indices, _ in batches for i in indices) == list(range(40))
        assert max(tokens for _, tokens in batches) <= 60
    assert module.read[0] != next(entry for entry in module.read if entry[0] == 1)


class Flattening:
    """A collate function that says it joins a batch into one row."""

    flattens_sequences = True

    def __call__(self, samples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        return pad(samples)


@pytest.mark.parametrize(
    ("packed", "collate", "dataset_size", "message"),
    [
        (True, pad, 20, r"packed=True .* the collate function pad does not join"),
        (True, None, 20, r"packed=True .* the collate function default_collate does not join"),
        (False, pad, 21, "it has 20 lengths but the dataset it batches .* has 21 samples"),
    ],
)
def test_what_the_sampler_cannot_batch_is_refused_before_anything_is_written(
    tmp_path: Path, packed: bool, collate: Any, dataset_size: int, message: str
) -> None:
    sampler = TokenBudgetBatchSampler(lengths_of(20), 30, packed=packed)
    module = Counter()
    with pytest.raises(TrainerConfigError, match=rf"Trainer\(batch_sampler=.*{message}"):
        trainer(tmp_path, sampler, collate_fn=collate).fit(
            module, Sequences(lengths_of(dataset_size))
        )
    assert module.read == []
    assert not (tmp_path / "run").exists()


def test_a_collate_function_that_flattens_may_pack(tmp_path: Path) -> None:
    lengths = lengths_of(20)
    sampler = TokenBudgetBatchSampler(lengths, 30, packed=True)
    module = Counter()
    trainer(tmp_path, sampler, collate_fn=Flattening()).fit(module, Sequences(lengths))
    first = [index for epoch, indices, _ in module.read if epoch == 0 for index in indices]
    assert sorted(first) == list(range(20))
