"""LAHIS experiment (c) on the tiny model: soft masks on top heads vs random heads (issue 14)."""

from __future__ import annotations

import json
import math
import shutil

import pandas as pd
import pytest
import torch

import lens_heads as lh
import lens_heads.lahis._soft_mask_experiment as experiment_module
from lens_heads.core._masks import MaskShapeError, parse_head
from lens_heads.core._scales import HeadScale
from lens_heads.core._tasks import Example, Task
from lens_heads.lahis._importance import HeadImportance
from lens_heads.lahis._languages import LanguageHeads
from lens_heads.lahis._soft_mask_experiment import (
    SoftMaskExperiment,
    random_heads,
    soft_mask_config,
    soft_mask_experiment,
    top_heads,
)

PAIRS = [
    ("the cat", "le chat"),
    ("a dog", "un chien"),
    ("the house", "la maison"),
    ("blue sky", "ciel bleu"),
    ("red car", "voiture rouge"),
    ("my book", "mon livre"),
    ("the sea", "la mer"),
    ("a tree", "un arbre"),
    ("the sun", "le soleil"),
    ("a bird", "un oiseau"),
    ("the moon", "la lune"),
    ("green apple", "pomme verte"),
    ("old man", "vieil homme"),
    ("the door", "la porte"),
    ("a cup", "une tasse"),
    ("the road", "la route"),
]
# scores of a 2 x 4 model: ranking L1H2 L0H1 L1H0 L0H3 L0H0 L1H3 L0H2 L1H1
SCORES = torch.tensor([[0.4, 0.8, 0.1, 0.5], [0.6, 0.0, 0.9, 0.3]])
RANKING = ["L1H2", "L0H1", "L1H0", "L0H3", "L0H0", "L1H3", "L0H2", "L1H1"]
SETTINGS = dict(fraction=0.25, n_train=8, n_eval=4, max_new_tokens=3, progress=False)


def _task() -> Task:
    examples = tuple(Example(a, b) for a, b in PAIRS)
    return Task("en-fr-tiny", examples, kind="translation", source_lang="en", target_lang="fr")


def _importance(scores: torch.Tensor = SCORES) -> HeadImportance:
    gradients = -scores[None].repeat(2, 1, 1)
    return HeadImportance(scores, gradients, torch.ones(2), "lahis", "tiny", 10)


def _config(**overrides) -> lh.TrainingConfig:
    return soft_mask_config(batch_size=4, precision="float32", **overrides)


@pytest.fixture(scope="module")
def model():
    return lh.tiny_model(n_layers=2, n_heads=4, n_kv_heads=2, seed=0)


@pytest.fixture(scope="module")
def run(model, tmp_path_factory):
    """One experiment saved to a folder (top 2 of 8 heads, random seeds 0 and 1)."""
    out = tmp_path_factory.mktemp("soft") / "out"
    result = soft_mask_experiment(
        model, _task(), _importance(), training=_config(), out=out, **SETTINGS
    )
    return result, out


# -- the head sets ----------------------------------------------------------------------------
def test_top_set_has_the_right_size_and_is_the_top_of_the_ranking():
    importance = _importance()
    assert importance.ranking() == RANKING
    assert top_heads(importance, (2, 4), 0.25) == RANKING[:2]
    assert top_heads(importance, (2, 4), 0.02) == RANKING[:1], "at least one head"
    assert top_heads(importance, (2, 4), 1.0) == RANKING
    assert top_heads(RANKING, (2, 4), 0.5) == RANKING[:4]
    languages = LanguageHeads(["en", "fr"], torch.stack([SCORES, -SCORES]), 0.5, 2, "lahis", "x")
    assert top_heads(languages, (2, 4), 0.25, language="en") == RANKING[:2]
    assert top_heads(languages, (2, 4), 0.25, language="fr") == ["L1H1", "L0H2"]
    # the paper's 2 % of Gemma 3 270M's 72 heads is one head, of 1024 heads 20
    assert len(top_heads([f"L{i // 4}H{i % 4}" for i in range(72)], (18, 4), 0.02)) == 1
    assert (
        len(
            top_heads(
                HeadImportance(
                    torch.rand(32, 32), torch.rand(1, 32, 32), torch.ones(1), "lahis", "x", 1
                ),
                (32, 32),
                0.02,
            )
        )
        == 20
    )


