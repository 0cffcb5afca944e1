"""Where two per-head measures agree: Spearman's rank correlation with a permutation p-value and a
bootstrap interval, Holm's correction across every pair of a table, and the overlap of the two
top-k sets against its expectation for random sets.

>>> import pandas as pd
>>> a, b, c = [1.0, 2, 3, 4, 5, 6], [2.0, 1, 4, 3, 6, 5], [6.0, 5, 4, 3, 2, 1]
>>> frame = pd.DataFrame({"a": a, "b": b, "c": c})
>>> table = agreement(frame, k=2, permutations=200, bootstrap=200)
>>> table[["first", "second", "spearman"]].round(3).values.tolist()
[['a', 'b', 0.829], ['a', 'c', -1.0], ['b', 'c', -0.829]]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from lens_heads.core import InputError, configure
from lens_heads.core.internal import (
    MAX_RESAMPLES,
    BootstrapSetting,
    LevelSetting,
    PermutationsSetting,
    SeedSetting,
    TopKSetting,
    holm,
    own_checks,
)

__all__ = ["MAX_RESAMPLES", "AgreementConfig", "agreement", "check_top_k", "holm", "top_k_overlap"]


@own_checks
@dataclass(frozen=True, kw_only=True)
class AgreementConfig(
    PermutationsSetting,
    BootstrapSetting.with_defaults(bootstrap=2000),
    LevelSetting,
    SeedSetting,
    TopKSetting,
):
    """How two head scores' agreement is measured: top-set overlap, its permutation p-value and
    bootstrap interval, Holm across the table's pairs; ``seed`` draws the permutations and the
    resamples; each field is a shared part's."""


def check_top_k(k: int, n_heads: int, name: str = "k") -> None:
    """Refuse top sets larger than half of the ``n_heads`` heads compared: two sets of ``k`` of
    ``n`` heads share at least ``2 k - n`` heads whatever they measure (all of them at ``k = n``),
    so their overlap says nothing.

    >>> check_top_k(10, 8)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lens_heads.core._errors.InputError: k=10 top heads of 8: ... pass k=4 or less (--k 4)
    """
    if 2 * k > n_heads:
        flag = "--" + name.replace("_", "-")
        raise InputError(
            f"{name}={k} top heads of {n_heads}: two top sets of more than half of the heads "
            f"overlap by at least 2k - n heads whatever they measure, so their overlap would "
            f"say nothing; pass {name}={max(1, n_heads // 2)} or less ({flag} "
            f"{max(1, n_heads // 2)})"
        )


def top_k_overlap(first: np.ndarray, second: np.ndarray, k: int) -> tuple[int | float, float]:
    """(heads in both top-k sets, the expected overlap of two random k-sets: ``k * k / n``);
    both NaN where ``k`` is more than half of the ``n`` heads (:func:`check_top_k`)."""
    n = len(first)
    if 2 * k > n:
        return math.nan, math.nan
    top_first = set(np.argsort(-first, kind="stable")[:k].tolist())
    top_second = set(np.argsort(-second, kind="stable")[:k].tolist())
    return len(top_first & top_second), k * k / n


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    return float(stats.spearmanr(a, b).statistic)


def _permutation_p(a: np.ndarray, b: np.ndarray, rho: float, n: int, rng: Any) -> float:
    """Two-sided permutation p of Spearman's rho: Pearson's correlation of the ranks, with
    ``b``'s ranks permuted ``n`` times (vectorized)."""
    ra, rb = stats.rankdata(a), stats.rankdata(b)
    ra = (ra - ra.mean()) / ra.std()
    rb = (rb - rb.mean()) / rb.std()
    extreme = 0
    for start in range(0, n, _CHUNK):  # a bounded block of permutations at a time
        rows = min(_CHUNK, n - start)
        null = rng.permuted(np.tile(rb, (rows, 1)), axis=1) @ ra / len(ra)
        extreme += int(np.sum(np.abs(null) >= abs(rho) - 1e-12))
    return float((extreme + 1) / (n + 1))


def _bootstrap(a: np.ndarray, b: np.ndarray, n: int, rng: Any) -> np.ndarray:
    """Spearman's rho of ``n`` bootstrap resamples of the heads (drawn with replacement, as
    ``n`` draws of ``len(a)`` indices), a block of resamples at a time: each row re-ranked (ties
    averaged, as :func:`scipy.stats.spearmanr` ranks), then Pearson's correlation of the ranks
    row by row; NaN for a resample in which either measure is constant."""
    found = []
    for start in range(0, n, _CHUNK):
        rows = min(_CHUNK, n - start)
        index = rng.integers(0, len(a), (rows, len(a)))
        ra, rb = stats.rankdata(a[index], axis=1), stats.rankdata(b[index], axis=1)
        ra -= ra.mean(axis=1, keepdims=True)
        rb -= rb.mean(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            found.append(
                np.sum(ra * rb, axis=1) / np.sqrt(np.sum(ra * ra, axis=1) * np.sum(rb * rb, axis=1))
            )
    return np.concatenate(found)


_CHUNK = 4096


def agreement(
    frame: pd.DataFrame,
    columns: list[str] | None = None,
    config: AgreementConfig | None = None,
    **options: object,
) -> pd.DataFrame:
    """One row per pair of ``columns`` (default: every numeric column) over the heads where
    both are defined: ``spearman``, its two-sided permutation ``p``, ``p (Holm)`` across the
    pairs, the bootstrap ``ci low``/``ci high``, ``top-k overlap`` and ``random overlap``."""
    config = configure(AgreementConfig, config, options, "agreement")
    columns = columns or [c for c in frame.columns if pd.api.types.is_numeric_dtype(frame[c])]
    rng = np.random.default_rng(config.seed)
    pairs = len(columns) * (len(columns) - 1) // 2
    permutations = max(config.permutations, math.ceil(2 * pairs / config.level))
    rows = []
    for first, second in combinations(columns, 2):
        both = frame[[first, second]].dropna()
        a, b = both[first].to_numpy(float), both[second].to_numpy(float)
        if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
            rows.append({"first": first, "second": second, "heads": len(a)})
            continue
        rho = _spearman(a, b)
        p = _permutation_p(a, b, rho, permutations, rng)
        boot = _bootstrap(a, b, config.bootstrap, rng)
        overlap, expected = top_k_overlap(a, b, config.k)
        rows.append(
            {
                "first": first,
                "second": second,
                "heads": len(a),
                "spearman": rho,
                "p": p,
                "ci low": float(np.nanpercentile(boot, 2.5)),
                "ci high": float(np.nanpercentile(boot, 97.5)),
                "top-k overlap": overlap,
                "random overlap": expected,
                "permutations": permutations,
            }
        )
    table = pd.DataFrame(rows)
    if "p" in table:
        tested = table["p"].notna()
        table.loc[tested, "p (Holm)"] = holm(table.loc[tested, "p"].to_numpy())
        table["agree"] = (table["p (Holm)"] < config.level) & (table["spearman"] > 0)
    return table
