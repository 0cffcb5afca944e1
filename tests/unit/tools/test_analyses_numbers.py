"""One number of each analysis module against an independent computation on the tiny model.

The modules run on a planted mask (a training folder whose weights and trajectory are set by
hand: heads L0H1 and L1H2 removed) so that the masked, original and instructed runs differ;
each check recomputes a number of ``numbers.json`` with plain forward passes, hand-written
``hook_z`` ablations and hand-computed ranks, cosines and attention sums."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
import torch

import lens_heads as lh
from analyses import (
    figure2_sweep,
    figure3_trajectories,
    figure4_similarity,
    figure5_sweep_similarity,
    figure7_mask_weights,
    figure8_9_orders,
    logit_lens_tables,
    table3_few_shot,
    table7_attention,
)
from lens_heads.core._capture import encode_prompt
from lens_heads.core._prompts import INSTRUCTION_TEMPLATE, encode_text
from lens_heads.engine import EvaluationResult, MaskTrainingResult
from lens_heads.heads_up._attention import AttentionResult
from lens_heads.heads_up._similarity_stats import SimilarityStats
from lens_heads.heads_up._sweep import SweepResult

REMOVED = [(0, 1), (1, 2)]  # the planted mask's removed heads
#: the planted keep probabilities after training (all distinct: a fixed removal order)
FINAL = torch.tensor([[0.95, 0.2, 0.85, 0.9], [0.8, 0.75, 0.3, 0.7]])
RUN = ["--steps", "3", "--n-eval", "4", "--no-progress"]


@pytest.fixture()
def tiny_everywhere(monkeypatch, tiny):
    monkeypatch.setattr(lh, "load_model", lambda spec, **kw: tiny)
    return tiny


@pytest.fixture()
def planted(tiny, tmp_path) -> Path:
    """A training folder: 3 real steps, then W and the trajectory replaced by hand. L0H1
    crosses 0.5 three times (0.9, 0.4, 0.6, 0.2), L1H2 once, every other head never."""
    config = lh.TrainingConfig(
        steps=3, batch_size=4, n_eval=4, precision="float32", trajectory_every=1
    )
    trained = lh.train_mask(tiny, lh.get_task("capitalize"), config, progress=False)
    trajectory = FINAL.repeat(4, 1, 1)
    trajectory[:, 0, 1] = torch.tensor([0.9, 0.4, 0.6, 0.2])
    trajectory[:, 1, 2] = torch.tensor([0.9, 0.8, 0.7, 0.3])
    result = dataclasses.replace(trained, W=torch.logit(FINAL), trajectory=trajectory)
    assert result.trajectory_steps == [0, 1, 2, 3]
    assert [(h // 4, h % 4) for h in range(8) if FINAL.flatten()[h] < 0.5] == REMOVED
    folder = tmp_path / "planted"
    result.save(folder)
    return folder


# -- the independent computations -------------------------------------------------------------
def _ablation(removed) -> list:
    """Hand-written ``hook_z`` hooks zeroing the ``removed`` heads."""

    def make(heads):
        def hook(z, hook):
            z = z.clone()
            z[:, :, heads] = 0.0
            return z

        return hook

    by_layer: dict[int, list[int]] = {}
    for layer, head in removed:
        by_layer.setdefault(layer, []).append(head)
    return [(f"blocks.{layer}.attn.hook_z", make(heads)) for layer, heads in by_layer.items()]


def _run(model, ids, removed=()) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Last-position logits and the activation cache of one unpadded prompt."""
    tokens = torch.tensor([ids])
    with torch.no_grad(), model.hooks(fwd_hooks=_ablation(removed)):
        logits, cache = model.run_with_cache(tokens)
    return logits[0, -1].float(), cache


def _rank(logits: torch.Tensor, token: int) -> int:
    return 1 + int((logits > logits[token]).sum())


def _cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    return float(a @ b / (a.norm() * b.norm())) if a.norm() and b.norm() else 0.0


ALL = [(layer, head) for layer in range(2) for head in range(4)]


def _sweep_ends(model, out: Path, sweep: str = "sweep") -> tuple[int, int]:
    """The target's rank with every head (step 0) and with none (the last step), by hand."""
    result = SweepResult.load(out / sweep)
    ids = encode_text(model.tokenizer, result.prompt, chat=True)
    target = model.tokenizer(result.target, add_special_tokens=False).input_ids[0]
    start = _rank(_run(model, ids)[0], target)
    end = _rank(_run(model, ids, ALL)[0], target)
    return start, end


def check_figure2(model, out, numbers):
    start, end = _sweep_ends(model, out)
    assert (numbers["target_rank_start"], numbers["target_rank_end"]) == (start, end)
    assert start != end


