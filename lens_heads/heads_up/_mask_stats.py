"""Statistics over pairs of trained head masks (Heads up! Table 5, Tables 37-38):
:func:`mask_statistics` gives ``|M1|``, ``|M2|``, recall, Jaccard, the Jaccard two random masks
of those sizes have on average (eq. 4) and their ratio, for chosen pairs (task against task, or
the same task on two models of the same shape), and the Jaccard matrix. The masks come as a
folder or a mapping (:mod:`lens_heads.heads_up._mask_sets`); how many masks keep each head is
:func:`lens_heads.heads_up.tasks_per_head`.

>>> import lens_heads as lh
>>> masks = {
...     "upper": lh.HeadMask.from_heads(["L0H0", "L0H1", "L1H0"], n_layers=2, n_heads=2),
...     "lower": lh.HeadMask.from_heads(["L0H0", "L1H1"], n_layers=2, n_heads=2),
... }
>>> stats = mask_statistics(masks)
>>> stats.to_frame()[["|M1|", "|M2|", "recall", "Jaccard"]].values.tolist()
[[3.0, 2.0, 0.3333333333333333, 0.25]]
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
from jaxtyping import Float
from torch import Tensor

from lens_heads.core import HeadMask, InputError, expected_random_jaccard, jaccard, markdown_table
from lens_heads.core.internal import FolderResult, MaskShapeError
from lens_heads.heads_up._mask_sets import MaskSet, common_model, mask_set, stack_masks

__all__ = ["MaskStatistics", "mask_statistics", "pair_row"]

logger = logging.getLogger(__name__)

_COLUMNS = ["mask 1", "mask 2", "|M1|", "|M2|", "|M1 ∩ M2|", "recall"]
_COLUMNS += ["Jaccard", "random Jaccard", "ratio"]


# -- Table 5 ---------------------------------------------------------------------------------------
def pair_row(a: HeadMask, b: HeadMask) -> dict[str, int | float]:
    """The Table 5 numbers of one pair: sizes, overlap, recall ``|M1 ∩ M2| / |M1|`` (the share
    of M1's heads that M2 keeps too), Jaccard, its random expectation (eq. 4) and the ratio.

    >>> a = HeadMask.from_heads(["L0H0", "L0H1"], n_layers=2, n_heads=2)
    >>> b = HeadMask.from_heads(["L0H0", "L1H1"], n_layers=2, n_heads=2)
    >>> row = pair_row(a, b)
    >>> row["recall"], row["Jaccard"], round(row["random Jaccard"], 4), round(row["ratio"], 3)
    (0.5, 0.3333333333333333, 0.3889, 0.857)
    """
    if a.shape != b.shape:
        raise MaskShapeError(
            f"masks of different shapes compared: {a.shape[0]}x{a.shape[1]} and "
            f"{b.shape[0]}x{b.shape[1]} (layers x heads); compare masks of models with the same "
            "number of layers and heads"
        )
    overlap = (a & b).n_selected
    similarity = jaccard(a, b)
    expected = expected_random_jaccard(a, b)
    return {
        "|M1|": a.n_selected,
        "|M2|": b.n_selected,
        "|M1 ∩ M2|": overlap,
        "recall": overlap / a.n_selected if a.n_selected else math.nan,
        "Jaccard": similarity,
        "random Jaccard": expected,
        "ratio": similarity / expected if expected > 0 else math.nan,
    }


@dataclass(repr=False)
class MaskStatistics(FolderResult):
    """Table 5 for chosen pairs of masks, and the Jaccard matrix of all of them.

    ``values_a[i]`` is the 0/1 mask ``names_a[i]`` (``values_b``/``names_b`` the second set, for
    masks of the same tasks on another model; None when the pairs are task against task within
    one set). :meth:`to_frame` has one row per pair: ``|M1|``, ``|M2|``, ``|M1 ∩ M2|``,
    ``recall`` = ``|M1 ∩ M2| / |M1|``, ``Jaccard``, ``random Jaccard`` (eq. 4: the mean Jaccard
    of two masks of these sizes placed uniformly at random) and ``ratio`` = Jaccard / random.

    >>> masks = {n: HeadMask.from_heads(h, n_layers=1, n_heads=4)
    ...          for n, h in {"a": ["L0H0", "L0H1"], "b": ["L0H1"], "c": ["L0H3"]}.items()}
    >>> stats = mask_statistics(masks, pairs=[("a", "b")])
    >>> stats.to_frame()[["mask 1", "mask 2", "Jaccard"]].values.tolist()
    [['a', 'b', 0.5]]
    >>> float(stats.matrix().loc["a", "c"]), stats.plot().data[0].z.shape
    (0.0, (3, 3))
    """

    _format: ClassVar[str] = "lens_heads.mask_statistics/1"

    names_a: list[str]
    values_a: Float[Tensor, "n_a n_layers n_heads"]
    pairs: list[tuple[str, str]]
    names_b: list[str] | None = None
    values_b: Float[Tensor, "n_b n_layers n_heads"] | None = None
    model_a: str | None = None
    model_b: str | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return int(self.values_a.shape[1]), int(self.values_a.shape[2])

    @property
    def cross(self) -> bool:
        """Are the pairs between two sets (e.g. two models) rather than within one?"""
        return self.values_b is not None

    def masks(self, side: str = "a") -> dict[str, HeadMask]:
        """The masks of set ``"a"`` or ``"b"`` by name."""
        if side == "b" and self.cross:
            assert self.names_b is not None and self.values_b is not None
            return {n: HeadMask(v) for n, v in zip(self.names_b, self.values_b, strict=True)}
        if side not in ("a", "b"):
            raise InputError(f"side must be 'a' or 'b', got {side!r}")
        return {n: HeadMask(v) for n, v in zip(self.names_a, self.values_a, strict=True)}

    def to_frame(self) -> pd.DataFrame:
        """One row per pair: the two names and the Table 5 columns (see :func:`pair_row`)."""
        first, second = self.masks("a"), self.masks("b")
        rows = [{"mask 1": a, "mask 2": b, **pair_row(first[a], second[b])} for a, b in self.pairs]
        return pd.DataFrame(rows, columns=_COLUMNS)

    def matrix(self) -> pd.DataFrame:
        """Jaccard of every mask of set a (rows) with every mask of set b (columns; set a
        again when there is no set b)."""
        first, second = self.masks("a"), self.masks("b")
        data = [[jaccard(first[a], second[b]) for b in second] for a in first]
        return pd.DataFrame(
            data, index=pd.Index(list(first), name="M1"), columns=pd.Index(list(second), name="M2")
        )

    def _side(self, side: str) -> str:
        model = self.model_a if side == "a" else (self.model_b if self.cross else self.model_a)
        return f"M{'1' if side == 'a' else '2'}" + (f" ({model})" if model else "")

    def to_markdown(self) -> str:

        n = self.shape[0] * self.shape[1]
        lines = [
            f"Mask statistics (Heads up! Table 5): {self._side('a')} vs {self._side('b')}, "
            f"{self.shape[0]} layers x {self.shape[1]} heads = {n} heads. recall = |M1 ∩ M2| / "
            "|M1|; random Jaccard = the mean Jaccard of two random masks of these sizes (eq. 4); "
            "ratio = Jaccard / random Jaccard.",
            "",
            markdown_table(self.to_frame(), index=False, floatfmt=".3f")
            if self.pairs
            else "(no pairs)",
            "",
            "Jaccard matrix:",
            "",
            markdown_table(self.matrix(), floatfmt=".2f"),
        ]
        return "\n".join(lines) + "\n"

    def plot(self) -> Any:
        """The Jaccard matrix as a heat map (values written in the cells; the hover adds the
        random expectation of eq. 4)."""
        import plotly.graph_objects as go

        matrix = self.matrix()
        first, second = self.masks("a"), self.masks("b")
        expected = [
            [expected_random_jaccard(first[a], second[b]) for b in matrix.columns]
            for a in matrix.index
        ]
        figure = go.Figure(
            go.Heatmap(
                z=matrix.to_numpy(),
                x=list(matrix.columns),
                y=list(matrix.index),
                customdata=expected,
                text=[[f"{v:.2f}" for v in row] for row in matrix.to_numpy()],
                texttemplate="%{text}",
                zmin=0.0,
                zmax=1.0,
                colorscale="Blues",
                colorbar={"title": "Jaccard"},
                hovertemplate="%{y} vs %{x}<br>Jaccard %{z:.3f}<br>random %{customdata:.3f}"
                "<extra></extra>",
            )
        )
        figure.update_layout(
            title=f"Jaccard similarity of masks: {self._side('a')} vs {self._side('b')}",
            xaxis_title=self._side("b"),
            yaxis_title=self._side("a"),
            yaxis_autorange="reversed",
            template="plotly_white",
            height=max(360, 40 * len(matrix) + 200),
            width=max(420, 40 * len(matrix.columns) + 300),
        )
        return figure

    def save(self, directory: str | os.PathLike[str], *, png: bool = False) -> list[Path]:
        """The :class:`~lens_heads.core._storage.FolderResult` folder plus ``matrix.csv``."""
        from lens_heads.core import write_atomic

        written = super().save(directory, png=png)
        return [*written, write_atomic(Path(directory) / "matrix.csv", self.matrix().to_csv())]

    @classmethod
    def _from_saved(cls, meta: dict[str, Any], tensors: dict[str, Any]) -> MaskStatistics:
        meta["pairs"] = [(str(a), str(b)) for a, b in meta["pairs"]]
        return cls(**meta, **tensors)


def _default_pairs(
    first: Mapping[str, HeadMask], second: Mapping[str, HeadMask] | None
) -> list[tuple[str, str]]:
    if second is None:
        names = list(first)
        if len(names) < 2:
            raise InputError(
                f"one mask ({names[0]}): nothing to compare; give two or more masks, or a second "
                "set masks_b (the same task on another model)"
            )
        return [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    common = [name for name in first if name in second]
    if not common:
        raise InputError(
            f"no task has a mask in both sets (a: {sorted(first)}; b: {sorted(second)}); "
            "pass pairs=[(name_a, name_b), ...]"
        )
    return [(name, name) for name in common]


def _check_pairs(
    pairs: Sequence[tuple[str, str]],
    first: Mapping[str, HeadMask],
    second: Mapping[str, HeadMask],
) -> list[tuple[str, str]]:
    checked = []
    for pair in pairs:
        if isinstance(pair, str) or len(pair) != 2:
            raise InputError(f"each pair must be (name 1, name 2), got {pair!r}")
        a, b = str(pair[0]), str(pair[1])
        for name, masks, side in ((a, first, "first"), (b, second, "second")):
            if name not in masks:
                raise InputError(
                    f"pair {pair!r}: no mask {name!r} in the {side} set; have {sorted(masks)}"
                )
        checked.append((a, b))
    return checked


def mask_statistics(
    masks_a: MaskSet,
    masks_b: MaskSet | None = None,
    pairs: Sequence[tuple[str, str]] | None = None,
) -> MaskStatistics:
    """Table 5 (and Tables 37-38) for pairs of masks: task against task within ``masks_a`` (by
    default every unordered pair), or -- with ``masks_b``, masks of another model of the same
    shape -- each task against the same task (by default every name in both sets).

    ``masks_a``/``masks_b`` are folders (:func:`load_masks`) or mappings ``name -> HeadMask``;
    ``pairs`` lists ``(name in a, name in b)``. Masks of different shapes are a
    :class:`~lens_heads.core._masks.MaskShapeError`.

    >>> import lens_heads as lh
    >>> a = {"upper": lh.HeadMask.from_heads(["L0H0", "L1H1"], n_layers=2, n_heads=2)}
    >>> b = {"upper": lh.HeadMask.from_heads(["L0H0"], n_layers=2, n_heads=2)}
    >>> mask_statistics(a, b).to_frame()[["|M1|", "|M2|", "recall", "ratio"]].values.tolist()
    [[2.0, 1.0, 0.5, 2.0]]
    """
    first = mask_set(masks_a, "masks_a")
    second = None if masks_b is None else mask_set(masks_b, "masks_b")
    if second is not None:
        shape_a, shape_b = next(iter(first.values())).shape, next(iter(second.values())).shape
        if shape_a != shape_b:
            raise MaskShapeError(
                f"masks of different shapes compared: masks_a are {shape_a[0]}x{shape_a[1]} and "
                f"masks_b {shape_b[0]}x{shape_b[1]} (layers x heads); compare masks of models "
                "with the same number of layers and heads"
            )
    chosen = (
        _default_pairs(first, second)
        if pairs is None
        else _check_pairs(pairs, first, second if second is not None else first)
    )
    return MaskStatistics(
        names_a=list(first),
        values_a=stack_masks(first),
        pairs=chosen,
        names_b=None if second is None else list(second),
        values_b=None if second is None else stack_masks(second),
        model_a=common_model(first),
        model_b=None if second is None else common_model(second),
    )
