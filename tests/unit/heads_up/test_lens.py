"""Unit tests on tiny models of activation capture, the logit lens and layer similarity."""

from __future__ import annotations

import re

import pandas as pd
import plotly.graph_objects as go
import pytest
import torch

import lens_heads as lh
from lens_heads.core._capture import (
    Run,
    cosine_by_layer,
    encode_prompt,
    layer_activations,
    lens_logits,
)
from lens_heads.core._hooks import maybe_mask
from lens_heads.core._masks import MaskShapeError
from lens_heads.core._prompts import token_text
from lens_heads.heads_up._lens import LogitLensResult, TopTokensResult, logit_lens, top_tokens
from lens_heads.heads_up._similarity import SimilarityResult, figure4_similarity, layer_similarity


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
    # the user's error, not the runtime type checker's TypeError (which pytest turns on)
    with pytest.raises(ValueError, match=r"shapes \(2, 2, 64\) and \(2, 2, 10\) do not match"):
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


# -- logit lens (Table 41) -----------------------------------------------------------------------
LENS_MASK = lh.HeadMask.from_heads(["L0H1", "L1H2"], n_layers=2, n_heads=4)
LENS_INSTRUCTION = "Repeat the word."


def _model_logits(model, prompt, *, instruction=None, mask=None, position=-1) -> torch.Tensor:
    """The model's own logits at ``position`` of the prompt, rendered like the lens renders it."""
    tokens = torch.tensor([encode_prompt(model, prompt, instruction=instruction).tokens])
    with torch.no_grad(), maybe_mask(model, mask):
        return model(tokens)[0, position].float()


@pytest.fixture(scope="module")
def lens_result(tiny) -> LogitLensResult:
    vocab = list(range(int(tiny.cfg.d_vocab)))  # every token a target: the full distribution
    return logit_lens(
        tiny, "apple", mask=LENS_MASK, instruction=LENS_INSTRUCTION, targets=vocab, top_k=4
    )


@pytest.mark.parametrize(
    ("setting", "instruction", "mask"),
    [("original", None, None), ("instructed", LENS_INSTRUCTION, None), ("masked", None, LENS_MASK)],
)
def test_logit_lens_last_layer_is_the_models_own_distribution(
    tiny, lens_result, setting, instruction, mask
):
    s = lens_result.settings.index(setting)
    logits = _model_logits(tiny, "apple", instruction=instruction, mask=mask)
    expected = logits.softmax(dim=-1)
    torch.testing.assert_close(lens_result.target_probs[s, -1], expected, atol=1e-6, rtol=1e-4)
    top_probs, top_ids = expected.topk(4)
    torch.testing.assert_close(lens_result.top_probs[s, -1], top_probs, atol=1e-6, rtol=1e-4)
    assert lens_result.top_ids[s, -1].tolist() == top_ids.tolist()
    # rank = 1 + number of strictly larger logits
    ranks = 1 + (logits[None, :] > logits[:, None]).sum(dim=-1)
    assert lens_result.target_ranks[s, -1].tolist() == ranks.tolist()
    encoded = encode_prompt(tiny, "apple", instruction=instruction)
    assert lens_result.prompts[s] == encoded.text
    assert lens_result.positions[s] == len(encoded.tokens) - 1


def test_logit_lens_masked_differs_and_settings_layers(lens_result):
    assert lens_result.settings == ["original", "instructed", "masked"]
    assert lens_result.layers == ["embed", "L0", "L1"]
    assert lens_result.top_ids.shape == (3, 3, 4)
    # the embedding layer is the same token in every setting: same distribution
    torch.testing.assert_close(lens_result.target_probs[0, 0], lens_result.target_probs[2, 0])
    assert not torch.allclose(lens_result.target_probs[0, -1], lens_result.target_probs[2, -1])
    torch.testing.assert_close(lens_result.target_probs.sum(dim=-1), torch.ones(3, 3))


