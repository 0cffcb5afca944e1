"""Issue 46 on tiny models: the faithfulness of a ranking against numbers written out by hand,
counterfactual ablation against a by-hand swap of ``hook_z``, the pairs, every method, the
benchmark as a resumable result and the MIB export."""

from __future__ import annotations

import json
import random

import pytest
import torch

import lens_heads as lh
from lens_heads.core._tasks import Example, Task
from lens_heads.finders import (
    BenchmarkConfig,
    FinderBenchmark,
    MethodConfig,
    counterfactual_pairs,
    faithfulness,
    head_finder_benchmark,
)
from lens_heads.finders._counterfactuals import ioi_records
from lens_heads.finders._faithfulness import PairScorer
from lens_heads.finders._methods import METHODS, score

WORDS = [f"{a}{b}{c}" for a in "bcdfg" for b in "aeiou" for c in "lmnrst"]


def _task() -> Task:
    return Task("caps", tuple(Example(w, w.upper()) for w in WORDS), match="startswith")


@pytest.fixture(scope="module")
def linear():
    """One layer, four heads: heads 0 and 1 are one head twice (one key-value head, the same
    query and output weights), heads 2 and 3 write nothing (their output weights are zero), the
    MLP writes nothing and the final norm is the identity -- so the logit difference is the
    embedding's plus the two equal heads' contributions, and a circuit's faithfulness is the
    share of those two heads it keeps."""
    model = lh.tiny_model(n_layers=1, n_heads=4, n_kv_heads=2, d_head=16, seed=3)
    hf = model.original_model
    attention = hf.model.layers[0].self_attn
    with torch.no_grad():
        q = attention.q_proj.weight  # [n_heads * d_head, d_model]
        q[16:32] = q[0:16]
        o = attention.o_proj.weight  # [d_model, n_heads * d_head]
        o[:, 16:32] = o[:, 0:16]
        o[:, 32:64] = 0.0
        hf.model.layers[0].mlp.down_proj.weight.zero_()
    norm = hf.model.norm
    norm.forward = lambda hidden: hidden  # the identity: the readout is linear in the heads
    return model


def _pairs(model):
    return counterfactual_pairs(model, _task(), n=12, n_eval=60, seed=1)


def test_the_right_ranking_is_perfect_and_the_reverse_one_is_worth_half(linear):
    pairs = _pairs(linear)
    sizes = (0.5, 0.75, 1.0)  # 2, 3 and 4 of the 4 heads
    right = faithfulness(linear, pairs, torch.tensor([[4.0, 3.0, 2.0, 1.0]]), "right",
                         sizes=sizes, bootstrap=20)  # fmt: skip
    assert right.counts == [2, 3, 4]
    assert right.f_signed == pytest.approx([1.0, 1.0, 1.0], abs=1e-5)
    assert right.cpr == pytest.approx(1.0, abs=1e-5) and right.cmd == pytest.approx(0.0, abs=1e-5)
    assert right.removal == pytest.approx([0.0, 0.0, 0.0], abs=1e-5)  # both carrying heads gone
    reverse = faithfulness(linear, pairs, torch.tensor([[1.0, 2.0, 3.0, 4.0]]), "reverse",
                           sizes=sizes, bootstrap=20)  # fmt: skip
    # top 2: heads 3 and 2 (nothing) -> 0; top 3 adds head 1 (half the total) -> 0.5; all -> 1
    assert reverse.f_signed == pytest.approx([0.0, 0.5, 1.0], abs=1e-5)
    # area over the sizes / their width: (0.25 (0 + 0.5) / 2 + 0.25 (0.5 + 1) / 2) / 0.5
    assert reverse.cpr == pytest.approx(0.5, abs=1e-5)
    # |1 - f| = 1, 0.5, 0: (0.25 (1 + 0.5) / 2 + 0.25 (0.5 + 0) / 2) / 0.5
    assert reverse.cmd == pytest.approx(0.5, abs=1e-5)
    # signed against absolute: a negative score ranks last by sign, first by size
    mixed = faithfulness(linear, pairs, torch.tensor([[-4.0, 3.0, 2.0, 1.0]]), "mixed",
                         sizes=sizes, bootstrap=20)  # fmt: skip
    assert mixed.f_signed[0] == pytest.approx(0.5, abs=1e-5)  # heads 1, 2
    assert mixed.f_absolute[0] == pytest.approx(1.0, abs=1e-5)  # heads 0, 1


