"""The analyses added for the papers' missing experiments (issues 24-25) run on the tiny model,
write the paper's layout, resume, and compute their statistics on the right rows."""

from __future__ import annotations

import json

import pytest

import lens_heads as lh
from analyses import figure8_many_words, table1_translation, table3_few_shot, table41_overlap

RUN = ["--no-progress"]


@pytest.fixture()
def tiny_everywhere(monkeypatch, tiny):
    monkeypatch.setattr(lh, "load_model", lambda spec, **kw: tiny)
    return tiny


def test_table3_has_the_papers_rows_and_an_unseen_task(tiny_everywhere, tmp_path):
    argv = ["--tasks", "capitalize,next_item", "--unseen", "present-past", "--per-task"]
    argv += ["--shots", "1", "--n-per-task", "8", "--steps", "3", "--n-eval", "4"]
    argv += ["--random-seeds", "0", *RUN, "--out", str(tmp_path)]
    assert table3_few_shot.main(argv) == 0
    rows = json.loads((tmp_path / "numbers.json").read_text())["rows"]
    settings = {(r["task"], r["setting"]) for r in rows}
    for task in ["capitalize", "next_item", "present-past (unseen)"]:
        for setting in ["Original", "w/ instruction", "w/ random M", "w/ M of hybrid"]:
            assert (task, setting) in settings, (task, setting)
        assert (task, "w/ M of the task") in settings
    assert (tmp_path / "training_present-past").is_dir() and (tmp_path / "training").is_dir()
    claims = json.loads((tmp_path / "numbers.json").read_text())["claims"]
    assert set(claims) == {"capitalize", "next_item", "present-past (unseen)"}
    for found in claims.values():
        assert 0 <= found["hybrid M above the original: p"] <= 1
        assert isinstance(found["own M at or above the instruction"], bool)
    with pytest.raises(ValueError, match="is one of --tasks"):
        table3_few_shot.main([*argv[:-2], "--unseen", "capitalize", "--out", str(tmp_path / "x")])


def test_more_often_right_by_hand():
    import pandas as pd

    from analyses.table3_few_shot import more_often_right

    first = pd.Series([1, 1, 1, 0, 1, 0, 0], index=range(7))
    second = pd.Series([0, 0, 0, 1, 1, 0, 0], index=range(7))
    # 3 queries only ``first`` gets right, 1 only ``second``: P(X >= 3 | n=4, 1/2) = 5/16
    assert more_often_right(first, second) == pytest.approx(5 / 16)
    assert more_often_right(second, first) == pytest.approx(15 / 16)  # P(X >= 1 | n=4)
    # aligned on the query index, not on the position
    assert more_often_right(first, second[::-1]) == pytest.approx(5 / 16)
    assert more_often_right(first, first) == 1.0


def test_table1_translation_runs_resumes_and_tests_the_claims(tiny_everywhere, tmp_path):
    argv = ["--pairs", "en-fr", "--steps", "3", "--holdout", "8", "--n-eval", "6"]
    argv += ["--random-seeds", "0", *RUN, "--out", str(tmp_path)]
    assert table1_translation.main(argv) == 0
    numbers = json.loads((tmp_path / "numbers.json").read_text())
    pair = numbers["en-fr"]
    assert pair["heads"] == 8 and set(pair["claims"]) >= {"M helps (CE below original)"}
    assert pair["table"]["answer CE, Original"] > 0
    markers = {m: m.stat().st_mtime_ns for m in tmp_path.glob("*/.complete")}
    assert len(markers) == 2  # the training and the evaluation
    assert table1_translation.main(argv) == 0
    assert {m: m.stat().st_mtime_ns for m in markers} == markers, "finished stages are reused"


def test_table1_with_demonstrations_trains_and_evaluates_on_them(tiny_everywhere, tmp_path):
    """``--shots 2``: the mask trains with two demonstrations before every input and every
    setting is evaluated with them (the stored training config and evaluation say so)."""
    from lens_heads.engine import EvaluationResult, MaskTrainingResult

    argv = ["--pairs", "en-fr", "--steps", "2", "--holdout", "8", "--n-eval", "4", "--shots", "2"]
    argv += ["--random-seeds", "0", *RUN, "--out", str(tmp_path)]
    assert table1_translation.main(argv) == 0
    assert json.loads((tmp_path / "numbers.json").read_text())["en-fr"]["shots"] == 2
    assert MaskTrainingResult.load(tmp_path / "training_en-fr").config.shots == 2
    evaluation = EvaluationResult.load(tmp_path / "eval_en-fr")
    assert evaluation.config["shots"] == 2


def test_table41_and_figure8_over_words(tiny_everywhere, tmp_path):
    common = ["--task", "next_item", "--steps", "3", "--n-eval", "8", "--words", "2", *RUN]
    assert table41_overlap.main([*common, "--out", str(tmp_path / "t41")]) == 0
    t41 = json.loads((tmp_path / "t41" / "numbers.json").read_text())
    assert t41["verdict"]["words"] == len(t41["rows"]) <= 2
    for row in t41["rows"]:
        assert 0 <= row["overlap instructed~masked"] <= 5
    argv = [*common, "--every", "2", "--out", str(tmp_path / "f8")]
    assert figure8_many_words.main(argv) == 0
    f8 = json.loads((tmp_path / "f8" / "numbers.json").read_text())
    assert f8["verdict"]["words"] == len(f8["rows"])
    # more words later reuse the finished ones (the word count is not a stored setting)
    more = [("3" if a == "2" and argv[i - 1] == "--words" else a) for i, a in enumerate(argv)]
    assert figure8_many_words.main(more) == 0