def test_random_sets_same_size_disjoint_from_top_reproducible_and_differ_by_seed():
    top = RANKING[:2]
    draws = [random_heads(top, (2, 4), 2, seed) for seed in range(10)]
    for seed, heads in enumerate(draws):
        assert len(heads) == 2 and len(set(heads)) == 2
        assert not set(heads) & set(top)
        assert heads == random_heads(top, (2, 4), 2, seed), "reproducible"
    assert len({tuple(heads) for heads in draws}) > 1, "seeds draw different sets"
    # every head outside the top set can be drawn
    assert set().union(*map(set, draws)) == set(RANKING[2:])


def test_experiment_uses_the_top_set_and_distinct_random_sets(run):
    result, _ = run
    assert result.top_heads == RANKING[:2]
    assert result.random_seeds == [0, 1]
    assert result.random_heads == [random_heads(RANKING[:2], (2, 4), 2, s) for s in (0, 1)]
    assert result.language == "fr" and result.n_train == 8 and result.n_eval == 4
    assert result.config["steps"] == 4, "2 epochs of 8 examples at batch 4"
    assert result.config["lr"] == result.config["min_lr"] == 0.01


def test_only_the_trainable_heads_move_in_every_condition(run):
    result, _ = run
    assert result.mask_names == ["top", "random-0", "random-1"]
    heads = [result.top_heads, *result.random_heads]
    for name, values, trained in zip(result.mask_names, result.multipliers, heads, strict=True):
        chosen = torch.zeros(2, 4, dtype=torch.bool)
        for label in trained:
            chosen[parse_head(label)] = True
        assert torch.equal(values[~chosen], torch.ones(6)), name  # exactly 1
        assert (values[chosen] != 1).all(), f"{name}: its trainable heads moved"
        assert (values >= 0).all()
        assert torch.equal(result.masks()[name].values, values)
    assert all(isinstance(mask, HeadScale) for mask in result.masks().values())


def test_result_rows_metrics_and_views(run):
    result, _ = run
    assert result.runs["condition"].tolist() == ["none", "top", "random", "random"]
    assert result.runs["seed"].tolist() == [-1, -1, 0, 1]
    assert result.runs["n_heads"].tolist() == [0, 2, 2, 2]
    table = result.to_frame()
    assert list(table.index) == ["no mask", "soft mask, top heads", "soft mask, random heads"]
    assert table["seeds"].tolist() == [1, 1, 2]
    for column in ("answer CE (paper: PPL)", "chrF++", "BLEU"):
        assert column in table.columns
    ce = result.runs["answer_ce"]
    assert table.loc["soft mask, random heads", "answer CE (paper: PPL)"] == pytest.approx(
        ce.iloc[2:].mean()
    )
    assert table.loc["soft mask, random heads", "answer CE (paper: PPL) std"] == pytest.approx(
        ce.iloc[2:].std()
    )
    assert math.isnan(table.loc["no mask", "answer CE (paper: PPL) std"])
    assert (ce > 0).all() and ce.nunique() > 1, "the masks change the answer CE"
    differences = result.differences()
    assert differences["ce_top_minus_none"] == pytest.approx(ce.iloc[1] - ce.iloc[0])
    markdown = result.to_markdown()
    assert "±" in markdown and "soft mask, top heads" in markdown and "L1H2=" in markdown
    assert len(result.outputs) == 4 * 4 and set(result.outputs["condition"]) == {
        "none",
        "top",
        "random",
    }
    assert result.history.groupby("mask").size().to_dict() == {
        "top": 4,
        "random-0": 4,
        "random-1": 4,
    }
    figure = result.plot()
    assert {trace.name for trace in figure.data} == set(table.index)


