"""The counter-based generator is SplitMix64 exactly, and its numbers look uniform."""

from __future__ import annotations

import torch

from accmt_collators._keyed_random import (
    Stream,
    draw,
    high_word,
    low_word,
    mix,
    row_keys,
    threshold,
    unit,
)

MASK64 = (1 << 64) - 1


def splitmix64(state: int) -> tuple[int, int]:
    """The reference generator (Steele, Lea and Flood 2014), in Python's exact integers."""
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


def test_mix_is_splitmix64_on_int64_tensors() -> None:
    state, expected = 0, []
    for _ in range(1000):
        state, value = splitmix64(state)
        expected.append(value)
    states = [(0x9E3779B97F4A7C15 * (i + 1)) & MASK64 for i in range(1000)]
    signed = torch.tensor([s - (1 << 64) if s >= 1 << 63 else s for s in states])
    got = [value & MASK64 for value in mix(signed).tolist()]
    assert got == expected
    # The first output for seed 0, as published with the reference implementation.
    assert got[0] == 0xE220A8397B1DCDAF


def test_draws_depend_only_on_key_counter_and_stream() -> None:
    keys = torch.tensor([5, 5, -7, 5])
    counters = torch.tensor([0, 1, 0, 0])
    token = draw(keys, counters, Stream.TOKEN)
    assert token[0] == token[3]
    assert token[0] != token[1]
    assert token[0] != token[2]
    assert not torch.equal(token, draw(keys, counters, Stream.SPAN))


def test_numbers_are_uniform() -> None:
    bits = draw(torch.full((200_000,), 123), torch.arange(200_000), Stream.TOKEN)
    low, high = low_word(bits), high_word(bits)
    for word in (low, high):
        assert float(word.min()) >= 0
        assert float(word.max()) < 2**32
        assert abs(float(unit(word).mean()) - 0.5) < 0.005
        assert abs(float((word < threshold(0.15)).double().mean()) - 0.15) < 0.005
    assert abs(float(torch.corrcoef(torch.stack([unit(low), unit(high)]))[0, 1])) < 0.01
    assert threshold(1.0) == 2**32
    assert threshold(0.0) == 0


def test_row_keys_follow_the_real_tokens_wherever_they_sit() -> None:
    right = torch.tensor([[5, 6, 7, 0], [5, 6, 0, 0], [5, 6, 7, 0]])
    real_right = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 0]]).bool()
    keys = row_keys(right, torch.arange(4)[None, :], real_right, salt=9)
    assert keys[0] == keys[2]
    assert keys[0] != keys[1]
    left = torch.tensor([[0, 0, 5, 6, 7], [0, 0, 0, 5, 6]])
    real_left = left != 0
    places = torch.arange(5)[None, :] - torch.tensor([[2], [3]])
    assert torch.equal(row_keys(left, places, real_left, salt=9), keys[:2])
    assert not torch.equal(row_keys(left, places, real_left, salt=10), keys[:2])
