"""Logit lens, Figure 4 similarity and Table 7 attention on the real models (issue 6)."""

from __future__ import annotations

import pytest
import torch

import lens_heads as lh
from lens_heads.cli import main
from lens_heads.core._capture import encode_prompt
from lens_heads.heads_up._attention import AttentionResult
from lens_heads.heads_up._lens import LogitLensResult, TopTokensResult
from lens_heads.heads_up._similarity import SimilarityResult
from tests.claims import LEVEL, lower_paired

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("fixture", ["smollm2", "gemma"])
def test_logit_lens_last_layer_is_the_models_output(request, fixture):
    """With the final norm applied (the reference code forgot it), the lens of the last layer
    is the model's own distribution -- on Gemma too (its norm and embedding scale differ)."""
    model = request.getfixturevalue(fixture)
    lens = lh.logit_lens(model, "The capital of France is", chat=False, top_k=3)
    tokens = torch.tensor([encode_prompt(model, "The capital of France is", chat=False).tokens])
    with torch.no_grad():
        probs = model(tokens)[0, -1].float().softmax(-1)
    top = probs.topk(3)
    torch.testing.assert_close(lens.top_probs[0, -1], top.values, atol=1e-4, rtol=1e-4)
    assert lens.top_ids[0, -1].tolist() == top.indices.tolist()
    print(f"\n{fixture}: {lens.top1_table().iloc[-6:].to_string()}")


def test_cli_logit_lens_and_top_tokens(demo_report, tmp_path):
    out = tmp_path / "lens"
    argv = ["logit-lens", "--model", "smollm2-135m-instruct", "--prompt", "apple"]
    argv += ["--mask", str(demo_report / "training"), "--target", "Apple"]
    argv += ["--instruction", "Capitalize the given word.", "--out", str(out)]
    assert main(argv) == 0
    lens = LogitLensResult.load(out)
    assert lens.settings == ["original", "instructed", "masked"]
    assert lens.layers[0] == "embed" and len(lens.layers) == 31
    table = TopTokensResult.load(out / "top_tokens")
    assert table.to_frame().query("setting == 'original'")["rank change"].eq(0).all()
    apple = lens.target_ids[0]
    # the mask raises 'Apple' at the last layer above the bare prompt
    assert lens.target_probs[2, -1, 0] > lens.target_probs[0, -1, 0]
    print(f"\nP('Apple') at the last layer: {lens.target_probs[:, -1, 0].tolist()} (id {apple})")


def test_cli_figure4_similarity(demo_report, tmp_path, capsys):
    out = tmp_path / "fig4"
    argv = ["similarity", "--model", "smollm2-135m-instruct", "--prompt", "apple"]
    argv += ["--instruction", "Capitalize the given word.", "--mask", str(demo_report / "training")]
    argv += ["--layers", "15-29", "--out", str(out)]
    assert main(argv) == 0
    print(capsys.readouterr().out[-700:])
    result = SimilarityResult.load(out)
    assert result.comparisons == [
        "original vs instructed",
        "masked vs instructed",
        "masked vs masked+instructed",
    ]
    assert result.cosine.shape == (3, 2, 30)
    assert bool(((result.cosine > -1.0001) & (result.cosine < 1.0001)).all())
    # the same last token: the runs agree most at the first layer, the instruction shows later
    assert bool((result.cosine[:, 0, 15:].mean(dim=-1) < result.cosine[:, 0, 0]).all())
    assert (out / "figure.html").is_file() and len(result.top1["masked"]) == 30


def test_cli_attention_table7_on_fruit_v_animal(demo_report, tmp_path):
    """Table 7's computation on an extractive task; the mask is the session's capitalize mask
    (the only one trained in CI), so the numbers illustrate the split M / 1-M, not Table 7."""
    out = tmp_path / "table7"
    argv = ["attention", "--model", "smollm2-135m-instruct", "--task", "fruit_v_animal_3"]
    argv += ["--n-eval", "20", "--mask", str(demo_report / "training"), "--out", str(out)]
    assert main(argv) == 0
    result = AttentionResult.load(out)
    assert result.settings == ["original", "instructed", "masked"]
    assert result.per_prompt.shape == (3, 20, 30, 9)
    assert bool(((result.per_prompt >= 0) & (result.per_prompt <= 1.0001)).all())
    means = result.means()
    print(f"\n{means.to_string()}")
    for setting in result.settings:
        scores = result.scores[result.settings.index(setting)]
        inside = scores[result.mask.selected].mean()
        assert means.loc[setting, "heads in M"] == pytest.approx(float(inside), rel=1e-5)
    # some head locates the answer word: chosen on the first 10 prompts, it attends to the word
    # more than the average head on each of the other 10 (paired test at tests.claims.LEVEL)
    original = result.per_prompt[0].flatten(1)  # [prompt, head]
    best = int(original[:10].mean(0).argmax())
    assert lower_paired(original[10:].mean(1).tolist(), original[10:, best].tolist()) < LEVEL