def check_figure3(model, out, numbers):
    assert numbers["heads_kept"] == 6
    assert numbers["heads crossing 0.5 more than once"] == 1  # L0H1
    assert numbers["heads that never crossed 0.5"] == 6  # all but L0H1 and L1H2


def check_figure4(model, out, numbers):
    stats = SimilarityStats.load(out / "similarity")
    differences = []
    for prompt in stats.prompts:
        bare = encode_prompt(model, prompt, chat=True).tokens
        instructed = encode_prompt(model, prompt, chat=True, instruction=stats.instruction).tokens
        state = {
            name: _run(model, ids, removed)[1]["blocks.1.hook_resid_post"][0, -1]
            for name, ids, removed in [
                ("original", bare, ()),
                ("instructed", instructed, ()),
                ("masked", bare, REMOVED),
            ]
        }
        differences.append(
            _cosine(state["masked"], state["instructed"])
            - _cosine(state["original"], state["instructed"])
        )  # the later half of 2 layers is layer 1
    assert numbers["n_prompts"] == len(differences) == 3
    assert numbers["mean"] == pytest.approx(sum(differences) / 3, abs=1e-5)
    assert numbers["n_positive"] == sum(d > 0 for d in differences)
    assert abs(numbers["mean"]) > 1e-4


def check_figure5(model, out, numbers):
    sweep = SweepResult.load(out / "sweep")
    task = lh.get_task("capitalize")
    reference = INSTRUCTION_TEMPLATE.format(instruction=task.instruction, input=sweep.prompt)
    bare = encode_text(model.tokenizer, sweep.prompt, chat=True)
    ref_cache = _run(model, encode_text(model.tokenizer, reference, chat=True))[1]
    for label, removed in [("start", ()), ("end", ALL)]:
        cache = _run(model, bare, removed)[1]
        for kind, hook in [
            ("decoder output", "hook_resid_post"),
            ("attention output", "hook_attn_out"),
        ]:
            for half, layer in (("later layers", 1), ("earlier layers", 0)):  # of 2 layers
                name = f"blocks.{layer}.{hook}"
                expected = _cosine(cache[name][0, -1], ref_cache[name][0, -1])
                found = numbers[half][label][kind]
                assert found == pytest.approx(expected, abs=1e-4), (half, label, kind)
    # every head removed: no attention output
    assert numbers["later layers"]["end"]["attention output"] == 0.0


def check_figure7(model, out, numbers):
    assert numbers["heads kept"] == 6 and numbers["heads"] == 8
    kept_by_layer = (FINAL >= 0.5).sum(dim=1).tolist()
    assert kept_by_layer == [3, 3]
    assert numbers["kept in the first half of the layers"] == kept_by_layer[0]
    assert numbers["kept in the second half"] == kept_by_layer[1]


def check_figure8_9(model, out, numbers):
    start, end = _sweep_ends(model, out)
    orders = [row["order"] for row in numbers["rows"]]
    assert orders == ["ascending weight", "influential", "mask from init 4"]
    for row in numbers["rows"]:  # every order starts from the full model and removes every head
        assert (row["rank at start"], row["rank at end"]) == (start, end), row["order"]
        assert row["best rank"] <= min(start, end)


def check_logit_lens(model, out, numbers):
    sweep_word = lh.get_task("capitalize").split(n_eval=4)[1].examples[0]
    ids = encode_text(model.tokenizer, sweep_word.input, chat=True)
    target_id = model.tokenizer(sweep_word.output, add_special_tokens=False).input_ids[0]
    target = model.tokenizer.decode([target_id])
    original, masked = _run(model, ids)[0], _run(model, ids, REMOVED)[0]
    assert numbers["original"][f"rank({target})"] == _rank(original, target_id)
    assert numbers["masked"][f"rank({target})"] == _rank(masked, target_id)
    assert _rank(original, target_id) != _rank(masked, target_id)