def test_logit_lens_intermediate_layers_match_run_with_cache(tiny):
    tokens = torch.tensor([encode_prompt(tiny, "apple pie").tokens])
    _, cache = tiny.run_with_cache(tokens)
    result = logit_lens(tiny, "apple pie", position=-2, top_k=3)
    assert result.positions == [tokens.shape[1] - 2]
    resid = [cache["blocks.0.hook_resid_pre"][0, -2]] + [
        cache[f"blocks.{layer}.hook_resid_post"][0, -2] for layer in range(2)
    ]
    for depth, vector in enumerate(resid):
        probs = lens_logits(tiny, vector).float().softmax(dim=-1)
        values, ids = probs.topk(3)
        torch.testing.assert_close(result.top_probs[0, depth], values, atol=1e-6, rtol=1e-4)
        assert result.top_ids[0, depth].tolist() == ids.tolist()
    # the default targets are the final top-1 tokens
    assert result.target_ids == [int(result.top_ids[0, -1, 0])]
    # at position -2 the last layer is the model's prediction there
    final = _model_logits(tiny, "apple pie", position=-2).softmax(dim=-1)
    torch.testing.assert_close(result.top_probs[0, -1], final.topk(3).values, atol=1e-6, rtol=1e-4)


def test_logit_lens_without_final_norm_is_not_the_model_output(tiny):
    result = logit_lens(tiny, "apple", final_norm=False, targets=[5, 6])
    expected = _model_logits(tiny, "apple").softmax(dim=-1)[[5, 6]]
    assert not torch.allclose(result.target_probs[0, -1], expected, atol=1e-6)
    assert result.final_norm is False


def test_logit_lens_string_targets_use_their_first_token(tiny):
    result = logit_lens(tiny, "apple", targets=["pear", 7])
    first = tiny.tokenizer("pear", add_special_tokens=False).input_ids[0]
    assert result.target_ids == [first, 7]
    assert result.target_probs.shape == (1, 3, 2)


def test_logit_lens_bad_inputs(tiny):
    with pytest.raises(ValueError, match="position 999 is out of range"):
        logit_lens(tiny, "apple", position=999)
    with pytest.raises(ValueError, match="position -999 is out of range"):
        logit_lens(tiny, "apple", position=-999)
    with pytest.raises(MaskShapeError, match="use a mask made for this model"):
        logit_lens(tiny, "apple", mask=lh.HeadMask.ones(3, 4))
    with pytest.raises(ValueError, match="prompt is empty"):
        logit_lens(tiny, "")
    with pytest.raises(ValueError, match="no prompt given"):
        logit_lens(tiny)
    with pytest.raises(ValueError, match="top_k must be at least 1"):
        logit_lens(tiny, "apple", top_k=0)
    with pytest.raises(lh.LensHeadsError, match=r"'topk' \(did you mean 'top_k'\?\)"):
        logit_lens(tiny, "apple", topk=3)


def test_the_lens_takes_its_settings_and_the_old_spelling_warns(tiny):
    """Issue 45: a LensConfig or its fields as keywords; ``apply_final_norm=`` is the old name of
    ``final_norm`` (one word: the result's own field) and still works, with a warning."""
    config = lh.LensConfig(top_k=2, final_norm=False)
    by_config = logit_lens(tiny, "apple", config)
    assert by_config.top_ids.shape[-1] == 2 and by_config.final_norm is False
    with pytest.warns(DeprecationWarning, match="apply_final_norm= is now final_norm="):
        old = logit_lens(tiny, "apple", top_k=2, apply_final_norm=False)
    assert torch.equal(old.top_ids, by_config.top_ids)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        logit_lens(tiny, "apple", targets=[10**6])
    with pytest.raises(ValueError, match="target token is empty"):
        logit_lens(tiny, "apple", targets=[""])
    with pytest.raises(ValueError, match="not both"):
        logit_lens(tiny, "apple", settings={"a": ("apple", None)})


