"""The one trainer learns a circuit directly (issue 46): counterfactual ablation outside the mask
(each removed head outputs its ``z`` on the example's counterfactual prompt, continued with the
example's own answer) and a head budget."""

from __future__ import annotations

import math

import pytest
import torch
from torch import Tensor

import lens_heads as lh
from lens_heads.core._tasks import Example, Task
from lens_heads.engine import MaskTrainer

WORDS = [f"{a}{b}{c}" for a in "bcdfg" for b in "aeiou" for c in "lmnr"]


def _task(counterfactual=True) -> Task:
    """Each word's counterfactual is another word of its length (the byte tokenizer: same
    token count)."""
    examples = []
    for index, word in enumerate(WORDS):
        other = WORDS[(index + 7) % len(WORDS)]
        examples.append(
            Example(word, word.upper(), counterfactual=other if counterfactual else None)
        )
    return Task("caps", tuple(examples), instruction="Capitalize.")


def _config(**values):
    base = dict(steps=2, batch_size=4, n_eval=0, precision="float32", chat=False,
                ablation="counterfactual", answer_end="none")  # fmt: skip
    return lh.TrainingConfig(**(base | values))


def test_the_loss_under_counterfactual_ablation_equals_a_swap_by_hand(tiny):
    trainer = MaskTrainer(tiny, _task(), _config(instructed=True))
    tokens, answers = trainer.batch(0)
    baseline = trainer.batch_baseline(0, tokens.shape[1])
    mask = torch.ones(4, 2, 4)
    mask[:, 0, 1] = 0.0  # L0H1 removed in every row
    mask[1, 1, 3] = 0.0  # and L1H3 in the second row
    found = trainer.loss(tokens, answers, mask, None, baseline)
    # by hand: each row's donor is its counterfactual prompt and its own answer tokens
    from lens_heads.core._prompts import PromptFormat, encode_example

    indices = lh.engine._training_data.batch_indices(0, len(trainer.encoded), 4, 0)
    rows = []
    for index in indices:
        example, clean = _task().examples[index], trainer.encoded[index]
        prompt = PromptFormat(chat=False, instruction="Capitalize.").render(
            example.counterfactual, tiny.tokenizer
        )
        donor = encode_example(tiny.tokenizer, prompt, example.output, chat=False).prompt_tokens
        rows.append([*donor, *clean.tokens[len(clean.prompt_tokens) :]])
    donors = torch.tensor([row + [trainer.pad_id] * (tokens.shape[1] - len(row)) for row in rows])
    _, cache = tiny.run_with_cache(donors)

    def swap(z, hook):
        layer = int(hook.name.split(".")[1])
        m = mask[:, layer][:, None, :, None]
        return m * z + (1 - m) * cache[hook.name]

    hooks = [(f"blocks.{layer}.attn.hook_z", swap) for layer in range(2)]
    logits = tiny.run_with_hooks(tokens, fwd_hooks=hooks)
    rows, cols = answers.nonzero(as_tuple=True)
    expected = torch.nn.functional.cross_entropy(logits[rows, cols - 1], tokens[rows, cols])
    assert float(found) == pytest.approx(float(expected), abs=1e-5)
    # the instruction is in every prompt, and the donors share it
    text = tiny.tokenizer.decode(trainer.encoded[0].prompt_tokens)
    assert "Capitalize." in text and "Capitalize." in tiny.tokenizer.decode(trainer.donors[0])


def test_counterfactual_ablation_needs_a_counterfactual_of_every_example_and_its_length(tiny):
    with pytest.raises(lh.LensHeadsError, match="needs a counterfactual input for every"):
        lh.train_mask(tiny, _task(counterfactual=False), _config(), progress=False)
    short = Task("caps", tuple(Example(w, w.upper(), counterfactual="x") for w in WORDS))
    with pytest.raises(lh.LensHeadsError, match="must have exactly as many"):
        lh.train_mask(tiny, short, _config(), progress=False)


