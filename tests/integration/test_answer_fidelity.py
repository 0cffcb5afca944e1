"""Answer fidelity on SmolLM2 (issue 12): the demo's capitalize mask, trained with the
end-of-turn token in its targets, answers and stops; Figure 4 over many held-out prompts runs
end to end from the command line."""

from __future__ import annotations

from contextlib import nullcontext

import pandas as pd
import pytest

import lens_heads as lh
from lens_heads.cli import main
from lens_heads.engine import EvaluationResult, MaskTrainingResult
from lens_heads.heads_up._similarity import SimilarityStats
from tests.claims import LEVEL, majority, more_often

pytestmark = pytest.mark.integration


def test_demo_mask_stops_after_the_answer(demo_run, smollm2):
    """Generated under the mask, held-out words are answered exactly and the outputs stop at
    the end-of-turn, both more often than without the mask (one-sided tests at
    :data:`tests.claims.LEVEL`; the training targets end with the end-of-turn token)."""
    training = MaskTrainingResult.load(demo_run / "training")
    assert training.config.answer_end == "auto"
    _, held_out = lh.get_task("capitalize").split(n_eval=20)
    n = len(held_out)
    counts = {}
    for name, mask in [("masked", training.mask), ("original", None)]:
        with lh.apply_mask(smollm2, mask) if mask is not None else nullcontext():
            outputs = lh.generate(smollm2, held_out.inputs, chat=True, max_new_tokens=10)
        stopped = sum(len(output.new_tokens) < 10 for output in outputs)  # EOS / end-of-turn
        answered = sum(
            output.text.strip() == example.output
            for output, example in zip(outputs, held_out.examples, strict=True)
        )
        counts[name] = (stopped, answered)
        print(name, [output.text for output in outputs])
    (stopped, answered), (stopped_0, answered_0) = counts["masked"], counts["original"]
    assert majority(stopped, n) < LEVEL, "most masked outputs end at the end-of-turn"
    assert more_often(stopped, n, stopped_0, n) < LEVEL, "... unlike the original model's"
    assert more_often(answered, n, answered_0, n) < LEVEL, "right after the answer, nothing else"


def test_demo_evaluation_records_how_outputs_ended(demo_run):
    evaluation = EvaluationResult.load(demo_run / "eval")
    print(f"\n{evaluation.to_markdown()}")
    records = evaluation.records
    masked, original = evaluation.predictions("mask"), evaluation.predictions("original")
    random = records[records["setting"] == "random"]
    n = len(masked)
    ended = int((masked["ended_by"] == "<|im_end|>").sum())
    ended_0 = int((original["ended_by"] == "<|im_end|>").sum())
    assert majority(ended, n) < LEVEL and more_often(ended, n, ended_0, n) < LEVEL
    exact = int(masked["exact"].sum())
    assert more_often(exact, n, int(original["exact"].sum()), n) < LEVEL
    assert more_often(exact, n, int(random["exact"].sum()), len(random)) < LEVEL
    table = evaluation.to_frame()
    # the paper's rule is never stricter than exact match
    assert (table["accuracy"] >= table["exact match"] - 1e-9).all()


def test_cli_figure4_over_many_prompts(demo_report, tmp_path, capsys):
    out = tmp_path / "fig4"
    argv = ["similarity", "--model", "smollm2-135m-instruct", "--task", "capitalize"]
    argv += ["--n-eval", "12", "--mask", str(demo_report / "training"), "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "paired t-test" in printed and "12 prompts" in printed
    result = SimilarityStats.load(out)
    assert result.n_prompts == 12 and result.later_layers == list(range(15, 30))
    assert result.prompts == lh.get_task("capitalize").inputs[-12:]
    per_prompt = pd.read_csv(out / "per_prompt.csv")
    assert len(per_prompt) == 12
    difference = result.difference()
    assert difference["n_positive"] + difference["n_negative"] == 12
    assert difference["ci95_low"] <= difference["mean"] <= difference["ci95_high"]
    print(result.verdict())
