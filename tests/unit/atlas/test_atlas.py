"""The head atlas on tiny models: each measure against an independent computation (TransformerLens'
own head detector, the OV product by hand, one hook per head), the agreement statistics, and the
atlas as a resumable result with its page."""

from __future__ import annotations

import base64
import json

import numpy as np
import pandas as pd
import pytest
import torch

import lens_heads as lh
from lens_heads.atlas import (
    AtlasConfig,
    DetectorConfig,
    EffectsConfig,
    HeadAtlas,
    agreement,
    chance_scores,
    detect_patterns,
    head_atlas,
    mean_head_outputs,
    ov_readout,
    plain_single_head_effects,
    relation_scores,
    single_head_effects,
    top_k_overlap,
)
from lens_heads.atlas._agreement import holm
from lens_heads.atlas._detectors import repeated_random_tokens
from tests.detector_reference import PATTERNS, transformer_lens_scores


@pytest.fixture(scope="module")
def gqa():
    return lh.tiny_model(n_layers=3, n_heads=4, n_kv_heads=2, seed=0)


# -- detectors -----------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1])
def test_detectors_equal_transformer_lens_head_detector_on_the_same_tokens(gqa, seed):
    config = DetectorConfig(n_sequences=1, length=9, seed=seed)
    ours = detect_patterns(gqa, config)
    tokens = repeated_random_tokens(gqa, config)
    for name in PATTERNS:
        theirs = transformer_lens_scores(gqa, tokens, name)
        torch.testing.assert_close(ours[name], theirs, rtol=1e-5, atol=1e-6)


def test_detector_sequences_repeat_their_block_and_chance_is_uniform_attention(gqa):
    tokens = repeated_random_tokens(gqa, DetectorConfig(n_sequences=3, length=5))
    assert tokens.shape == (3, 11) and torch.equal(tokens[:, 1:6], tokens[:, 6:])
    special = set(gqa.tokenizer.all_special_ids)
    assert not special & set(tokens[:, 1:].flatten().tolist())
    chance = chance_scores(gqa, DetectorConfig(n_sequences=3, length=5))
    # previous token: a row i >= 1 puts 1/(i+1) on i-1; averaged over the 11 rows of the matrix
    assert chance["previous token"] == pytest.approx(sum(1 / (i + 1) for i in range(1, 11)) / 11)
    assert chance["first-token sink"] == pytest.approx(chance["previous token"])


def test_a_model_too_short_for_the_sequences_is_refused_before_running(gqa):
    with pytest.raises(lh.LensHeadsError, match="exceed the model's context"):
        detect_patterns(gqa, DetectorConfig(length=int(gqa.cfg.n_ctx)))


# -- readouts ------------------------------------------------------------------------------------
def test_ov_readout_is_the_product_of_the_weights_by_hand(gqa):
    sources, targets = [10, 11, 12, 40], [10, 11, 12, 50, 60]
    found = ov_readout(gqa, sources, targets)
    for layer in range(3):
        for head in range(4):
            group = head // 2  # four query heads over two key-value heads
            x = gqa.W_E[sources] @ gqa.W_V[layer, group] @ gqa.W_O[layer, head]
            expected = gqa.ln_final(x) @ gqa.W_U[:, targets] + gqa.b_U[targets]
            torch.testing.assert_close(found[layer, head], expected.detach(), rtol=1e-4, atol=1e-5)


def test_a_relation_score_counts_pairs_whose_target_reads_highest(gqa):
    pairs = [(10, 20), (11, 21), (12, 22), (13, 20)]
    scores = relation_scores(gqa, {"r": pairs, "empty": []})
    logits = ov_readout(gqa, [s for s, _ in pairs], [20, 21, 22])
    expected = (logits.argmax(-1) == torch.tensor([0, 1, 2, 0])).float().mean(-1)
    torch.testing.assert_close(scores["r"], expected)
    assert torch.isnan(scores["empty"]).all()


# -- effects -------------------------------------------------------------------------------------
PROMPTS = ["the cat sat", "a dog ran far away", "hello", "one two three four five"]
ANSWERS = ["x", "y", "z", "w"]


def test_batched_single_head_effects_equal_one_hook_per_head(gqa):
    for batch_size in (1, 3):
        config = EffectsConfig(batch_size=batch_size)
        fast = single_head_effects(gqa, PROMPTS, ANSWERS, reference=PROMPTS[:2], config=config)
        plain = plain_single_head_effects(gqa, PROMPTS, ANSWERS, reference=PROMPTS[:2])
        for ablation in ("zero", "mean"):
            torch.testing.assert_close(fast[ablation], plain[ablation], rtol=1e-4, atol=1e-5)
            assert fast[ablation].abs().max() > 0, "some head moves the answer"
        assert not torch.allclose(fast["zero"], fast["mean"])


