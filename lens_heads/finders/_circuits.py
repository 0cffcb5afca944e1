"""Circuits chosen on the calibration pairs: among candidate circuits for each budget, the one
whose faithfulness there is nearest 1 (the calibrated cut of a ranking's prefixes, and the
selected step of an exact-budget mask's training).

>>> prefix_sizes(6)
[6, 4, 3, 2, 1]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor

from lens_heads.core import InputError, head_shape
from lens_heads.finders._counterfactuals import CounterfactualSet


@runtime_checkable
class _Inputs(Protocol):
    """What the choice reads of a method's inputs (``_methods._Inputs`` has it all)."""

    model: Any
    train_pairs: CounterfactualSet
    calibration_pairs: CounterfactualSet | None
    config: Any  # its batch_size: the pairs scored at once


def prefix_sizes(k: int, ratio: float = 0.75) -> list[int]:
    """The circuit sizes :func:`calibrated_circuits` tries for a budget of ``k`` heads: ``k``
    and a geometric grid below it down to one head, largest first.

    >>> prefix_sizes(20)
    [20, 15, 11, 8, 6, 5, 4, 3, 2, 1]
    """
    found, size = [], float(k)
    while size >= 1:
        if round(size) not in found:
            found.append(round(size))
        size *= ratio
    return found if found[-1] == 1 else [*found, 1]


def calibrated_circuits(
    inputs: _Inputs, orders: Sequence[Tensor], budgets: Sequence[int]
) -> tuple[list[Tensor], list[float], int]:
    """For each budget ``k`` and its head order (``[n_layers, n_heads]``, higher first), the
    circuit of the top ``k'`` heads, ``k'`` of :func:`prefix_sizes` (at most ``k``), whose
    faithfulness on the calibration pairs (counterfactual patching) is nearest 1; ties (within
    1e-6) keep the larger circuit. A circuit that overshoots (``f`` above 1: heads that work
    against the answer patched away with the rest) is cut back to one that matches the model.
    The calibration pairs are the training pairs unless the inputs carry a set of their own
    (``BenchmarkConfig.n_calibration_pairs``: pairs no method trained on, so that a mask fitted
    to its training pairs is not cut by the same pairs). Returns the circuits, their ``f`` on
    the calibration pairs (what chose them: a reader compares it with the held-out ``f``) and
    the forwards spent. The held-out pairs are never read."""
    from lens_heads.finders._faithfulness import top_heads

    candidates = [
        [top_heads(order, size) for size in prefix_sizes(k)]  # largest first: ties keep it
        for order, k in zip(orders, budgets, strict=True)
    ]
    return nearest_circuits(inputs, candidates)


def nearest_circuits(
    inputs: _Inputs, candidates: Sequence[Sequence[Tensor]]
) -> tuple[list[Tensor], list[float], int]:
    """For each list of candidate circuits (0/1 masks ``[n_layers, n_heads]``), the one whose
    faithfulness on the calibration pairs (the training pairs where the inputs carry none) is
    nearest 1; ties (within 1e-6) keep the earlier candidate (the scorer measures each distinct
    circuit once). Returns the circuits, their ``f`` there and the forwards spent."""
    from lens_heads.finders._faithfulness import PairScorer

    if not all(candidates):
        raise InputError("every budget needs at least one candidate circuit")
    n_layers, n_heads = head_shape(inputs.model)
    pairs = inputs.calibration_pairs or inputs.train_pairs
    scorer = PairScorer(inputs.model, pairs, "counterfactual", inputs.config.batch_size)
    ends = [torch.ones(n_layers, n_heads), torch.zeros(n_layers, n_heads)]
    flat = [circuit for group in candidates for circuit in group]
    values = scorer.metrics(torch.stack(ends + flat)).mean(dim=-1)  # each distinct one once
    f = iter(((values[2:] - values[1]) / (values[0] - values[1])).tolist())
    chosen: list[tuple[Tensor, float]] = []
    for group in candidates:
        best: tuple[float, Tensor, float] | None = None
        for circuit in group:
            value = next(f)
            if best is None or abs(1.0 - value) < best[0] - 1e-6:
                best = (abs(1.0 - value), circuit, value)
        assert best is not None  # every group has a candidate (checked above)
        chosen.append((best[1], best[2]))
    return [c[0] for c in chosen], [c[1] for c in chosen], scorer.forwards


def _fitted(
    counts: Sequence[int], n: int, budgets: Sequence[int], fitted: Sequence[float]
) -> list[float]:
    """The calibration-pair ``f`` of every size's circuit: the calibrated ``budgets``' ``fitted``,
    0 for no head and 1 for every head (by definition)."""
    found = dict(zip(budgets, fitted, strict=True))
    return [found.get(k, 1.0 if k == n else 0.0) for k in counts]