def test_held_out_examples_are_not_trained_on(run):
    result, out = run
    held_out = set(PAIRS[i][0] for i in range(12, 16))
    assert set(result.outputs["input"]) == held_out
    training = lh.MaskTrainingResult.load(out / "top")
    assert training.task == "en-fr-tiny:train8" and training.config.n_eval == 0


def test_save_load_round_trip(run, tmp_path):
    result, out = run
    for folder in (out, tmp_path / "copy"):
        if folder != out:
            result.save(folder)
        loaded = SoftMaskExperiment.load(folder)
        assert torch.equal(loaded.multipliers, result.multipliers)
        pd.testing.assert_frame_equal(loaded.to_frame(), result.to_frame())
        pd.testing.assert_frame_equal(loaded.runs, result.runs, check_dtype=False)
        assert loaded.random_heads == result.random_heads and loaded.top_heads == result.top_heads
        assert loaded.to_markdown() == result.to_markdown()
    for name in ("table.csv", "table.md", "figure.html", "plan.json"):
        assert (out / name).is_file(), name
    example = SoftMaskExperiment.example()
    example.save(tmp_path / "example")
    assert SoftMaskExperiment.load(tmp_path / "example").differences() == pytest.approx(
        {
            "ce_top_minus_none": -0.5,
            "ce_top_minus_random": -0.45,
            "chrf_top_minus_none": 6.0,
            "chrf_top_minus_random": 6.0,
        }
    )


def test_resume_does_not_retrain_or_reevaluate(run, model, monkeypatch):
    result, out = run

    def refuse(*args, **kwargs):
        raise AssertionError("called on resume")

    monkeypatch.setattr(experiment_module, "train_mask", refuse)
    monkeypatch.setattr(experiment_module, "evaluate", refuse)
    again = soft_mask_experiment(
        model, _task(), _importance(), training=_config(), out=out, **SETTINGS
    )
    assert torch.equal(again.multipliers, result.multipliers)
    pd.testing.assert_frame_equal(again.to_frame(), result.to_frame())


def test_resume_trains_only_the_missing_condition(run, model, monkeypatch, tmp_path):
    result, out = run
    copy = tmp_path / "partial"
    shutil.copytree(out, copy)
    shutil.rmtree(copy / "random-1")
    calls = []
    real = experiment_module.train_mask

    def counting(model, task, config, **kwargs):
        calls.append(config.trainable)
        return real(model, task, config, **kwargs)

    monkeypatch.setattr(experiment_module, "train_mask", counting)
    monkeypatch.setattr("lens_heads.engine._training_folder.train_mask", counting)  # the one way
    again = soft_mask_experiment(
        model, _task(), _importance(), training=_config(), out=copy, **SETTINGS
    )
    assert calls == [tuple(result.random_heads[1])]
    assert torch.equal(again.multipliers, result.multipliers), "the same training, reproduced"


def test_another_experiment_in_the_same_folder_is_refused(run, model):
    _, out = run
    with pytest.raises(
        ValueError, match=r"holds a soft-mask experiment of other settings.*fraction"
    ):
        soft_mask_experiment(
            model,
            _task(),
            _importance(),
            training=_config(),
            out=out,
            **{**SETTINGS, "fraction": 0.5},
        )
    assert json.loads((out / "plan.json").read_text())["fraction"] == 0.25


# -- bad input --------------------------------------------------------------------------------
@pytest.mark.parametrize("fraction", [0.0, -0.1, 1.5, float("nan")])
def test_fraction_outside_zero_one_is_an_error(model, fraction):
    with pytest.raises(ValueError, match=r"fraction must lie in \(0, 1\]"):
        soft_mask_experiment(
            model, _task(), _importance(), training=_config(), **{**SETTINGS, "fraction": fraction}
        )