def check_table7(model, out, numbers):
    attention = AttentionResult.load(out / "attention_fruit_v_animal_3")
    task = lh.get_task("fruit_v_animal_3")
    scores = {"original": [], "instructed": [], "masked": []}

    def positions_of(encoded, prompt, word):
        start = encoded.input_start + prompt.index(word)
        return [
            i
            for i, (a, b) in enumerate(encoded.offsets)
            if b > a and a < start + len(word) and b > start
        ]

    for prompt, word in zip(attention.prompts, attention.targets, strict=True):
        for setting, instruction, removed in [
            ("original", None, ()),
            ("instructed", task.instruction, ()),
            ("masked", None, REMOVED),
        ]:
            encoded = encode_prompt(model, prompt, chat=True, instruction=instruction, offsets=True)
            target = positions_of(encoded, prompt, word)
            pool = [i for w in prompt.split(", ") for i in positions_of(encoded, prompt, w)]
            cache = _run(model, encoded.tokens, removed)[1]
            patterns = torch.stack(
                [cache[f"blocks.{layer}.attn.hook_pattern"][0, :, -1] for layer in range(2)]
            )  # [layer, head, key]
            share = patterns[:, :, target].sum(-1) / patterns[:, :, pool].sum(-1)
            scores[setting].append(share)  # Table 7: normalised over the three candidates
    rows = numbers["fruit_v_animal_3"]["rows"]
    inside = torch.ones(2, 4, dtype=torch.bool)
    for layer, head in REMOVED:
        inside[layer, head] = False

    def mean(setting, heads=None):
        per_prompt = torch.stack(scores[setting])  # [prompt, layer, head]
        chosen = per_prompt.flatten(1) if heads is None else per_prompt[:, heads]
        return float(chosen.mean(1).mean())

    assert rows["Original, all heads"] == pytest.approx(mean("original"), abs=1e-5)
    assert rows["w/ instruction, heads in M"] == pytest.approx(mean("instructed", inside), abs=1e-5)
    assert rows["w/ M, heads in 1-M"] == pytest.approx(mean("masked", ~inside), abs=1e-5)
    assert rows["w/ M, heads in 1-M"] != rows["w/ instruction, heads in 1-M"]


def check_table3(model, out, numbers):
    records = EvaluationResult.load(out / "eval_capitalize").predictions("original")
    losses = []
    for prompt, answer in zip(records["prompt"], records["answer"], strict=True):
        prompt_ids = model.tokenizer(prompt, add_special_tokens=False).input_ids
        ids = model.tokenizer(prompt + answer, add_special_tokens=False).input_ids
        with torch.no_grad():
            logits = model(torch.tensor([ids]))[0].float()
        start = len(prompt_ids)
        targets = torch.tensor(ids[start:])
        losses.append(float(torch.nn.functional.cross_entropy(logits[start - 1 : -1], targets)))
    row = next(
        r for r in numbers["rows"] if r["task"] == "capitalize" and r["setting"] == "Original"
    )
    assert len(losses) == 4
    assert row["answer CE (paper: PPL)"] == pytest.approx(sum(losses) / 4, rel=1e-5)
    assert row["perplexity"] > 1 and math.isfinite(row["perplexity"])


SWEEP = ["--task", "capitalize", "--every", "1", "--max-new-tokens", "0"]
CASES = [
    (figure2_sweep, SWEEP, check_figure2),
    (figure3_trajectories, ["--task", "capitalize"], check_figure3),
    (figure4_similarity, ["--task", "capitalize", "--n-prompts", "3"], check_figure4),
    (figure5_sweep_similarity, SWEEP, check_figure5),
    (figure7_mask_weights, ["--task", "capitalize"], check_figure7),
    (figure8_9_orders, [*SWEEP, "--negative-mask", "PLANTED"], check_figure8_9),
    (logit_lens_tables, ["--task", "capitalize"], check_logit_lens),
    (table7_attention, ["--task", "fruit_v_animal_3", "--n-prompts", "3"], check_table7),
]


@pytest.mark.parametrize(
    ("module", "options", "check"), CASES, ids=lambda v: getattr(v, "__name__", "")
)
def test_a_number_of_each_analysis_matches_an_independent_computation(
    tiny_everywhere, planted, tmp_path, module, options, check, monkeypatch
):
    from analyses import _common

    # on a CPU with native bf16 too, a run that only uses a float32 mask records float32
    measured = _common.machine
    monkeypatch.setattr(_common, "machine", lambda: {**measured(), "native_bf16": True})
    out = tmp_path / "out"
    options = [str(planted) if option == "PLANTED" else option for option in options]
    assert module.main([*RUN, *options, "--mask", str(planted), "--out", str(out)]) == 0
    assert MaskTrainingResult.load(planted).mask.n_selected == 6
    numbers = json.loads((out / "numbers.json").read_text())
    assert numbers["provenance"]["precision"] == "float32", "the mask's precision, not the CPU's"
    check(tiny_everywhere, out, numbers)


def test_table3_answer_ce_matches_a_teacher_forced_pass(tiny_everywhere, tmp_path):
    out = tmp_path / "out"
    options = ["--tasks", "capitalize,next_item", "--shots", "1", "--n-per-task", "4"]
    assert table3_few_shot.main([*RUN, *options, "--random-seeds", "0", "--out", str(out)]) == 0
    check_table3(tiny_everywhere, out, json.loads((out / "numbers.json").read_text()))
