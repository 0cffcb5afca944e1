"""How far two sets of head classes agree, measured like for like: Cohen's kappa beside the
agreement chance alone gives, single mask against single mask and majority against majority of
equal halves, within one tool and between two (issue 47). A tie between classes is a class of
its own (``no majority``), not the first class in order.

>>> a, b = torch.tensor([0, 0, 1, 1]), torch.tensor([0, 1, 1, 1])
>>> found = cohen_kappa(a, b, n_classes=2)
>>> found["observed"], found["chance"], found["kappa"]
(0.75, 0.5, 0.5)
"""

from __future__ import annotations

import itertools
from typing import Any

import torch
from jaxtyping import Int
from torch import Tensor

from lens_heads.core import InputError

__all__ = ["agreement_table", "agreement_within", "cohen_kappa", "majority", "split_halves"]


def cohen_kappa(a: Tensor, b: Tensor, n_classes: int) -> dict[str, float]:
    """Observed agreement of two labelings of the same heads, the agreement chance gives with
    each labeling's class shares, and Cohen's kappa ``(observed - chance) / (1 - chance)``
    (nan when chance is 1: one class everywhere in both)."""
    a, b = a.flatten().long(), b.flatten().long()
    if a.shape != b.shape or not len(a):
        raise InputError(f"two labelings of the same heads are needed, got {len(a)} and {len(b)}")
    observed = float((a == b).float().mean())
    share_a = torch.bincount(a, minlength=n_classes).float() / len(a)
    share_b = torch.bincount(b, minlength=n_classes).float() / len(b)
    chance = float((share_a * share_b).sum())
    kappa = (observed - chance) / (1 - chance) if chance < 1 else float("nan")
    return {"observed": observed, "chance": chance, "kappa": kappa}


def majority(per_mask: Int[Tensor, "masks ..."], n_classes: int) -> Tensor:
    """The class most masks give each head; a tie is class ``n_classes`` (no majority).

    >>> majority(torch.tensor([[0, 1], [0, 2]]), n_classes=3).tolist()
    [0, 3]
    """
    counts = torch.stack([(per_mask == c).sum(dim=0) for c in range(n_classes)])
    top = counts.max(dim=0).values
    winners = (counts == top).sum(dim=0)
    return torch.where(winners == 1, counts.argmax(dim=0), torch.full_like(top, n_classes))


def split_halves(n_masks: int) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Every split of the masks into two halves of equal size (each split once).

    >>> split_halves(4)
    [((0, 1), (2, 3)), ((0, 2), (1, 3)), ((0, 3), (1, 2))]
    """
    if n_masks < 2 or n_masks % 2:
        raise InputError(f"halves of equal size need an even number of masks, got {n_masks}")
    splits = []
    for first in itertools.combinations(range(n_masks), n_masks // 2):
        if 0 not in first:
            continue
        splits.append((first, tuple(i for i in range(n_masks) if i not in first)))
    return splits


def _mean(found: list[dict[str, float]]) -> dict[str, float]:
    keys = ("observed", "chance", "kappa")
    return {key: sum(f[key] for f in found) / len(found) for key in keys} | {"pairs": len(found)}


def _single_pairs(per_mask: Tensor, n_classes: int) -> list[dict[str, float]]:
    return [
        cohen_kappa(per_mask[i], per_mask[j], n_classes)
        for i, j in itertools.combinations(range(len(per_mask)), 2)
    ]


def _half_majorities(per_mask: Tensor, n_classes: int) -> list[tuple[Tensor, Tensor]]:
    return [
        (majority(per_mask[list(a)], n_classes), majority(per_mask[list(b)], n_classes))
        for a, b in split_halves(len(per_mask))
    ]


def agreement_within(per_mask: Int[Tensor, "masks ..."], n_classes: int) -> list[dict[str, Any]]:
    """How far the masks of one fit agree with each other, like for like: every pair of single
    masks, and (with an even number of masks) the majority classes of every split into equal
    halves (a tie: no majority). Each row: the mean observed agreement, chance agreement and
    kappa over its pairs.

    >>> rows = agreement_within(torch.tensor([[0, 1, 1, 0], [0, 1, 0, 0]]), n_classes=2)
    >>> [(r["compared"], r["observed"], r["pairs"]) for r in rows]
    [('single mask', 0.75, 1)]
    """
    rows: list[dict[str, Any]] = []
    if len(per_mask) >= 2:
        rows.append({"compared": "single mask", **_mean(_single_pairs(per_mask, n_classes))})
    if len(per_mask) >= 4 and len(per_mask) % 2 == 0:  # two halves of one are single masks
        halves = _half_majorities(per_mask, n_classes)
        found = [cohen_kappa(a, b, n_classes + 1) for a, b in halves]
        rows.append({"compared": "majority of half the masks", **_mean(found)})
    return rows


def agreement_table(
    ours: Int[Tensor, "masks ..."], theirs: Int[Tensor, "masks ..."], n_classes: int
) -> list[dict[str, Any]]:
    """Agreement within each tool and between the two, measured the same way each time: single
    masks (every pair of two masks) and majorities of equal halves of the masks (a tie: no
    majority); each row the mean observed agreement, chance agreement and kappa over its pairs.
    Between the tools a half of one is compared with a half of the other of the same size."""
    n_ours, n_theirs = len(ours), len(theirs)
    rows: list[dict[str, Any]] = []
    single = {
        "within ours": _single_pairs(ours, n_classes),
        "within theirs": _single_pairs(theirs, n_classes),
        "between": [
            cohen_kappa(ours[i], theirs[j], n_classes)
            for i in range(n_ours)
            for j in range(n_theirs)
        ],
    }
    for where, found in single.items():
        if found:
            rows.append({"compared": "single mask", "where": where, **_mean(found)})
    if n_ours % 2 == 0 and n_theirs % 2 == 0 and min(n_ours, n_theirs) >= 2:
        width = n_classes + 1  # the no-majority class
        halves_ours = _half_majorities(ours, n_classes)
        halves_theirs = _half_majorities(theirs, n_classes)
        same_size = n_ours == n_theirs
        half = {
            "within ours": [cohen_kappa(a, b, width) for a, b in halves_ours],
            "within theirs": [cohen_kappa(a, b, width) for a, b in halves_theirs],
            "between": [
                cohen_kappa(mine, other, width)
                for pair_ours in halves_ours
                for pair_theirs in halves_theirs
                for mine in pair_ours
                for other in pair_theirs
            ]
            if same_size
            else [],
        }
        for where, found in half.items():
            if found:
                rows.append({"compared": "majority of half the masks", "where": where,
                             **_mean(found)})  # fmt: skip
    return rows
