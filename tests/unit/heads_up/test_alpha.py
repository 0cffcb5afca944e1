"""Scaled masks (Figure 6, Table 8) and the sweep overlay (Figures 8, 9) on a tiny model.

Exact comparisons are made on the same batch composition: a BLAS matrix product's float sums
can depend on how many rows its batch has (MKL takes other kernels for 1-3 rows, and other
splits with several threads), so a batch of prompts x alphas and a batch of prompts alone may
differ in the 7th digit of the answer CE. Across compositions the generations and scores are
compared exactly and the CE to 1e-5."""

from __future__ import annotations

import dataclasses
import importlib
import json

import pandas as pd
import plotly.graph_objects as go
import pytest
import torch

import lens_heads as lh
from lens_heads.core._masks import HeadMask, MaskShapeError
from lens_heads.core._tasks import Example, Task
from lens_heads.engine import evaluate
from lens_heads.heads_up._alpha import AlphaCurve, table8
from lens_heads.heads_up._sweep import SweepResult

WORDS = "cat dog owl bee ant cow pig elk yak emu fox hen ram gnu".split()
ALPHAS = (0.0, 0.25, 0.5, 1.0)
N_EVAL = 6
RUN = dict(n_eval=N_EVAL, batch_size=3, progress=False)


def word_task(**kwargs) -> Task:
    examples = tuple(Example(w, w.upper()) for w in WORDS)
    return Task("upper", examples, instruction="Write the word in capitals.", **kwargs)


@pytest.fixture(scope="module")
def mask() -> HeadMask:
    return HeadMask.from_heads(["L0H1", "L1H0", "L1H3"], n_layers=2, n_heads=4)


@pytest.fixture(scope="module")
def curve(tiny, mask) -> AlphaCurve:
    return lh.alpha_curve(tiny, word_task(), mask, alphas=ALPHAS, **RUN)


def rows(curve: AlphaCurve, alpha: float, instructed: bool = True) -> pd.DataFrame:
    records = curve.records
    chosen = records[(records["alpha"] == alpha) & (records["instructed"] == instructed)]
    return chosen.reset_index(drop=True)


def assert_same_run(records: pd.DataFrame, reference: pd.DataFrame, *, exact: bool) -> None:
    """Same generations and scores; the answer CE bit-identical or to 1e-5."""
    assert len(records) == len(reference) == N_EVAL
    assert records["input"].tolist() == reference["input"].tolist()
    assert records["generated"].tolist() == reference["generated"].tolist()
    assert records["correct"].tolist() == reference["correct"].tolist()
    assert records["exact"].tolist() == reference["exact"].tolist()
    if exact:
        assert records["answer_ce"].tolist() == reference["answer_ce"].tolist()
    else:
        assert records["answer_ce"].tolist() == pytest.approx(
            reference["answer_ce"].tolist(), abs=1e-5, rel=0
        )


# -- the curve -----------------------------------------------------------------------------------
def test_alpha_one_is_the_unmasked_model_and_alpha_zero_the_hard_mask(tiny, mask):
    assert torch.equal(mask.with_alpha(1.0).multiplier(), torch.ones(2, 4))
    assert torch.equal(mask.with_alpha(0.0).multiplier(), mask.values)
    task = word_task()
    # one batched pass: the curve's alphas 0 and 1 against the evaluator's hard mask M and
    # unmasked model (no mask: a multiplier of ones), stacked the same way
    curve = lh.alpha_curve(tiny, task, mask, alphas=(0, 1), **RUN)
    stacked = evaluate(
        tiny, task, ["mask+instruction", "instruction"], mask=mask, stack_masks=True, **RUN
    )
    assert_same_run(rows(curve, 0.0), stacked.predictions("mask+instruction"), exact=True)
    assert_same_run(rows(curve, 1.0), stacked.predictions("instruction"), exact=True)
    # the un-instructed point is the evaluator's own "w/ M" run
    uninstructed = evaluate(tiny, task, ["mask"], mask=mask, **RUN)
    assert_same_run(rows(curve, 0.0, instructed=False), uninstructed.records, exact=True)
    assert curve.uninstructed_ce == uninstructed.runs["answer_ce"].iloc[0]
    # and a hook multiplying by alpha = 1 is the model without hooks, bit for bit
    scaled = evaluate(tiny, task, ["mask+instruction"], mask=mask.with_alpha(1.0), **RUN)
    plain = evaluate(tiny, task, ["instruction"], **RUN)
    assert_same_run(scaled.records, plain.records, exact=True)
    # the comparisons mean something only if the mask changes the numbers
    assert rows(curve, 0.0)["answer_ce"].tolist() != rows(curve, 1.0)["answer_ce"].tolist()


