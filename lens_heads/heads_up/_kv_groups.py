"""Do a mask's removed heads form whole key-value groups? (Heads up! Figure 7, Appendix C.2)

Under grouped-query attention the query heads of a layer share key-value heads in groups of
``n_heads // n_kv_heads`` adjacent heads. If a task lived in the KV heads, a mask would tend to
remove whole groups. :func:`kv_groups_removed` counts the groups whose query heads a mask removes
all of, against what removing as many heads at random gives (exact expectation and a one-sided
permutation p-value).

>>> import lens_heads as lh
>>> kept = ["L0H2", "L0H3", "L1H0", "L1H1", "L1H2", "L1H3"]
>>> mask = lh.HeadMask.from_heads(kept, n_layers=2, n_heads=4)
>>> result = kv_groups_removed(mask, n_kv_heads=2, permutations=200, seed=0)
>>> result.removed, result.groups, result.whole_groups_removed
(2, 4, 1)
>>> round(result.expected, 4)  # 4 groups x P(both heads of a group among the 2 removed)
0.1429
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import torch

from lens_heads.core import InputError, MaskSource, resolve_mask

__all__ = ["KVGroupsRemoved", "kv_groups_removed"]


@dataclass(frozen=True)
class KVGroupsRemoved:
    """Whole KV groups a mask removes, against random removal of as many heads."""

    removed: int
    groups: int
    group_size: int
    whole_groups_removed: int
    expected: float
    p_value: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _whole_groups(removed: torch.Tensor, group_size: int) -> torch.Tensor:
    """Per row of ``removed [..., n_layers, n_heads]`` (bool), the number of whole groups."""
    shape = (*removed.shape[:-1], removed.shape[-1] // group_size, group_size)
    return removed.reshape(shape).all(dim=-1).flatten(-2).sum(dim=-1)


def kv_groups_removed(
    mask: MaskSource,
    n_kv_heads: int,
    *,
    permutations: int = 2000,
    seed: int = 0,
) -> KVGroupsRemoved:
    """Count the KV groups whose query heads ``mask`` removes entirely (query heads ``h`` with
    the same ``h // (n_heads // n_kv_heads)`` share a KV head, as in transformers).

    ``expected`` is exact: groups x C(N - g, R - g) / C(N, R) for N heads, R removed, group size
    g. ``p_value`` is the share of ``permutations`` random removals of R heads with at least as
    many whole groups (add-one smoothed). ``mask`` is any form of
    :func:`~lens_heads.core.resolve_mask`."""
    mask = resolve_mask(mask)
    n_layers, n_heads = mask.values.shape
    if n_kv_heads < 1 or n_heads % n_kv_heads:
        raise InputError(
            f"n_kv_heads={n_kv_heads} does not divide the mask's {n_heads} heads per layer; "
            "pass the model's number of key-value heads (config.num_key_value_heads)"
        )
    group_size = n_heads // n_kv_heads
    removed = mask.values < 0.5
    total, r = removed.numel(), int(removed.sum())
    groups = n_layers * n_kv_heads
    observed = int(_whole_groups(removed, group_size))
    expected = (
        groups * math.comb(total - group_size, r - group_size) / math.comb(total, r)
        if r >= group_size
        else 0.0
    )
    generator = torch.Generator().manual_seed(seed)
    order = torch.rand(permutations, total, generator=generator).argsort(dim=1)
    shuffled = (order < r).reshape(permutations, n_layers, n_heads)
    at_least = int((_whole_groups(shuffled, group_size) >= observed).sum())
    return KVGroupsRemoved(
        removed=r,
        groups=groups,
        group_size=group_size,
        whole_groups_removed=observed,
        expected=expected,
        p_value=(at_least + 1) / (permutations + 1),
    )
