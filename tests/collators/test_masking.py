"""The masking collators against transformers': the same invariants, the same rates.

Their draws differ by design (ours are a function of seed, epoch and sample), so the tensors
cannot be equal; what must hold is what masked language modeling means: the chosen fraction,
the 80/10/10 split, special tokens and padding never chosen, labels -100 exactly where not
chosen, and whole words chosen whole.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import transformers
from hypothesis import given, settings
from hypothesis import strategies as st

import accmt_collators

from ._text import MASK, PAD, TEXTS, as_kind, encoded, token_rows, wordpiece

TOKENIZER = wordpiece()
SPECIAL = torch.tensor(TOKENIZER.all_special_ids)
# 64 real texts of about 100 tokens each, of different lengths: padding in every batch.
SAMPLES = encoded([text[: 250 + 7 * i] for i, text in enumerate(TEXTS[:64])], TOKENIZER)


def padded_ids(samples: list[dict[str, Any]]) -> torch.Tensor:
    return transformers.DataCollatorWithPadding(TOKENIZER)(samples)["input_ids"]


def outcome(original: torch.Tensor, batch: dict[str, Any]) -> dict[str, float]:
    """Rates of one masked batch: chosen among eligible tokens; mask/random/kept among chosen."""
    eligible = ~torch.isin(original, SPECIAL)
    chosen = batch["labels"] != -100
    inputs = batch["input_ids"]
    return {
        "eligible": float(eligible.sum()),
        "chosen": float(chosen.sum()),
        "masked": float((chosen & (inputs == MASK)).sum()),
        "kept": float((chosen & (inputs == original)).sum()),
    }


def rates(collate: Any, epochs: int) -> dict[str, float]:
    totals: dict[str, float] = {}
    original = padded_ids(SAMPLES)
    for epoch in range(epochs):
        if hasattr(collate, "set_epoch"):
            collate.set_epoch(epoch)
        for key, value in outcome(original, collate([dict(s) for s in SAMPLES])).items():
            totals[key] = totals.get(key, 0.0) + value
    return {
        "chosen": totals["chosen"] / totals["eligible"],
        "masked": totals["masked"] / totals["chosen"],
        # A random replacement may draw the token it replaces (1 in 1500): counted as kept.
        "kept": totals["kept"] / totals["chosen"],
    }


@pytest.mark.parametrize("probability", [0.15, 0.4])
def test_rates_match_the_rule_and_transformers(probability: float) -> None:
    ours = rates(
        accmt_collators.DataCollatorForLanguageModeling(
            TOKENIZER, mlm_probability=probability, seed=3
        ),
        epochs=4,
    )
    theirs = rates(
        transformers.DataCollatorForLanguageModeling(
            TOKENIZER, mlm_probability=probability, seed=3
        ),
        epochs=4,
    )
    expected = {"chosen": probability, "masked": 0.8, "kept": 0.1}
    for key, rate in expected.items():
        tolerance = 0.015 if key == "chosen" else 0.04
        assert abs(ours[key] - rate) < tolerance, (key, ours)
        assert abs(theirs[key] - rate) < tolerance, (key, theirs)
        assert abs(ours[key] - theirs[key]) < 2 * tolerance, (key, ours, theirs)


@st.composite
def masking_cases(draw: st.DrawFn) -> tuple[list[Any], dict[str, Any]]:
    rows = draw(st.integers(1, 8).flatmap(token_rows))
    kind = draw(st.sampled_from(["list", "tensor", "numpy"]))
    bare = draw(st.booleans())
    samples = [as_kind(r, kind) if bare else {"input_ids": as_kind(r, kind)} for r in rows]
    mask_share = draw(st.floats(0, 1))
    options = {
        "mlm_probability": draw(st.sampled_from([0.0, 0.15, 0.5, 1.0])),
        "mask_replace_prob": mask_share,
        "random_replace_prob": draw(st.floats(0, 1 - mask_share)),
        "pad_to_multiple_of": draw(st.none() | st.integers(1, 8)),
        "seed": draw(st.integers(0, 2**40)),
    }
    return samples, options


@settings(settings.get_profile("collators"))
@given(masking_cases(), st.sampled_from(["left", "right"]), st.integers(0, 3))
def test_masks_keep_the_invariants(
    case: tuple[list[Any], dict[str, Any]], side: str, epoch: int
) -> None:
    samples, options = case
    tokenizer = wordpiece(side)
    collate = accmt_collators.DataCollatorForLanguageModeling(tokenizer, **options)
    collate.set_epoch(epoch)
    batch = collate(samples)
    rows = [s if not isinstance(s, dict) else s["input_ids"] for s in samples]
    original = transformers.DataCollatorForLanguageModeling(
        tokenizer, mlm=False, pad_to_multiple_of=options["pad_to_multiple_of"]
    )([torch.as_tensor(r) for r in rows])["input_ids"]
    inputs, labels = batch["input_ids"], batch["labels"]
    chosen = labels != -100
    protected = torch.isin(original, SPECIAL)
    assert inputs.shape == labels.shape == original.shape
    assert not (chosen & protected).any(), "a special token or padding was chosen"
    assert torch.equal(labels[chosen], original[chosen]), "labels hold the original tokens"
    assert torch.equal(inputs[~chosen], original[~chosen]), "unchosen tokens stay as they are"
    assert ((inputs[chosen] >= 0) & (inputs[chosen] < len(tokenizer))).all()
    if options["mlm_probability"] == 1.0:
        assert torch.equal(chosen, ~protected), "probability 1 chooses every eligible token"
    if options["mask_replace_prob"] == 1.0:
        assert (inputs[chosen] == MASK).all()
    if options["mask_replace_prob"] + options["random_replace_prob"] == 0:
        assert torch.equal(inputs, original)


def word_ids(samples: list[dict[str, Any]], length: int) -> torch.Tensor:
    """Each token's word (-1 for special tokens and padding), from the fast tokenizer."""
    ids = torch.full((len(samples), length), -1)
    for row, text in enumerate(samples):
        words = TOKENIZER(text["text"]).word_ids()
        ids[row, : len(words)] = torch.tensor([-1 if w is None else w for w in words])
    return ids