def test_logit_lens_explicit_settings(tiny):
    result = logit_lens(
        tiny,
        settings={"bare": ("apple", None), "both": ("apple", LENS_MASK, LENS_INSTRUCTION)},
        targets=[5],
    )
    assert result.settings == ["bare", "both"]
    expected = _model_logits(tiny, "apple", instruction=LENS_INSTRUCTION, mask=LENS_MASK)
    torch.testing.assert_close(
        result.target_probs[1, -1, 0], expected.softmax(dim=-1)[5], atol=1e-6, rtol=1e-4
    )


# -- layer similarity (Figure 4) -----------------------------------------------------------------
def test_layer_similarity_of_a_run_with_itself_is_one(tiny):
    run = ("apple", LENS_MASK, LENS_INSTRUCTION)
    result = layer_similarity(tiny, run, Run("apple", LENS_MASK, LENS_INSTRUCTION, name="again"))
    assert result.cosine.shape == (1, 2, 2)
    torch.testing.assert_close(result.cosine, torch.ones(1, 2, 2))
    # the same run twice under one label is computed once and is 1 too
    same = layer_similarity(tiny, ("apple", None), ("apple", None))
    assert same.comparisons == ["original vs original"]
    torch.testing.assert_close(same.cosine, torch.ones(1, 2, 2))


def test_layer_similarity_matches_a_hand_computation(tiny):
    result = layer_similarity(tiny, ("apple", None), ("apple", None, LENS_INSTRUCTION))
    assert result.comparisons == ["original vs instructed"]
    caches = []
    for instruction in (None, LENS_INSTRUCTION):
        tokens = torch.tensor([encode_prompt(tiny, "apple", instruction=instruction).tokens])
        caches.append(tiny.run_with_cache(tokens)[1])
    for h, hook in enumerate(result.hooks):
        for layer in range(2):
            a, b = (cache[f"blocks.{layer}.{hook}"][0, -1] for cache in caches)
            expected = torch.nn.functional.cosine_similarity(a, b, dim=0)
            assert float(result.cosine[0, h, layer]) == pytest.approx(float(expected), abs=1e-5)
    assert bool((result.cosine < 0.9999).any())


def test_figure4_with_an_all_ones_mask_repeats_original_vs_instructed(tiny):
    result = figure4_similarity(tiny, "apple", LENS_INSTRUCTION, lh.HeadMask.ones(tiny))
    summary = result.summary()
    original = result.cosine[result.comparisons.index("original vs instructed")]
    masked = result.cosine[result.comparisons.index("masked vs instructed")]
    both = result.cosine[result.comparisons.index("masked vs masked+instructed")]
    torch.testing.assert_close(masked, original)
    torch.testing.assert_close(both, original)
    assert bool((original < 0.9999).any())  # the instruction does change the hidden states
    assert result.top1["masked"] == result.top1["original"]
    assert result.top1["masked+instructed"] == result.top1["instructed"]
    assert summary.loc["masked vs instructed", "decoder"] == pytest.approx(
        summary.loc["original vs instructed", "decoder"]
    )


def test_figure4_with_a_real_mask_changes_the_masked_comparison(tiny):
    result = figure4_similarity(tiny, "apple", LENS_INSTRUCTION, LENS_MASK)
    original = result.cosine[0]
    masked = result.cosine[1]
    assert not torch.allclose(masked, original, atol=1e-4)
    assert result.label_runs == ["instructed", "masked"]
    frame = result.to_frame()
    assert list(frame.columns[-2:]) == ["top-1 instructed", "top-1 masked"]
    assert frame.shape == (2, 3 * 2 + 2)
    later = result.summary(range(1, 2))
    assert later.loc["masked vs instructed", "attention"] == pytest.approx(float(masked[1, 1]))
    with pytest.raises(ValueError, match="out of range"):
        result.summary([5])


