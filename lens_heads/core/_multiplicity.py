"""Holm's step-down correction for a family of p-values: the toolkit's one multiplicity rule
(the atlas's agreement table, the comparisons of head finders, the verdicts of the
reproduction page). It needs numpy only, so that the docs' own check can load this file
without the package (``scripts/reproduction``).

>>> holm(np.array([0.01, 0.04, 0.03])).tolist()
[0.03, 0.06, 0.06]
"""

from __future__ import annotations

import numpy as np

__all__ = ["holm"]


def holm(p_values: np.ndarray) -> np.ndarray:
    """Holm-adjusted p-values (step-down, running maximum, capped at 1), in the given order."""
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p)
    adjusted = np.empty_like(p)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[index]))
        adjusted[index] = running
    return adjusted
