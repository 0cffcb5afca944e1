"""Unit tests of lens_heads.lens on tiny models: capture helpers, logit lens, layer similarity."""

from __future__ import annotations

import pytest
import torch

import lens_heads as lh
from lens_heads.lens import (
    cosine_by_layer,
    encode_prompt,
    layer_activations,
    lens_logits,
)
from lens_heads.masks import MaskShapeError


# -- capture helpers -----------------------------------------------------------------------------
def test_layer_activations_match_run_with_cache(tiny):
    encoded = encode_prompt(tiny, "apple pie")
    tokens = torch.tensor([encoded.tokens])
    _, cache = tiny.run_with_cache(tokens)
    acts = layer_activations(tiny, "apple pie", position=-2)
    assert set(acts) == {"hook_resid_post", "hook_attn_out"}
    for hook, stacked in acts.items():
        assert stacked.shape == (1, 2, tiny.cfg.d_model)
        for layer in range(2):
            expected = cache[f"blocks.{layer}.{hook}"][0, -2]
            torch.testing.assert_close(stacked[0, layer], expected)


def test_layer_activations_batches_right_padded_prompts_like_single_runs(tiny):
    prompts = ["a", "a much longer prompt here", "mid size"]
    together = layer_activations(tiny, prompts, batch_size=3)["hook_resid_post"]
    for i, prompt in enumerate(prompts):
        alone = layer_activations(tiny, prompt)["hook_resid_post"][0]
        torch.testing.assert_close(together[i], alone, atol=1e-5, rtol=1e-5)


def test_layer_activations_per_example_masks_equal_one_mask_each(tiny):
    masks = [lh.HeadMask.ones(tiny), lh.HeadMask.from_heads(["L0H1"], n_layers=2, n_heads=4)]
    batched = layer_activations(tiny, ["apple"] * 2, mask=masks, batch_size=1)
    for i, mask in enumerate(masks):
        alone = layer_activations(tiny, "apple", mask=mask)
        torch.testing.assert_close(batched["hook_attn_out"][i], alone["hook_attn_out"][0])
    # the mask changes the attention output of layer 0
    assert not torch.allclose(batched["hook_attn_out"][0, 0], batched["hook_attn_out"][1, 0])


def test_cosine_by_layer_is_one_with_itself_and_broadcasts(tiny):
    acts = layer_activations(tiny, ["apple", "pear"])["hook_resid_post"]
    torch.testing.assert_close(cosine_by_layer(acts, acts), torch.ones(2, 2))
    against_first = cosine_by_layer(acts, acts[0])
    assert against_first.shape == (2, 2)
    torch.testing.assert_close(against_first[0], torch.ones(2))
    assert bool((against_first[1] < 0.9999).any())
    # the shape annotation is checked under pytest (TypeError); without it, a clear ValueError
    with pytest.raises((ValueError, TypeError), match=r"do not match|d_model"):
        cosine_by_layer(acts, acts[..., :10])


def test_lens_logits_of_last_layer_are_the_model_logits(tiny):
    tokens = torch.tensor([encode_prompt(tiny, "hello there").tokens])
    logits, cache = tiny.run_with_cache(tokens)
    lens = lens_logits(tiny, cache["blocks.1.hook_resid_post"])
    torch.testing.assert_close(lens, logits, atol=1e-5, rtol=1e-5)
    unnormed = lens_logits(tiny, cache["blocks.1.hook_resid_post"], apply_final_norm=False)
    assert not torch.allclose(unnormed, logits, atol=1e-3)


def test_encode_prompt_locates_the_raw_input():
    model = lh.tiny_model()
    for chat in (True, False):
        for instruction in (None, "Repeat apple."):
            encoded = encode_prompt(model, "apple", chat=chat, instruction=instruction)
            start = encoded.input_start
            assert start is not None
            assert encoded.text[start : start + 5] == "apple"
            if instruction:  # the instruction's own "apple" comes first; the input is later
                assert start > encoded.text.index("apple")


# -- bad inputs ----------------------------------------------------------------------------------
def test_capture_bad_inputs(tiny):
    with pytest.raises(ValueError, match="prompt is empty"):
        layer_activations(tiny, "")
    with pytest.raises(ValueError, match="prompt is empty"):
        layer_activations(tiny, [[]])
    with pytest.raises(ValueError, match="position 99 is out of range"):
        layer_activations(tiny, "apple", position=99)
    with pytest.raises(ValueError, match="position -99 is out of range"):
        layer_activations(tiny, "apple", position=-99)
    other = lh.HeadMask.ones(3, 4)
    with pytest.raises(MaskShapeError, match="use a mask made for this model"):
        layer_activations(tiny, "apple", mask=other)
    with pytest.raises(MaskShapeError, match="2 masks given for 1 prompts"):
        layer_activations(tiny, "apple", mask=[lh.HeadMask.ones(tiny)] * 2)
