"""Logits only where a loss needs them: the answer positions of a batch, through a forward pass
that stops after the last block so that only those positions go through ``ln_final`` and the
unembedding (the vocabulary projection dominates a small model's cost). Mask training and the
LAHIS head importance both use it.

>>> import torch, lens_heads as lh
>>> model = lh.tiny_model(n_layers=2, n_heads=4)
>>> tokens = torch.tensor([[1, 5, 7, 9]])
>>> answer = torch.tensor([[False, False, True, True]])
>>> partial_unembed_works(model, tokens, answer)
True
>>> tuple(answer_logits(model, tokens, answer, [], partial=True).shape) == (2, model.cfg.d_vocab)
True
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from typing import Any

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from lens_heads.core._errors import ComputationError
from lens_heads.core._models import ModelLike

__all__ = ["answer_logits", "partial_unembed_works"]

logger = logging.getLogger(__name__)


class _StopForward(Exception):
    """Raised by a hook once the final residual stream is captured."""


def answer_logits(
    model: ModelLike,
    tokens: Int[Tensor, "batch pos"],
    answer_mask: Bool[Tensor, "batch pos"],
    fwd_hooks: list[tuple[str, Callable[..., Any]]],
    *,
    partial: bool,
) -> Float[Tensor, "n_answer d_vocab"]:
    """Logits predicting each answer token (row-major order). With ``partial`` the forward
    pass stops after the last block (its ``hook_resid_post`` is captured) and only the
    predicting positions go through ``ln_final`` and the unembedding."""
    rows, cols = answer_mask.nonzero(as_tuple=True)
    if not partial:
        logits = model.run_with_hooks(tokens, fwd_hooks=fwd_hooks)
        return logits[rows, cols - 1]
    captured: dict[str, Tensor] = {}

    def capture(resid: Tensor, hook: Any) -> None:
        captured["resid"] = resid
        raise _StopForward

    last = f"blocks.{int(model.cfg.n_layers) - 1}.hook_resid_post"
    try:
        with model.hooks(fwd_hooks=[*fwd_hooks, (last, capture)]):
            model(tokens)
    except _StopForward:
        pass
    if "resid" not in captured:
        raise ComputationError(f"the hook {last} never fired; this model does not expose it")
    selected = captured["resid"][rows, cols - 1]
    logits = model.unembed(model.ln_final(selected))
    # what the architecture does after the unembedding (Gemma 2's soft cap, Cohere's logit scale)
    transform = getattr(getattr(model, "adapter", None), "apply_output_logits_transform", None)
    if transform is not None:
        return transform(logits)
    cap = float(getattr(model.cfg, "output_logits_soft_cap", -1.0) or -1.0)
    if cap > 0:
        logits = cap * torch.tanh(logits / cap)
    return logits


def partial_unembed_works(model: ModelLike, tokens: Tensor, answer_mask: Tensor) -> bool:
    """Check once that the partial unembedding equals the model's own logits."""
    try:
        with torch.no_grad():
            full = answer_logits(model, tokens, answer_mask, [], partial=False).float()
            part = answer_logits(model, tokens, answer_mask, [], partial=True).float()
    except Exception as error:  # any surface mismatch: fall back to full logits
        logger.warning("partial unembedding unavailable (%s); using full logits", error)
        return False
    scale = float(full.abs().max().clamp_min(1.0))
    ok = part.shape == full.shape and bool((part - full).abs().max() <= 1e-4 * scale)
    if not ok:
        warnings.warn(
            "the partial unembedding (final residual -> ln_final -> unembed) does not reproduce "
            "this model's logits; training computes the full logits instead (slower)",
            stacklevel=3,
        )
    return ok