def test_one_prompts_figure4_shows_its_bar_only_with_progress(tiny, capsys):
    """The four runs of one prompt's Figure 4 show a progress bar unless ``progress=False`` (the
    demo passes its own switch down, so ``run_demo(progress=False)`` prints no bar)."""
    shown = figure4_similarity(tiny, "apple", LENS_INSTRUCTION, LENS_MASK)
    assert "runs" in capsys.readouterr().err
    quiet = figure4_similarity(tiny, "apple", LENS_INSTRUCTION, LENS_MASK, progress=False)
    assert "runs" not in capsys.readouterr().err
    torch.testing.assert_close(quiet.cosine, shown.cosine)
    with pytest.raises(lh.LensHeadsError, match="many prompts"):
        figure4_similarity(tiny, "apple", LENS_INSTRUCTION, LENS_MASK, n_prompts=3)


def test_similarity_bad_inputs(tiny):
    with pytest.raises(MaskShapeError, match="use a mask made for this model"):
        figure4_similarity(tiny, "apple", LENS_INSTRUCTION, lh.HeadMask.ones(3, 4))
    with pytest.raises(ValueError, match="position 999 is out of range"):
        figure4_similarity(tiny, "apple", LENS_INSTRUCTION, LENS_MASK, position=999)
    with pytest.raises(ValueError, match="give two runs"):
        layer_similarity(tiny, ("apple", None))
    with pytest.raises(ValueError, match="both called 'masked'"):
        layer_similarity(
            tiny,
            comparisons={
                "a": (("apple", LENS_MASK), ("apple", None)),
                "b": (("apple", lh.HeadMask.zeros(tiny)), ("apple", None)),
            },
        )


# -- top tokens (Table 4b) -----------------------------------------------------------------------
def _reference_rank(logits: torch.Tensor, token: int) -> int:
    return 1 + int((logits > logits[token]).sum())


def test_top_tokens_rank_changes_are_hand_computed(tiny):
    zeros = lh.HeadMask.zeros(tiny)
    result = top_tokens(tiny, "apple", mask=zeros, instruction=LENS_INSTRUCTION, top_k=6)
    assert result.settings == ["original", "instructed", "masked"]
    assert result.reference == "original"
    logits = {
        "original": _model_logits(tiny, "apple"),
        "instructed": _model_logits(tiny, "apple", instruction=LENS_INSTRUCTION),
        "masked": _model_logits(tiny, "apple", mask=zeros),
    }
    frame = result.to_frame()
    changes = 0
    for s, setting in enumerate(result.settings):
        values, ids = logits[setting].topk(6)
        assert result.top_ids[s].tolist() == ids.tolist()
        torch.testing.assert_close(result.top_logits[s], values, atol=1e-5, rtol=1e-5)
        rows = frame[frame["setting"] == setting]
        for i, token in enumerate(ids.tolist()):
            rank = _reference_rank(logits["original"], token)
            assert int(result.reference_ranks[s, i]) == rank
            assert int(rows["reference rank"].iloc[i]) == rank
            assert int(rows["rank change"].iloc[i]) == rank - (i + 1)
            changes += rank != i + 1
    assert frame[frame["setting"] == "original"]["rank change"].tolist() == [0] * 6
    assert changes > 0  # removing every head reorders the top tokens
    markdown = result.to_markdown()
    assert "↑" in markdown or "↓" in markdown
    assert markdown.count("↑") + markdown.count("↓") == changes
    assert "relative to 'original'" in markdown


def test_top_tokens_other_reference(tiny):
    zeros = lh.HeadMask.zeros(tiny)
    result = top_tokens(tiny, "apple", mask=zeros, top_k=4, reference="masked")
    frame = result.to_frame()
    assert frame[frame["setting"] == "masked"]["rank change"].tolist() == [0] * 4
    masked_logits = _model_logits(tiny, "apple", mask=zeros)
    expected = [_reference_rank(masked_logits, int(t)) for t in result.top_ids[0]]
    assert result.reference_ranks[0].tolist() == expected
    markdown = result.to_markdown()
    assert "relative to 'masked'" in markdown
    assert "↓" in markdown or "↑" in markdown


