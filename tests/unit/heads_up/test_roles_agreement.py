"""Agreement of head classes, like for like (issue 47): Cohen's kappa beside chance, single
masks against single masks and majorities of equal halves, ties as a class of their own."""

from __future__ import annotations

import math

import pytest
import torch

from lens_heads.heads_up import agreement_table, cohen_kappa
from lens_heads.heads_up._roles_agreement import majority, split_halves


def test_kappa_by_hand():
    """72 % observed agreement where the class shares alone give 50 %: kappa 0.44, not 0.72."""
    a = torch.tensor([0] * 50 + [1] * 50)
    b = torch.tensor([0] * 36 + [1] * 14 + [0] * 14 + [1] * 36)
    found = cohen_kappa(a, b, n_classes=2)
    assert found["observed"] == pytest.approx(0.72)
    assert found["chance"] == pytest.approx(0.5)
    assert found["kappa"] == pytest.approx((0.72 - 0.5) / 0.5)
    assert cohen_kappa(a, a, 2)["kappa"] == pytest.approx(1.0)
    assert math.isnan(cohen_kappa(torch.zeros(4), torch.zeros(4), 2)["kappa"])  # chance is 1
    with pytest.raises(ValueError, match="same heads"):
        cohen_kappa(a, b[:10], 2)


def test_a_tie_is_no_majority_not_the_first_class():
    """Two tools whose masks split evenly on every head (0/1 in one, 0/2 in the other): with
    ties given to the first class both majorities would be class 0 everywhere, a perfect but
    empty agreement; as a class of its own the tie says there is no majority to compare."""
    ours = torch.tensor([[0, 0, 0], [1, 1, 1]])
    theirs = torch.tensor([[0, 0, 0], [2, 2, 2]])
    assert majority(ours, 4).tolist() == [4, 4, 4]
    assert majority(torch.tensor([[0, 1], [0, 1], [1, 1]]), 4).tolist() == [0, 1]
    by_order = torch.stack([(ours == c).sum(0) for c in range(4)]).argmax(0)  # the old rule
    assert by_order.tolist() == [0, 0, 0] and by_order.tolist() != majority(ours, 4).tolist()
    assert len(split_halves(4)) == 3 and len(split_halves(2)) == 1
    with pytest.raises(ValueError, match="even number"):
        split_halves(3)
    row = next(
        r for r in agreement_table(ours, theirs, 4)
        if r["compared"] == "majority of half the masks" and r["where"] == "between"
    )  # fmt: skip
    # halves of one mask are the masks themselves: of the four half-against-half comparisons
    # only 0 against 0 agrees
    assert row["observed"] == pytest.approx(0.25) and row["pairs"] == 4


def test_the_table_compares_like_with_like():
    """Within a tool and between tools, each kind of comparison over the same kind of pairs:
    single masks (every pair) and halves' majorities; numbers by hand for a 4-head example."""
    ours = torch.tensor([[0, 0, 1, 1], [0, 0, 1, 2]])
    theirs = torch.tensor([[0, 1, 1, 1], [0, 1, 1, 1]])
    rows = {(r["compared"], r["where"]): r for r in agreement_table(ours, theirs, 3)}
    within = rows[("single mask", "within ours")]
    assert within["observed"] == pytest.approx(0.75) and within["pairs"] == 1
    # shares (0.5, 0.5, 0) and (0.5, 0.25, 0.25): chance 0.375
    assert within["chance"] == pytest.approx(0.375)
    assert within["kappa"] == pytest.approx((0.75 - 0.375) / 0.625)
    assert rows[("single mask", "within theirs")]["observed"] == pytest.approx(1.0)
    between = rows[("single mask", "between")]
    assert between["pairs"] == 4 and between["observed"] == pytest.approx((0.75 + 0.5) / 2)
    assert {where for _, where in rows} == {"within ours", "within theirs", "between"}


def test_head_roles_give_a_tie_no_majority():
    """HeadRoles: a head whose two masks give two classes has no majority (the old rule gave it
    the class named first), with agreement one half; counts and heads list the class."""
    from lens_heads.heads_up import HeadRoles
    from lens_heads.heads_up._roles_result import MAJORITY_CLASSES

    roles = HeadRoles.example()
    frame = roles.to_frame()
    assert list(frame["class"]) == ["facilitating", "interfering", "no majority", "irrelevant"]
    assert list(frame["agreement"]) == [1.0, 1.0, 0.5, 1.0]
    assert roles.counts()["no majority"] == 1 and roles.heads("no majority") == ["L1H0"]
    assert set(roles.counts()) == set(MAJORITY_CLASSES)
    assert roles.plot().data[0].colorbar.ticktext[-1] == "no majority"


def test_masks_that_agree_by_chance_alone_have_kappa_near_zero_while_the_mean_share_looks_high():
    """A role run's masks, measured like for like: four masks drawing classes independently
    agree with each other only as often as their class shares give (kappa near 0), while the
    mean share of masks behind each head's majority, the figure the pages used to print, never
    falls below one half. Identical masks: kappa 1 in both rows."""
    from lens_heads.heads_up import HeadRoles, agreement_within

    generator = torch.Generator().manual_seed(0)
    independent = torch.multinomial(
        torch.tensor([0.5, 0.3, 0.2]), 4 * 5000, replacement=True, generator=generator
    ).reshape(4, 5000)
    rows = {row["compared"]: row for row in agreement_within(independent, n_classes=3)}
    assert set(rows) == {"single mask", "majority of half the masks"}
    assert rows["single mask"]["chance"] == pytest.approx(0.38, abs=0.01)
    assert abs(rows["single mask"]["kappa"]) < 0.03 and rows["single mask"]["pairs"] == 6
    assert abs(rows["majority of half the masks"]["kappa"]) < 0.03
    assert rows["majority of half the masks"]["pairs"] == 3
    same = agreement_within(independent[:1].repeat(4, 1), n_classes=3)
    assert [row["kappa"] for row in same] == pytest.approx([1.0, 1.0])
    # the same numbers as the rival comparison's rows within one tool (written once)
    table = agreement_table(independent, independent.flip(0), n_classes=3)
    within = [
        {k: v for k, v in r.items() if k != "where"} for r in table if r["where"] == "within ours"
    ]
    assert within == agreement_within(independent, n_classes=3)
    # on a role result: gates of independent masks
    gates = torch.rand(3, 4, 8, 9, generator=generator)
    roles = HeadRoles("tiny", "upper", gates)
    assert float(roles.agreement.mean()) >= 0.5
    assert roles.mask_agreement() == agreement_within(roles.per_mask, n_classes=4)
    assert roles.mask_agreement()[0]["kappa"] < 0.25
