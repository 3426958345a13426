"""Random numbers that are a function of a key and a counter, drawn for a whole batch at once.

torch's generators are sequential: a draw depends on every draw made before it. A collator
drawing from one would mask a sample differently depending on which samples its process
collated first: its DataLoader worker, its shard on N processes, or the batches a resumed run
skipped. Here each number is a pure function of (key, counter, stream), computed for all tokens
of a batch with a few integer tensor operations: the SplitMix64 output function (Steele, Lea
and Flood, "Fast splittable pseudorandom number generators", 2014; the generator of Java's
SplittableRandom) applied to ``key + counter * gamma``. torch has no counter-based generator
on the CPU to call instead. int64 arithmetic wraps modulo 2**64, which is the uint64
arithmetic SplitMix64 is written in; a test checks the outputs against the reference.
"""

from __future__ import annotations

import enum
import hashlib

import torch

_BITS = (1 << 64) - 1
_GAMMA = 0x9E3779B97F4A7C15
_MULTIPLIERS = (0xBF58476D1CE4E5B9, 0x94D049BB133111EB)
_SHIFTS = (30, 27, 31)


class Stream(enum.IntEnum):
    """Independent draws for one counter: each purpose reads its own stream."""

    TOKEN = 0  # whether a token is chosen, and what it becomes
    REPLACEMENT = 1  # the random token that replaces a chosen one
    SPAN = 2  # a permutation-LM span's length and start
    ORDER = 3  # a permutation-LM factorisation order


_STREAMS = len(Stream)


def as_int64(value: int) -> int:
    """An unsigned 64-bit value as the int64 with the same bits."""
    value &= _BITS
    return value - (1 << 64) if value >= 1 << 63 else value


def _shift_right(z: torch.Tensor, shift: int) -> torch.Tensor:
    """Logical (unsigned) right shift of int64 values: torch's >> copies the sign bit."""
    return (z >> shift) & ((1 << (64 - shift)) - 1)


def mix(z: torch.Tensor) -> torch.Tensor:
    """SplitMix64's output function, in place on an int64 tensor, which it returns."""
    z ^= _shift_right(z, _SHIFTS[0])
    z *= as_int64(_MULTIPLIERS[0])
    z ^= _shift_right(z, _SHIFTS[1])
    z *= as_int64(_MULTIPLIERS[1])
    z ^= _shift_right(z, _SHIFTS[2])
    return z


def draw(keys: torch.Tensor, counters: torch.Tensor, stream: Stream) -> torch.Tensor:
    """64 random bits (as int64) for each (key, counter) pair in ``stream``."""
    return mix(keys + (counters * _STREAMS + (int(stream) + 1)) * as_int64(_GAMMA))


def low_unit(bits: torch.Tensor) -> torch.Tensor:
    """A uniform float in [0, 1) from the low 32 bits."""
    return (bits & 0xFFFFFFFF).to(torch.float64) * 2.0**-32


def high_unit(bits: torch.Tensor) -> torch.Tensor:
    """A uniform float in [0, 1) from the high 32 bits, independent of ``low_unit``."""
    return _shift_right(bits, 32).to(torch.float64) * 2.0**-32


def below(bits: torch.Tensor, bound: int | torch.Tensor) -> torch.Tensor:
    """A uniform int in [0, bound) from the high 53 bits (bias below 2**-53 * bound)."""
    unit = _shift_right(bits, 11).to(torch.float64) * 2.0**-53
    return (unit * bound).to(torch.int64)


def row_keys(tokens: torch.Tensor, rows: torch.Tensor, positions: torch.Tensor,
             count: int, salt: int) -> torch.Tensor:  # fmt: skip
    """One key per row from its tokens, their order and ``salt``: equal rows, equal keys.

    ``tokens``, ``rows`` and ``positions`` are flat: each token, the row it belongs to, and its
    place in that row.
    """
    hashed = mix(tokens + positions * as_int64(_GAMMA))
    sums = torch.zeros(count, dtype=torch.int64).index_add_(0, rows, hashed)
    return mix(sums + as_int64(salt))


def salt_of(*parts: object) -> int:
    """A 64-bit salt from plain values (ints and strings), stable across processes and runs."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")
