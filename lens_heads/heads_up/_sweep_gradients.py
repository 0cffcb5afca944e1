"""Gradient estimates of a removal sweep, held against the exact sweep (issue 36, first part).

A removal sweep removes heads one after another in an ``order`` and reads, after each removal,
the answer's logit at the last prompt position: ``f(m_k)`` with ``m_k`` the mask that removes
the first ``k`` heads. Two cheap estimates give each removed head an attribution ``a_h``, and
the estimated curve is ``f(1) + a_1 + ... + a_k``:

* **first order**: one forward and one backward at the full mask: ``a_h = -df/dm_h`` at
  ``m = 1`` (the tangent's prediction of removing ``h`` alone);
* **integrated gradients** along the straight path from ``1`` to the sweep's last mask
  ``m_K``: ``a_h = (m_K - 1)_h * mean_t df/dm_h(1 + t (m_K - 1))``, ``t`` at ``steps``
  midpoints, all in one batched forward and backward (one row per ``t``). The attributions add
  up to ``f(m_K) - f(1)`` up to the quadrature's error (completeness), whatever the path's
  curvature; single steps of the curve need not match.

The exact sweep costs ``K`` forwards; the first-order estimate one forward and one backward;
integrated gradients one batched forward and backward of ``steps`` rows.

>>> import lens_heads as lh
>>> model = lh.tiny_model(n_layers=2, n_heads=4)
>>> found = sweep_estimates(model, "the cat", "s", ["L1H0", "L0H2", "L1H3"], steps=8)
>>> list(found.to_frame().columns)
['step', 'head', 'exact', 'first order', 'integrated gradients']
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pandas as pd
import torch
from jaxtyping import Float
from scipy import stats
from torch import Tensor

from lens_heads.core import InputError, answer_logits, head_shape, mask_hooks
from lens_heads.core.internal import (
    FolderResult,
    ModelLike,
    PromptLike,
    check_int,
    encode_prompt,
    model_name,
    parse_head,
    target_token_ids,
)

__all__ = ["SweepEstimates", "answer_logit", "sweep_estimates"]


def answer_logit(
    model: ModelLike,
    tokens: Sequence[int],
    answer: int,
    masks: Tensor,
    *,
    rows: int = 32,
) -> Float[Tensor, " rows"]:
    """The answer's logit at the last position under each row's mask ``masks`` ``[rows,
    n_layers, n_heads]`` (differentiable in the masks), ``rows`` masks per forward; only the
    last position goes through the unembedding."""
    found = []
    for start in range(0, len(masks), rows):
        chunk = masks[start : start + rows]
        batch = torch.tensor([[*tokens, answer]] * len(chunk), device=model.cfg.device)
        last = torch.zeros_like(batch, dtype=torch.bool)
        last[:, -1] = True  # the logits that predict the appended answer: the prompt's last
        logits = answer_logits(model, batch, last, mask_hooks(chunk, model), partial=True)
        found.append(logits[:, answer].float())
    return torch.cat(found)


@dataclass(repr=False)
class SweepEstimates(FolderResult):
    """Per sweep step: the removed head, the exact logit change of that step, and each
    estimate's attribution of the head; ``totals``: ``f(m_K) - f(1)`` exact and estimated;
    ``cost``: forwards and backwards of each."""

    model: str
    prompt: str
    order: list[str]
    exact: list[float]
    first_order: list[float]
    integrated: list[float]
    full: float
    steps: int
    cost: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    _format: ClassVar[str] = "lens_heads.sweep_estimates/1"

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "step": range(1, len(self.order) + 1),
                "head": self.order,
                "exact": self.exact,
                "first order": self.first_order,
                "integrated gradients": self.integrated,
            }
        )

    def curves(self) -> pd.DataFrame:
        """The answer's logit after each step: exact and as each estimate predicts it."""
        frame = self.to_frame()
        columns = ["exact", "first order", "integrated gradients"]
        curves = frame[columns].cumsum() + self.full
        curves.insert(0, "step", frame["step"])
        return curves

    def summary(self, k: int = 5) -> dict[str, Any]:
        """Per estimate: Spearman's rank correlation of the heads' attributions with the exact
        step changes, the overlap of the ``k`` largest drops, the total's error, and the heads
        where the estimate errs most."""
        frame = self.to_frame()
        exact = frame["exact"]
        found: dict[str, Any] = {"total change (exact)": float(exact.sum())}
        for name in ("first order", "integrated gradients"):
            estimate = frame[name]
            worst = (estimate - exact).abs().nlargest(min(3, len(frame))).index
            top_exact = set(exact.nsmallest(k).index)
            top_estimate = set(estimate.nsmallest(k).index)
            found[name] = {
                "spearman": float(stats.spearmanr(estimate, exact).statistic)
                if len(frame) > 2
                else float("nan"),
                f"top-{k} overlap": len(top_exact & top_estimate),
                "total": float(estimate.sum()),
                "total error": float(estimate.sum() - exact.sum()),
                "worst heads": [frame["head"][i] for i in worst],
                "cost": self.cost.get(name),
            }
        return found

    def to_markdown(self) -> str:
        from lens_heads.core import markdown_table

        return markdown_table(self.to_frame(), floatfmt=".4g", index=False)

    def plot(self) -> Any:
        """The answer's logit along the sweep: exact and as each estimate predicts it."""
        import plotly.graph_objects as go

        curves = self.curves()
        figure = go.Figure()
        for name in ("exact", "first order", "integrated gradients"):
            figure.add_scatter(x=curves["step"], y=curves[name], mode="lines+markers", name=name)
        figure.update_layout(
            title=f"removal sweep and its gradient estimates ({self.model})",
            xaxis_title="heads removed",
            yaxis_title="answer logit",
            template="plotly_white",
        )
        return figure


