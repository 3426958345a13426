"""``Perplexity(causal=True)`` takes a causal language model's logits and labels as the model
takes them (labels are the input ids) and shifts them itself: on a tiny GPT-2's outputs it is
``exp`` of the token-weighted loss, and of the model's own loss. Without a choice, sequences are
refused, since a forgotten shift cannot be seen in the shapes."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from accmt_metrics import MetricError, Perplexity
from tests.trainer._tiny_gpt2 import batched, padded_sequences, tiny_gpt2, token_weighted_loss

from ._data import cuts, feed


@pytest.fixture(scope="module")
def gpt2_outputs() -> tuple[torch.Tensor, torch.Tensor, float]:
    """A tiny GPT-2's logits over padded sequences, their labels, and its own loss."""
    model = tiny_gpt2().eval()
    batch = batched(padded_sequences())
    with torch.no_grad():
        output = model(**batch)
    return output.logits, batch["labels"], float(output.loss)


@pytest.mark.transformers
def test_causal_perplexity_of_a_gpt2_is_exp_of_its_token_weighted_loss(
    gpt2_outputs: tuple[torch.Tensor, torch.Tensor, float],
) -> None:
    logits, labels, model_loss = gpt2_outputs
    expected = math.exp(token_weighted_loss(logits, labels))
    found = feed(Perplexity(causal=True), logits, labels, [4, 7]).compute()["perplexity"]
    assert found == pytest.approx(expected, rel=1e-6)
    # The model shifts its labels itself: its loss over one batch of every sequence is the
    # same token-weighted mean.
    assert found == pytest.approx(math.exp(model_loss), rel=1e-5)
    # The figure a forgotten shift gives (each position scored against its own input token)
    # is far from it: the test above tells the two apart.
    forgotten = feed(Perplexity(causal=False), logits, labels).compute()["perplexity"]
    assert abs(forgotten - expected) > 0.05 * expected


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    rows=st.integers(1, 6),
    length=st.integers(2, 7),
    at=st.data(),
)
def test_causal_is_the_shift_by_hand(seed: int, rows: int, length: int, at: st.DataObject) -> None:
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, length, 5, generator=generator, dtype=torch.float64)
    labels = torch.randint(0, 5, (rows, length), generator=generator)
    labels[torch.rand(rows, length, generator=generator) < 0.3] = -100
    labels[0, 1] = 3  # at least one scored token after the shift
    batches = at.draw(cuts(rows))
    causal = feed(Perplexity(causal=True), logits, labels, batches).compute()
    by_hand = feed(Perplexity(causal=False), logits[:, :-1], labels[:, 1:], batches).compute()
    assert causal == by_hand


def test_sequences_without_a_choice_are_refused_naming_both() -> None:
    with pytest.raises(
        MetricError,
        match=r"Perplexity\('perplexity'\): targets of shape \(2, 5\)"
        r" are sequences.*causal=True.*causal=False",
    ):
        Perplexity().add_batch(torch.randn(2, 5, 7), torch.randint(0, 7, (2, 5)))
    # Targets with no sequence dimension have nothing to shift.
    plain = Perplexity()
    plain.add_batch(torch.zeros(3, 7), torch.tensor([0, 1, 2]))
    assert plain.compute() == {"perplexity": pytest.approx(7.0)}


def test_causal_with_logits_shifted_by_hand_is_refused() -> None:
    with pytest.raises(MetricError, match=r"do not fit.*causal=True takes both unshifted"):
        Perplexity(causal=True).add_batch(torch.randn(2, 4, 7), torch.randint(0, 7, (2, 5)))


def test_causal_needs_a_sequence_and_a_bool() -> None:
    with pytest.raises(MetricError, match=r"causal=True shifts along the sequence.*\(3,\)"):
        Perplexity(causal=True).add_batch(torch.randn(3, 7), torch.tensor([0, 1, 2]))
    with pytest.raises(MetricError, match="causal must be True, False or None, got 'yes'"):
        Perplexity(causal="yes")  # type: ignore[arg-type]


def test_causal_sequences_of_one_token_score_nothing() -> None:
    metric = Perplexity(causal=True)
    metric.add_batch(torch.randn(2, 1, 7), torch.randint(0, 7, (2, 1)))
    with pytest.raises(MetricError, match="no token to score"):
        metric.compute()