def test_batched_curve_equals_a_loop_of_evaluator_calls(tiny, curve, mask):
    task = word_task()
    for alpha in ALPHAS:
        alone = evaluate(tiny, task, ["mask+instruction"], mask=mask.with_alpha(alpha), **RUN)
        assert_same_run(rows(curve, alpha), alone.records, exact=False)
        run = alone.runs.iloc[0]
        for metric in ("accuracy", "exact_match", "echo_rate"):
            assert curve.value(alpha, metric) == run[metric], (alpha, metric)
        for metric in ("answer_ce", "perplexity"):
            assert curve.value(alpha, metric) == pytest.approx(run[metric], rel=1e-5)
    ces = [curve.value(alpha) for alpha in ALPHAS]
    assert len(set(ces)) == len(ALPHAS)  # every alpha scores differently


def test_all_alphas_are_decoded_in_one_pass(tiny, mask, monkeypatch):
    """One call of the decoder for the instructed prompts (every alpha as per-example masks,
    a batch of prompts with all its alphas) and one for the un-instructed point."""
    scoring = importlib.import_module("lens_heads.engine._scoring")
    calls: list[tuple[int, torch.Tensor | None, int]] = []
    inner = scoring.generate_and_score

    def spy(model, encoded, run_mask, new_tokens, batch_size, **kwargs):
        calls.append((len(encoded), kwargs.get("per_example_masks"), batch_size))
        return inner(model, encoded, run_mask, new_tokens, batch_size, **kwargs)

    monkeypatch.setattr(scoring, "generate_and_score", spy)
    lh.alpha_curve(tiny, word_task(), mask, alphas=ALPHAS, **RUN)
    assert len(calls) == 2
    (rows_, masks, batch), (rows_alone, masks_alone, _) = calls
    assert rows_ == N_EVAL * len(ALPHAS) and batch == 3 * len(ALPHAS)
    assert masks is not None and masks.shape == (N_EVAL * len(ALPHAS), 2, 4)
    expected = torch.stack([mask.with_alpha(a).multiplier() for a in ALPHAS])
    assert torch.equal(masks[: len(ALPHAS)], expected)  # prompt-major: prompt 0, every alpha
    assert rows_alone == N_EVAL and masks_alone is None  # the un-instructed point alone


def test_prefix_runs_once_per_distinct_mask(tiny, mask, monkeypatch):
    import lens_heads.core._decoding as decoding
    from lens_heads.core._decoding import decode_greedy, shared_prefix_length
    from lens_heads.core._prompts import encode_example

    fed: list[tuple[int, int]] = []
    step = decoding.cached_forward

    def counting(model, tokens, *args, **kwargs):
        fed.append(tuple(tokens.shape))
        return step(model, tokens, *args, **kwargs)

    monkeypatch.setattr(decoding, "cached_forward", counting)
    encoded = [
        encode_example(tiny.tokenizer, f"Write it in capitals.\n\n{w}", w.upper(), chat=True)
        for w in WORDS[:3]
    ]
    prompts = [e.prompt_tokens for e in encoded] * 2
    factors = [mask.multiplier(), HeadMask.ones(tiny).multiplier()]
    per_row = torch.stack([factors[0]] * 3 + [factors[1]] * 3)
    decoded = decode_greedy(
        tiny, prompts, max_new_tokens=3, stops=[], mask=per_row, prefix_per_mask=True
    )
    prefix = shared_prefix_length(prompts)
    assert prefix > 0 and fed[0] == (2, prefix)  # one prefix row per distinct mask
    alone = [
        decode_greedy(tiny, prompts[:3], max_new_tokens=3, stops=[], mask=HeadMask(f)).new_tokens
        for f in factors
    ]
    assert decoded.new_tokens == alone[0] + alone[1]


