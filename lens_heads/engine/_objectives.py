"""The losses a circuit mask can be trained towards besides the answer's cross-entropy: the
unmasked model's distribution (``objective="model"``) and its logit difference of the answer and
the counterfactual answer (``objective="difference"``)."""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["difference_gap", "divergence_from_model", "mean_difference_gap"]


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
    found, target = _differences(logits, reference, tokens, answer_mask, contrasts)
    return ((found - target) ** 2).mean() / (target**2).mean().clamp_min(1e-6)


def mean_difference_gap(
    logits: Tensor, reference: Tensor, tokens: Tensor, answer_mask: Tensor, contrasts: Tensor
) -> Tensor:
    """The loss of ``objective="mean-difference"``: the squared gap between the batch's mean
    logit difference under the mask and without it, over the squared mean without it; the rows
    are :func:`difference_gap`'s. Faithfulness is a ratio of means, so a circuit that matches the
    model's mean difference has ``f = 1`` on the batch however its rows scatter about it.

    >>> tokens = torch.tensor([[5, 1], [5, 3]])
    >>> answer_mask = torch.tensor([[False, True], [False, True]])
    >>> reference = torch.zeros(2, 4); reference[0, 1] = 2.0; reference[1, 3] = 1.0
    >>> swapped = torch.zeros(2, 4); swapped[0, 1] = 1.0; swapped[1, 3] = 2.0
    >>> contrasts = torch.tensor([0, 0])
    >>> float(mean_difference_gap(swapped, reference, tokens, answer_mask, contrasts))
    0.0
    >>> round(float(difference_gap(swapped, reference, tokens, answer_mask, contrasts)), 6)
    0.4
    """
    found, target = _differences(logits, reference, tokens, answer_mask, contrasts)
    return (found.mean() - target.mean()) ** 2 / (target.mean() ** 2).clamp_min(1e-6)


def _differences(
    logits: Tensor, reference: Tensor, tokens: Tensor, answer_mask: Tensor, contrasts: Tensor
) -> tuple[Tensor, Tensor]:
    """Each row's logit difference of its answer's first token and its contrast token, under
    the mask (``logits``) and without it (``reference``)."""
    counts = answer_mask.sum(dim=1)
    first = torch.cumsum(counts, dim=0) - counts  # each row's first answer position, flattened
    answers = tokens[answer_mask][first]
    rows = torch.arange(len(first), device=logits.device)

    def difference(values: Tensor) -> Tensor:
        chosen = values[first]
        return chosen[rows, answers] - chosen[rows, contrasts]

    return difference(logits), difference(reference)