def test_mean_ablation_baseline_is_the_mean_of_z_over_real_positions_by_hand(gqa):
    from lens_heads.core._capture import encode_prompt

    found = mean_head_outputs(gqa, PROMPTS[:3], batch_size=2)
    rows = []
    for prompt in PROMPTS[:3]:  # one at a time: no padding to leave out
        ids = torch.tensor([encode_prompt(gqa, prompt).tokens])
        _, cache = gqa.run_with_cache(ids)
        rows.append(torch.stack([cache[f"blocks.{layer}.attn.hook_z"][0] for layer in range(3)]))
    z = torch.cat([r.transpose(0, 1) for r in rows])  # [positions, layer, head, d_head]
    torch.testing.assert_close(found, z.mean(dim=0), rtol=1e-4, atol=1e-6)


#: prompts that share their first tokens, as a task's rendered prompts do (template, instruction)
SHARED = ["the cat sat", "the cat ran far away", "the cat is", "the cat on the mat"]


@pytest.mark.parametrize("batch_size", [1, 3])
def test_the_shared_prefix_path_equals_one_hook_per_head(gqa, batch_size):
    config = EffectsConfig(batch_size=batch_size, shared_prefix=True)
    fast = single_head_effects(gqa, SHARED, ANSWERS, reference=SHARED[:2], config=config)
    plain = plain_single_head_effects(gqa, SHARED, ANSWERS, reference=SHARED[:2])
    for ablation in ("zero", "mean"):
        torch.testing.assert_close(fast[ablation], plain[ablation], rtol=1e-4, atol=1e-5)
        assert fast[ablation].abs().max() > 0
    with pytest.raises(lh.LensHeadsError, match="use shared_prefix=False"):
        resample = EffectsConfig(ablations=("resample",), shared_prefix=True)
        single_head_effects(gqa, SHARED, ANSWERS, reference=SHARED, config=resample)


#: a donor of each prompt's length for the resample ablation (byte tokens: one per character)
DONORS = [prompt[::-1] for prompt in PROMPTS]


def test_resample_ablation_batched_equals_plain_and_a_swap_by_hand(gqa):
    from lens_heads.core._capture import encode_prompt

    config = EffectsConfig(ablations=("resample",), batch_size=3)
    fast = single_head_effects(gqa, PROMPTS, ANSWERS, reference=DONORS, config=config)
    plain = plain_single_head_effects(gqa, PROMPTS, ANSWERS, reference=DONORS, config=config)
    torch.testing.assert_close(fast["resample"], plain["resample"], rtol=1e-4, atol=1e-5)
    # by hand, one prompt: head L1H2's z replaced by its z on the donor, at every position
    ids = torch.tensor([encode_prompt(gqa, PROMPTS[1]).tokens])
    donor = torch.tensor([encode_prompt(gqa, DONORS[1]).tokens])
    _, cache = gqa.run_with_cache(donor)
    swapped = cache["blocks.1.attn.hook_z"][:, :, 2]

    def swap(z, hook):
        z = z.clone()
        z[:, :, 2] = swapped
        return z

    answer = gqa.tokenizer.encode(ANSWERS[1], add_special_tokens=False)[0]
    full = gqa(ids)[0, -1, answer]
    removed = gqa.run_with_hooks(ids, fwd_hooks=[("blocks.1.attn.hook_z", swap)])[0, -1, answer]
    alone = single_head_effects(
        gqa, PROMPTS[1:2], ANSWERS[1:2], reference=DONORS[1:2], config=config
    )
    torch.testing.assert_close(alone["resample"][1, 2], (full - removed).float(), atol=1e-5, rtol=0)
    assert abs(float(full - removed)) > 1e-4, "the swap moves the answer"


def test_resample_ablation_needs_a_donor_of_each_length(gqa):
    config = EffectsConfig(ablations=("resample",))
    with pytest.raises(lh.LensHeadsError, match=r"prompt 2 has .* tokens and no reference prompt"):
        single_head_effects(gqa, PROMPTS, ANSWERS, reference=DONORS[:2], config=config)


def test_effects_refuse_bad_input_before_running(gqa):
    with pytest.raises(lh.LensHeadsError, match="one answer per prompt"):
        single_head_effects(gqa, PROMPTS, ANSWERS[:2])
    with pytest.raises(lh.LensHeadsError, match="mean ablation needs reference"):
        single_head_effects(gqa, PROMPTS, ANSWERS)
    with pytest.raises(lh.LensHeadsError, match="ablations must be some of"):
        EffectsConfig(ablations=("gaussian",))