def test_a_budget_keeps_that_many_heads(tiny):
    free = lh.train_mask(tiny, _task(), _config(steps=30, ablation="zero"), progress=False)
    kept = lh.train_mask(tiny, _task(), _config(steps=30, ablation="zero", budget=2),
                         progress=False)  # fmt: skip
    assert kept.mask.n_selected == 2 and kept.mask.metadata["budget"] == 2
    assert torch.sigmoid(kept.W).mean() < torch.sigmoid(free.W).mean()
    top = set(torch.argsort(-kept.W.flatten())[:2].tolist())
    assert {i for i, v in enumerate(kept.mask.values.flatten().tolist()) if v} == top
    with pytest.raises(lh.LensHeadsError, match="budget applies to the straight-through"):
        _config(budget=2, gates="sigmoid")


def test_the_model_objective_is_the_kl_divergence_from_the_unmasked_model(tiny):
    """``objective="model"``: the loss is KL(unmasked || masked) at the answer positions, by hand;
    zero with every head kept, positive with a head patched, and not the answer CE."""
    trainer = MaskTrainer(tiny, _task(), _config(objective="model"))
    tokens, answers = trainer.batch(0)
    baseline = trainer.batch_baseline(0, tokens.shape[1])
    kept = torch.ones(4, 2, 4)
    assert float(trainer.loss(tokens, answers, kept, None, baseline)) == pytest.approx(0, abs=1e-5)
    mask = kept.clone()
    mask[:, 1, 2] = 0.0
    found = float(trainer.loss(tokens, answers, mask, None, baseline))
    rows, cols = answers.nonzero(as_tuple=True)
    full = tiny(tokens)[rows, cols - 1].log_softmax(-1)
    answer_ce = MaskTrainer(tiny, _task(), _config()).loss(tokens, answers, mask, None, baseline)

    def patch(z, hook):
        return torch.where(mask[:, 1][:, None, :, None].bool(), z, baseline[:, :, 1])

    masked = tiny.run_with_hooks(tokens, fwd_hooks=[("blocks.1.attn.hook_z", patch)])
    masked = masked[rows, cols - 1].log_softmax(-1)
    expected = float((full.exp() * (full - masked)).sum(-1).mean())
    assert found == pytest.approx(expected, rel=1e-4) and found > 1e-6
    assert found != pytest.approx(float(answer_ce), rel=1e-2)
    with pytest.raises(
        lh.LensHeadsError, match="one of answer, model, difference, mean-difference"
    ):
        _config(objective="logit")


def _contrasted_task(offset: int = 7) -> Task:
    """Each word's counterfactual is another word of its length, and its answer that word's
    (``offset`` words on: 20 and more start with another letter)."""
    examples = []
    for index, word in enumerate(WORDS):
        other = WORDS[(index + offset) % len(WORDS)]
        examples.append(
            Example(word, word.upper(), counterfactual=other, counterfactual_output=other.upper())
        )
    return Task("caps", tuple(examples), instruction="Capitalize.")


def _patched_by_hand(tiny, tokens, mask, baseline):
    """The logits without a mask and with ``mask``'s 0-heads patched to ``baseline`` by hand."""

    def patch(z, hook):
        layer = int(hook.name.split(".")[1])
        return torch.where(mask[:, layer][:, None, :, None].bool(), z, baseline[:, :, layer])

    hooks = [(f"blocks.{layer}.attn.hook_z", patch) for layer in range(2)]
    return tiny(tokens), tiny.run_with_hooks(tokens, fwd_hooks=hooks)