def test_large_batches_drop_finished_rows_with_the_same_tokens(tiny, mask, monkeypatch):
    import lens_heads.core._decoding as decoding
    from lens_heads.core._decoding import decode_greedy

    prompts = [tiny.to_tokens(w, prepend_bos=False)[0].tolist() for w in WORDS[:6]]
    per_row = torch.stack([mask.with_alpha(a).multiplier() for a in (0.0, 1.0)] * 3)
    run = dict(max_new_tokens=6, mask=per_row, prefix_per_mask=True)
    run["drop_finished"] = True
    free = decode_greedy(tiny, prompts, stops=[], **run).new_tokens
    stops = sorted({free[0][1], free[3][2]})  # rows finish at different steps
    whole = decode_greedy(tiny, prompts, stops=stops, **run)
    fed: list[int] = []
    step = decoding.cached_forward

    def counting(model, tokens, *args, **kwargs):
        fed.append(tokens.shape[0])
        return step(model, tokens, *args, **kwargs)

    monkeypatch.setattr(decoding, "cached_forward", counting)
    monkeypatch.setattr(decoding, "PRUNE_ROWS", 2)
    pruned = decode_greedy(tiny, prompts, stops=stops, **run)
    assert pruned.new_tokens == whole.new_tokens and pruned.stopped_by == whole.stopped_by
    first = fed.index(len(prompts))  # the batch's own tokens (after any prefix pass)
    assert min(fed[first:]) < len(prompts)  # later steps ran fewer rows
    assert sum(stop is not None for stop in whole.stopped_by) >= 2


def test_best_alpha_is_the_lowest_instructed_ce(curve):
    curve_rows = curve.curve
    lowest = curve_rows.loc[curve_rows["answer_ce"].idxmin(), "alpha"]
    assert curve.best_alpha == lowest
    example = AlphaCurve.example()
    assert example.best_alpha == 0.5  # CE 1.1; the un-instructed point (0.9) is not on the curve
    tied = dataclasses.replace(example, runs=example.runs.assign(answer_ce=[1.0, 1.0, 2.0, 0.5]))
    assert tied.best_alpha == 0.0  # ties go to the smaller alpha


def test_frame_markdown_and_table8_frame(curve):
    frame = curve.to_frame()
    assert frame["alpha"].tolist() == [*ALPHAS, 0.0]
    assert frame["instruction"].tolist() == [True] * len(ALPHAS) + [False]
    assert frame["setting"].tolist() == [
        "w/ M + instruction",
        "w/ 0.25M + instruction",
        "w/ 0.5M + instruction",
        "w/ instruction",
        "w/ M",
    ]
    assert (frame["heads of M"] == 3).all()
    table = curve.table8_frame()
    assert list(table.index)[:2] == ["w/ instruction", "w/ M + instruction"]
    assert table["alpha"].tolist() == [1.0, 0.0, curve.best_alpha]
    assert table["answer CE (paper: PPL)"].tolist() == [
        curve.value(1.0),
        curve.value(0.0),
        curve.value(curve.best_alpha),
    ]
    assert list(table.columns) == ["alpha", "answer CE (paper: PPL)", "accuracy", "exact match"]
    markdown = curve.to_markdown()
    assert "Table 8" in markdown and "| w/ 0.25M + instruction |" in markdown
    with pytest.raises(ValueError, match=r"alphas 1, 0 and 0\.3"):
        curve.table8_frame(0.3)


def test_save_load_round_trip(curve, tmp_path):
    written = {path.name for path in curve.save(tmp_path / "curve")}
    assert {"table.csv", "table.md", "result.json", "figure.html", "records.csv"} <= written
    loaded = AlphaCurve.load(tmp_path / "curve")
    pd.testing.assert_frame_equal(loaded.runs, curve.runs)
    pd.testing.assert_frame_equal(loaded.records, curve.records)
    assert loaded.config == json.loads(json.dumps(curve.config, default=str))
    assert (loaded.best_alpha, loaded.alphas, loaded.uninstructed_ce) == (
        curve.best_alpha,
        curve.alphas,
        curve.uninstructed_ce,
    )
    pd.testing.assert_frame_equal(loaded.to_frame(), curve.to_frame())
    with pytest.raises(ValueError, match="not a readable"):
        (tmp_path / "curve" / "result.json").write_text('{"format": "something else"}')
        AlphaCurve.load(tmp_path / "curve")