def test_the_exact_effects_and_the_gradients_find_the_two_heads(linear):
    pairs = _pairs(linear)
    config = MethodConfig(ig_steps=4)
    effects = score(linear, "effects-counterfactual", _task(), pairs, config, chat=False).scores
    attribution = score(linear, "attribution", _task(), pairs, config, chat=False).scores
    integrated = score(linear, "integrated", _task(), pairs, config, chat=False).scores
    for scores in (effects, attribution, integrated):  # linear in each head: all three agree
        torch.testing.assert_close(scores, effects, rtol=1e-3, atol=1e-5)
    assert effects[0, 2:].abs().max() < 1e-6 and effects[0, 0] == pytest.approx(effects[0, 1])
    scorer = PairScorer(linear, pairs, "counterfactual", 64)
    values = scorer.metrics(torch.stack([torch.ones(1, 4), torch.zeros(1, 4)])).mean(dim=1)
    # completeness: integrated gradients sum to m(all heads) - m(none)
    assert float(integrated.sum()) == pytest.approx(float(values[0] - values[1]), rel=1e-3)


def test_the_warm_mask_starts_from_the_gradients_circuit_and_keeps_it(linear):
    """On the model where heads 0 and 1 carry the answer, the warm start opens exactly the
    gradients' top ``k`` heads, and a few steps trained to match the model keep them: its
    circuit of two heads is the two carrying heads. (A cold start, the same logit for every
    head, has no such head start.)"""
    from lens_heads.finders._methods import warm_start

    pairs = _pairs(linear)
    config = MethodConfig(ig_steps=4, mask_steps=3, precision="float32")
    integrated = score(linear, "integrated", _task(), pairs, config, chat=False).scores
    start = warm_start(integrated, k=2)
    assert (start > 0).flatten().tolist() == [True, True, False, False]
    warm = score(linear, "warm-mask", _task(), pairs, config, chat=False, sizes=(0.5, 1.0))
    assert warm.circuits is not None
    assert warm.circuits[0].flatten().tolist() == [1.0, 1.0, 0.0, 0.0]
    assert warm.forwards > score(linear, "matching-mask", _task(), pairs, config, chat=False,
                                 sizes=(0.5, 1.0)).forwards  # fmt: skip  # the gradients' too


def test_the_difference_mask_contrasts_each_pair_and_finds_the_two_heads(linear):
    """The pairs carry their counterfactual's answer: a trainer on ``as_task`` contrasts each
    example with exactly the pair's ``counterfactual_answer`` (the token the metric ``m``
    subtracts), and the difference mask's circuit of two heads is the two carrying heads."""
    from lens_heads.engine import MaskTrainer, TrainingConfig

    pairs = _pairs(linear)
    assert all(p.counterfactual_output for p in pairs.pairs)
    config = TrainingConfig(steps=1, batch_size=4, n_eval=0, precision="float32", chat=False,
                            ablation="counterfactual", answer_end="none", objective="difference",
                            instructed=True)  # fmt: skip
    trainer = MaskTrainer(linear, pairs.as_task(_task().instruction), config)
    assert trainer.contrasts == [p.counterfactual_answer for p in pairs.pairs]
    assert [e.answer_tokens[0] for e in trainer.encoded] == [p.answer for p in pairs.pairs]
    methods = MethodConfig(ig_steps=4, mask_steps=3, precision="float32")
    for method in ("difference-mask", "warm-difference-mask"):
        found = score(linear, method, _task(), pairs, methods, chat=False, sizes=(0.5, 1.0))
        assert found.circuits is not None and found.circuits[0].sum() == 2
    warm = score(linear, "warm-difference-mask", _task(), pairs, methods, chat=False,
                 sizes=(0.5, 1.0))  # fmt: skip
    assert warm.circuits[0].flatten().tolist() == [1.0, 1.0, 0.0, 0.0]