def test_the_difference_objective_is_the_relative_gap_of_the_logit_difference_by_hand(tiny):
    """``objective="difference"``: at each row's first answer position, the logit difference of
    its answer's first token and its counterfactual answer's (encoded after the counterfactual
    prompt), masked against unmasked: ``mean((d - d_ref)^2) / mean(d_ref^2)``, by hand."""
    from lens_heads.core._prompts import PromptFormat, encode_example

    task = _contrasted_task()
    trainer = MaskTrainer(tiny, task, _config(objective="difference"))
    tokens, answers = trainer.batch(0)
    baseline = trainer.batch_baseline(0, tokens.shape[1])
    contrasts = trainer.batch_contrasts(0)
    indices = lh.engine._training_data.batch_indices(0, len(trainer.encoded), 4, 0)
    expected_contrasts = []
    for index in indices:
        example = task.examples[index]
        prompt = PromptFormat(chat=False).render(example.counterfactual, tiny.tokenizer)
        encoded = encode_example(tiny.tokenizer, prompt, example.counterfactual_output, chat=False)
        expected_contrasts.append(encoded.answer_tokens[0])
    assert contrasts.tolist() == expected_contrasts
    assert any(c != int(tokens[r, answers[r].nonzero()[0]]) for r, c in enumerate(contrasts))
    kept = torch.ones(4, 2, 4)
    assert float(trainer.loss(tokens, answers, kept, None, baseline, contrasts)) == pytest.approx(
        0, abs=1e-6
    )
    mask = kept.clone()
    mask[:, 0, 3] = 0.0
    mask[:, 1, 2] = 0.0
    found = float(trainer.loss(tokens, answers, mask, None, baseline, contrasts))
    full, masked = _patched_by_hand(tiny, tokens, mask, baseline)
    gaps, targets = [], []
    for row in range(4):
        column = int(answers[row].nonzero()[0])  # the first answer token, predicted before it
        answer, contrast = int(tokens[row, column]), int(contrasts[row])
        d_ref = full[row, column - 1, answer] - full[row, column - 1, contrast]
        d = masked[row, column - 1, answer] - masked[row, column - 1, contrast]
        gaps.append(float(d - d_ref) ** 2)
        targets.append(float(d_ref) ** 2)
    expected = sum(gaps) / sum(targets)
    assert found == pytest.approx(expected, rel=1e-4) and found > 1e-6
    kl = MaskTrainer(tiny, task, _config(objective="model"))
    assert found != pytest.approx(float(kl.loss(tokens, answers, mask, None, baseline)), rel=1e-2)


def test_the_mean_difference_objective_is_the_gap_of_the_batch_means_by_hand(tiny):
    """``objective="mean-difference"``: ``(mean d - mean d_ref)^2 / mean(d_ref)^2`` over the
    batch, by hand; every row's answer starts with another letter than its contrast, so rows
    scatter and the per-row gap of ``"difference"`` differs from it."""
    task = _contrasted_task(offset=20)
    means = MaskTrainer(tiny, task, _config(objective="mean-difference"))
    tokens, answers = means.batch(0)
    baseline = means.batch_baseline(0, tokens.shape[1])
    contrasts = means.batch_contrasts(0)
    mask = torch.ones(4, 2, 4)
    mask[:, 0, 3] = 0.0
    mask[:, 1, 2] = 0.0
    found = float(means.loss(tokens, answers, mask, None, baseline, contrasts))
    full, masked = _patched_by_hand(tiny, tokens, mask, baseline)
    ds, refs = [], []
    for row in range(4):
        column = int(answers[row].nonzero()[0])
        answer, contrast = int(tokens[row, column]), int(contrasts[row])
        refs.append(float(full[row, column - 1, answer] - full[row, column - 1, contrast]))
        ds.append(float(masked[row, column - 1, answer] - masked[row, column - 1, contrast]))
    assert all(abs(r) > 1e-6 for r in refs)
    expected = (sum(ds) / 4 - sum(refs) / 4) ** 2 / (sum(refs) / 4) ** 2
    per_row = sum((d - r) ** 2 for d, r in zip(ds, refs, strict=True)) / sum(r**2 for r in refs)
    assert found == pytest.approx(expected, rel=1e-4) and found > 1e-6
    assert found != pytest.approx(per_row, rel=1e-2)


def test_the_difference_objective_needs_each_counterfactual_answer(tiny):
    with pytest.raises(lh.LensHeadsError, match="need every training example's counterfactual"):
        lh.train_mask(tiny, _task(), _config(objective="difference"), progress=False)
    result = lh.train_mask(tiny, _contrasted_task(), _config(objective="difference", budget=3),
                           progress=False)  # fmt: skip
    assert result.mask.n_selected == 3 and all(math.isfinite(v) for v in result.history["loss"])


