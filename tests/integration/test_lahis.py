"""LAHIS on Gemma 3 270M with small settings (issue 14): language heads of the five built-in
languages, the perplexity experiment's direction, attention transfer through the CLI."""

from __future__ import annotations

import json

import pytest

import lens_heads as lh
from lens_heads.cli import main
from lens_heads.language_experiments import perplexity_experiment
from lens_heads.languages import LanguageHeads

pytestmark = pytest.mark.integration

N_DOCS = 8


@pytest.fixture(scope="module")
def heads(gemma) -> LanguageHeads:
    return lh.language_heads(gemma, n_docs=N_DOCS, progress=False)


def test_language_heads_of_five_languages(gemma, heads):
    assert heads.languages == ["en", "fr", "es", "de", "zh"]
    assert heads.scores.shape == (5, 18, 4)
    # 72 heads, strictly above the 0.96 quantile: 2 or 3 heads per language
    assert all(2 <= int(n) <= 3 for n in heads.sets.flatten(1).sum(1))
    empty = [lang for lang, labels in heads.specific.items() if not labels]
    assert not empty, f"no specific head for {empty}: {heads.summary()}"
    assert heads.general_labels, "no head is shared by 4 or more languages"
    assert all(p.grad is None for p in gemma.parameters())


@pytest.mark.parametrize("language", ["fr", "zh"])
def test_own_language_perplexity_hurt_most(gemma, heads, language):
    result = perplexity_experiment(
        gemma, heads, languages=["en", "fr", "zh"], n_docs=N_DOCS, skip=100, seeds=(0, 1)
    )
    row = result.direction().set_index("masked").loc[language]
    assert row["own_rise"] > row["max_other_rise"], result.to_markdown()
    assert row["own_rise"] > row["random_rise"], result.to_markdown()


def test_attention_transfer_cli(heads, tmp_path):
    heads.save(tmp_path / "heads")
    out = tmp_path / "transfer"
    argv = ["transfer", "--model", "gemma-3-270m", "--heads", str(tmp_path / "heads")]
    argv += ["--source", "en", "--target", "fr", "--factors", "3", "--n-eval", "3"]
    argv += ["--shots", "1", "--max-new-tokens", "10", "--out", str(out)]
    assert main(argv) == 0
    saved = json.loads((out / "result.json").read_text())
    assert [row for row in saved["summary"]["setting"]] == ["original", "x3"]
    assert len(saved["outputs"]["output"]) == 6
    assert all(0 <= rate <= 1 for rate in saved["summary"]["off_target"])
    assert (out / "figure.html").is_file()