@pytest.fixture(scope="module")
def opposed():
    """The linear model with head 2 made the negative of head 0 (the second key-value head a
    copy of the first, head 2's query head 0's, its output weights head 0's negated): all four
    heads together add one head's worth to the logit difference, heads 0 and 1 alone two."""
    model = lh.tiny_model(n_layers=1, n_heads=4, n_kv_heads=2, d_head=16, seed=3)
    hf = model.original_model
    attention = hf.model.layers[0].self_attn
    with torch.no_grad():
        for projection in (attention.k_proj, attention.v_proj):
            projection.weight[16:32] = projection.weight[0:16]
        q, o = attention.q_proj.weight, attention.o_proj.weight
        q[16:32] = q[0:16]
        q[32:48] = q[0:16]
        o[:, 16:32] = o[:, 0:16]
        o[:, 32:48] = -o[:, 0:16]
        o[:, 48:64] = 0.0
        hf.model.layers[0].mlp.down_proj.weight.zero_()
    hf.model.norm.forward = lambda hidden: hidden
    return model


def test_a_calibrated_circuit_is_cut_back_to_the_prefix_nearest_the_model(opposed):
    """Heads 0 and 1 kept with head 2 patched give f = 2 (the head against the answer gone), head
    0 alone f = 1, heads 0 to 2 f = 1: a budget of two heads is cut back to head 0, a budget of
    three keeps all three (the tie at f = 1 goes to the larger circuit)."""
    from lens_heads.finders._methods import _Inputs, calibrated_circuits

    pairs = _pairs(opposed)
    scorer = PairScorer(opposed, pairs, "counterfactual", 64)
    circuits = torch.tensor([[[1.0, 1.0, 1.0, 1.0]], [[0.0] * 4], [[1.0, 1.0, 0, 0]],
                             [[1.0, 0, 0, 0]], [[1.0, 1.0, 1.0, 0]]])  # fmt: skip
    m = scorer.metrics(circuits).mean(dim=1)
    f = ((m[2:] - m[1]) / (m[0] - m[1])).tolist()
    assert f == pytest.approx([2.0, 1.0, 1.0], abs=1e-4)
    inputs = _Inputs(opposed, _task(), pairs, MethodConfig(), False, (0.5, 1.0))
    order = torch.tensor([[4.0, 3.0, 2.0, 1.0]])
    picked, fitted, forwards = calibrated_circuits(inputs, [order, order], [2, 3])
    assert picked[0].flatten().tolist() == [1.0, 0.0, 0.0, 0.0]
    assert picked[1].flatten().tolist() == [1.0, 1.0, 1.0, 0.0]
    assert fitted == pytest.approx([1.0, 1.0], abs=1e-4) and forwards > 0
    # integrated gradients rank heads 0, 1 and 2 alike by size: their top two overshoot, the
    # calibrated circuit of at most two heads is one head
    config = MethodConfig(ig_steps=4)
    plain = score(opposed, "integrated", _task(), pairs, config, chat=False, sizes=(0.5, 1.0))
    assert plain.scores.abs()[0, :3].tolist() == pytest.approx([plain.scores[0, 0].item()] * 3,
                                                                rel=1e-3)  # fmt: skip
    cut = score(opposed, "calibrated-integrated", _task(), pairs, config, chat=False,
                sizes=(0.5, 1.0))  # fmt: skip
    assert cut.circuits is not None and cut.circuits[0].sum() == 1
    assert cut.circuits[1].sum() == 4 and cut.forwards > plain.forwards
    assert cut.notes["fitted"] == pytest.approx([1.0, 1.0], abs=1e-4) and not plain.notes
    # on the held-out pairs: the plain top two overshoot to f = 2, the cut-back circuit is at 1
    held_out = counterfactual_pairs(opposed, _task(), n=12, n_eval=60, seed=2)
    both = [faithfulness(opposed, held_out, found.scores, name, sizes=(0.5, 1.0), bootstrap=10,
                         circuits=found.circuits)
            for name, found in (("plain", plain), ("cut", cut))]  # fmt: skip
    assert both[0].f_absolute[0] == pytest.approx(2.0, abs=1e-4) and both[0].kept == [2, 4]
    assert both[1].f_absolute[0] == pytest.approx(1.0, abs=1e-4) and both[1].kept == [1, 4]
    assert both[1].cmd < both[0].cmd and both[1].to_frame()["heads kept"].tolist() == [1, 4]
    fitted_curve = faithfulness(
        opposed,
        held_out,
        cut.scores,
        "cut",
        sizes=(0.5, 1.0),
        bootstrap=10,
        circuits=cut.circuits,
        fitted=cut.notes["fitted"],
    )
    assert fitted_curve.fitted == pytest.approx([1.0, 1.0], abs=1e-4) and both[1].fitted == []


