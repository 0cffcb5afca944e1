"""The claims the integration tests check on real models, each derived rather than read off one
measured run.

A claim of the papers ("the mask solves the task far more often than the original model and
random masks") is checked as a one-sided hypothesis test at :data:`LEVEL`: Fisher's exact test
for counts (how many held-out examples are solved), the Wilcoxon signed-rank test for paired
per-example values (each example's answer CE under two settings), the Mann-Whitney test for two
samples (the first and last training losses). None of them depends on the exact numbers of one
run, so the same test passes on a CPU that trains in bf16 and on one that trains in fp32 (issue
28), and a broken mask -- one that behaves like the original model -- fails them.
"""

from __future__ import annotations

from collections.abc import Sequence

from scipy import stats

#: the level of every claim: a 1 % chance of passing when the claimed difference is absent
LEVEL = 0.01


def more_often(k_a: int, n_a: int, k_b: int, n_b: int) -> float:
    """One-sided p-value of "setting a succeeds more often than setting b" (Fisher's exact test
    on ``k_a`` of ``n_a`` against ``k_b`` of ``n_b``).

    >>> round(more_often(8, 20, 0, 20), 5)  # C(20,8) / C(40,8)
    0.00164
    """
    table = [[k_a, n_a - k_a], [k_b, n_b - k_b]]
    return float(stats.fisher_exact(table, alternative="greater").pvalue)


def lower_paired(a: Sequence[float], b: Sequence[float]) -> float:
    """One-sided p-value of "``a`` is lower than ``b``, example by example" (Wilcoxon
    signed-rank test on the pairs).

    >>> lower_paired([1, 2, 3, 4, 5, 6, 7, 8], [2, 3, 4, 5, 6, 7, 8, 9]) < LEVEL
    True
    """
    return float(stats.wilcoxon(a, b, alternative="less").pvalue)


def lower_sample(a: Sequence[float], b: Sequence[float]) -> float:
    """One-sided p-value of "the values of ``a`` are lower than those of ``b``" (Mann-Whitney U
    test on two samples).

    >>> lower_sample([1, 1, 2, 2, 1], [5, 6, 5, 7, 6]) < LEVEL
    True
    """
    return float(stats.mannwhitneyu(a, b, alternative="less").pvalue)


def majority(k: int, n: int) -> float:
    """One-sided p-value of "more than half succeed" (binomial test of ``k`` of ``n``).

    >>> majority(15, 20) < 0.05, majority(11, 20) < 0.05
    (True, False)
    """
    return float(stats.binomtest(k, n, 0.5, alternative="greater").pvalue)