def test_alignment_heads_reports_the_papers_quantities(tiny_everywhere, tmp_path):
    from analyses import alignment_heads

    argv = ["--languages", "en,fr", "--n", "3", "--n-eval", "3", "--seeds", "1"]
    argv += ["--ablation-k", "2", *RUN, "--out", str(tmp_path)]
    assert alignment_heads.main(argv) == 0
    numbers = json.loads((tmp_path / "numbers.json").read_text())
    assert set(numbers["activity"]) == {"en-fr", "fr-en"}
    for shares in numbers["activity"].values():  # the three groups partition the heads
        groups = [v for k, v in shares.items() if k != "chance"]
        assert sum(groups) == pytest.approx(1.0)
    assert str(min(20, numbers["heads"])) in numbers["consistency"]
    assert {row["heads ablated"] for row in numbers["ablation"]} >= {2}


def test_own_versus_random_by_hand():
    import pandas as pd

    from analyses.lahis_languages import own_versus_random
    from lens_heads.lahis._language_experiments import PerplexityExperiment

    result = PerplexityExperiment.example()
    rows = [("en", "en", d, 2.0, 2.0 + 0.5 * (d + 1), 2.0 + 0.1 * d) for d in range(6)]
    result.documents = pd.DataFrame(
        rows, columns=["masked", "evaluated", "document", "ce_base", "ce_masked", "ce_random"]
    )
    row = own_versus_random(result).iloc[0]
    assert row["own CE rise"] == pytest.approx(0.5 * 3.5)  # mean of 0.5 .. 3.0
    assert row["random CE rise"] == pytest.approx(0.25)  # mean of 0 .. 0.5
    assert row["p (own heads cost more, one-sided Wilcoxon)"] == pytest.approx(1 / 64)


def test_lahis_languages_runs_and_resumes(tiny_everywhere, tmp_path):
    from analyses import lahis_languages

    argv = ["--n-docs", "4", "--ppl-docs", "3", "--skip", "10", "--seeds", "0"]
    argv += ["--targets", "fr", "--n-eval", "2", "--min-languages", "2", *RUN]
    argv += ["--out", str(tmp_path)]
    assert lahis_languages.main(argv) == 0
    numbers = json.loads((tmp_path / "numbers.json").read_text())
    assert numbers["languages"] == len(numbers["perplexity direction"]) <= 5
    assert set(numbers["transfer"]) == {"fr"}
    markers = {m: m.stat().st_mtime_ns for m in tmp_path.glob("*/.complete")}
    assert len(markers) == 3
    assert lahis_languages.main(argv) == 0
    assert {m: m.stat().st_mtime_ns for m in markers} == markers


def test_table4_shows_outputs_and_top_tokens(tiny_everywhere, tmp_path):
    from analyses import table4_top_tokens

    argv = ["--pairs", "en-fr", "--steps", "2", "--holdout", "8", "--sentences", "2"]
    argv += ["--top-k", "3", "--max-new-tokens", "3", *RUN, "--out", str(tmp_path)]
    assert table4_top_tokens.main(argv) == 0
    numbers = json.loads((tmp_path / "numbers.json").read_text())["en-fr"]
    assert numbers["sentences"] == len(numbers["rows"]) == 2
    row = numbers["rows"][0]
    assert len(row["top 3, masked"].split("' '")) == 3
    assert 0 <= numbers["masked outputs in the target language"] <= 2

    # with a mask of ones the masked run is the original run: same top tokens, and its output
    # is the bare prompt's greedy continuation
    config = table4_top_tokens.Config(sentences=2, holdout=8, top_k=3, max_new_tokens=3)
    task = lh.get_task("en-fr")
    table = table4_top_tokens.pair_table(
        config, tiny_everywhere, task, lh.HeadMask.ones(tiny_everywhere)
    )
    assert (table["top 3, masked"] == table["top 3, original"]).all()
    assert table["top 3, instructed"].ne(table["top 3, original"]).any()


def test_the_table3_grid_files_are_what_the_analysis_trains_and_evaluates(tmp_path):
    """docs/grids/table3_few_shot.toml trains on shipped k-shot files: they must equal a fresh
    export, and the grid's held-out split must be the queries the analysis evaluates."""
    from pathlib import Path

    from analyses.table3_few_shot import Config, _queries, export_tasks
    from lens_heads.core._checks import InputWarning

    shipped = Path(__file__).resolve().parents[3] / "docs" / "grids" / "table3_few_shot"
    config = Config(unseen="country-capital")
    with pytest.warns(InputWarning, match="country-capital"):
        written = export_tasks(config, tmp_path)
    assert sorted(p.name for p in written) == sorted(p.name for p in shipped.glob("*.json"))
    for path in written:
        assert path.read_bytes() == (shipped / path.name).read_bytes(), path.name
    task = lh.get_task(shipped / "antonym.json")
    assert task.instruction == lh.get_task("antonym").instruction
    train, held_out = task.split(config.n_eval)
    evaluated = _queries(config, "antonym").examples[-config.n_eval :]
    assert [e.input for e in held_out.examples] == [e.input for e in evaluated]
    assert not {e.input for e in held_out.examples} & {e.input for e in train.examples}