def test_top_tokens_bad_inputs(tiny):
    with pytest.raises(ValueError, match="position 999 is out of range"):
        top_tokens(tiny, "apple", position=999)
    with pytest.raises(ValueError, match="position -999 is out of range"):
        top_tokens(tiny, "apple", position=-999)
    with pytest.raises(MaskShapeError, match="use a mask made for this model"):
        top_tokens(tiny, "apple", mask=lh.HeadMask.ones(2, 5))
    with pytest.raises(ValueError, match="reference 'masked' is not one of the settings"):
        top_tokens(tiny, "apple", reference="masked")
    with pytest.raises(ValueError, match="top_k must be at least 1, got 0"):
        top_tokens(tiny, "apple", top_k=0)
    with pytest.raises(lh.LensHeadsError, match="did you mean 'top_k'"):
        top_tokens(tiny, "apple", topk=3)
    with pytest.raises(ValueError, match="prompt is empty"):
        top_tokens(tiny, "")


# -- markdown of tokens that look like markdown --------------------------------------------------
def _cells(line: str) -> int:
    """Number of cells of a markdown table row (escaped pipes do not split cells)."""
    return len(re.split(r"(?<!\\)\|", line.strip())) - 2


def _assert_table_is_well_formed(markdown: str) -> None:
    rows = [line for line in markdown.splitlines() if line.startswith("|")]
    assert len(rows) >= 3
    assert {_cells(row) for row in rows} == {_cells(rows[0])}


def test_markdown_tables_survive_pipes_and_control_characters():
    tokens = ["<|im_end|>", "a|b", "|"]
    table = TopTokensResult(
        model="m",
        settings=["original", "masked"],
        prompts=["p", "p"],
        reference="original",
        top_ids=torch.tensor([[4, 5, 6], [6, 5, 4]]),
        top_logits=torch.tensor([[3.0, 2.0, 1.0], [3.0, 2.0, 1.0]]),
        reference_ranks=torch.tensor([[1, 2, 3], [3, 2, 1]]),
        tokens=[tokens, tokens[::-1]],
    )
    _assert_table_is_well_formed(table.to_markdown())
    lens = LogitLensResult(
        model="m",
        settings=["original"],
        prompts=["p"],
        positions=[0],
        layers=["embed", "L0"],
        top_ids=torch.tensor([[[4], [5]]]),
        top_probs=torch.tensor([[[0.5], [0.5]]]),
        top_tokens=[[["<|im_end|>"], ["a|b"]]],
        target_ids=[4],
        targets=["<|im_end|>"],
        target_probs=torch.tensor([[[0.5], [0.25]]]),
        target_ranks=torch.tensor([[[1], [2]]]),
    )
    _assert_table_is_well_formed(lens.to_markdown())
    similarity = SimilarityResult(
        model="m",
        comparisons=["a vs b"],
        pairs=[("a", "b")],
        hooks=["hook_resid_post"],
        cosine=torch.ones(1, 1, 2),
        top1={"a": ["<|im_end|>", "x"], "b": ["|", "y"]},
        label_runs=["a", "b"],
    )
    _assert_table_is_well_formed(similarity.to_markdown())


def test_token_text_escapes_control_characters(tiny):
    backspace = tiny.tokenizer("\x08", add_special_tokens=False).input_ids
    assert len(backspace) == 1
    text = token_text(tiny.tokenizer, backspace[0])
    assert text and not re.search(r"[\x00-\x1f\x7f]", text)
    newline = tiny.tokenizer("\n", add_special_tokens=False).input_ids[0]
    assert token_text(tiny.tokenizer, newline) == "\\n"
    space = tiny.tokenizer(" ", add_special_tokens=False).input_ids[0]
    assert token_text(tiny.tokenizer, space) == "␣"


# -- save / load / plot ---------------------------------------------------------------------------
_FILES = {"table.csv", "table.md", "result.json", "tensors.safetensors", "figure.html"}


