"""Choosing the tokens of masked language modeling, per sample, for a whole batch at once."""

from __future__ import annotations

import torch

from ._keyed_random import Stream, draw_at, low_word, signed_high_word, threshold


class TokenMasking:
    """BERT's rule: each token (or word) is chosen with ``probability``; a chosen token becomes
    the mask token with ``mask_replace_prob``, a random token with ``random_replace_prob``,
    and stays as it is otherwise (0.8 / 0.1 / 0.1 by default).

    Each token's draw is a function of its sample's key and its place in the sample, so a
    sample is masked alike whichever batch, worker or process collates it.
    """

    def __init__(
        self,
        probability: float,
        mask_replace_prob: float,
        random_replace_prob: float,
        mask_token_id: int,
        vocabulary_size: int,
    ) -> None:
        self.mask_token_id = mask_token_id
        self.vocabulary_size = vocabulary_size
        self._chosen_below = threshold(probability)
        self._masked_below = threshold(mask_replace_prob, signed=True)
        self._random_below = threshold(mask_replace_prob + random_replace_prob, signed=True)

    def apply(
        self,
        ids: torch.Tensor,
        keys: torch.Tensor,
        positions: torch.Tensor,
        eligible: torch.Tensor,
        word_start: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The new ids and the labels (-100 where not chosen) of padded ``ids`` (rows, length).

        ``keys`` has one key per row, ``positions`` each token's place in its row, and
        ``eligible`` marks the tokens that may be chosen (not padding, not special). For
        whole-word masking, ``word_start`` gives the column of each token's word's first
        token, whose draw decides for the whole word.
        """
        bits = draw_at(keys, positions, Stream.TOKEN)
        chance = low_word(bits)
        if word_start is not None:
            chance = chance.gather(1, word_start)
        chosen = chance < self._chosen_below
        chosen &= eligible
        kind = signed_high_word(bits)
        replacement = ids
        if self._random_below > self._masked_below:
            # Given a random replacement, ``kind`` is uniform over [masked, random): its place
            # there picks the token (over 2**28 values for the default 0.1; bias < V / 2**28).
            # The kinds below ``masked`` it also covers become the mask token just after.
            width = self._random_below - self._masked_below
            token = (kind - self._masked_below) * self.vocabulary_size // width
            replacement = torch.where(kind < self._random_below, token, ids)
        replacement = torch.where(kind < self._masked_below, self.mask_token_id, replacement)
        # Chosen last, once: fewer tensor operations, each a fixed cost at small batches.
        new_ids = torch.where(chosen, replacement, ids)
        return new_ids, torch.where(chosen, ids, -100)


def word_starts(
    positions: torch.Tensor, eligible: torch.Tensor, continues_word: torch.Tensor
) -> torch.Tensor:
    """(rows, length): for each token, the column of the first token of its word.

    ``continues_word`` says which tokens belong to the word of the token before them; a
    sample's first token, and a token after an ineligible one (special), always start a word.
    Ineligible tokens are never chosen, so their own entry does not matter.
    """
    after_ineligible = ~torch.roll(eligible, 1, dims=1)
    starts = eligible & (~continues_word | after_ineligible | (positions == 0))
    columns = torch.arange(starts.shape[1]).expand_as(starts)
    index = torch.where(starts, columns, -1)
    return torch.cummax(index, dim=1).values.clamp_(min=0)


def continues_by_offsets(offsets: torch.Tensor) -> torch.Tensor:
    """transformers 5's rule: a token continues a word when it starts where the last ended.

    ``offsets`` is (rows, length, 2): each token's start and end in its text.
    """
    previous_end = torch.roll(offsets[..., 1], 1, dims=1)
    return offsets[..., 0] == previous_end
