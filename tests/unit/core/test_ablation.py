"""Ablation types as a setting of the one hook (issue 36): the mean baseline reaches every
analysis that applies a mask -- training, evaluation, sweeps, roles -- and equals a hand
computation; resample is refused where it cannot apply, with a reason."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

import lens_heads as lh
from lens_heads.core._ablation import ablation_baseline, check_ablation, mean_head_outputs
from lens_heads.core._capture import encode_prompt
from lens_heads.core._errors import InputError
from lens_heads.core._hooks import ablated, current_baseline
from lens_heads.core._tasks import Example, Task

WORDS = "apple pear plum fig kiwi lime date peach grape melon lemon mango berry cherry".split()
TASK = Task("upper", tuple(Example(w, w.upper()) for w in WORDS), instruction="Uppercase it.")


@pytest.fixture(scope="module")
def model():
    return lh.tiny_model(n_layers=2, n_heads=4, d_head=16, seed=1)


def _z(model, tokens):
    _, cache = model.run_with_cache(tokens)
    return [cache[f"blocks.{layer}.attn.hook_z"] for layer in range(2)]


def test_inside_ablated_a_removed_head_outputs_the_baseline_by_hand(model):
    tokens = model.to_tokens("the cat sat")
    baseline = mean_head_outputs(model, ["a dog", "the small bird ran"])
    mask = lh.HeadMask.from_heads(["L0H1", "L1H3"], n_layers=2, n_heads=4).complement()

    def by_hand(z, hook):
        layer = int(hook.name.split(".")[1])
        z = z.clone()
        head = 1 if layer == 0 else 3
        z[:, :, head] = baseline[layer, head]
        return z

    hooks = [(f"blocks.{layer}.attn.hook_z", by_hand) for layer in range(2)]
    with model.hooks(fwd_hooks=hooks):
        expected = model(tokens)
    with ablated(model, baseline), lh.apply_mask(model, mask):
        assert current_baseline(model) is baseline
        found = model(tokens)
    torch.testing.assert_close(found, expected)
    assert current_baseline(model) is None  # left on exit
    with lh.apply_mask(model, mask):
        zero = model(tokens)
    assert not torch.allclose(zero, expected)


def test_ablated_nests_and_checks_the_shape(model):
    outer, inner = torch.zeros(2, 4, 16), torch.ones(2, 4, 16)
    with ablated(model, outer):
        with ablated(model, inner):
            assert current_baseline(model) is inner
        assert current_baseline(model) is outer
    with pytest.raises(lh.LensHeadsError, match=r"\[n_layers, n_heads, d_head\]"):
        with ablated(model, torch.zeros(2, 3, 16)):
            pass


def test_resample_and_unknown_ablations_are_refused_with_the_reason():
    with pytest.raises(InputError, match="donor prompt of the same token length"):
        lh.EvaluationConfig(ablation="resample")
    with pytest.raises(
        InputError, match="takes ablation 'zero' or 'mean' or 'counterfactual', got 'median'"
    ):
        lh.TrainingConfig(ablation="median")
    with pytest.raises(InputError, match="no donor for generated tokens"):
        lh.SweepConfig(ablation="resample")
    assert check_ablation("resample", where="atlas") == "resample"
    with pytest.raises(InputError, match="needs reference prompts"):
        ablation_baseline(lh.tiny_model(), "mean", [], where="evaluation")
    with pytest.raises(InputError, match="query_side"):
        lh.TrainingConfig(ablation="mean", query_side=True)


def test_mask_training_with_mean_ablation_uses_the_training_prompts_mean(model):
    from lens_heads.engine._training import MaskTrainer

    config = lh.TrainingConfig(
        steps=1, batch_size=4, n_eval=4, precision="float32", ablation="mean"
    )
    trainer = MaskTrainer(model, TASK, config)
    prompts = [example.prompt_tokens for example in trainer.encoded]
    torch.testing.assert_close(trainer.baseline, mean_head_outputs(model, prompts))
    tokens, answer_mask = trainer.batch(0)
    mask = torch.tensor([[1.0, 0.0, 1.0, 1.0], [0.0, 1.0, 1.0, 1.0]])
    found = trainer.loss(tokens, answer_mask, mask)
    zero = MaskTrainer(model, TASK, replace(config, ablation="zero"))
    with ablated(model, trainer.baseline):  # the zero-ablation trainer inside the same baseline
        expected = zero.loss(tokens, answer_mask, mask)
    torch.testing.assert_close(found, expected)
    assert not torch.allclose(found, zero.loss(tokens, answer_mask, mask))
    result = lh.train_mask(model, TASK, config, progress=False)
    assert result.config.ablation == "mean" and result.mask.metadata["ablation"] == "mean"
    with pytest.raises(InputError, match="trained with mean ablation"):
        result.hooks(model)
    with ablated(model, trainer.baseline):
        assert len(result.hooks(model)) == 2


def test_evaluation_with_mean_ablation_is_zero_ablation_inside_the_bare_training_mean(model):
    mask = lh.HeadMask.from_heads(["L0H0", "L1H2"], n_layers=2, n_heads=4)
    options = dict(mask=mask, n_eval=4, random_seeds=(), progress=False)
    found = lh.evaluate(model, TASK, ["mask", "mask+instruction"], ablation="mean", **options)
    assert found.config["ablation"] == "mean"
    train, _ = TASK.split(n_eval=4)
    bare = [encode_prompt(model, example.input).tokens for example in train.examples]
    with ablated(model, mean_head_outputs(model, bare)):
        expected = lh.evaluate(model, TASK, ["mask", "mask+instruction"], **options)
    assert expected.config["ablation"] == "zero"
    for column in ("accuracy", "answer_ce"):
        assert found.runs[column].tolist() == pytest.approx(expected.runs[column].tolist())
    zero = lh.evaluate(model, TASK, ["mask", "mask+instruction"], **options)
    assert zero.runs["answer_ce"].tolist() != pytest.approx(found.runs["answer_ce"].tolist())


def test_a_sweep_with_mean_ablation_equals_each_step_by_hand(model):
    order = ["L1H0", "L0H2", "L1H3"]
    reference = ["a dog", "the small bird ran", "one more prompt here"]
    sweep = lh.removal_sweep(
        model, "the cat", order, target=5, max_new_tokens=0, ablation="mean",
        ablation_prompts=reference, chat=False, progress=False,
    )  # fmt: skip
    assert sweep.metadata["ablation"] == "mean" and sweep.metadata["ablation_prompts"] == 3
    from lens_heads.core._prompts import encode_text

    baseline = mean_head_outputs(
        model, [encode_text(model.tokenizer, p, chat=False) for p in reference]
    )
    tokens = torch.tensor([encode_text(model.tokenizer, "the cat", chat=False)])
    for step in range(len(order) + 1):
        mask = lh.HeadMask.ones(model)
        removed = lh.HeadMask.from_heads(order[:step], n_layers=2, n_heads=4).values.bool()
        values = mask.values.float().masked_fill(removed, 0.0)
        with model.hooks(fwd_hooks=lh.mask_hooks(values, model, baseline=baseline)):
            logit = model(tokens)[0, -1, 5]
        assert float(sweep.logits[step, 0]) == pytest.approx(float(logit), abs=1e-4)
    zero = lh.removal_sweep(
        model, "the cat", order, target=5, max_new_tokens=0, chat=False, progress=False
    )
    assert not torch.allclose(zero.logits[1:], sweep.logits[1:])
    with pytest.raises(InputError, match="pass ablation='mean' or 'resample'"):
        lh.removal_sweep(model, "the cat", order, target=5, ablation_prompts=reference)


def test_a_sweep_with_resample_ablation_swaps_in_the_donors_outputs_by_hand(model):
    from lens_heads.core._prompts import encode_text

    order = ["L1H0", "L0H2", "L1H3"]
    encode = lambda text: encode_text(model.tokenizer, text, chat=False)  # noqa: E731
    prompt, donor = "the cat sat", "one dog ran"
    assert len(encode(prompt)) == len(encode(donor))
    reference = ["one", donor, "the mouse ran"]  # the first with as many tokens is the donor
    sweep = lh.removal_sweep(
        model, prompt, order, target=5, max_new_tokens=0, ablation="resample",
        ablation_prompts=reference, chat=False, progress=False,
    )  # fmt: skip
    assert sweep.metadata["ablation"] == "resample"
    donor_z = _z(model, torch.tensor([encode(donor)]))
    tokens = torch.tensor([encode(prompt)])
    for step in range(len(order) + 1):
        removed = {lh.core.internal.parse_head(h) for h in order[:step]}

        def swap(z, hook, removed=removed):
            layer = int(hook.name.split(".")[1])
            z = z.clone()
            for head in [h for (at, h) in removed if at == layer]:
                z[:, :, head] = donor_z[layer][:, :, head]
            return z

        hooks = [(f"blocks.{layer}.attn.hook_z", swap) for layer in range(2)]
        with model.hooks(fwd_hooks=hooks):
            logit = model(tokens)[0, -1, 5]
        assert float(sweep.logits[step, 0]) == pytest.approx(float(logit), abs=1e-4)
    with pytest.raises(InputError, match="no reference prompt has as many"):
        lh.removal_sweep(
            model, prompt, order, target=5, max_new_tokens=0, ablation="resample",
            ablation_prompts=["one", "two words"], chat=False, progress=False,
        )  # fmt: skip