def test_the_nearest_circuit_is_chosen_once_measured_and_ties_keep_the_earlier(opposed):
    """Of heads 0 and 1 (f = 2) and head 0 alone (f = 1), head 0 alone; of heads 0 to 2 and head
    0 alone (both f = 1), the first; a circuit given twice is measured once."""
    from lens_heads.finders._circuits import nearest_circuits
    from lens_heads.finders._methods import _Inputs

    inputs = _Inputs(opposed, _task(), _pairs(opposed), MethodConfig(), False, (0.5, 1.0))
    two, one, three = (torch.tensor([values]) for values in
                       ([1.0, 1.0, 0, 0], [1.0, 0, 0, 0], [1.0, 1.0, 1.0, 0]))  # fmt: skip
    picked, fitted, forwards = nearest_circuits(inputs, [[two, one], [three, one]])
    assert [p.flatten().tolist() for p in picked] == [one.flatten().tolist(),
                                                      three.flatten().tolist()]  # fmt: skip
    assert fitted == pytest.approx([1.0, 1.0], abs=1e-4)
    _, _, again = nearest_circuits(inputs, [[two, one, two.clone()], [three, one]])
    assert again == forwards, "the copy of a circuit is not measured again"
    with pytest.raises(lh.LensHeadsError, match="at least one candidate"):
        nearest_circuits(inputs, [[two], []])


def test_the_selected_mask_keeps_the_step_nearest_the_model_on_the_calibration_pairs(opposed):
    """The top head by the size of its gradient is head 0 (f = 1); trained for the answer alone,
    an exact mask of one head ends on head 2, which works against it (f = -1). Chosen among its
    steps on the calibration pairs, the circuit is one head that carries the answer (f = 1), and
    its ``fitted`` is its ``f`` there by hand; ``selected-exact-mask`` keeps a step at least as
    near 1 there as its last, and the choice costs forwards."""
    from lens_heads.finders._methods import _budget_masks, _Inputs

    pairs = _pairs(opposed)
    calibration = counterfactual_pairs(opposed, _task(), n=12, n_eval=60, seed=4)
    config = MethodConfig(ig_steps=4, mask_steps=60, precision="float32")
    inputs = _Inputs(opposed, _task(), pairs, config, False, (0.25, 1.0), None, calibration)
    scorer = PairScorer(opposed, calibration, "counterfactual", 64)

    def f(circuit):
        m = scorer.metrics(torch.stack([torch.ones(1, 4), torch.zeros(1, 4), circuit])).mean(1)
        return float((m[2] - m[1]) / (m[0] - m[1]))

    found = {
        every: _budget_masks("answer", warm=True, exact=True, by_size=True, select_every=every)(
            inputs
        )
        for every in (0, 1)
    }
    last, chosen = found[0][3][0], found[1][3][0]
    assert last.flatten().tolist() == [0.0, 0.0, 1.0, 0.0]
    assert f(last) == pytest.approx(-1, abs=1e-3)
    assert chosen.flatten().tolist() in ([1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0])
    assert f(chosen) == pytest.approx(1, abs=1e-3)
    assert found[1][4]["fitted"][0] == pytest.approx(f(chosen), abs=1e-5) and not found[0][4]
    assert found[1][1] > found[0][1]
    exact = score(opposed, "exact-mask", _task(), pairs, config, chat=False, sizes=(0.5, 1.0),
                  calibration_pairs=calibration)  # fmt: skip
    selected = score(opposed, "selected-exact-mask", _task(), pairs, config, chat=False,
                     sizes=(0.5, 1.0), calibration_pairs=calibration)  # fmt: skip
    assert selected.circuits is not None and exact.circuits is not None
    assert abs(1 - f(selected.circuits[0])) <= abs(1 - f(exact.circuits[0])) + 1e-6


