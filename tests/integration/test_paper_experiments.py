"""The papers' experiments of issue 25 end to end on the real Gemma 3 270M, at small settings
(the full settings and their wall times are in docs/reproduction.md's stored results)."""

from __future__ import annotations

import json

import pytest

import lens_heads as lh

pytestmark = pytest.mark.integration

RUN = ["--no-progress"]


@pytest.fixture()
def gemma_everywhere(monkeypatch, gemma):
    monkeypatch.setattr(lh, "load_model", lambda spec, **kw: gemma)
    return gemma


def test_table1_then_table4_on_translation(gemma_everywhere, tmp_path):
    from analyses import table1_translation, table4_top_tokens

    argv = ["--pairs", "en-fr", "--steps", "3", "--holdout", "20", "--n-eval", "8"]
    argv += ["--random-seeds", "0", *RUN, "--out", str(tmp_path / "t1")]
    assert table1_translation.main(argv) == 0
    pair = json.loads((tmp_path / "t1" / "numbers.json").read_text())["en-fr"]
    assert pair["heads"] == 72 and 0 < pair["heads kept"] <= 72
    table = pair["table"]
    # the base model needs its instruction: instructed CE below the bare prompt's on average
    assert table["answer CE, w/ instruction"] < table["answer CE, Original"]
    assert 0 <= table["ROUGE-L, w/ M"] <= 1
    argv = ["--pairs", "en-fr", "--masks", str(tmp_path / "t1"), "--holdout", "20"]
    argv += ["--sentences", "2", "--top-k", "3", "--max-new-tokens", "8", *RUN]
    assert table4_top_tokens.main([*argv, "--out", str(tmp_path / "t4")]) == 0
    t4 = json.loads((tmp_path / "t4" / "numbers.json").read_text())["en-fr"]
    assert t4["heads kept"] == pair["heads kept"]  # Table 1's mask was reused
    assert t4["sentences"] == 2 and all(row["top 3, masked"] for row in t4["rows"])


def test_alignment_heads_small(gemma_everywhere, tmp_path):
    from analyses import alignment_heads

    argv = ["--languages", "en,fr", "--n", "6", "--n-eval", "4", "--seeds", "1"]
    argv += ["--ablation-k", "2", *RUN, "--out", str(tmp_path)]
    assert alignment_heads.main(argv) == 0
    numbers = json.loads((tmp_path / "numbers.json").read_text())
    for shares in numbers["activity"].values():
        assert sum(v for k, v in shares.items() if k != "chance") == pytest.approx(1.0)
        assert shares["alignment heads"] > 0  # Gemma has alignment heads on every pair
    from scipy.stats import hypergeom

    overlap = hypergeom(72, 20, 20)  # the exact expectation (the paper's eq. 4 approximates it)
    exact = sum(overlap.pmf(i) * i / (40 - i) for i in range(21))
    assert numbers["consistency"]["20"]["random expectation"] == pytest.approx(exact)


def test_lahis_languages_small(gemma_everywhere, tmp_path):
    from analyses import lahis_languages

    argv = ["--n-docs", "2", "--ppl-docs", "2", "--seeds", "0", "--targets", "fr"]
    argv += ["--n-eval", "2"]
    argv += [*RUN, "--out", str(tmp_path)]
    assert lahis_languages.main(argv) == 0
    numbers = json.loads((tmp_path / "numbers.json").read_text())
    assert numbers["languages"] == len(numbers["perplexity direction"]) >= 1
    rows = numbers["transfer"]["fr"]
    assert {row["setting"] for row in rows} >= {"original"}
    assert all(0 <= row["off_target"] <= 1 for row in rows)


def test_table3_few_shot_small(monkeypatch, smollm2, tmp_path):
    """The hybrid mask and the unseen task on SmolLM2 at tiny settings: every row of the
    paper's layout is there and the claims are tested per task (the per-task masks run on the
    tiny model in tests/unit/tools/test_paper_experiments.py)."""
    from analyses import table3_few_shot

    monkeypatch.setattr(lh, "load_model", lambda spec, **kw: smollm2)
    argv = ["--tasks", "antonym,capitalize_first_letter", "--unseen", "country-capital"]
    argv += ["--shots", "1", "--n-per-task", "8", "--steps", "2", "--n-eval", "2"]
    argv += ["--random-seeds", "0", *RUN, "--out", str(tmp_path)]
    assert table3_few_shot.main(argv) == 0
    numbers = json.loads((tmp_path / "numbers.json").read_text())
    assert numbers["heads"] == 270 and 0 < numbers["heads kept (hybrid)"] <= 270
    settings = {(row["task"], row["setting"]) for row in numbers["rows"]}
    assert ("country-capital (unseen)", "w/ M of hybrid") in settings
    assert ("antonym", "w/ instruction") in settings
    tasks = {"antonym", "capitalize_first_letter", "country-capital (unseen)"}
    assert set(numbers["claims"]) == tasks
