"""The losses a circuit mask can be trained towards besides the answer's cross-entropy: the
unmasked model's distribution (``objective="model"``) and its logit difference of the answer and
the counterfactual answer (``objective="difference"``)."""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["difference_gap", "divergence_from_model"]


def divergence_from_model(logits: Tensor, reference: Tensor) -> Tensor:
    """The loss of ``objective="model"``: KL(unmasked || masked) of the next-token distributions
    at the answer positions, the mean over them.

    >>> float(divergence_from_model(torch.zeros(2, 3), torch.zeros(2, 3)))
    0.0
    """
    return torch.nn.functional.kl_div(
        logits.log_softmax(-1), reference.log_softmax(-1), reduction="batchmean", log_target=True
    )


def difference_gap(
    logits: Tensor, reference: Tensor, tokens: Tensor, answer_mask: Tensor, contrasts: Tensor
) -> Tensor:
    """The loss of ``objective="difference"``: at each row's first answer position, the logit
    difference ``d`` of its answer token and its ``contrasts`` token under the mask and ``d_ref``
    without it; ``mean((d - d_ref)^2) / mean(d_ref^2)`` over the rows (zero when the masked
    model's differences equal the model's, 1 when they are all zero). ``logits`` and
    ``reference`` hold every answer position's logits in row-major order (``answer_logits``).

    >>> tokens = torch.tensor([[5, 1, 2], [5, 3, 0]])
    >>> answer_mask = torch.tensor([[False, True, True], [False, True, False]])
    >>> reference = torch.zeros(3, 4); reference[0, 1] = 2.0; reference[2, 3] = 1.0
    >>> contrasts = torch.tensor([0, 0])
    >>> float(difference_gap(reference, reference, tokens, answer_mask, contrasts))
    0.0
    >>> float(difference_gap(torch.zeros(3, 4), reference, tokens, answer_mask, contrasts))
    1.0
    """
    counts = answer_mask.sum(dim=1)
    first = torch.cumsum(counts, dim=0) - counts  # each row's first answer position, flattened
    answers = tokens[answer_mask][first]
    rows = torch.arange(len(first), device=logits.device)

    def difference(values: Tensor) -> Tensor:
        chosen = values[first]
        return chosen[rows, answers] - chosen[rows, contrasts]

    target = difference(reference)
    return ((difference(logits) - target) ** 2).mean() / (target**2).mean().clamp_min(1e-6)