def test_the_calibrated_cut_reads_pairs_of_its_own_beside_the_training_ones(tiny, tmp_path):
    """``skip`` draws the pairs after the training pairs of the same draw (none in common), and
    the calibrated cut's ``f`` is measured on them, not on the pairs the methods trained on."""
    from lens_heads.finders._methods import _Inputs, calibrated_circuits

    train = counterfactual_pairs(tiny, _task(), part="train", n=6, n_eval=60)
    calibration = counterfactual_pairs(tiny, _task(), part="train", n=6, n_eval=60, skip=6)
    both = counterfactual_pairs(tiny, _task(), part="train", n=12, n_eval=60)
    assert both.pairs == train.pairs + calibration.pairs and calibration.settings["skip"] == 6
    assert not {p.text for p in train.pairs} & {p.text for p in calibration.pairs}
    with pytest.raises(lh.LensHeadsError, match="after the first 10000"):
        counterfactual_pairs(tiny, _task(), part="train", n=6, n_eval=60, skip=10_000)
    order = torch.tensor([[0.9, 0.1, 0.5, 0.3], [0.8, 0.2, 0.7, 0.4]])
    inputs = _Inputs(tiny, _task(), train, MethodConfig(), False, (0.5, 1.0), None, calibration)
    picked, fitted, _ = calibrated_circuits(inputs, [order], [4])

    def f(pairs):
        values = (
            PairScorer(tiny, pairs, "counterfactual", 64)
            .metrics(torch.stack([torch.ones(2, 4), torch.zeros(2, 4), picked[0]]))
            .mean(dim=1)
        )
        return float((values[2] - values[1]) / (values[0] - values[1]))

    assert fitted[0] == pytest.approx(f(calibration), abs=1e-5)
    assert abs(f(train) - f(calibration)) > 1e-3, "the two sets differ: the test means something"
    with pytest.raises(lh.LensHeadsError, match="n_calibration_pairs"):
        BenchmarkConfig(n_calibration_pairs=1)
    config = BenchmarkConfig(n_pairs=6, n_train_pairs=6, n_calibration_pairs=4, n_eval=60,
                             bootstrap=10, sizes=(0.25, 1.0),
                             method_settings=MethodConfig(ig_steps=2))  # fmt: skip
    head_finder_benchmark(tiny, ["capitalize"], ["calibrated-integrated"], config, out=tmp_path)
    stored = {p.parent.name: json.loads(p.read_text()) for p in tmp_path.rglob("pairs.json")}
    texts = {part: {p["text"] for p in stored[f"pairs-{part}"]["pairs"]}
             for part in ("train", "calibration")}  # fmt: skip
    assert len(texts["calibration"]) == 4 and not texts["train"] & texts["calibration"]