def chosen_words(chosen: torch.Tensor, words: torch.Tensor) -> tuple[int, int]:
    """(words chosen, words) after checking that each word is chosen whole or not at all."""
    picked = total = 0
    for row in range(len(words)):
        for word in words[row].unique().tolist():
            if word < 0:
                continue
            states = chosen[row][words[row] == word]
            assert states.all() or not states.any(), f"word {word} of sample {row} split"
            picked, total = picked + int(states.all()), total + 1
    return picked, total


def whole_word_batch(texts: list[str], **tokenize: Any) -> list[dict[str, Any]]:
    return [{**dict(TOKENIZER(t, **tokenize)), "text": t} for t in texts]


def without(samples: list[dict[str, Any]], *keys: str) -> list[dict[str, Any]]:
    return [{k: v for k, v in sample.items() if k not in keys} for sample in samples]


def offset_words(samples: list[dict[str, Any]], length: int) -> torch.Tensor:
    """transformers 5's words: runs of tokens whose offsets touch (-1 at special tokens)."""
    words = torch.full((len(samples), length), -1)
    for row, sample in enumerate(samples):
        offsets = sample["offset_mapping"]
        gaps = [
            int(now[0] != before[1]) for now, before in zip(offsets[1:], offsets[:-1], strict=True)
        ]
        words[row, : len(offsets)] = torch.tensor([0, *gaps]).cumsum(0)
    words[torch.isin(padded_ids(without(samples, "text", "offset_mapping")), SPECIAL)] = -1
    return words


@pytest.mark.parametrize("by", ["wordpiece", "offsets"])
def test_whole_words_are_chosen_whole_at_the_rate(by: str) -> None:
    texts = [text[:300] for text in TEXTS[:48]]
    samples = whole_word_batch(texts, return_offsets_mapping=by == "offsets")
    collate = accmt_collators.DataCollatorForWholeWordMask(TOKENIZER, seed=1)
    picked = total = 0
    for epoch in range(3):
        collate.set_epoch(epoch)
        batch = collate(without(samples, "text"))
        assert "offset_mapping" not in batch
        chosen = batch["labels"] != -100
        assert not (
            chosen & torch.isin(padded_ids(without(samples, "text", "offset_mapping")), SPECIAL)
        ).any()
        # WordPiece's words ('##' continues one) are the tokenizer's own word_ids.
        length = chosen.shape[1]
        words = word_ids(samples, length) if by == "wordpiece" else offset_words(samples, length)
        done = chosen_words(chosen, words)
        picked, total = picked + done[0], total + done[1]
    assert abs(picked / total - 0.15) < 0.02, picked / total


def test_whole_word_masking_chooses_words_at_transformers_rate() -> None:
    # transformers 5 reads words from offsets it cannot pad: give it samples of one length.
    texts = [text[:2000] for text in TEXTS if len(text) > 2000][:48]
    tokenize = {"return_offsets_mapping": True, "truncation": True, "max_length": 96}
    samples = without(whole_word_batch(texts, **tokenize), "text")
    words = offset_words(samples, 96)
    ours = accmt_collators.DataCollatorForLanguageModeling(
        TOKENIZER, whole_word_mask=True, mask_replace_prob=1.0, random_replace_prob=0.0, seed=2
    )
    theirs = transformers.DataCollatorForLanguageModeling(
        TOKENIZER, whole_word_mask=True, mask_replace_prob=1.0, random_replace_prob=0.0, seed=2
    )
    found = {}
    for name, collate in (("ours", ours), ("theirs", theirs)):
        picked = total = 0
        for epoch in range(3):
            if name == "ours":
                ours.set_epoch(epoch)
            batch = collate([dict(s) for s in samples])
            chosen = batch["labels"] != -100
            assert (batch["input_ids"][chosen] == MASK).all()
            done = chosen_words(chosen, words)
            picked, total = picked + done[0], total + done[1]
        found[name] = picked / total
    assert abs(found["ours"] - 0.15) < 0.02, found
    assert abs(found["theirs"] - 0.15) < 0.02, found


