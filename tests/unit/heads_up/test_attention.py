"""Unit tests of attention on target (Heads up! Table 7) on a tiny model."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import pytest
import torch

import lens_heads as lh
from lens_heads.core._hooks import maybe_mask
from lens_heads.core._masks import MaskShapeError
from lens_heads.heads_up._attention import (
    AttentionResult,
    attention_on_target,
    extractive_targets,
    target_token_span,
)

# prompts of different lengths (right-padded together), each with its target word
PROMPTS = [
    "pear, dog, cat",
    "a much longer list: horse, cow, sheep, banana, goat, hen",
    "fig, ox",
]
TARGETS = ["pear", "banana", "fig"]
INSTRUCTION = "Output the fruit."
SETTINGS = ["original", "instructed", "masked"]


def _mask() -> lh.HeadMask:
    return lh.HeadMask.from_heads(["L0H1", "L1H2", "L1H3"], n_layers=2, n_heads=4)


def hand_scores(model, prompts, targets, *, instruction=None, mask=None) -> torch.Tensor:
    """``[prompt, layer, head]``: the final query's attention summed over the target's tokens,
    from ``run_with_cache`` on each prompt alone (masked runs inside ``apply_mask``)."""
    n_layers = int(model.cfg.n_layers)
    rows = []
    for prompt, target in zip(prompts, targets, strict=True):
        tokens, (lo, hi) = target_token_span(model, prompt, target, instruction=instruction)
        with torch.no_grad(), maybe_mask(model, mask):
            _, cache = model.run_with_cache(torch.tensor([tokens]))
        rows.append(
            torch.stack(
                [
                    cache[f"blocks.{layer}.attn.hook_pattern"][0, :, -1, lo:hi].sum(dim=-1)
                    for layer in range(n_layers)
                ]
            )
        )
    return torch.stack(rows).float()


@pytest.fixture(scope="module")
def result(tiny) -> AttentionResult:
    """Three prompts of different lengths, batch_size 2 (< 3 prompts), all three settings."""
    return attention_on_target(
        tiny, PROMPTS, TARGETS, mask=_mask(), instruction=INSTRUCTION, batch_size=2
    )


# -- the scores are the hook_pattern sums -------------------------------------------------------
def test_settings_and_shapes(result):
    assert result.settings == SETTINGS
    assert result.per_prompt.shape == (3, len(PROMPTS), 2, 4)
    assert result.scores.shape == (3, 2, 4)
    assert result.prompts == PROMPTS
    assert result.targets == TARGETS
    assert bool(((result.per_prompt >= 0) & (result.per_prompt <= 1 + 1e-5)).all())
    assert bool((result.per_prompt > 0).all())  # the final query sees every earlier token


@pytest.mark.parametrize(
    ("setting", "instruction", "masked"),
    [("original", None, False), ("instructed", INSTRUCTION, False), ("masked", None, True)],
)
def test_per_prompt_equals_hand_computation_from_hook_pattern(
    tiny, result, setting, instruction, masked
):
    expected = hand_scores(
        tiny, PROMPTS, TARGETS, instruction=instruction, mask=_mask() if masked else None
    )
    s = result.settings.index(setting)
    torch.testing.assert_close(result.per_prompt[s], expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(result.scores[s], expected.mean(dim=0), atol=1e-5, rtol=1e-5)
    # the recorded spans are the ones target_token_span gives for this setting
    for i, (prompt, target) in enumerate(zip(PROMPTS, TARGETS, strict=True)):
        _, span = target_token_span(tiny, prompt, target, instruction=instruction)
        assert tuple(result.spans[s][i]) == span


def test_mask_changes_only_the_later_layers_attention(result):
    original = result.per_prompt[result.settings.index("original")]
    masked = result.per_prompt[result.settings.index("masked")]
    # a head mask on hook_z cannot change layer 0's own pattern, but it changes layer 1's input
    torch.testing.assert_close(masked[:, 0], original[:, 0], atol=1e-6, rtol=1e-6)
    assert not torch.allclose(masked[:, 1], original[:, 1], atol=1e-4)
    instructed = result.per_prompt[result.settings.index("instructed")]
    assert not torch.allclose(instructed, original, atol=1e-4)


def test_batching_equals_single_runs(tiny, result):
    batched_one = attention_on_target(
        tiny, PROMPTS, TARGETS, mask=_mask(), instruction=INSTRUCTION, batch_size=1
    )
    torch.testing.assert_close(batched_one.per_prompt, result.per_prompt, atol=1e-5, rtol=1e-5)
    for i, (prompt, target) in enumerate(zip(PROMPTS, TARGETS, strict=True)):
        alone = attention_on_target(
            tiny, prompt, target, mask=_mask(), instruction=INSTRUCTION, settings=SETTINGS
        )
        assert alone.per_prompt.shape == (3, 1, 2, 4)
        torch.testing.assert_close(
            alone.per_prompt[:, 0], result.per_prompt[:, i], atol=1e-5, rtol=1e-5
        )


def test_masked_plus_instructed_on_request(tiny):
    mask = _mask()
    result = attention_on_target(
        tiny,
        PROMPTS[:2],
        TARGETS[:2],
        mask=mask,
        instruction=INSTRUCTION,
        settings=["masked+instructed", "original"],
    )
    assert result.settings == ["masked+instructed", "original"]
    expected = hand_scores(tiny, PROMPTS[:2], TARGETS[:2], instruction=INSTRUCTION, mask=mask)
    torch.testing.assert_close(result.per_prompt[0], expected, atol=1e-5, rtol=1e-5)


def test_default_settings_follow_the_arguments(tiny):
    assert attention_on_target(tiny, "pear, dog", "pear").settings == ["original"]
    assert attention_on_target(tiny, "pear, dog", "pear", instruction="X.").settings == [
        "original",
        "instructed",
    ]
    masked = attention_on_target(tiny, "pear, dog", "pear", mask=lh.HeadMask.ones(tiny))
    assert masked.settings == ["original", "masked"]
    # an all-ones mask changes nothing
    torch.testing.assert_close(masked.per_prompt[1], masked.per_prompt[0])


# -- Table 7 means ------------------------------------------------------------------------------
def test_means_average_the_per_head_scores(result):
    mask = _mask()
    means = result.means()
    assert list(means.columns) == ["all heads", "heads in M", "heads in 1-M"]
    assert list(means.index) == SETTINGS
    inside = mask.heads
    every = [(layer, head) for layer in range(2) for head in range(4)]
    outside = [pair for pair in every if pair not in inside]
    assert len(inside) == 3 and len(outside) == 5
    for s, setting in enumerate(SETTINGS):
        scores = result.scores[s]
        all_heads = sum(float(scores[layer, head]) for layer in range(2) for head in range(4)) / 8
        in_m = sum(float(scores[layer, head]) for layer, head in inside) / len(inside)
        out_m = sum(float(scores[layer, head]) for layer, head in outside) / len(outside)
        assert means.loc[setting, "all heads"] == pytest.approx(all_heads, abs=1e-6)
        assert means.loc[setting, "heads in M"] == pytest.approx(in_m, abs=1e-6)
        assert means.loc[setting, "heads in 1-M"] == pytest.approx(out_m, abs=1e-6)
    # the markdown table carries the same numbers
    markdown = result.to_markdown()
    assert "heads in M" in markdown and f"{means.iloc[0, 0]:.4f}" in markdown


def test_means_without_mask_have_only_all_heads(tiny):
    result = attention_on_target(tiny, PROMPTS[:2], TARGETS[:2])
    means = result.means()
    assert list(means.columns) == ["all heads"]
    assert means.loc["original", "all heads"] == pytest.approx(float(result.scores[0].mean()))


def test_to_frame_and_top_heads(result):
    frame = result.to_frame()
    assert len(frame) == 3 * 8
    assert set(frame.columns) >= {"setting", "layer", "head", "label", "score", "in_mask"}
    row = frame[(frame["setting"] == "masked") & (frame["label"] == "L1H2")].iloc[0]
    assert row["score"] == pytest.approx(float(result.scores[2, 1, 2]))
    assert bool(row["in_mask"]) is True
    top = result.top_heads("instructed", k=3)
    assert len(top) == 3
    best = result.scores[1].flatten().topk(3).values.tolist()
    assert top["score"].tolist() == pytest.approx(best)


# -- targets --------------------------------------------------------------------------------------
@pytest.mark.parametrize("chat", [None, False])
def test_word_and_character_span_give_the_same_result(tiny, chat):
    prompts = ["dog, pear, cat", "hen, fig"]
    words = ["pear", "fig"]
    spans = [(5, 9), (5, 8)]
    for prompt, word, (start, end) in zip(prompts, words, spans, strict=True):
        assert prompt[start:end] == word
    by_word = attention_on_target(tiny, prompts, words, instruction=INSTRUCTION, chat=chat)
    by_span = attention_on_target(tiny, prompts, spans, instruction=INSTRUCTION, chat=chat)
    assert by_word.spans == by_span.spans
    torch.testing.assert_close(by_word.per_prompt, by_span.per_prompt)
    assert by_span.targets == ["5:9", "5:8"]


@pytest.mark.parametrize("instruction", [None, INSTRUCTION])
@pytest.mark.parametrize("chat", [None, False])
def test_a_word_of_several_tokens_covers_all_of_them(tiny, instruction, chat):
    for prompt, word in [("dog, pear, cat", "pear"), ("strawberry, ox", "strawberry")]:
        tokens, (lo, hi) = target_token_span(tiny, prompt, word, instruction=instruction, chat=chat)
        assert hi - lo > 1  # byte-level tokenizer: one token per letter
        assert tiny.tokenizer.decode(tokens[lo:hi]) == word
        # the tokens just outside the span are not part of the word
        assert word not in tiny.tokenizer.decode(tokens[lo + 1 : hi + 1])
        assert word not in tiny.tokenizer.decode(tokens[lo - 1 : hi - 1])


def test_target_word_prefers_a_whole_word_occurrence(tiny):
    prompt = "concatenate, cat"
    _, by_word = target_token_span(tiny, prompt, "cat", chat=False)
    _, by_span = target_token_span(tiny, prompt, (13, 16), chat=False)
    assert prompt[13:16] == "cat"
    assert by_word == by_span
    # the instruction's own words are not confused with the input's
    tokens, (lo, _) = target_token_span(tiny, "pear, dog", "pear", instruction="Output pear.")
    text = tiny.tokenizer.decode(tokens)
    assert text.index("pear") < text.index("pear, dog")  # the instruction has "pear" first
    assert tiny.tokenizer.decode(tokens[lo:]).startswith("pear, dog")


def test_a_single_prompt_and_span_target(tiny):
    result = attention_on_target(tiny, "dog, pear", (5, 9))
    assert result.per_prompt.shape == (1, 1, 2, 4)
    expected = hand_scores(tiny, ["dog, pear"], ["pear"])
    torch.testing.assert_close(result.per_prompt[0], expected, atol=1e-5, rtol=1e-5)


# -- bad input ------------------------------------------------------------------------------------
def test_bad_inputs_raise_clear_errors(tiny):
    with pytest.raises(ValueError, match=r"target 'kiwi' does not occur in the prompt"):
        attention_on_target(tiny, ["pear, dog"], ["kiwi"])
    with pytest.raises(ValueError, match=r"span \(3, 99\) is outside the prompt of 9 characters"):
        attention_on_target(tiny, ["pear, dog"], [(3, 99)])
    with pytest.raises(ValueError, match=r"span \(5, 2\) is outside the prompt"):
        attention_on_target(tiny, "pear, dog", (5, 2))
    with pytest.raises(ValueError, match="prompt is empty"):
        attention_on_target(tiny, [""], ["pear"])
    with pytest.raises(ValueError, match="prompt is empty"):
        attention_on_target(tiny, ["pear, dog", "   "], ["pear", "dog"])
    with pytest.raises(ValueError, match="no prompts given"):
        attention_on_target(tiny, [], [])
    with pytest.raises(ValueError, match="2 prompts but 1 targets"):
        attention_on_target(tiny, ["pear, dog", "fig, ox"], ["pear"])
    with pytest.raises(ValueError, match="1 prompts but 2 targets"):
        attention_on_target(tiny, ["pear, dog"], ["pear", "dog"])
    with pytest.raises(ValueError, match="target word is empty"):
        attention_on_target(tiny, ["pear, dog"], [""])
    with pytest.raises(MaskShapeError, match="use a mask made for this model"):
        attention_on_target(tiny, ["pear, dog"], ["pear"], mask=lh.HeadMask.ones(3, 4))
    with pytest.raises(ValueError, match="'masked' needs mask="):
        attention_on_target(tiny, ["pear, dog"], ["pear"], settings=["masked"])
    with pytest.raises(ValueError, match="'instructed' needs instruction="):
        attention_on_target(tiny, ["pear, dog"], ["pear"], settings=["instructed"])
    with pytest.raises(ValueError, match="batch_size must be at least 1, got 0"):
        attention_on_target(tiny, ["pear, dog"], ["pear"], batch_size=0)
    with pytest.raises(ValueError, match="'batch_siz' \\(did you mean 'batch_size'"):
        attention_on_target(tiny, ["pear, dog"], ["pear"], batch_siz=4)


def test_target_token_span_bad_inputs(tiny):
    with pytest.raises(ValueError, match="does not occur in the prompt"):
        target_token_span(tiny, "pear, dog", "kiwi")
    with pytest.raises(ValueError, match=r"span \(0, 10\) is outside the prompt of 9 characters"):
        target_token_span(tiny, "pear, dog", (0, 10))


# -- extractive tasks ----------------------------------------------------------------------------
def test_extractive_targets_of_fruit_v_animal(tiny):
    prompts, targets = extractive_targets(lh.get_task("fruit_v_animal_3"), n=5)
    assert len(prompts) == len(targets) == 5
    for prompt, target in zip(prompts, targets, strict=True):
        assert target and target in prompt
    result = attention_on_target(tiny, prompts, targets, instruction=INSTRUCTION, batch_size=2)
    assert result.per_prompt.shape == (2, 5, 2, 4)
    assert bool(torch.isfinite(result.per_prompt).all())
    assert bool(((result.per_prompt > 0) & (result.per_prompt <= 1 + 1e-5)).all())
    for s, instruction in enumerate([None, INSTRUCTION]):
        for i, (prompt, target) in enumerate(zip(prompts, targets, strict=True)):
            tokens, _ = target_token_span(tiny, prompt, target, instruction=instruction)
            lo, hi = result.spans[s][i]
            assert tiny.tokenizer.decode(tokens[lo:hi]) == target
    expected = hand_scores(tiny, prompts, targets)
    torch.testing.assert_close(result.per_prompt[0], expected, atol=1e-5, rtol=1e-5)


def test_extractive_targets_all_and_not_extractive():
    task = lh.get_task("fruit_v_animal_3")
    prompts, targets = extractive_targets(task)
    assert len(prompts) == len(task.examples)
    assert extractive_targets(task, n=3) == (prompts[-3:], targets[-3:])
    with pytest.raises(ValueError, match="not extractive"):
        extractive_targets(lh.get_task("capitalize"))


# -- save / load / plot ---------------------------------------------------------------------------
def test_save_load_round_trip_with_mask(result, tmp_path):
    written = result.save(tmp_path / "attention")
    names = {path.name for path in written}
    assert {"table.csv", "table.md", "result.json", "tensors.safetensors", "figure.html"} <= names
    assert (tmp_path / "attention" / "figure.html").stat().st_size > 0
    loaded = AttentionResult.load(tmp_path / "attention")
    assert torch.equal(loaded.per_prompt, result.per_prompt)
    assert loaded.mask == result.mask
    assert (loaded.model, loaded.settings, loaded.prompts, loaded.targets) == (
        result.model,
        result.settings,
        result.prompts,
        result.targets,
    )
    assert loaded.spans == [[tuple(span) for span in row] for row in result.spans]
    pd.testing.assert_frame_equal(loaded.to_frame(), result.to_frame())
    pd.testing.assert_frame_equal(loaded.means(), result.means())
    # a folder of another result type is refused
    with pytest.raises(ValueError, match="not a readable"):
        lh.lens.LogitLensResult.load(tmp_path / "attention")


def test_save_load_round_trip_without_mask(tiny, tmp_path):
    result = attention_on_target(tiny, PROMPTS[:2], [(0, 4), "banana"])
    result.save(tmp_path)
    loaded = AttentionResult.load(tmp_path)
    assert loaded.mask is None
    assert loaded.targets == ["0:4", "banana"]
    torch.testing.assert_close(loaded.per_prompt, result.per_prompt, rtol=0, atol=0)
    pd.testing.assert_frame_equal(loaded.means(), result.means())


def test_plot_is_a_figure_with_one_panel_per_setting(result):
    figure = result.plot()
    assert isinstance(figure, go.Figure)
    heatmaps = [trace for trace in figure.data if trace.type == "heatmap"]
    assert len(heatmaps) == 3
    assert torch.allclose(torch.tensor(heatmaps[2].z), result.scores[2])


def test_errors_name_the_prompt_at_fault(tiny):
    with pytest.raises(ValueError, match=r"prompt 1 \('fig, ox'\): target 'kiwi' does not occur"):
        attention_on_target(tiny, ["pear, dog", "fig, ox"], ["pear", "kiwi"])
    with pytest.raises(ValueError, match=r"prompt 2 \('hen, ox'\): span \(3, 99\) is outside"):
        attention_on_target(tiny, ["pear, dog", "fig, ox", "hen, ox"], ["pear", "fig", (3, 99)])


def test_targets_as_a_tuple_of_words_or_spans(tiny):
    prompts = ["pear, dog", "hen, fig"]
    as_list = attention_on_target(tiny, prompts, ["pear", "fig"])
    words = attention_on_target(tiny, prompts, ("pear", "fig"))
    spans = attention_on_target(tiny, prompts, ((0, 4), (5, 8)))
    torch.testing.assert_close(words.per_prompt, as_list.per_prompt)
    torch.testing.assert_close(spans.per_prompt, as_list.per_prompt)
    assert words.targets == ["pear", "fig"]


def test_save_load_keeps_the_mask_alpha(tiny, tmp_path):
    mask = _mask().with_alpha(0.25)
    result = attention_on_target(tiny, "pear, dog", "pear", mask=mask)
    result.save(tmp_path)
    loaded = AttentionResult.load(tmp_path)
    assert loaded.mask is not None and loaded.mask.alpha == 0.25
    assert loaded.mask == mask
    torch.testing.assert_close(loaded.per_prompt, result.per_prompt, rtol=0, atol=0)
