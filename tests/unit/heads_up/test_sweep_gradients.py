"""Gradient estimates of a removal sweep (issue 36): integrated gradients add up to the exact
sweep's total change, and the first-order attribution is the finite-difference derivative."""

from __future__ import annotations

import pytest
import torch

import lens_heads as lh
from lens_heads.core._capture import encode_prompt, target_token_ids
from lens_heads.core._masks import parse_head
from lens_heads.heads_up._sweep_gradients import SweepEstimates, answer_logit, sweep_estimates

ORDER = ["L1H0", "L0H2", "L1H3", "L0H1", "L1H1"]


@pytest.fixture(scope="module")
def model():
    return lh.tiny_model(n_layers=2, n_heads=4, n_kv_heads=2, seed=0)


def test_integrated_gradients_add_up_to_the_exact_total_change(model):
    found = sweep_estimates(model, "the small cat sat", "s", ORDER, steps=256)
    exact_total = sum(found.exact)
    assert abs(exact_total) > 1e-3, "the sweep moves the answer"
    assert sum(found.integrated) == pytest.approx(exact_total, rel=1e-3, abs=1e-4)
    coarse = sweep_estimates(model, "the small cat sat", "s", ORDER, steps=2)
    # the quadrature's error shrinks with the steps; the first order is no such sum
    assert abs(sum(found.integrated) - exact_total) <= abs(sum(coarse.integrated) - exact_total)


def test_the_first_order_attribution_is_the_finite_difference_derivative(model):
    found = sweep_estimates(model, "the small cat sat", "s", ORDER)
    tokens = encode_prompt(model, "the small cat sat").tokens
    answer = target_token_ids(model, ["s"])[0]
    eps = 1e-2
    for head, attribution in zip(found.order, found.first_order, strict=True):
        layer, index = parse_head(head)
        up, down = torch.ones(1, 2, 4), torch.ones(1, 2, 4)
        up[0, layer, index] += eps
        down[0, layer, index] -= eps
        with torch.no_grad():
            derivative = (
                answer_logit(model, tokens, answer, up) - answer_logit(model, tokens, answer, down)
            ) / (2 * eps)
        assert attribution == pytest.approx(-float(derivative), rel=1e-2, abs=1e-4)


def test_the_exact_steps_are_the_removal_sweep_and_the_result_reloads(model, tmp_path):
    """The exact curve equals :func:`lh.removal_sweep`'s own record of the answer's logit."""
    found = sweep_estimates(model, "the small cat sat", "s", ORDER, steps=4)
    answer = target_token_ids(model, ["s"])[0]
    sweep = lh.removal_sweep(model, "the small cat sat", ORDER, target=answer, max_new_tokens=0)
    assert sweep.n_removed == list(range(len(ORDER) + 1))
    recorded = sweep.logits[:, sweep.roles.index("target")]
    torch.testing.assert_close(
        torch.tensor([found.full, *found.curves()["exact"]], dtype=recorded.dtype),
        recorded,
        rtol=1e-4,
        atol=1e-4,
    )
    summary = found.summary(k=2)
    assert set(summary) == {"total change (exact)", "first order", "integrated gradients"}
    assert summary["first order"]["cost"] == "1 forward and 1 backward"
    found.save(tmp_path / "est")
    again = SweepEstimates.load(tmp_path / "est")
    assert again.exact == found.exact and again.order == ORDER
    with pytest.raises(lh.LensHeadsError, match="each head of the sweep once"):
        sweep_estimates(model, "x", "s", ["L0H0", "L0H0"])
