"""Batched greedy generation equals one-at-a-time generation."""

from __future__ import annotations

import pytest

import lens_heads as lh
from lens_heads.core._generation import greedy_generate, stop_token_ids
from lens_heads.core._masks import HeadMask, MaskShapeError
from lens_heads.core._prompts import encode_text

PROMPTS = ["a", "hello there", "the quick brown fox", "zz", "mid length"]


@pytest.mark.parametrize("batch_size", [2, 5])
def test_batched_equals_one_by_one(tiny, batch_size):
    encoded = [encode_text(tiny.tokenizer, p) for p in PROMPTS]
    batched = greedy_generate(
        tiny, encoded, max_new_tokens=6, batch_size=batch_size, stop_tokens=[]
    )
    alone = [
        greedy_generate(tiny, [e], max_new_tokens=6, batch_size=1, stop_tokens=[])[0]
        for e in encoded
    ]
    assert batched == alone
    assert all(len(tokens) == 6 for tokens in batched)


@pytest.mark.parametrize("chat", [False, True])
def test_text_generation_batched_equals_one_at_a_time(tiny, chat):
    """``lh.generate`` on prompts of different lengths (left padded), under a mask."""
    mask = HeadMask.from_heads(["L0H0", "L0H3", "L1H1"], n_layers=2, n_heads=4)
    batched = lh.generate(tiny, PROMPTS, chat=chat, max_new_tokens=5, mask=mask, batch_size=5)
    alone = [
        lh.generate(tiny, prompt, chat=chat, max_new_tokens=5, mask=mask, batch_size=1)[0]
        for prompt in PROMPTS
    ]
    assert [g.new_tokens for g in batched] == [g.new_tokens for g in alone]
    assert [g.text for g in batched] == [g.text for g in alone]
    assert len({len(g.prompt_tokens) for g in batched}) == len(PROMPTS)


def test_per_example_masks_in_generation(tiny):
    encoded = [encode_text(tiny.tokenizer, p) for p in PROMPTS[:3]]
    masks = [
        HeadMask.zeros(tiny),
        HeadMask.ones(tiny),
        HeadMask.from_heads(["L1H1"], n_layers=2, n_heads=4),
    ]
    batched = greedy_generate(tiny, encoded, max_new_tokens=5, mask=masks, stop_tokens=[])
    alone = [
        greedy_generate(tiny, [e], max_new_tokens=5, mask=m, batch_size=1, stop_tokens=[])[0]
        for e, m in zip(encoded, masks, strict=True)
    ]
    assert batched == alone
    with pytest.raises(MaskShapeError, match="2 per-example masks for 3 prompts"):
        greedy_generate(tiny, encoded, mask=masks[:2])


def test_stop_tokens_cut_output(tiny):
    encoded = [encode_text(tiny.tokenizer, "hello")]
    free = greedy_generate(tiny, encoded, max_new_tokens=8, stop_tokens=[])[0]
    stopped = greedy_generate(tiny, encoded, max_new_tokens=8, stop_tokens=[free[2]])[0]
    assert stopped == free[: free.index(free[2])]


def test_stop_token_ids_include_end_of_turn(tiny):
    assert tiny.tokenizer.convert_tokens_to_ids("<|im_end|>") in stop_token_ids(tiny.tokenizer)


def test_text_generation_and_errors(tiny):
    outputs = lh.generate(tiny, ["hi", "there"], chat=True, max_new_tokens=3)
    assert [len(o.new_tokens) <= 3 for o in outputs] == [True, True]
    assert outputs[0].prompt_tokens[0] == tiny.tokenizer.convert_tokens_to_ids("<|im_start|>")
    with pytest.raises(ValueError, match="empty"):
        lh.generate(tiny, "")
    with pytest.raises(ValueError, match="max_new_tokens"):
        greedy_generate(tiny, [[1, 2]], max_new_tokens=0)


def test_generation_takes_its_config_by_position_or_as_keywords(tiny):
    """Issue 45: ``generate`` and ``greedy_generate`` take a settings object after their
    prompts, or its fields as keywords (a misspelt one names the closest field before any
    decoding); the text config is also a decoding config, so ``generate`` hands it on."""
    from lens_heads.core import DecodingConfig, GenerationConfig

    ids = [encode_text(tiny.tokenizer, "hello", chat=False)]
    assert greedy_generate(tiny, ids, DecodingConfig(max_new_tokens=2)) == greedy_generate(
        tiny, ids, max_new_tokens=2
    )
    by_config = lh.generate(tiny, ["hello"], GenerationConfig(max_new_tokens=2))
    assert by_config == lh.generate(tiny, ["hello"], max_new_tokens=2)
    assert isinstance(GenerationConfig(), DecodingConfig)
    with pytest.raises(lh.LensHeadsError, match="'max_tokens' \\(did you mean 'max_new_tokens'"):
        greedy_generate(tiny, ids, max_tokens=2)
    with pytest.raises(lh.LensHeadsError, match="max_new_tokens must be at least 1, got 0"):
        lh.generate(tiny, ["hello"], max_new_tokens=0)