def test_an_exact_budget_trains_every_forward_on_exactly_that_many_heads(tiny):
    """``exact_budget``: each row of each training forward keeps the budget's heads, the size
    the circuit is read at; the penalised budget instead trains on however many heads are above
    0.5 (here all of them at the start: ``init_mean`` 4)."""
    seen: dict[bool, list[Tensor]] = {True: [], False: []}
    for exact in (True, False):
        trainer = MaskTrainer(tiny, _task(), _config(steps=6, budget=3, exact_budget=exact))
        loss = trainer.loss

        def recording(tokens, answers, mask, *rest, exact=exact, loss=loss):
            seen[exact].append(mask.detach().flatten(-2).sum(dim=-1))
            return loss(tokens, answers, mask, *rest)

        trainer.loss = recording
        for _ in range(6):
            trainer.step()
        assert trainer.W.grad is not None and bool(trainer.W.grad.ne(0).any())
    assert all(bool((rows == 3).all()) for rows in seen[True]) and len(seen[True]) == 6
    assert not all(bool((rows == 3).all()) for rows in seen[False])
    result = lh.train_mask(tiny, _task(), _config(steps=6, budget=3, exact_budget=True),
                           progress=False)  # fmt: skip
    assert result.mask.n_selected == 3
    with pytest.raises(lh.LensHeadsError, match="exact_budget keeps exactly budget heads"):
        _config(exact_budget=True)


def test_the_top_k_estimator_keeps_k_per_sample_and_passes_gradient_near_the_cut():
    from lens_heads.engine._training_config import top_k_straight_through

    weights = torch.tensor([[1.0, 0.5, -0.5], [0.0, 2.0, -2.0]], requires_grad=True)
    noise = torch.randn(5, 2, 3, generator=torch.Generator().manual_seed(0))
    mask = top_k_straight_through(weights, noise, tau=0.5, k=2)
    assert mask.shape == (5, 2, 3) and mask.flatten(-2).sum(dim=-1).tolist() == [2.0] * 5
    chosen = (weights.detach() + noise).flatten(-2).topk(2).indices.sort().values
    assert mask.flatten(-2).nonzero()[:, 1].view(5, 2).tolist() == chosen.tolist()
    (grad,) = torch.autograd.grad(mask.sum(), weights)
    assert bool((grad > 0).all())  # every head's sigmoid about the cut moves with its weight
    assert top_k_straight_through(weights, noise, tau=0.5, k=6).eq(1).all()


def test_annealed_noise_trains_the_read_out_circuit_after_the_anneal(tiny):
    """``noise_end=0``: after the temperature's anneal every row of every forward is the top
    ``budget`` heads of W alone, the circuit the mask is read as; during it the noise still
    varies the rows. ``noise_end=1`` (the default) keeps the noise after the anneal too."""
    seen: dict[float, list[Tensor]] = {0.0: [], 1.0: []}
    for end in (0.0, 1.0):
        config = _config(steps=10, tau_fraction=0.4, budget=3, exact_budget=True, noise_end=end)
        trainer = MaskTrainer(tiny, _task(), config)
        loss = trainer.loss

        def recording(tokens, answers, mask, *rest, end=end, loss=loss, trainer=trainer):
            top = trainer.W.detach().flatten().topk(3).indices
            read = torch.zeros_like(trainer.W).flatten().index_fill(0, top, 1.0)
            seen[end].append(mask.detach().flatten(-2).eq(read).all(dim=-1))
            return loss(tokens, answers, mask, *rest)

        trainer.loss = recording
        for _ in range(10):
            trainer.step()
    assert all(bool(rows.all()) for rows in seen[0.0][4:])  # steps 4..9: after the anneal
    assert not all(bool(rows.all()) for rows in seen[0.0][:4])
    assert not all(bool(rows.all()) for rows in seen[1.0][4:])
    with pytest.raises(lh.LensHeadsError, match="noise_end scales the Gumbel noise"):
        _config(noise_end=1.5)