def test_plot_marks_the_uninstructed_point_and_the_best_alpha(curve):
    figure = curve.plot()
    assert isinstance(figure, go.Figure)
    names = [trace.name for trace in figure.data]
    assert names.count("with instruction") == 2  # answer CE and accuracy panels
    reference = [t for t in figure.data if t.name.startswith("w/ M, no instruction")]
    assert len(reference) == 2 and list(reference[0].x) == [0.0]
    assert reference[0].y[0] == pytest.approx(curve.uninstructed_ce)
    lines = [shape.y0 for shape in figure.layout.shapes]
    assert pytest.approx(curve.uninstructed_ce) in lines  # the dashed reference line
    (star,) = [t for t in figure.data if t.name.startswith("best alpha")]
    assert list(star.x) == [curve.best_alpha]
    assert list(figure.data[0].x) == list(ALPHAS)


def test_translation_curve_reports_bleu_and_chrf(tiny, mask):
    pairs = [("the cat", "le chat"), ("the dog", "le chien"), ("a tree", "un arbre")] * 3
    task = Task(
        "en-fr",
        tuple(Example(a, b) for a, b in pairs),
        instruction="Translate into French.",
        kind="translation",
        source_lang="en",
        target_lang="fr",
    )
    curve = lh.alpha_curve(
        tiny, task, mask, alphas=(0, 1), n_eval=3, max_new_tokens=4, progress=False
    )
    assert {"bleu", "chrf", "rouge_l"} <= set(curve.metrics)
    assert "BLEU" in curve.to_frame().columns and "chrF++" in curve.table8_frame().columns
    assert [t.name for t in curve.plot().data].count("with instruction") == 2
    assert curve.plot().layout.annotations[1].text == "BLEU"


def test_an_uninstructed_curve_has_no_reference_point(tiny, mask):
    curve = lh.alpha_curve(tiny, word_task(), mask, alphas=(0, 1), instructed=False, **RUN)
    assert curve.uninstructed is None and curve.to_frame()["instruction"].tolist() == [False] * 2
    assert curve.to_frame()["setting"].tolist() == ["w/ M", "Original"]
    with pytest.raises(ValueError, match="no instruction"):
        curve.table8_frame()


def test_a_legacy_model_takes_the_fallback_path_to_the_same_curve(tiny, curve, mask):
    from tests.unit.core.test_decoding import Legacy

    legacy = lh.alpha_curve(Legacy(tiny), word_task(), mask, alphas=ALPHAS, **RUN)
    assert legacy.records["generated"].tolist() == curve.records["generated"].tolist()
    assert legacy.records["answer_ce"].tolist() == pytest.approx(
        curve.records["answer_ce"].tolist(), abs=1e-5
    )


def test_evaluate_can_stack_its_settings(tiny, mask):
    """evaluate(stack_masks=True) decodes the settings of one prompt set together and gives
    the numbers of the setting-by-setting loop."""
    kwargs = dict(mask=mask, random_seeds=(0, 1), **RUN)
    loop = evaluate(tiny, word_task(), **kwargs)
    stacked = evaluate(tiny, word_task(), stack_masks=True, **kwargs)
    columns = ["setting", "seed", "generated", "correct", "exact", "answer_ce"]
    pd.testing.assert_frame_equal(
        stacked.records[columns], loop.records[columns], check_exact=False, atol=1e-5, rtol=0
    )
    # perplexity is exp(CE): a float32 rounding of 1e-7 in the CE moves a perplexity of 250 by
    # 2.5e-5 (and the seeds' std of perplexities by as much), so the table's tolerance is that
    pd.testing.assert_frame_equal(stacked.to_frame(), loop.to_frame(), atol=1e-4, rtol=1e-6)
    assert stacked.config["stack_masks"] and not loop.config["stack_masks"]


# -- Table 8 -------------------------------------------------------------------------------------
def test_table8_chooses_alpha_on_other_examples(tiny, curve, mask):
    table = table8(tiny, word_task(), mask, alphas=ALPHAS, **RUN)
    chosen = table.config["best_alpha"]
    assert chosen in ALPHAS and "before the held-out ones" in table.config["best_alpha_selection"]
    assert table.alphas == sorted({0.0, chosen, 1.0})
    assert table.records["input"].unique().tolist() == WORDS[-N_EVAL:]  # held-out examples
    frame = table.table8_frame()
    assert frame["alpha"].tolist() == [1.0, 0.0, chosen]
    assert frame.index[2].endswith("(best alpha)")
    # on the held-out examples the numbers are those of the full curve
    assert frame["answer CE (paper: PPL)"].tolist() == pytest.approx(
        [curve.value(a) for a in (1.0, 0.0, chosen)], abs=1e-5, rel=0
    )
    given = table8(tiny, word_task(), mask, best_alpha=0.25, **RUN)
    assert given.config["best_alpha"] == 0.25 and given.alphas == [0.0, 0.25, 1.0]
    assert given.table8_frame()["alpha"].tolist() == [1.0, 0.0, 0.25]
    from_curve = table8(tiny, word_task(), mask, best_alpha=curve, **RUN)
    assert from_curve.config["best_alpha"] == curve.best_alpha
    assert "Table 8 (alpha 0.25: given)" in given.to_markdown()
    assert "before the held-out ones" in table.table8_markdown()


