"""Errors of gradient estimates over a task's prompts (issue 36): the recorded parts equal
their definitions on a tiny model, the summary's numbers follow from the tensors, and the
failure names come from the parts of each head's error."""

from __future__ import annotations

import pytest
import torch

import lens_heads as lh
from lens_heads.core._hooks import ablated
from lens_heads.core._tasks import Example, Task
from lens_heads.engine import _scoring as scoring
from lens_heads.heads_up import (
    EstimateErrors,
    EstimateErrorsConfig,
    estimate_errors,
)
from lens_heads.heads_up._sweep_gradients import sweep_estimates

WORDS = "apple pear plum fig kiwi lime date peach grape melon lemon mango".split()
TASK = Task("upper", tuple(Example(w, w.upper()) for w in WORDS))
ORDER = ["L1H0", "L0H2", "L1H3", "L0H1"]
FAST = EstimateErrorsConfig(n_eval=3, ig_steps=64, k=2, chat=False, progress=False)


@pytest.fixture(scope="module")
def model():
    return lh.tiny_model(n_layers=2, n_heads=4, n_kv_heads=2, seed=0)


def _prompts(model, config):
    train, evaluation = TASK.split(n_eval=config.n_eval)
    encoded = scoring.encode_prompts(
        model, evaluation, instructed=False, chat=False, shots=0, shot_pool=None, shot_seed=0,
        separator="\n\n",
    )  # fmt: skip
    return train, evaluation, encoded


def test_each_part_is_its_definition_on_every_prompt(model, tmp_path):
    found = estimate_errors(model, TASK, ORDER, FAST)
    assert found.exact.shape == (3, 4) and found.order == ORDER
    _, _, encoded = _prompts(model, FAST)
    for row, example in enumerate(encoded):
        tokens, answer = example.prompt_tokens, example.answer_tokens[0]
        alone = sweep_estimates(model, tokens, answer, ORDER, steps=4)
        torch.testing.assert_close(found.exact[row], torch.tensor(alone.exact))
        for index, head in enumerate(ORDER):  # removing the head alone: a sweep of one step
            single = sweep_estimates(model, tokens, answer, [head], steps=1)
            assert float(found.alone[row, index]) == pytest.approx(single.exact[0], abs=1e-5)
            assert float(found.first_order[row, index]) == pytest.approx(
                single.first_order[0], abs=1e-5
            )
        # integrated gradients add up to the sweep's total change on each prompt
        assert float(found.integrated[row].sum()) == pytest.approx(
            float(found.exact[row].sum()), rel=2e-2, abs=1e-3
        )
        _, cache = model.run_with_cache(torch.tensor([tokens]))
        pattern = cache["blocks.1.attn.hook_pattern"][0, 0, -1]
        assert float(found.attention_max[row, 0]) == pytest.approx(float(pattern.max()))
    frame = found.to_frame().set_index("estimate")
    assert frame.loc["integrated gradients", "abs error of the total"] < 1e-2
    assert found.cost["integrated gradients"] == "1 forward and 1 backward of 64 rows"
    found.save(tmp_path / "errors")
    again = EstimateErrors.load(tmp_path / "errors")
    torch.testing.assert_close(again.exact, found.exact)
    assert list(again.by_step()["head"]) == ORDER


def test_mean_ablation_runs_the_sweeps_inside_the_bare_training_mean(model):
    from dataclasses import replace

    config = replace(FAST, ablation="mean")
    found = estimate_errors(model, TASK, ORDER, config)
    train, evaluation, encoded = _prompts(model, config)
    baseline = scoring.task_baseline(model, "mean", train, evaluation, chat=False)
    example = encoded[0]
    with ablated(model, baseline):
        by_hand = sweep_estimates(model, example.prompt_tokens, example.answer_tokens[0], ORDER)
    torch.testing.assert_close(found.exact[0], torch.tensor(by_hand.exact))
    assert found.settings["ablation"] == "mean"
    zero = estimate_errors(model, TASK, ORDER, FAST)
    assert not torch.allclose(zero.exact, found.exact)


def _made(exact, first, integrated, alone, attention) -> EstimateErrors:
    return EstimateErrors(
        model="m", task="t", order=[f"L0H{i}" for i in range(exact.shape[1])],
        exact=exact, first_order=first, integrated=integrated, alone=alone,
        attention_max=attention, settings={"k": 2, "saturation": 0.9},
    )  # fmt: skip