def test_counterfactual_ablation_is_a_swap_of_hook_z_by_hand(tiny):
    pairs = counterfactual_pairs(tiny, _task(), n=4, n_eval=60)
    mask = torch.ones(2, 4)
    mask[1, 2] = 0.0  # L1H2 ablated
    found = PairScorer(tiny, pairs, "counterfactual", 8).metrics(mask[None])[0]
    for index, pair in enumerate(pairs.pairs):
        _, cache = tiny.run_with_cache(torch.tensor([pair.counterfactual_tokens]))
        donor = cache["blocks.1.attn.hook_z"][0, :, 2]

        def swap(z, hook, donor=donor):
            z = z.clone()
            z[0, :, 2] = donor
            return z

        logits = tiny.run_with_hooks(
            torch.tensor([pair.tokens]), fwd_hooks=[("blocks.1.attn.hook_z", swap)]
        )[0, -1]
        expected = logits[pair.answer] - logits[pair.counterfactual_answer]
        assert float(found[index]) == pytest.approx(float(expected), abs=1e-4)


def test_ioi_pairs_differ_only_in_the_second_mention_of_the_subject():
    records = ioi_records()
    assert len(records) == 600 and {r["order"] for r in records} == {"ABBA", "BABA"}
    for record in records:
        clean, counter = record["prompt"].split(), record["counterfactual"].split()
        differ = [i for i, (a, b) in enumerate(zip(clean, counter, strict=True)) if a != b]
        assert len(differ) == 1, record
        word = clean[differ[0]].rstrip(",.")
        assert word == record["s"] and counter[differ[0]].rstrip(",.") == record["io"]
        assert clean.count(record["io"]) == 1 and record["answer"] == " " + record["io"]
        assert record["counterfactual_answer"] == " " + record["s"]


