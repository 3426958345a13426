"""Choosing the tokens of masked language modeling, per sample, for a whole batch at once."""

from __future__ import annotations

import torch

from ._keyed_random import Stream, below, draw, high_unit, low_unit, row_keys
from ._ragged import Ragged


class TokenMasking:
    """BERT's rule: each token (or word) is chosen with ``probability``; a chosen token becomes
    the mask token with ``mask_replace_prob``, a random token with ``random_replace_prob``,
    and stays as it is otherwise (0.8 / 0.1 / 0.1 by default).

    Every draw is a function of (salt, the sample's tokens, the token's position), so a sample
    is masked alike whichever batch, worker or process collates it.
    """

    def __init__(
        self,
        probability: float,
        mask_replace_prob: float,
        random_replace_prob: float,
        mask_token_id: int,
        vocabulary_size: int,
    ) -> None:
        self.probability = probability
        self.mask_replace_prob = mask_replace_prob
        self.random_replace_prob = random_replace_prob
        self.mask_token_id = mask_token_id
        self.vocabulary_size = vocabulary_size

    def apply(
        self, ids: Ragged, protected: torch.Tensor, word_start: torch.Tensor | None, salt: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The new ids and the labels (-100 where not chosen), flat like ``ids.values``.

        ``protected`` marks the tokens never chosen (special tokens). ``word_start`` gives, for
        whole-word masking, the index of each token's word's first token, whose draw decides
        for the whole word.
        """
        rows, positions = ids.rows_and_positions()
        token_keys = row_keys(ids.values, rows, positions, len(ids.lengths), salt)[rows]
        bits = draw(token_keys, positions, Stream.TOKEN)
        chance = low_unit(bits)
        if word_start is not None:
            chance = chance[word_start]
        chosen = (chance < self.probability) & ~protected
        kind = high_unit(bits)
        to_mask = chosen & (kind < self.mask_replace_prob)
        new_ids = torch.where(to_mask, self.mask_token_id, ids.values)
        if self.random_replace_prob > 0:
            to_random = chosen & ~to_mask
            to_random &= kind < self.mask_replace_prob + self.random_replace_prob
            where = to_random.nonzero().squeeze(1)
            replacement = draw(token_keys[where], positions[where], Stream.REPLACEMENT)
            new_ids[where] = below(replacement, self.vocabulary_size)
        labels = torch.where(chosen, ids.values, -100)
        return new_ids, labels


def word_starts(ids: Ragged, special: torch.Tensor, continues_word: torch.Tensor) -> torch.Tensor:
    """For each token, the flat index of the first token of its word.

    ``continues_word`` (flat, bool) says which tokens belong to the word of the token before
    them; a sample's first token, and a token after a special one, always start a word.
    Special tokens are words of their own (and are never chosen).
    """
    _, positions = ids.rows_and_positions()
    after_special = torch.roll(special, 1)
    starts = ~special & (~continues_word | after_special | (positions == 0))
    index = torch.where(starts, torch.arange(len(starts)), -1)
    return torch.cummax(index, dim=0).values.clamp_(min=0)


def continues_by_offsets(offsets: torch.Tensor) -> torch.Tensor:
    """transformers 5's rule: a token continues a word when it starts where the last ended."""
    previous_end = torch.roll(offsets[:, 1], 1)
    return offsets[:, 0] == previous_end
