"""Random numbers that are a function of a key and a counter, drawn for a whole batch at once.

torch's generators are sequential: a draw depends on every draw made before it. A collator
drawing from one would mask a sample differently depending on which samples its process
collated first: its DataLoader worker, its shard on N processes, or the batches a resumed run
skipped. Here each number is a pure function of (key, counter, stream), computed for all tokens
of a batch with a few integer tensor operations: the SplitMix64 output function (Steele, Lea
and Flood, "Fast splittable pseudorandom number generators", 2014; the generator of Java's
SplittableRandom) applied to ``key + counter * gamma``, where the key is a hash of one
sample's tokens (and the seed and epoch) and the counter a token's place in it. torch has no
counter-based generator on the CPU to call instead. int64 arithmetic wraps modulo 2**64, which
is the uint64 arithmetic SplitMix64 is written in; a test checks the outputs against the
reference.
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
    SPAN = 1  # a permutation-LM span's length and start
    ORDER = 2  # a permutation-LM factorisation order


_STREAMS = len(Stream)
_WORD = 1 << 32


def as_int64(value: int) -> int:
    """An unsigned 64-bit value as the int64 with the same bits."""
    value &= _BITS
    return value - (1 << 64) if value >= 1 << 63 else value


def _shift_right(z: torch.Tensor, shift: int) -> torch.Tensor:
    """Logical (unsigned) right shift of int64 values: torch's >> copies the sign bit."""
    shifted = z >> shift
    shifted &= (1 << (64 - shift)) - 1
    return shifted


# The multipliers as the int64 values torch multiplies by (same bits, wrapping alike).
_SIGNED = tuple(as_int64(multiplier) for multiplier in _MULTIPLIERS)


def mix(z: torch.Tensor) -> torch.Tensor:
    """SplitMix64's output function, in place on an int64 tensor, which it returns."""
    z ^= _shift_right(z, _SHIFTS[0])
    z *= _SIGNED[0]
    z ^= _shift_right(z, _SHIFTS[1])
    z *= _SIGNED[1]
    z ^= _shift_right(z, _SHIFTS[2])
    return z


def draw(keys: torch.Tensor, counters: torch.Tensor, stream: Stream) -> torch.Tensor:
    """64 random bits (as int64) for each (key, counter) pair in ``stream`` (broadcast)."""
    return mix(keys + (counters * _STREAMS + (int(stream) + 1)) * as_int64(_GAMMA))


def low_word(bits: torch.Tensor) -> torch.Tensor:
    """The low 32 bits: a uniform int in [0, 2**32)."""
    return bits & (_WORD - 1)


def high_word(bits: torch.Tensor) -> torch.Tensor:
    """The high 32 bits: a uniform int in [0, 2**32), independent of ``low_word``."""
    return _shift_right(bits, 32)


def signed_high_word(bits: torch.Tensor) -> torch.Tensor:
    """The high 32 bits read as signed: a uniform int in [-2**31, 2**31) (one operation)."""
    return bits >> 32


def threshold(probability: float, *, signed: bool = False) -> int:
    """The bound under which a 32-bit word (``signed_high_word`` when ``signed``) falls with
    ``probability`` (to 2**-32)."""
    return round(probability * _WORD) - (_WORD // 2 if signed else 0)


def unit(word: torch.Tensor) -> torch.Tensor:
    """A 32-bit word as a uniform float64 in [0, 1)."""
    return word.to(torch.float64) * (1.0 / _WORD)


class _PositionTables:
    """Per-position constants, computed once for the longest length seen so far."""

    def __init__(self) -> None:
        self._length = 0
        self.weights = torch.zeros(0, dtype=torch.int64)
        self.counters: list[torch.Tensor] = []

    def grow(self, length: int) -> None:
        if length <= self._length:
            return
        size = max(length, 2 * self._length, 512)
        places = torch.arange(size)
        # Odd multipliers for hashing a row's tokens, one per place.
        self.weights = mix((places + 1) * as_int64(_GAMMA)) | 1
        # Each stream's counter term of ``draw`` for each place.
        self.counters = [(places * _STREAMS + (s + 1)) * as_int64(_GAMMA) for s in Stream]
        self._length = size


_TABLES = _PositionTables()


def _at(table: torch.Tensor, places: torch.Tensor) -> torch.Tensor:
    """``table[places]`` (0 over the padding, where places are negative)."""
    if places.shape[0] == 1 and int(places[0, 0]) == 0:
        # Places rise by one along a row: a single row starting at 0 is 0, 1, 2, ...
        return table[: places.shape[1]][None, :]
    return table[places.clamp(min=0)]


def row_keys(
    tokens: torch.Tensor, places: torch.Tensor, real: torch.Tensor, salt: int
) -> torch.Tensor:
    """One key per row of ``tokens`` (rows, length) from its real tokens, their order and
    ``salt``: equal token sequences get equal keys, wherever they sit in a padded batch.

    ``places`` holds each column's place in its own row (one shared row 0, 1, 2, ... when the
    batch is padded on the right); ``real`` marks the tokens that are not padding. The key is
    a sum of (token + 1) times a fixed random odd multiplier per place, plus the salt. Keys of
    different rows differ by pseudo-random 64-bit amounts and ``draw`` mixes each key with
    each counter, so two rows' draws coincide only if their keys differ by one of the few
    thousand multiples of gamma that separate two counters: a chance of about 2**-50.
    """
    _TABLES.grow(tokens.shape[1])
    hashed = torch.where(real, (tokens + 1) * _at(_TABLES.weights, places), 0)
    return hashed.sum(1).add_(as_int64(salt))


def draw_at(keys: torch.Tensor, places: torch.Tensor, stream: Stream) -> torch.Tensor:
    """``draw(keys[:, None], places, stream)``, with the counters from a table."""
    _TABLES.grow(places.shape[1])
    return mix(_at(_TABLES.counters[stream], places) + keys[:, None])


def salt_of(*parts: object) -> int:
    """A 64-bit salt from plain values (ints and strings), stable across processes and runs."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")