# -- bad input -----------------------------------------------------------------------------------
def test_bad_input_gives_clear_errors(tiny, mask):
    task = word_task()
    with pytest.raises(ValueError, match=r"outside \[0, 1\].*lh\.HeadScale"):
        lh.alpha_curve(tiny, task, mask, alphas=(0, 1.5))
    with pytest.raises(ValueError, match="outside"):
        lh.alpha_curve(tiny, task, mask, alphas=(-0.1,))
    with pytest.raises(ValueError, match="outside"):
        lh.alpha_curve(tiny, task, mask, alphas=(float("nan"),))
    with pytest.raises(ValueError, match="alphas is empty"):
        lh.alpha_curve(tiny, task, mask, alphas=())
    with pytest.raises(ValueError, match="repeat"):
        lh.alpha_curve(tiny, task, mask, alphas=(0, 0.5, 0.5))
    with pytest.raises(ValueError, match="must be a number"):
        lh.alpha_curve(tiny, task, mask, alphas=(True,))
    with pytest.raises(MaskShapeError, match="2 layers x 4 heads"):
        lh.alpha_curve(tiny, task, HeadMask.ones(3, 4))
    with pytest.raises(ValueError, match="HeadScale has its own factors"):
        lh.alpha_curve(tiny, task, lh.HeadScale.ones(tiny).scaled(["L0H1"], 3.0))
    with pytest.raises(ValueError, match="has no instruction"):
        lh.alpha_curve(tiny, dataclasses.replace(task, instruction=None), mask)
    with pytest.raises(ValueError, match="n_eval must be at least 1"):
        lh.alpha_curve(tiny, task, mask, n_eval=0)
    with pytest.raises(ValueError, match="HeadScale"):
        table8(tiny, task, mask, best_alpha=2.0)


# -- Figures 8 and 9: sweeps on one plot ---------------------------------------------------------
def test_plot_sweeps_overlays_target_ranks_and_marks_switch_steps():
    switching = SweepResult.example()  # target top-1 from 2 heads removed on (stay=2)
    ranks = torch.tensor([[12, 1], [3, 1], [2, 1], [1, 2], [5, 1], [90, 1]])
    never = dataclasses.replace(switching, ranks=ranks)  # top-1 once, never for 2 steps
    assert (switching.switch_step(2), never.switch_step(2)) == (2, None)
    figure = lh.plot_sweeps({"ascending weight": switching, "negative init": never}, stay=2)
    assert [trace.name for trace in figure.data] == [
        "ascending weight (switch: 2 heads)",
        "negative init (no switch)",
    ]
    assert list(figure.data[0].y) == switching.target_ranks
    assert list(figure.data[1].y) == never.target_ranks
    assert [shape.x0 for shape in figure.layout.shapes] == [2]  # one switch, one line
    assert "switch step ascending weight 2, negative init none" in figure.layout.title.text
    assert figure.layout.yaxis.type == "log"


def test_plot_sweeps_of_real_sweeps_and_bad_input(tiny):
    weights = torch.tensor([[0.3, -1.0, 2.0, 0.1], [1.5, -0.2, 0.7, -3.0]])
    run = dict(target="a", max_new_tokens=0, progress=False)
    ascending = lh.removal_sweep(tiny, "apple", weights, **run)
    influential = lh.removal_sweep(tiny, "apple", "influential", **run)
    figure = lh.plot_sweeps([ascending, influential])
    assert [trace.name.split(" (")[0] for trace in figure.data] == ["weights", "influential"]
    assert list(figure.data[1].y) == influential.target_ranks
    switches = [s.switch for s in (ascending, influential) if s.switch is not None]
    assert sorted(shape.x0 for shape in figure.layout.shapes) == sorted(switches)
    untracked = lh.removal_sweep(tiny, "apple", weights, max_new_tokens=0, progress=False)
    with pytest.raises(ValueError, match="tracked no target"):
        lh.plot_sweeps({"no target": untracked})
    with pytest.raises(ValueError, match="no sweeps"):
        lh.plot_sweeps({})