def _check_saved(written, folder) -> None:
    assert {path.name for path in written} >= _FILES
    assert (folder / "figure.html").stat().st_size > 1000
    assert "<html" in (folder / "figure.html").read_text()[:500].lower()


def test_logit_lens_save_load_plot(tiny, tmp_path):
    result = logit_lens(tiny, "apple", mask=LENS_MASK, instruction=LENS_INSTRUCTION, targets=[5, 6])
    figure = result.plot()
    assert isinstance(figure, go.Figure) and len(figure.data) > 0
    _check_saved(result.save(tmp_path), tmp_path)
    loaded = LogitLensResult.load(tmp_path)
    for name in ("top_ids", "top_probs", "target_probs", "target_ranks"):
        assert torch.equal(getattr(loaded, name), getattr(result, name)), name
    for name in ("model", "settings", "prompts", "positions", "layers", "top_tokens"):
        assert getattr(loaded, name) == getattr(result, name), name
    assert (loaded.target_ids, loaded.targets, loaded.final_norm) == (
        result.target_ids,
        result.targets,
        result.final_norm,
    )
    pd.testing.assert_frame_equal(loaded.to_frame(), result.to_frame())
    pd.testing.assert_frame_equal(loaded.top1_table(), result.top1_table())
    assert (tmp_path / "table.md").read_text() == result.to_markdown()


def test_similarity_save_load_plot(tiny, tmp_path):
    result = figure4_similarity(tiny, "apple", LENS_INSTRUCTION, LENS_MASK)
    figure = result.plot()
    assert isinstance(figure, go.Figure) and len(figure.data) > 0
    _check_saved(result.save(tmp_path), tmp_path)
    loaded = SimilarityResult.load(tmp_path)
    assert torch.equal(loaded.cosine, result.cosine)
    for name in ("model", "comparisons", "pairs", "hooks", "top1", "label_runs", "position"):
        assert getattr(loaded, name) == getattr(result, name), name
    pd.testing.assert_frame_equal(loaded.to_frame(), result.to_frame())
    pd.testing.assert_frame_equal(loaded.summary(), result.summary())


def test_top_tokens_save_load_plot(tiny, tmp_path):
    result = top_tokens(tiny, "apple", mask=lh.HeadMask.zeros(tiny), top_k=3)
    figure = result.plot()
    assert isinstance(figure, go.Figure) and len(figure.data) == 2
    _check_saved(result.save(tmp_path), tmp_path)
    loaded = TopTokensResult.load(tmp_path)
    for name in ("top_ids", "top_logits", "reference_ranks"):
        assert torch.equal(getattr(loaded, name), getattr(result, name)), name
    for name in ("model", "settings", "prompts", "reference", "tokens"):
        assert getattr(loaded, name) == getattr(result, name), name
    pd.testing.assert_frame_equal(loaded.to_frame(), result.to_frame())
    assert loaded.to_markdown() == result.to_markdown()


def test_load_refuses_a_foreign_or_missing_folder(tiny, tmp_path):
    top_tokens(tiny, "apple", top_k=2).save(tmp_path / "top")
    with pytest.raises(ValueError, match=r"not a readable lens_heads\.logit_lens/1 result"):
        LogitLensResult.load(tmp_path / "top")
    with pytest.raises(FileNotFoundError, match="saved result folder"):
        SimilarityResult.load(tmp_path / "nothing")


def test_top_overlap_counts_shared_tokens_by_hand():
    """Table 41's measure: per layer, the tokens two settings share among their top k."""
    import dataclasses

    import torch

    model = lh.tiny_model(n_layers=1, n_heads=4)
    lens = lh.logit_lens(model, "apple", instruction="Repeat.", top_k=3)
    planted = torch.tensor([[[1, 2, 3], [4, 5, 6]], [[3, 9, 1], [7, 8, 9]]])
    lens = dataclasses.replace(lens, top_ids=planted)
    assert lens.top_overlap("original", "instructed") == [2, 0]
    assert lens.top_overlap("instructed", "original") == [2, 0]
