"""Whole key-value groups removed by a mask, against hand-computed counts and expectations."""

from __future__ import annotations

import math

import pytest
import torch

import lens_heads as lh
from lens_heads.heads_up._kv_groups import kv_groups_removed


def test_counts_and_expectation_by_hand():
    # 2 layers x 6 heads, 2 KV heads: groups of 3. Removed: all of group (L0, 0), two heads of
    # group (L1, 1) -> 1 whole group; R = 5 of N = 12.
    values = torch.ones(2, 6)
    values[0, 0:3] = 0.0
    values[1, 3:5] = 0.0
    result = kv_groups_removed(lh.HeadMask(values), n_kv_heads=2, permutations=500, seed=1)
    assert (result.removed, result.groups, result.group_size) == (5, 4, 3)
    assert result.whole_groups_removed == 1
    assert result.expected == pytest.approx(4 * math.comb(9, 2) / math.comb(12, 5))


def test_p_value_matches_the_exact_distribution():
    # 1 layer x 4 heads, 2 groups of 2, R = 2: P(at least one whole group) = 2 / C(4, 2) = 1/3.
    values = torch.tensor([[0.0, 0.0, 1.0, 1.0]])
    result = kv_groups_removed(lh.HeadMask(values), n_kv_heads=2, permutations=6000, seed=0)
    assert result.whole_groups_removed == 1
    assert result.p_value == pytest.approx(1 / 3, abs=0.03)


def test_scattered_removal_has_p_value_one():
    values = torch.tensor([[0.0, 1.0, 0.0, 1.0]])
    result = kv_groups_removed(lh.HeadMask(values), n_kv_heads=2, permutations=100)
    assert result.whole_groups_removed == 0
    assert result.p_value == 1.0


def test_kv_heads_must_divide_the_heads():
    with pytest.raises(ValueError, match="does not divide"):
        kv_groups_removed(lh.HeadMask(torch.ones(1, 4)), n_kv_heads=3)