# -- the analysis module -------------------------------------------------------------------------
def test_figure6_analysis_trains_evaluates_resumes_and_guards_its_folder(
    tiny, monkeypatch, tmp_path, capsys
):
    from analyses import figure6_alpha

    monkeypatch.setattr(lh, "load_model", lambda spec, **kw: tiny)
    out = tmp_path / "figure6"
    argv = ["--task", "capitalize", "--steps", "2", "--train-batch-size", "4", "--holdout", "12"]
    argv += ["--n-eval", "4", "--n-select", "4", "--alphas", "0,0.5,1", "--out", str(out)]
    assert figure6_alpha.main(argv) == 0
    assert "## Table 8 (held-out examples)" in capsys.readouterr().out
    files = ["mask/mask.safetensors", "curve/table.csv", "curve/result.json", "table8/table.md"]
    files += ["figure6.html", "summary.md", "summary.json", "config.json"]
    for name in files:
        assert (out / name).is_file(), name
    summary = json.loads((out / "summary.json").read_text())
    curve = AlphaCurve.load(out / "curve")
    assert curve.alphas == [0.0, 0.5, 1.0] and summary["best_alpha_on_curve"] == curve.best_alpha
    assert [row["alpha"] for row in summary["table8"]][:2] == [1.0, 0.0]
    numbers = json.loads((out / "numbers.json").read_text())  # the summary and its provenance
    assert numbers["provenance"]["command"].startswith("python -m analyses.figure6_alpha")
    assert numbers["best_alpha_on_curve"] == summary["best_alpha_on_curve"]
    stamps = {p: (out / p).stat().st_mtime_ns for p in files[:3]}
    assert figure6_alpha.main(argv) == 0, "a second run reuses the finished parts"
    assert {p: (out / p).stat().st_mtime_ns for p in stamps} == stamps
    assert figure6_alpha.main([*argv, "--no-progress"]) == 0, "progress bars are no setting"
    with pytest.raises(ValueError, match="other settings \\(alphas: saved"):
        figure6_alpha.main([*argv[:-4], "--alphas", "0,1", "--out", str(out)])
    # a given mask (its training folder) is used as it is: nothing is trained
    other = tmp_path / "given"
    given = ["--mask", str(out / "mask"), "--n-eval", "4", "--n-select", "4", "--alphas", "0,1"]
    assert figure6_alpha.main([*given, "--out", str(other)]) == 0
    assert not (other / "mask").exists() and (other / "curve" / "result.json").is_file()
    with pytest.raises(ValueError, match=r"outside \[0, 1\]"):
        figure6_alpha.Config(alphas=(0.0, 2.0))
    # with demonstrations: every evaluation (the curve and Table 8) puts them before the prompt
    shots = tmp_path / "shots"
    assert figure6_alpha.main([*given, "--shots", "2", "--out", str(shots)]) == 0
    assert json.loads((shots / "numbers.json").read_text())["shots"] == 2
    assert AlphaCurve.load(shots / "table8").config["shots"] == 2
    with pytest.raises(ValueError, match="exceed the 12 examples held out"):
        figure6_alpha.Config(n_eval=10, n_select=10, holdout=12)


def test_the_instruction_is_text_everywhere_and_the_bool_form_still_works(tiny, mask):
    """Issue 72: ``instruction=`` takes the text (None: the task's own) in alpha_curve and
    table8 as in every other function; whether a curve is instructed is ``instructed=``. The
    bool form of before warns and gives the same curve."""
    text = lh.alpha_curve(tiny, word_task(), mask, alphas=(0, 1), instruction="Upper.", **RUN)
    with pytest.warns(DeprecationWarning, match="instruction=False is now instructed=False"):
        old = lh.alpha_curve(tiny, word_task(), mask, alphas=(0, 1), instruction=False, **RUN)
    new = lh.alpha_curve(tiny, word_task(), mask, alphas=(0, 1), instructed=False, **RUN)
    assert old.records["generated"].tolist() == new.records["generated"].tolist()
    assert text.to_frame()["instruction"].tolist()[0] is True