# -- agreement -----------------------------------------------------------------------------------
def test_holm_matches_the_step_down_rule():
    rng = np.random.default_rng(0)
    for _ in range(30):
        p = rng.uniform(0, 0.05, size=int(rng.integers(1, 9)))
        order, m = np.argsort(p), len(p)
        rejected, stop = set(), False
        for rank, index in enumerate(order):
            if not stop and p[index] < 0.01 / (m - rank):
                rejected.add(int(index))
            else:
                stop = True
        assert {int(i) for i in np.flatnonzero(holm(p) < 0.01)} == rejected


def test_agreement_finds_related_measures_and_not_independent_ones():
    rng = np.random.default_rng(1)
    base = rng.normal(size=60)
    frame = pd.DataFrame(
        {"a": base, "b": base + 0.3 * rng.normal(size=60), "noise": rng.normal(size=60)}
    )
    table = agreement(frame, permutations=300, bootstrap=200).set_index(["first", "second"])
    assert table.loc[("a", "b"), "agree"] and table.loc[("a", "b"), "ci low"] > 0.5
    assert not table.loc[("a", "noise"), "agree"]
    assert table["p (Holm)"].ge(table["p"]).all()
    assert top_k_overlap(np.arange(10.0), np.arange(10.0), 3) == (3, 0.9)