def sweep_estimates(
    model: ModelLike,
    prompt: PromptLike,
    answer: str | int,
    order: Sequence[str | tuple[int, int]],
    *,
    steps: int = 32,
) -> SweepEstimates:
    """The exact removal sweep of ``order`` on ``prompt`` (the answer's logit after each
    removal) beside its first-order and integrated-gradient estimates (``steps`` midpoints)."""
    check_int("steps", steps, minimum=1)
    n_layers, n_heads = head_shape(model)
    heads = [parse_head(h) if isinstance(h, str) else tuple(h) for h in order]
    if not heads or len(set(heads)) != len(heads):
        raise InputError("give each head of the sweep once, in removal order")
    for layer, head in heads:
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise InputError(f"head L{layer}H{head} is outside the model's {n_layers}x{n_heads}")
    tokens = list(encode_prompt(model, prompt).tokens)
    target = target_token_ids(model, [answer])[0]
    # the exact sweep: one row per step (0 = the full model)
    masks = torch.ones(len(heads) + 1, n_layers, n_heads)
    for k, (layer, head) in enumerate(heads):
        masks[k + 1 :, layer, head] = 0.0
    clock = time.perf_counter()
    with torch.no_grad():
        curve = answer_logit(model, tokens, target, masks).cpu()
    exact = (curve[1:] - curve[:-1]).tolist()
    seconds = {"exact": time.perf_counter() - clock}
    clock = time.perf_counter()
    # first order: the gradient at the full mask
    ones = torch.ones(1, n_layers, n_heads, requires_grad=True)
    (gradient,) = torch.autograd.grad(answer_logit(model, tokens, target, ones).sum(), ones)
    first_order = [-float(gradient[0, layer, head]) for layer, head in heads]
    seconds["first order"] = time.perf_counter() - clock
    clock = time.perf_counter()
    # integrated gradients along 1 -> m_K, at the midpoints of ``steps`` intervals
    direction = masks[-1] - 1.0  # -1 on removed heads
    t = (torch.arange(steps, dtype=torch.float32) + 0.5) / steps
    path = (1.0 + t[:, None, None] * direction[None]).requires_grad_(True)
    (gradients,) = torch.autograd.grad(answer_logit(model, tokens, target, path).sum(), path)
    integrated_all = direction * gradients.mean(dim=0)
    integrated = [float(integrated_all[layer, head]) for layer, head in heads]
    seconds["integrated gradients"] = time.perf_counter() - clock
    return SweepEstimates(
        model=model_name(model),
        prompt=prompt if isinstance(prompt, str) else str(tokens),
        order=[f"L{layer}H{head}" for layer, head in heads],
        exact=exact,
        first_order=first_order,
        integrated=integrated,
        full=float(curve[0]),
        steps=steps,
        cost={
            "exact": f"{len(heads)} forwards (one row each)",
            "first order": "1 forward and 1 backward",
            "integrated gradients": f"1 forward and 1 backward of {steps} rows",
        },
        seconds=seconds,
    )