def test_no_random_seed_is_an_error(model):
    with pytest.raises(ValueError, match="random_seeds is empty"):
        soft_mask_experiment(
            model, _task(), _importance(), training=_config(), random_seeds=(), **SETTINGS
        )


def test_a_task_without_training_examples_is_an_error(model):
    small = Task("tiny", (Example("a", "b"), Example("c", "d")), kind="translation")
    with pytest.raises(ValueError, match="too few for n_eval=4 held-out and n_train=8"):
        soft_mask_experiment(model, small, _importance(), training=_config(), **SETTINGS)
    with pytest.raises(ValueError, match="lower n_train or n_eval"):
        soft_mask_experiment(
            model, _task(), _importance(), training=_config(), **{**SETTINGS, "n_train": 13}
        )


def test_other_bad_input_is_named(model):
    def call(ranking=None, **overrides):
        arguments = {**SETTINGS, "training": _config(), **overrides}
        return soft_mask_experiment(model, _task(), ranking or _importance(), **arguments)

    with pytest.raises(ValueError, match="soft=True"):
        call(training=lh.TrainingConfig(batch_size=4))
    with pytest.raises(ValueError, match=r"leave training\.trainable None"):
        call(training=_config(trainable=["L0H0"]))
    with pytest.raises(ValueError, match="smaller than the batch size"):
        call(n_train=2)
    with pytest.raises(MaskShapeError, match="compute it for this model"):
        call(_importance(torch.rand(3, 4)))
    with pytest.raises(ValueError, match="pass language="):
        languages = LanguageHeads(["en", "de"], torch.stack([SCORES, SCORES]), 0.5, 2, "x", "t")
        call(languages)
    with pytest.raises(ValueError, match="give a longer ranking"):
        call(["L0H0"])
    with pytest.raises(ValueError, match="out of range"):
        call(["L9H0", "L0H0"])
    with pytest.raises(ValueError, match="cannot draw 8 random heads"):
        call(fraction=1.0)
    with pytest.raises(ValueError, match="epochs must be at least 1"):
        call(epochs=0)


# -- the command ------------------------------------------------------------------------------
def test_cli_soft_mask_experiment(tmp_path, tiny_dir, monkeypatch, capsys):
    import lens_heads.core
    from lens_heads.cli import main

    monkeypatch.setattr(
        lens_heads.core,
        "load_model",
        lambda spec, **kw: lh.tiny_model(n_layers=2, n_heads=4, n_kv_heads=2, seed=0),
    )
    data = tmp_path / "my-pairs.json"
    examples = [{"input": a, "output": b} for a, b in PAIRS]
    data.write_text(json.dumps({"source_lang": "en", "target_lang": "fr", "examples": examples}))
    _importance().save(tmp_path / "importance")
    base = ["soft-mask-experiment", "--model", str(tiny_dir), "--task", str(data)]
    base += ["--n-train", "8"]
    base += ["--n-eval", "4", "--batch-size", "4", "--fraction", "0.25", "--precision", "fp32"]
    base += ["--max-new-tokens", "2"]
    out = tmp_path / "out"
    assert main([*base, "--importance", str(tmp_path / "importance"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "soft mask, top heads" in printed and "L1H2=" in printed
    assert SoftMaskExperiment.load(out).top_heads == RANKING[:2]
    # without --importance: the importance of the target language on the built-in corpus
    out = tmp_path / "computed"
    assert main([*base, "--n-docs", "3", "--out", str(out)]) == 0
    importance = HeadImportance.load(out / "importance")
    assert importance.n_docs == 3
    assert SoftMaskExperiment.load(out).top_heads == importance.top(2)
    with pytest.raises(SystemExit) as exit_info:  # checked while parsing
        main([*base, "--fraction", "2", "--out", str(tmp_path / "bad")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "--fraction: must lie in (0, 1]" in err
