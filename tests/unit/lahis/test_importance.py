"""LAHIS on the tiny model: gradient importance, language heads, scales, soft masks (issue 14)."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

import lens_heads as lh
from lens_heads.core._language_id import identify_language
from lens_heads.core._masks import HeadMask, MaskFileError, MaskShapeError
from lens_heads.core._models import model_name
from lens_heads.core._scales import HeadScale, ScaleValueError
from lens_heads.core._tasks import Example, Task
from lens_heads.lahis._importance import (
    HeadImportance,
    ImportanceInputError,
    document_losses,
    head_importance,
    scores_from_gradients,
)
from lens_heads.lahis._language_experiments import (
    PerplexityExperiment,
    TransferResult,
    perplexity_experiment,
    transfer_scale,
)
from lens_heads.lahis._languages import (
    LanguageHeads,
    language_heads,
    load_texts_by_language,
    select_language_heads,
)

TEXTS = [
    "the cat sat on the mat",
    "a dog",
    "colourless green ideas sleep furiously tonight",
    "hello world",
    "one two three four five",
]


@pytest.fixture(scope="module")
def model():
    return lh.tiny_model(n_layers=2, n_heads=4, n_kv_heads=2, seed=0)


# -- importance ------------------------------------------------------------------------------
def test_gradient_equals_finite_difference(model):
    result = head_importance(model, TEXTS[:2], precision="float32", batch_size=1, progress=False)
    eps = 1e-2
    for doc in range(2):
        for layer, head in [(0, 0), (0, 3), (1, 1), (1, 2)]:

            def loss(value: float, doc: int = doc, layer: int = layer, head: int = head) -> float:
                mask = torch.ones(2, 4)
                mask[layer, head] = value
                return float(document_losses(model, [TEXTS[doc]], mask=mask, dtype="float32")[0])

            estimate = (loss(1 + eps) - loss(1 - eps)) / (2 * eps)
            assert result.gradients[doc, layer, head].item() == pytest.approx(
                estimate, rel=0.03, abs=2e-4
            )


def test_batched_equals_batch_one(model):
    alone = head_importance(model, TEXTS, precision="float32", batch_size=1, progress=False)
    batched = head_importance(model, TEXTS, precision="float32", batch_size=5, progress=False)
    by_tokens = head_importance(model, TEXTS, precision="float32", progress=False)
    assert (alone.gradients - batched.gradients).abs().max() <= 1e-5
    assert (alone.gradients - by_tokens.gradients).abs().max() <= 1e-5
    assert (alone.losses - batched.losses).abs().max() <= 1e-5
    assert alone.gradients.abs().max() > 1e-4  # the comparison is not of zeros


def test_no_weight_gradient_and_requires_grad_restored(model):
    parameters = list(model.parameters())
    before = [p.requires_grad for p in parameters]
    parameters[0].requires_grad_(True)
    try:
        head_importance(model, TEXTS[:3], precision="float32", progress=False)
        assert all(p.grad is None for p in parameters)
        assert parameters[0].requires_grad
    finally:
        for parameter, flag in zip(parameters, before, strict=True):
            parameter.requires_grad_(flag)


def test_inside_no_grad_still_works(model):
    outside = head_importance(model, TEXTS[:3], precision="float32", progress=False)
    with torch.no_grad():
        inside = head_importance(model, TEXTS[:3], precision="float32", progress=False)
    torch.testing.assert_close(inside.gradients, outside.gradients, atol=1e-7, rtol=1e-6)
    torch.testing.assert_close(inside.losses, outside.losses, atol=1e-7, rtol=1e-6)
    assert torch.equal(inside.scores.argsort(), outside.scores.argsort())
    assert bool(outside.gradients.ne(0).all()), "every head has a gradient to compare"


def test_scores_by_method_hand_computed():
    g = torch.tensor([[[-1.0, 2.0]], [[-3.0, -2.0]], [[1.0, -2.0]]])
    assert scores_from_gradients(g, "abs_grad").tolist() == [[pytest.approx(5 / 3), 2.0]]
    assert scores_from_gradients(g, "taylor").tolist() == [
        [pytest.approx(-1.0), pytest.approx(-2 / 3)]
    ]
    lahis = scores_from_gradients(g, "lahis")
    assert lahis[0, 0].item() == pytest.approx(5 / 3 * 2 / 3)
    assert lahis[0, 1].item() == pytest.approx(2.0 * 2 / 3)


def test_result_views_and_round_trip(model, tmp_path):
    result = head_importance(model, TEXTS, method="abs_grad", precision="float32", progress=False)
    frame = result.to_frame()
    assert list(frame["label"][:3]) == result.top(3)
    assert frame["score"].is_monotonic_decreasing
    assert result.mask(2).n_selected == 2
    assert [t.type for t in result.plot_heatmap().data] == ["heatmap"]
    result.save(tmp_path / "imp")
    loaded = HeadImportance.load(tmp_path / "imp")
    assert torch.equal(loaded.scores, result.scores) and loaded.method == "abs_grad"
    assert torch.equal(
        loaded.with_method("taylor").scores, scores_from_gradients(result.gradients, "taylor")
    )
    assert (tmp_path / "imp" / "figure.html").is_file()


@pytest.mark.parametrize(
    ("texts", "match"),
    [([], "empty"), (["ok text", "  "], "document 1 is empty"), ("one string", "not one string")],
)
def test_bad_texts(model, texts, match):
    with pytest.raises(ImportanceInputError, match=match):
        head_importance(model, texts, progress=False)


def test_bad_method_and_batch(model):
    with pytest.raises(ImportanceInputError, match="method must be one of"):
        head_importance(model, TEXTS, method="fisher", progress=False)
    with pytest.raises(lh.LensHeadsError, match="batch_size must be at least 1, got 0"):
        head_importance(model, TEXTS, batch_size=0, progress=False)
    with pytest.raises(ImportanceInputError, match="k must lie"):
        HeadImportance.example().top(99)


# -- language heads -----------------------------------------------------------------------
def _hand_scores() -> torch.Tensor:
    # 3 languages, 2 x 3 heads; quantile 0.5 of 6 values -> the 3 largest are strictly above
    return torch.tensor(
        [
            [[9.0, 8.0, 7.0], [1.0, 2.0, 3.0]],  # en: L0H0 L0H1 L0H2
            [[9.0, 1.0, 2.0], [8.0, 3.0, 7.0]],  # fr: L0H0 L1H0 L1H2
            [[9.0, 1.0, 2.0], [3.0, 8.0, 7.0]],  # de: L0H0 L1H1 L1H2
        ]
    )


def test_quantile_and_min_languages_rules_hand_computed():
    result = LanguageHeads(
        ["en", "fr", "de"], _hand_scores(), quantile=0.5, min_languages=2, method="x", model="m"
    )
    assert result.general_labels == ["L0H0", "L1H2"]
    assert result.specific == {"en": ["L0H1", "L0H2"], "fr": ["L1H0"], "de": ["L1H1"]}
    strict = result.__class__(
        ["en", "fr", "de"], _hand_scores(), quantile=0.5, min_languages=3, method="x", model="m"
    )
    assert strict.general_labels == ["L0H0"]
    assert strict.specific["fr"] == ["L1H0", "L1H2"]


def test_strictly_above_the_quantile():
    scores = torch.tensor([[[1.0, 1.0], [1.0, 2.0]]])
    thresholds, sets = select_language_heads(scores, 0.5, 1)
    assert thresholds.tolist() == [1.0]
    assert sets.flatten().tolist() == [False, False, False, True]  # ties at the quantile: out


def test_language_heads_end_to_end_and_round_trip(model, tmp_path):
    texts = {"en": TEXTS[:3], "fr": ["le chat", "un chien noir"], "de": ["der Hund", "die Katze"]}
    result = language_heads(model, texts, quantile=0.75, min_languages=2, progress=False)
    assert result.scores.shape == (3, 2, 4)
    assert result.n_docs == {"en": 3, "fr": 2, "de": 2}
    frame = result.to_frame()
    assert len(frame) == 3 * 8 and set(frame["kind"]) <= {"", "specific", "general"}
    assert set(result.summary()["language"]) == {"en", "fr", "de"}
    figure = result.plot()
    assert sum(t.type == "heatmap" for t in figure.data) == 3
    result.save(tmp_path / "lh")
    loaded = LanguageHeads.load(tmp_path / "lh")
    assert loaded.specific == result.specific and loaded.general_labels == result.general_labels
    assert result.specific_mask("en").labels == result.specific["en"]


def test_language_texts_from_folder_and_tsv(tmp_path):
    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "en.txt").write_text("one\n\ntwo\n", encoding="utf-8")
    (folder / "fr.txt").write_text("un\n", encoding="utf-8")
    assert load_texts_by_language(folder) == {"en": ["one", "two"], "fr": ["un"]}
    tsv = tmp_path / "p.tsv"
    tsv.write_text("en\tde\nthe cat\tdie Katze\n", encoding="utf-8")
    assert load_texts_by_language(tsv) == {"en": ["the cat"], "de": ["die Katze"]}
    builtin = load_texts_by_language()
    assert list(builtin) == ["en", "fr", "es", "de", "zh"]


def test_language_heads_bad_input(model, tmp_path):
    texts = {"en": ["a b c"], "fr": ["d e f"]}
    with pytest.raises(ImportanceInputError, match="min_languages=4 exceeds the 2 language"):
        language_heads(model, texts, progress=False)
    for quantile in (0.0, 1.0, 1.5, -0.1):
        with pytest.raises(ImportanceInputError, match=r"quantile must lie in \(0, 1\)"):
            language_heads(model, texts, quantile=quantile, min_languages=1, progress=False)
    with pytest.raises(ImportanceInputError, match="no languages given"):
        language_heads(model, {}, min_languages=1, progress=False)
    with pytest.raises(ImportanceInputError, match="language 'fr' has no documents"):
        language_heads(model, {"en": ["a"], "fr": []}, min_languages=1, progress=False)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ImportanceInputError, match="holds no language files"):
        load_texts_by_language(empty)
    with pytest.raises(FileNotFoundError, match="neither a folder"):
        load_texts_by_language(tmp_path / "missing.tsv")


# -- scales ---------------------------------------------------------------------------------
def test_scale_three_multiplies_hook_z_by_three(model):
    tokens = model.to_tokens("hello there")
    captured: dict[str, torch.Tensor] = {}

    def capture(z, hook):
        captured["z"] = z.detach().clone()

    name = "blocks.0.attn.hook_z"
    model.run_with_hooks(tokens, fwd_hooks=[(name, capture)])
    plain = captured["z"]
    scale = HeadScale.from_heads(["L0H2"], n_layers=2, n_heads=4, factor=3.0)
    model.run_with_hooks(tokens, fwd_hooks=[*lh.mask_hooks(scale, model), (name, capture)])
    scaled = captured["z"]
    torch.testing.assert_close(scaled[:, :, 2], 3 * plain[:, :, 2])
    torch.testing.assert_close(scaled[:, :, [0, 1, 3]], plain[:, :, [0, 1, 3]])


def test_scale_round_trip_and_mask_refuses_it(tmp_path):
    scale = HeadScale.ones(2, 4).scaled(["L0H1"], 5.0).scaled(["L1H0"], 0.0)
    assert scale.changed == ["L0H1", "L1H0"]
    path = scale.save(tmp_path / "scale.safetensors")
    assert HeadScale.load(path) == scale
    with pytest.raises(ValueError, match=r"must lie in \[0, 1\]"):
        HeadMask.load(path)  # a 0/1 mask is meant: the [0, 1] check stays
    mask = HeadMask.from_heads(["L0H0"], n_layers=2, n_heads=4).with_alpha(0.5)
    assert HeadScale.from_mask(mask).values[1, 1].item() == 0.5
    assert (scale * HeadScale.from_mask(mask)).values[0, 1].item() == 2.5


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, -math.inf])
def test_scale_rejects_negative_nan_inf(bad):
    with pytest.raises(ScaleValueError, match="finite"):
        HeadScale(torch.tensor([[1.0, bad]]))
    with pytest.raises(ScaleValueError, match="finite number >= 0"):
        HeadScale.ones(1, 2).scaled(["L0H0"], bad)


def test_scale_bad_alpha_and_shapes():
    with pytest.raises(ScaleValueError, match="has no alpha"):
        HeadScale(torch.ones(1, 2), alpha=0.5)
    with pytest.raises(MaskShapeError, match="different models"):
        HeadScale.ones(2, 4) * HeadScale.ones(3, 4)
    with pytest.raises(MaskShapeError, match="same model"):
        HeadScale.ones(2, 4).scaled(HeadMask.ones(3, 4), 2.0)
    with pytest.raises(MaskShapeError, match="do not combine"):
        HeadMask.ones(2, 4) & HeadMask.ones(3, 4)
    with pytest.raises(ValueError, match="out of range"):
        HeadScale.ones(2, 4).scaled(["L5H0"], 2.0)


def test_transfer_scale_and_errors():
    heads = LanguageHeads(
        ["en", "fr", "de"], _hand_scores(), quantile=0.5, min_languages=2, method="x", model="m"
    )
    scale = transfer_scale(heads, "fr", "en", 3.0)
    assert scale.values[1, 0].item() == 3.0
    assert scale.values[0, 1].item() == 0.0 and scale.values[0, 2].item() == 0.0
    assert scale.values[0, 0].item() == 1.0  # general heads untouched
    with pytest.raises(ImportanceInputError, match="no language 'xx'"):
        transfer_scale(heads, "xx", None, 3.0)
    shared = LanguageHeads(["en", "fr", "de"], _hand_scores(), 0.5, 3, "x", "m")
    assert shared.specific["fr"] == ["L1H0", "L1H2"] and shared.specific["de"] == ["L1H1", "L1H2"]
    both = transfer_scale(shared, "fr", "de", 3.0)  # L1H2 is specific to both: stays x3
    assert both.values[1].tolist() == [3.0, 0.0, 3.0]
    with pytest.raises(ScaleValueError):
        transfer_scale(heads, "fr", None, -3.0)


# -- soft masks on the one trainer ----------------------------------------------------------
def _task() -> Task:
    return Task("upper", tuple(Example(w, w.upper()) for w in "abcdefghijklmnopqrst"))


def test_soft_mask_trains_only_its_heads(model):
    config = lh.TrainingConfig(
        steps=5,
        batch_size=4,
        n_eval=4,
        precision="float32",
        soft=True,
        trainable=["L0H1", "L1H3"],
        warmup_fraction=0.0,
        weight_decay=0.1,
    )
    result = lh.train_mask(model, _task(), config, progress=False)
    trained = torch.zeros(2, 4, dtype=torch.bool)
    trained[0, 1] = trained[1, 3] = True
    assert torch.equal(result.W[~trained], torch.ones(6))  # exactly 1
    assert (result.W[trained] != 1).all()
    assert (result.W >= 0).all()
    assert isinstance(result.mask, HeadScale)
    assert result.trajectory.shape[1:] == (2, 4) and len(result.history) == 5


def test_soft_mask_checkpoint_resume(model, tmp_path):
    config = lh.TrainingConfig(
        steps=4, batch_size=4, n_eval=4, precision="float32", soft=True, trainable=["L0H0"]
    )
    whole = lh.train_mask(model, _task(), config, progress=False)
    first = lh.TrainingConfig(**{**config.to_dict(), "steps": 4})
    lh.train_mask(
        model, _task(), first, checkpoint_dir=tmp_path, checkpoint_every=2, progress=False
    )
    resumed = lh.train_mask(
        model, _task(), first, checkpoint_dir=tmp_path, resume=True, progress=False
    )
    assert torch.equal(resumed.W, whole.W)
    whole.save(tmp_path / "out")
    loaded = lh.MaskTrainingResult.load(tmp_path / "out")
    assert loaded.config.trainable == ("L0H0",) and isinstance(loaded.mask, HeadScale)


def test_soft_mask_bad_trainable(model):
    with pytest.raises(ValueError, match="trainable is empty"):
        lh.TrainingConfig(soft=True, trainable=[])
    with pytest.raises(ValueError, match="pass soft=True"):
        lh.TrainingConfig(trainable=["L0H0"])
    with pytest.raises(ValueError, match="not of the form"):
        lh.TrainingConfig(soft=True, trainable=["head3"])
    config = lh.TrainingConfig(steps=1, batch_size=2, n_eval=2, soft=True, trainable=["L7H0"])
    with pytest.raises(ValueError, match="out of range"):
        lh.train_mask(model, _task(), config, progress=False)


# -- experiments (plumbing on the tiny model; the direction is an integration test) ---------
def test_perplexity_experiment_plumbing(model, tmp_path):
    texts = {"en": TEXTS, "fr": ["le chat noir", "un chien", "la maison bleue", "le ciel"]}
    scores = torch.zeros(2, 2, 4)
    scores[0, 0, 1] = scores[1, 1, 2] = 1.0  # en: L0H1, fr: L1H2 (planted)
    heads = LanguageHeads(["en", "fr"], scores, 0.75, 2, "lahis", model_name(model))
    assert heads.specific == {"en": ["L0H1"], "fr": ["L1H2"]}
    result = perplexity_experiment(model, heads, texts, n_docs=2, random_seeds=(0, 1))
    table = result.table.set_index(["masked", "evaluated"])
    assert len(table) == 4 and (table["ppl_base"] > 1).all()
    removal = heads.specific_mask("en").complement()  # every head but L0H1
    expected = document_losses(model, texts["fr"][:2], mask=removal)
    assert table.loc[("en", "fr"), "ce_masked"] == pytest.approx(float(expected.mean()), rel=1e-5)
    assert table.loc[("en", "fr"), "ce_base"] == pytest.approx(
        float(document_losses(model, texts["fr"][:2]).mean()), rel=1e-5
    )
    documents = result.documents.set_index(["masked", "evaluated", "document"])
    assert documents.loc[("en", "fr"), "ce_masked"].tolist() == pytest.approx(expected.tolist())
    means = result.documents.groupby(["masked", "evaluated"])[["ce_base", "ce_masked"]].mean()
    assert means.to_numpy() == pytest.approx(table[["ce_base", "ce_masked"]].to_numpy())
    result.save(tmp_path / "ppl")
    loaded = PerplexityExperiment.load(tmp_path / "ppl")
    assert loaded.to_frame().shape == result.to_frame().shape
    pd.testing.assert_frame_equal(loaded.documents, result.documents)
    other = LanguageHeads(["a", "b"], torch.rand(2, 3, 4), 0.5, 1, "x", "other")
    with pytest.raises(MaskShapeError, match="compute them for this model"):
        perplexity_experiment(model, other, texts)
    with pytest.raises(ImportanceInputError, match="seeds is empty"):
        perplexity_experiment(model, heads, texts, random_seeds=())


def test_result_examples_round_trip(tmp_path):
    TransferResult.example().save(tmp_path / "t")
    assert TransferResult.load(tmp_path / "t").to_frame()["off_target"].tolist() == [0.5, 0.0]
    assert PerplexityExperiment.example().direction()["own_hurt_most"].tolist() == [True]


def test_identify_language():
    found = identify_language(
        ["Le chat est sur la table.", "Die Katze ist auf dem Tisch.", "猫在桌子上。", "123"],
        ["en", "fr", "de", "zh"],
    )
    assert found == ["fr", "de", "zh", ""]
    with pytest.raises(ValueError, match="candidates is empty"):
        identify_language(["x"], [])


def test_mask_file_error_for_missing_scale(tmp_path):
    with pytest.raises(MaskFileError, match="does not exist"):
        HeadScale.load(tmp_path / "none.safetensors")


def test_train_mask_soft_cli_arguments(tmp_path):
    from lens_heads.cli import build_parser
    from lens_heads.cli._lahis import trainable_from_args

    parser = build_parser()
    base = ["train-mask", "--model", "m", "--task", "t", "--out", str(tmp_path)]
    HeadImportance.example().save(tmp_path / "imp")
    args = parser.parse_args(
        [*base, "--soft", "--heads", "top:2", "--importance", str(tmp_path / "imp")]
    )
    assert trainable_from_args(args) == ("L1H0", "L0H1")
    (tmp_path / "heads.txt").write_text("L0H1, L1H0\n", encoding="utf-8")
    args = parser.parse_args([*base, "--soft", "--heads", str(tmp_path / "heads.txt")])
    assert trainable_from_args(args) == ("L0H1", "L1H0")
    with pytest.raises(ValueError, match="add --soft"):
        trainable_from_args(parser.parse_args([*base, "--heads", "top:2"]))
    with pytest.raises(ValueError, match="--importance DIR"):
        trainable_from_args(parser.parse_args([*base, "--soft", "--heads", "top:2"]))
    with pytest.raises(FileNotFoundError, match="no such file"):
        trainable_from_args(parser.parse_args([*base, "--soft", "--heads", "missing.txt"]))
    for command in ("importance", "language-heads", "language-perplexity", "transfer"):
        assert command in parser._subparsers._group_actions[0].choices


def _planted_language_scores() -> torch.Tensor:
    """Scores of 5 languages on 2 x 4 heads: each language's top two (strictly above its 0.75
    quantile) are L0H0, shared by all five (general at min_languages=4), and one head of its
    own: en L0H1, fr L1H2, es L1H0, de L1H1, zh L1H3."""
    own = {"en": (0, 1), "fr": (1, 2), "es": (1, 0), "de": (1, 1), "zh": (1, 3)}
    scores = torch.arange(8.0).view(1, 2, 4).repeat(5, 1, 1) * 0.01  # distinct, small
    for index, (layer, head) in enumerate(own.values()):
        scores[index, 0, 0] = 9.0
        scores[index, layer, head] = 10.0
    return scores


def test_attention_transfer_plumbing(model, monkeypatch):
    from lens_heads.lahis import _language_experiments as language_experiments
    from lens_heads.lahis._language_experiments import attention_transfer

    heads = LanguageHeads(
        ["en", "fr", "es", "de", "zh"], _planted_language_scores(), 0.75, 4, "x", "tiny"
    )
    assert heads.general_labels == ["L0H0"]
    assert heads.specific["en"] == ["L0H1"] and heads.specific["fr"] == ["L1H2"]
    calls = []
    real_generate = language_experiments.generate

    def recording_generate(model, prompts, **kwargs):
        calls.append((list(prompts), kwargs["mask"]))
        return real_generate(model, prompts, **kwargs)

    monkeypatch.setattr(language_experiments, "generate", recording_generate)
    result = attention_transfer(
        model, heads, source="en", target="fr", factors=(3.0,), n_eval=2, shots=1, max_new_tokens=3
    )
    frame = result.to_frame()
    assert frame["setting"].tolist() == ["original", "x3"]
    assert frame["strengthened"].tolist() == ["", "L1H2"]
    assert frame["weakened"].tolist() == ["", "L0H1"]
    # the x3 run generates under fr's specific head x3 and en's x0, every other head x1
    expected = torch.ones(2, 4)
    expected[1, 2], expected[0, 1] = 3.0, 0.0
    (prompts, unmasked), (same_prompts, scale) = calls
    assert unmasked is None and same_prompts == prompts and len(prompts) == 2
    assert torch.equal(scale.values, expected)
    by_hand = lh.generate(model, prompts, max_new_tokens=3, mask=HeadScale(expected))
    outputs = result.outputs.set_index("setting")
    assert outputs.loc["x3", "output"].tolist() == [
        g.text.strip().split("\n")[0].strip() for g in by_hand
    ]
    for setting, row in frame.set_index("setting").iterrows():
        languages = outputs.loc[setting, "language"].tolist()
        assert row["off_target"] == sum(lang != "fr" for lang in languages) / 2
    with pytest.raises(ImportanceInputError, match="factors is empty"):
        attention_transfer(model, heads, factors=())