def permutation_batch(collate: Any, rows: list[list[int]]) -> dict[str, torch.Tensor]:
    if hasattr(collate, "set_epoch"):
        collate.set_epoch(0)
    return dict(collate([torch.tensor(r) for r in rows]))


def check_permutation_batch(batch: dict[str, torch.Tensor], original: torch.Tensor) -> None:
    inputs, labels = batch["input_ids"], batch["labels"]
    masked = labels != -100
    functional = torch.isin(original, SPECIAL)
    assert not (masked & functional).any()
    assert torch.equal(labels[masked], original[masked])
    assert (inputs[masked] == MASK).all()
    assert torch.equal(inputs[~masked], original[~masked])
    size = original.shape[1]
    assert torch.equal(batch["target_mapping"], torch.eye(size).expand(len(original), -1, -1))
    perm = batch["perm_mask"]
    visible = ~masked & ~functional
    # Everyone sees the unmasked ordinary tokens; of two masked tokens exactly one sees the other.
    assert (perm.transpose(1, 2)[visible] == 0).all()
    for row in range(len(original)):
        where = masked[row].nonzero().squeeze(1)
        block = perm[row][where][:, where]
        assert torch.equal(block + block.T, torch.ones_like(block) + torch.eye(len(where)))


def test_permutation_lm_matches_transformers_shapes_invariants_and_rate() -> None:
    rows = [s["input_ids"][: 40 + 2 * (i % 10)] for i, s in enumerate(SAMPLES)]
    ours = accmt_collators.DataCollatorForPermutationLanguageModeling(TOKENIZER, seed=5)
    theirs = transformers.DataCollatorForPermutationLanguageModeling(TOKENIZER)
    original = padded_ids([{"input_ids": r} for r in rows])
    found = {}
    for name, collate in (("ours", ours), ("theirs", theirs)):
        batch = permutation_batch(collate, rows)
        check_permutation_batch(batch, original)
        found[name] = batch
    for key, value in found["theirs"].items():
        assert found["ours"][key].shape == value.shape, key
        assert found["ours"][key].dtype == value.dtype, key
    share = {
        k: float((b["labels"] != -100).sum() / (~torch.isin(original, SPECIAL)).sum())
        for k, b in found.items()
    }
    assert abs(share["ours"] - share["theirs"]) < 0.04, share
    assert 0.1 < share["ours"] < 0.25, share


def test_permutation_lm_needs_an_even_length() -> None:
    rows = [[2, 9, 10, 3], [2, 11, 3]]
    collate = accmt_collators.DataCollatorForPermutationLanguageModeling(TOKENIZER, seed=5)
    with pytest.raises(accmt_collators.CollatorError, match="pad_to_multiple_of=2"):
        collate([[2, 9, 10, 11, 3], [2, 11, 3]])
    even = accmt_collators.DataCollatorForPermutationLanguageModeling(
        TOKENIZER, pad_to_multiple_of=2, seed=5
    )
    batch = permutation_batch(even, [*rows, [2, 9, 10, 11, 3]])
    assert batch["input_ids"].shape == (3, 6)
    assert batch["input_ids"][1, 3] == PAD
    assert batch["labels"][1, 3] == -100


def test_permutation_batch_is_dense_and_trains_xlnet() -> None:
    """Every tensor of the batch is dense (collectives read a tensor's memory as such), and a
    tiny XLNet, built here, trains on it: a finite loss, finite gradients."""
    rows = [s["input_ids"][: 20 + 2 * (i % 5)] for i, s in enumerate(SAMPLES[:6])]
    collate = accmt_collators.DataCollatorForPermutationLanguageModeling(TOKENIZER, seed=1)
    batch = permutation_batch(collate, rows)
    assert all(value.is_contiguous() for value in batch.values())
    config = transformers.XLNetConfig(
        vocab_size=len(TOKENIZER), d_model=16, n_layer=1, n_head=2, d_inner=32, dropout=0.0
    )
    torch.manual_seed(0)
    model = transformers.XLNetLMHeadModel(config)
    loss = model(**batch).loss
    loss.backward()
    assert torch.isfinite(loss)
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads
    assert all(torch.isfinite(g).all() for g in grads)
    assert model.transformer.word_embedding.weight.grad.abs().sum() > 0


def test_permutation_batches_from_dataloader_workers_equal_the_main_process_s() -> None:
    rows = [s["input_ids"][: 30 + 2 * (i % 7)] for i, s in enumerate(SAMPLES[:16])]
    collate = accmt_collators.DataCollatorForPermutationLanguageModeling(
        TOKENIZER, pad_to_multiple_of=2, seed=4
    )
    collate.set_epoch(2)
    loader = torch.utils.data.DataLoader(rows, batch_size=4, collate_fn=collate, num_workers=2)
    here = [collate(rows[start : start + 4]) for start in range(0, 16, 4)]
    for in_worker, expected in zip(loader, here, strict=True):
        assert in_worker.keys() == expected.keys()
        for key, value in expected.items():
            assert torch.equal(in_worker[key], value), key