@pytest.mark.parametrize("kind", ["continuous", "ties", "constant resamples"])
def test_the_bootstrap_interval_is_scipys_spearman_of_each_resample(kind):
    """The vectorized bootstrap equals :func:`scipy.stats.spearmanr` on each resample drawn one
    at a time from the same generator (ties averaged; NaN where a resample is constant), and
    leaves the generator where the one-at-a-time draws leave it."""
    import warnings

    from scipy import stats

    from lens_heads.atlas._agreement import _bootstrap

    rng = np.random.default_rng(3)
    a = rng.normal(size=40)
    b = a + rng.normal(size=40)
    if kind == "ties":
        a, b = np.round(a), np.round(b)
    if kind == "constant resamples":
        a, b = np.array([0.0, 0.0, 0.0, 1.0]), np.array([1.0, 2.0, 3.0, 4.0])
    one, block = np.random.default_rng(7), np.random.default_rng(7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy warns on each constant resample
        expected = np.array(
            [stats.spearmanr(a[i], b[i]).statistic for i in
             (one.integers(0, len(a), len(a)) for _ in range(300))]
        )  # fmt: skip
    found = _bootstrap(a, b, 300, block)
    assert np.array_equal(np.isnan(found), np.isnan(expected))
    assert np.allclose(found[~np.isnan(found)], expected[~np.isnan(expected)], atol=1e-12)
    assert (kind == "constant resamples") == bool(np.isnan(found).any())
    assert one.integers(0, 1000) == block.integers(0, 1000)


# -- the atlas -----------------------------------------------------------------------------------
def _config(**overrides):
    values = dict(
        task="capitalize", n_eval=4, n_reference=4, n_sequences=3, length=5, k=3,
        permutations=20, bootstrap=20, batch_size=4,
    )  # fmt: skip
    return AtlasConfig(**(values | overrides))


def test_the_atlas_joins_the_measures_resumes_and_reloads(gqa, tmp_path, monkeypatch):
    atlas = head_atlas(gqa, _config(), out=tmp_path)
    frame = atlas.to_frame()
    assert list(frame["label"][:3]) == ["L0H0", "L0H1", "L0H2"] and len(frame) == 12
    assert list(frame["kv group"][:4]) == [0, 0, 1, 1]
    assert {"previous token", "induction", "zero-ablation effect", "mean-ablation effect"} <= set(
        atlas.measures
    )
    assert frame["top OV tokens"].str.count(r" \| ").eq(7).all()
    reloaded = HeadAtlas.load(tmp_path / "atlas")
    pd.testing.assert_frame_equal(reloaded.frame, frame, check_dtype=False)
    torch.testing.assert_close(reloaded.example_attention, atlas.example_attention)
    # a second run reuses every stage; a lost stage (a killed run) is the only one computed again
    calls = []
    from lens_heads.atlas import _build as build

    original = build.single_head_effects
    monkeypatch.setattr(
        build, "single_head_effects", lambda *a, **k: calls.append(1) or original(*a, **k)
    )
    head_atlas(gqa, _config(), out=tmp_path)
    assert calls == []
    (tmp_path / "effects" / ".complete").unlink()
    again = head_atlas(gqa, _config(), out=tmp_path)
    assert calls == [1]
    pd.testing.assert_frame_equal(again.frame, frame, check_dtype=False)


def _page_data(page: str) -> dict:
    return json.loads(page.split('type="application/json">', 1)[1].split("</script>", 1)[0])


def test_the_page_carries_every_head_and_its_card(gqa, tmp_path):
    atlas = head_atlas(gqa, _config(task=None), out=tmp_path)
    folder = tmp_path / "atlas"
    page = (folder / "atlas.html").read_text()
    data = _page_data(page)
    assert data["labels"] == atlas.frame["label"].tolist()
    i = data["labels"].index("L2H3")
    assert (data["layer"][i], data["head"][i], data["kv"][i]) == (2, 3, 1)
    expected = float(atlas.frame.set_index("label").loc["L2H3", "previous token"])
    assert data["values"]["previous token"][i] == pytest.approx(expected, rel=1e-3)
    assert data["ranks"]["previous token"][i] == int(atlas.ranks()["previous token"][i])
    # the example attention comes back from its bytes to within one step of 1/255
    n = data["attention"]["n"]
    assert n == len(data["attention"]["tokens"]) == 11
    raw = np.frombuffer(base64.b64decode(data["attention"]["bytes"]), np.uint8)
    rows, cols = np.tril_indices(n)
    decoded = raw.reshape(len(data["labels"]), -1)[i] / 255
    truth = atlas.example_attention[2, 3].float().numpy()[rows, cols]
    assert np.abs(decoded - truth).max() <= 0.5 / 255 + 1e-6
    # every pair of the agreement table, and plotly.js once, beside the pages
    assert len(data["pairs"]) == len(atlas.agreement())
    assert 'src="plotly.min.js"' in page and "Plotly.newPlot" not in page.split("<script>")[0]
    assert (folder / "plotly.min.js").stat().st_size > 1_000_000
    assert (folder / "figure.html").stat().st_size < 100_000  # it loads the same plotly.min.js


def test_a_page_of_smollm2s_shape_stays_small():
    """The page of a 30-layer × 9-head atlas with fourteen measures and a 49-token example
    weighs well under 3 MB without plotly.js (the stored 0.2 page weighed 14 MB)."""
    rng = np.random.default_rng(0)
    layers, heads, n = 30, 9, 49
    frame = pd.DataFrame(
        {
            "label": [f"L{layer}H{head}" for layer in range(layers) for head in range(heads)],
            "layer": np.repeat(np.arange(layers), heads),
            "head": np.tile(np.arange(heads), layers),
            "kv group": np.tile(np.arange(heads) // 3, layers),
            **{f"measure {m}": rng.random(layers * heads) for m in range(14)},
            "top OV tokens": ["alpha beta gamma"] * (layers * heads),
        }
    )
    attention = torch.softmax(torch.randn(layers, heads, n, n), -1)
    atlas = HeadAtlas("shape", frame, example_tokens=["tok"] * n, example_attention=attention)
    table = pd.DataFrame(
        [{"first": "measure 0", "second": "measure 1", "spearman": 0.1, "ci low": 0.0,
          "ci high": 0.2, "p (Holm)": 0.5, "top-k overlap": 1, "random overlap": 0.4}]
    )  # fmt: skip
    page = atlas.to_html(plotly_js="plotly.min.js", agreement=table)
    assert len(page.encode()) < 1_000_000
    inline = atlas.to_html(agreement=table)
    assert len(inline.encode()) - len(page.encode()) > 3_000_000  # plotly.js, once


def test_the_research_lines_join_from_their_saved_results(gqa, tmp_path):
    masks = tmp_path / "masks"
    masks.mkdir()
    lh.HeadMask.from_heads(["L0H0", "L1H2"], n_layers=3, n_heads=4).save(masks / "a.safetensors")
    lh.HeadMask.from_heads(["L0H0"], n_layers=3, n_heads=4).save(masks / "b.safetensors")
    atlas = head_atlas(gqa, _config(task=None, masks=str(masks)))
    kept = atlas.frame.set_index("label")["Heads up! share of masks keeping it"]
    assert kept["L0H0"] == 1.0 and kept["L1H2"] == 0.5 and kept["L2H3"] == 0.0
    with pytest.raises(lh.LensHeadsError, match="does not exist"):
        AtlasConfig(scores=str(tmp_path / "missing"))


def test_top_ov_tokens_unembed_the_mean_normed_output(gqa):
    from lens_heads.atlas._readouts import top_ov_tokens

    sources = [10, 11, 12]
    vocab = list(range(int(gqa.cfg.d_vocab)))
    full = ov_readout(gqa, sources, vocab).mean(dim=2)  # mean of logits: linear after the norm
    torch.testing.assert_close(top_ov_tokens(gqa, sources, 5), full.topk(5, dim=-1).indices)


def test_the_cross_line_questions_read_their_columns():
    from analyses.head_atlas import questions

    n = 20
    labels = [f"L{i // 4}H{i % 4}" for i in range(n)]
    frame = pd.DataFrame(
        {
            "label": labels,
            "layer": [i // 4 for i in range(n)],
            "head": [i % 4 for i in range(n)],
            "kv group": [0] * n,
            "induction": [1.0 if i < 5 else 0.0 + i / 100 for i in range(n)],
            "Heads up! share of masks keeping it": [1.0 if i < 5 else 0.2 for i in range(n)],
            "translation score l1-l2": [float(n - i) for i in range(n)],
            "LAHIS specific to": ["fr" if i in (0, 1, 10) else "" for i in range(n)],
            "OV en→fr word": [float(n - i) for i in range(n)],
            "OV successor": [0.5 if i == 7 else 0.1 for i in range(n)],
        }
    )
    atlas = HeadAtlas("m", frame, chance={"OV successor": 0.125})
    found = questions(atlas)
    assert found["successor"]["best head"] == "L1H3" and found["successor"]["score"] == 0.5
    assert found["successor"]["heads at least twice chance"] == 1
    keep = found["masks keep the induction heads"]
    assert keep["share of masks keeping them (mean)"] == 1.0
    assert keep["p (kept more often, one-sided Mann-Whitney)"] < 0.01
    overlap = found["alignment heads are language-specific heads"]
    assert overlap["in both"] == 2 and overlap["expected at random"] == pytest.approx(5 * 3 / 20)
    assert found["OV en→fr predicts the translation score"]["spearman"] == pytest.approx(1.0)


def test_the_blocks_before_a_heads_layer_are_not_computed(gqa):
    """With start_at_layer the bridge would run every block; the effects run each layer's rows
    through the blocks from that layer on only (counted on the wrapped modules)."""
    calls = [0, 0, 0]
    handles = [
        block.original_component.register_forward_hook(
            lambda module, args, output, i=i: calls.__setitem__(i, calls[i] + 1)
        )
        for i, block in enumerate(gqa.blocks)
    ]
    try:
        single_head_effects(
            gqa, PROMPTS[:2], ANSWERS[:2], config=EffectsConfig(ablations=("zero",), batch_size=8)
        )
    finally:
        for handle in handles:
            handle.remove()
    # one full forward for the cache, then layer l's rows run blocks l.. only
    assert calls == [1 + 1, 1 + 2, 1 + 3]


def test_the_permutation_p_is_fine_enough_for_holm_over_every_pair():
    """Fourteen measures make 91 pairs: a p-value of 1 / 2001 cannot pass Holm at 0.01, so the
    table permutes at least 2 x 91 / 0.01 times; strongly related measures then agree."""
    rng = np.random.default_rng(2)
    base = rng.normal(size=200)
    frame = pd.DataFrame({f"m{i}": base + 0.2 * rng.normal(size=200) for i in range(14)})
    table = agreement(frame, permutations=50, bootstrap=20)
    assert len(table) == 91 and table["permutations"].min() >= 18200
    assert table["p (Holm)"].max() <= 0.005 + 1e-9
    assert table["agree"].all()
    # the vectorized permutation p matches a loop over scipy's spearmanr
    from scipy import stats

    from lens_heads.atlas._agreement import _permutation_p

    a, b = base[:40], base[:40] + rng.normal(size=40)
    rho = stats.spearmanr(a, b).statistic
    fast = _permutation_p(a, b, rho, 4000, np.random.default_rng(0))
    slow_rng = np.random.default_rng(1)
    slow = (
        sum(
            abs(stats.spearmanr(a, slow_rng.permutation(b)).statistic) >= abs(rho)
            for _ in range(4000)
        )
        + 1
    ) / 4001
    assert fast == pytest.approx(slow, abs=0.01)


def test_the_figures_menu_retitles_in_the_form_plotly_js_reads():
    """plotly.js 3 ignores a title given as a bare string in a menu's update: each button sets
    ``{"title": {"text": ...}}``, the measure's name and the model's."""
    atlas = HeadAtlas.example()
    figure = atlas.plot()
    assert figure.layout.title.text == "previous token (example)"
    for button, measure in zip(figure.layout.updatemenus[0].buttons, atlas.measures, strict=True):
        assert button.args[1]["title"] == {"text": f"{measure} (example)"}