def test_the_stored_ioi_prompts_are_the_generator_s():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "scripts" / "make_builtin_data.py"
    spec = importlib.util.spec_from_file_location("make_builtin_data", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.ioi_records(random.Random(46)) == ioi_records()


@pytest.mark.parametrize("task", ["capitalize", "country-capital", "antonym", "english-french"])
def test_the_toolkit_tasks_counterfactuals_change_the_answer(tiny, task):
    pairs = counterfactual_pairs(tiny, task, n=10, n_eval=60, seed=2)
    held_out = {e.input for e in lh.get_task(task).split(n_eval=60)[1].examples}
    for pair in pairs.pairs:
        assert len(pair.tokens) == len(pair.counterfactual_tokens)
        assert pair.answer != pair.counterfactual_answer and pair.text != pair.counterfactual_text
        assert pair.text in held_out and pair.counterfactual_text in held_out
    train = counterfactual_pairs(tiny, task, part="train", n=10, n_eval=60, seed=2)
    assert not {p.text for p in train.pairs} & held_out, "training pairs never held out ones"


@pytest.mark.parametrize("method", [m for m in METHODS if m not in ("translation",)])
def test_every_method_scores_every_head(tiny, method):
    task = _task()
    pairs = counterfactual_pairs(tiny, task, part="train", n=6, n_eval=60)
    config = MethodConfig(
        ig_steps=2, mask_steps=2, n_masks=2, chg_steps=2, chg_masks=2, lahis_documents=4,
        detector_sequences=2, precision="float32",
    )  # fmt: skip
    found = score(tiny, method, task.split(n_eval=60)[0], pairs, config, chat=False)
    assert found.scores.shape == (2, 4) and torch.isfinite(found.scores).all()
    assert found.seconds >= 0


def test_the_benchmark_resumes_reloads_and_exports_for_mib(tiny, tmp_path, monkeypatch):
    config = BenchmarkConfig(n_pairs=6, n_train_pairs=6, n_eval=60, bootstrap=20,
                             sizes=(0.25, 0.5, 1.0))  # fmt: skip
    methods = ["effects-zero", "attribution", "integrated", "random-0"]
    first = head_finder_benchmark(tiny, ["capitalize"], methods, config, out=tmp_path)
    frame = first.to_frame()
    assert list(frame["method"]) == methods and frame["CMD"].notna().all()
    assert frame.loc[frame["method"] != frame["best gradient"], "p (Holm)"].notna().all()
    reloaded = FinderBenchmark.load(tmp_path / "benchmark")
    assert reloaded.to_frame()["CMD"].tolist() == pytest.approx(frame["CMD"].tolist())
    from lens_heads.finders import _benchmark as benchmark

    monkeypatch.setattr(benchmark, "score", lambda *a, **k: pytest.fail("recomputed"))
    again = head_finder_benchmark(tiny, ["capitalize"], methods, config, out=tmp_path)
    assert again.to_frame()["CMD"].tolist() == pytest.approx(frame["CMD"].tolist())
    with pytest.raises(lh.LensHeadsError, match="other settings"):
        head_finder_benchmark(tiny, ["capitalize"], methods, config, out=tmp_path, seed=1)
    monkeypatch.undo()  # a method and a task added later: only they compute
    more = head_finder_benchmark(tiny, ["capitalize", "antonym"], [*methods, "random-1"], config,
                                 out=tmp_path)  # fmt: skip
    kept = more.to_frame().set_index(["task", "method"])
    assert kept.loc[("capitalize", "attribution"), "CMD"] == pytest.approx(
        frame.set_index("method").loc["attribution", "CMD"]
    )
    assert ("antonym", "random-1") in kept.index
    from lens_heads.finders._mib import write_mib_scores

    path = write_mib_scores(first.curves["capitalize/attribution"].scores, tmp_path / "mib",
                            "capitalize", "tiny", d_model=64)  # fmt: skip
    nodes = json.loads(path.read_text())["nodes"]
    assert path.parent.name == "capitalize_tiny" and len(nodes) == 1 + 2 * 4 + 2
    assert nodes["a1.h3"]["score"] == pytest.approx(float(first.curves["capitalize/attribution"]
                                                          .scores[1, 3]))  # fmt: skip


def test_integrated_gradients_sum_to_the_total_change_on_a_nonlinear_model(tiny):
    """Completeness along the path from every head to none (midpoints: the error shrinks with
    the steps; 64 leave well under one percent here)."""
    pairs = counterfactual_pairs(tiny, _task(), part="train", n=6, n_eval=60)
    found = score(tiny, "integrated", _task(), pairs, MethodConfig(ig_steps=64), chat=False)
    scorer = PairScorer(tiny, pairs, "counterfactual", 64)
    values = scorer.metrics(torch.stack([torch.ones(2, 4), torch.zeros(2, 4)])).mean(dim=1)
    total = float(values[0] - values[1])
    assert abs(total) > 1e-3, "the heads change the metric: the test means something"
    assert float(found.scores.sum()) == pytest.approx(total, rel=1e-2)


def test_too_few_pairs_for_a_task_is_an_error_before_any_method_runs(tiny, tmp_path, monkeypatch):
    """The draw gives up to ``n`` pairs; the benchmark refuses fewer than asked, for every
    task before the first method, naming the setting and how many pairs there are."""
    from lens_heads.finders import _benchmark as benchmark

    monkeypatch.setattr(benchmark, "score", lambda *a, **k: pytest.fail("a method ran"))
    available = len(counterfactual_pairs(tiny, "country-capital", part="train", n=10_000,
                                         n_eval=80))  # fmt: skip
    config = BenchmarkConfig(n_pairs=6, n_train_pairs=available + 1, n_eval=80, bootstrap=10)
    with pytest.raises(lh.LensHeadsError, match=rf"gives {available} train pairs.*n_train_pairs"):
        head_finder_benchmark(tiny, ["capitalize", "country-capital"], ["random-0"], config,
                              out=tmp_path)  # fmt: skip
    with pytest.raises(lh.LensHeadsError, match=r"eval pairs.*n_pairs=10000.*hold out more"):
        head_finder_benchmark(tiny, ["country-capital"], ["random-0"], n_pairs=10_000,
                              n_train_pairs=6, n_eval=80)  # fmt: skip