def test_the_summary_and_the_failure_names_follow_from_the_parts():
    exact = torch.tensor([[-3.0, -1.0, 0.5, -2.0], [-2.5, -1.5, 0.2, -1.0]])
    # head 0: the tangent is right about removing it alone, earlier removals change it
    # head 1: alone and exact agree, the tangent misses (and its attention is saturated)
    alone = exact.clone()
    alone[:, 0] = 1.0
    first = alone.clone()
    first[:, 1] = 2.0
    attention = torch.full((2, 4), 0.3)
    attention[:, 1] = 0.95
    errors = _made(exact, first, exact.clone(), alone, attention)
    failures = errors.failures("first order").set_index("head")
    assert failures.loc["L0H0", "failure"] == "interaction"
    assert failures.loc["L0H1", "failure"] == "linearisation, saturated"
    assert list(failures.index[:2]) == ["L0H0", "L0H1"]  # the largest errors first
    frame = errors.to_frame().set_index("estimate")
    assert frame.loc["integrated gradients", "spearman"] == pytest.approx(1.0)
    assert frame.loc["integrated gradients", "top-2 overlap"] == 2.0
    assert frame.loc["integrated gradients", "abs error per step"] == 0.0
    assert frame.loc["first order", "spearman"] < 1.0
    assert frame.loc["first order", "abs error per step"] == pytest.approx(
        float((first - exact).abs().mean())
    )
    assert errors.plot().data[0].name == "|exact step|"
    with pytest.raises(lh.LensHeadsError, match="estimate must be one of"):
        errors.failures("second order")


def test_bad_settings_are_refused_before_any_model_runs():
    with pytest.raises(lh.LensHeadsError, match="n_eval must be at least 1"):
        EstimateErrorsConfig(n_eval=0)
    with pytest.raises(lh.LensHeadsError, match="saturation must lie in"):
        EstimateErrorsConfig(saturation=1.5)
    with pytest.raises(lh.LensHeadsError, match="got 'median'"):
        EstimateErrorsConfig(ablation="median")


def test_the_command_writes_the_table_and_reloads(tiny_dir, tmp_path, capsys):
    from lens_heads.cli import main

    out = tmp_path / "run"
    argv = ["sweep-estimates", "--model", str(tiny_dir), "--task", "capitalize", "--heads",
            "L0H1,L1H2,L0H3", "--n-eval", "2", "--ig-steps", "4", "--k", "2", "--chat", "no",
            "--out", str(out), "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    assert "integrated gradients" in capsys.readouterr().out
    again = EstimateErrors.load(out / "errors")
    assert again.order == ["L0H1", "L1H2", "L0H3"] and again.exact.shape == (2, 3)
    assert (
        "linearisation" in (out / "summary.md").read_text()
        or "interaction" in (out / "summary.md").read_text()
    )


def test_resample_ablation_takes_a_training_prompt_of_the_same_length_as_donor(model):
    from dataclasses import replace

    from lens_heads.core._hooks import head_outputs

    found = estimate_errors(model, TASK, ORDER, replace(FAST, ablation="resample"))
    train, _, encoded = _prompts(model, FAST)
    bare = scoring.encode_prompts(
        model, train, instructed=False, chat=False, shots=0, shot_pool=None, shot_seed=0,
        separator="\n\n",
    )  # fmt: skip
    example = encoded[0]  # "melon": its donor is the first training word of five letters
    donor = next(e for e in bare if len(e.prompt_tokens) == len(example.prompt_tokens))
    assert TASK.examples[WORDS.index("apple")].input == "apple"
    answer = example.answer_tokens[0]
    with ablated(model, head_outputs(model, torch.tensor([[*donor.prompt_tokens, answer]]))):
        by_hand = sweep_estimates(model, example.prompt_tokens, answer, ORDER)
    torch.testing.assert_close(found.exact[0], torch.tensor(by_hand.exact))
    zero = estimate_errors(model, TASK, ORDER, FAST)
    assert not torch.allclose(zero.exact, found.exact)


def test_the_path_is_the_answer_logit_along_the_integrated_gradient_path(model, tmp_path):
    from dataclasses import replace

    from lens_heads.heads_up._sweep_gradients import answer_logit

    found = estimate_errors(model, TASK, ORDER, replace(FAST, path_points=5))
    _, _, encoded = _prompts(model, FAST)
    example = encoded[1]
    removed = torch.ones(2, 4)
    for head in ORDER:
        layer, index = lh.core.internal.parse_head(head)
        removed[layer, index] = 0.0
    t = torch.tensor([0.0, 0.25, 0.5, 0.75, 1.0])[:, None, None]
    with torch.no_grad():
        expected = answer_logit(
            model, example.prompt_tokens, example.answer_tokens[0], 1 + t * (removed - 1)
        )
    torch.testing.assert_close(found.path[1], expected)
    # its ends are the full model and the sweep's last step
    assert float(found.path[1, -1] - found.path[1, 0]) == pytest.approx(
        float(found.exact[1].sum()), abs=1e-4
    )
    rough = found.path_roughness()
    assert rough["path travel"] >= rough["path ends apart"] - 1e-6
    steps = found.path.diff(dim=1).abs()
    share = (steps.max(1).values / steps.sum(1)).mean()
    assert rough["largest segment share"] == pytest.approx(float(share))
    assert 1 / 4 <= rough["largest segment share"] <= 1  # 4 segments
    found.save(tmp_path / "e")
    torch.testing.assert_close(EstimateErrors.load(tmp_path / "e").path, found.path)
