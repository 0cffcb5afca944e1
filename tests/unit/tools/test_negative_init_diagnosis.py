"""scripts/negative_init_diagnosis.py measures the all-off gradient and the loss landscape; its
numbers are checked against the chain rule through hand-written hooks and plain forward passes."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

import lens_heads as lh
from lens_heads.engine import MaskTrainer
from lens_heads.engine._training import gumbel_noise, tau_at

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "negative_init_diagnosis.py"


def _script():
    spec = importlib.util.spec_from_file_location("negative_init_diagnosis", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _trainer(model) -> MaskTrainer:
    """The trainer the script builds (the short schedule from the negative init), in float32 on
    every machine: with bf16 autocast (a CPU with native bf16) the trainer's gradient differs
    from the float32 chain rule by rounding, not by a defect."""
    config = lh.TrainingConfig.short(init_mean=-3.0, n_eval=100, precision="float32")
    return MaskTrainer(model, lh.get_task("capitalize"), config)


def _z_hooks(heads: torch.Tensor) -> list:
    """Multiply ``hook_z`` by ``heads[b, l, h]`` (per example), written out."""

    def make(layer):
        return lambda z, hook: z * heads[:, layer, None, :, None]

    return [(f"blocks.{layer}.attn.hook_z", make(layer)) for layer in range(heads.shape[1])]


def _answer_ce(model, tokens, answer_mask, hooks) -> torch.Tensor:
    logits = model.run_with_hooks(tokens, fwd_hooks=hooks)
    rows, cols = answer_mask.nonzero(as_tuple=True)
    return torch.nn.functional.cross_entropy(logits[rows, cols - 1].float(), tokens[rows, cols])


def _gradients_by_hand(trainer: MaskTrainer, batches: int) -> torch.Tensor:
    """For each batch, at W = init and tau = tau_begin: replay the per-example noise, take the
    gradient of the answer CE with respect to the sampled 0/1 head masks and multiply by the
    straight-through factor ``s (1 - s) / tau``, ``s = sigmoid((W + G) / tau)``."""
    replay = torch.Generator()
    replay.set_state(trainer.generator.get_state())
    tau, W = tau_at(0, trainer.config), trainer.W.detach()
    grads = []
    for index in range(batches):
        tokens, answer_mask = trainer.batch(index)
        soft = torch.sigmoid((W + gumbel_noise((tokens.shape[0], *W.shape), replay)) / tau)
        hard = (soft > 0.5).float().requires_grad_(True)
        assert not bool(hard.any()), "at -3 every head is sampled off"
        loss = _answer_ce(trainer.model, tokens, answer_mask, _z_hooks(hard))
        (grad,) = torch.autograd.grad(loss, hard)
        grads.append((grad * soft * (1 - soft) / tau).sum(0))
    return torch.stack(grads)


def test_the_diagnosis_writes_its_landscape_and_summary(monkeypatch, tiny, tmp_path, capsys):
    monkeypatch.setattr(lh, "load_model", lambda spec, **kw: tiny)
    out = tmp_path / "diag"
    argv = ["--model", "tiny", "--batches", "3", "--seeds", "2", "--out", str(out)]
    assert _script().main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    n_heads = tiny.cfg.n_layers * tiny.cfg.n_heads
    landscape = (out / "landscape.csv").read_text().splitlines()
    assert landscape[1].startswith("0,") and landscape[-1].startswith(f"{n_heads},")
    assert "Answer CE with k heads on" in capsys.readouterr().out
    # the gradient numbers, from the chain rule through hand-written hooks
    grads = _gradients_by_hand(_trainer(tiny), 3)
    mean = grads.mean(0)
    assert summary["heads_that_want_on"] == int((mean < 0).sum())
    agreement = float((torch.sign(grads) == torch.sign(mean)).float().mean())
    assert summary["per_batch_sign_agreement"] == pytest.approx(agreement, abs=1e-6)
    assert 0 < agreement < 1
    # the landscape's ends: every head off and every head on, on the first two batches
    trainer = _trainer(tiny)
    batches = [trainer.batch(0), trainer.batch(1)]
    off = torch.zeros(trainer.config.batch_size, *trainer.shape)
    with torch.no_grad():
        all_off = [float(_answer_ce(tiny, t, a, _z_hooks(off))) for t, a in batches]
        full = [float(_answer_ce(tiny, t, a, [])) for t, a in batches]
    assert summary["answer_ce_all_off"] == pytest.approx(sum(all_off) / 2, rel=1e-5)
    assert summary["answer_ce_full_model"] == pytest.approx(sum(full) / 2, rel=1e-5)
    assert summary["answer_ce_all_off"] != pytest.approx(summary["answer_ce_full_model"])


def test_the_gradient_at_all_off_is_taken_without_an_update(tiny):
    trainer = _trainer(tiny)
    before = trainer.W.detach().clone()
    expected = _gradients_by_hand(trainer, 2)
    grads = _script().gradient_at_all_off(trainer, 2)
    assert grads.shape == (2, *before.shape) and bool(grads.abs().sum() > 0)
    torch.testing.assert_close(grads, expected, rtol=1e-4, atol=1e-9)
    assert bool((trainer.W == before).all()) and trainer.step_index == 0
