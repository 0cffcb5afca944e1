"""How many of a set of trained head masks keep each head (Heads up! §4): :class:`TasksPerHead`
with the heads every mask keeps and those no mask keeps.

>>> import lens_heads as lh
>>> masks = {
...     "upper": lh.HeadMask.from_heads(["L0H0", "L0H1", "L1H0"], n_layers=2, n_heads=2),
...     "lower": lh.HeadMask.from_heads(["L0H0", "L1H1"], n_layers=2, n_heads=2),
... }
>>> per_head = tasks_per_head(masks)
>>> per_head.counts.tolist(), per_head.kept_by_all, per_head.kept_by_none
([[2, 1], [1, 1]], ['L0H0'], [])
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor

from lens_heads.core import format_head
from lens_heads.core.internal import FolderResult
from lens_heads.heads_up._mask_sets import MaskSet, common_model, mask_set, stack_masks

__all__ = ["TasksPerHead", "tasks_per_head"]


# -- tasks per head (§4) --------------------------------------------------------------------------
@dataclass(repr=False)
class TasksPerHead(FolderResult):
    """How many of a set of masks keep each head (Heads up! §4).

    ``values[i]`` is the 0/1 mask ``names[i]``; :attr:`counts` ``[layer, head]`` is the number of
    masks that keep the head. :attr:`kept_by_all` / :attr:`kept_by_none` label the heads every
    mask keeps / no mask keeps.

    >>> import lens_heads as lh
    >>> masks = {"a": lh.HeadMask.from_heads(["L0H0"], n_layers=1, n_heads=3),
    ...          "b": lh.HeadMask.from_heads(["L0H0", "L0H2"], n_layers=1, n_heads=3)}
    >>> per_head = tasks_per_head(masks)
    >>> per_head.counts.tolist(), per_head.mean_tasks_per_head, per_head.kept_by_none
    ([[2, 0, 1]], 1.0, ['L0H1'])
    """

    _format: ClassVar[str] = "lens_heads.tasks_per_head/1"

    names: list[str]
    values: Float[Tensor, "n_masks n_layers n_heads"]
    model: str | None = None

    @property
    def n_masks(self) -> int:
        return len(self.names)

    @property
    def counts(self) -> Int[Tensor, "n_layers n_heads"]:
        """Masks keeping each head."""
        return (self.values >= 0.5).sum(dim=0).to(torch.int64)

    @property
    def mean_tasks_per_head(self) -> float:
        """Mean over all heads of the number of masks keeping the head."""
        return float(self.counts.double().mean())

    @property
    def mean_tasks_per_used_head(self) -> float:
        """Mean over the heads kept by at least one mask (NaN if no mask keeps any head)."""
        counts = self.counts
        used = counts[counts > 0]
        return float(used.double().mean()) if used.numel() else math.nan

    def _labels_where(self, chosen: Tensor) -> list[str]:
        return [format_head(int(layer), int(head)) for layer, head in chosen.nonzero().tolist()]

    @property
    def kept_by_all(self) -> list[str]:
        return self._labels_where(self.counts == self.n_masks)

    @property
    def kept_by_none(self) -> list[str]:
        return self._labels_where(self.counts == 0)

    def to_frame(self) -> pd.DataFrame:
        """One row per head (layer-major): ``layer, head, label, tasks`` (masks keeping it) and
        ``masks`` (their names)."""
        selected = self.values >= 0.5
        rows = []
        for layer in range(selected.shape[1]):
            for head in range(selected.shape[2]):
                keeping = [
                    n for n, s in zip(self.names, selected[:, layer, head], strict=True) if s
                ]
                rows.append(
                    {
                        "layer": layer,
                        "head": head,
                        "label": format_head(layer, head),
                        "tasks": len(keeping),
                        "masks": ", ".join(keeping),
                    }
                )
        return pd.DataFrame(rows)

    def distribution(self) -> pd.DataFrame:
        """How many heads are kept by exactly k masks, for k = 0 .. n_masks."""
        counts = torch.bincount(self.counts.flatten(), minlength=self.n_masks + 1)
        return pd.DataFrame(
            {"heads": counts.tolist()}, index=pd.RangeIndex(self.n_masks + 1, name="masks keeping")
        )

    def summary(self) -> dict[str, Any]:
        """The §4 numbers as one flat dict."""
        selected = self.values >= 0.5
        return {
            "masks": self.n_masks,
            "heads": int(self.counts.numel()),
            "mean heads per mask": float(selected.sum(dim=(1, 2)).double().mean()),
            "mean tasks per head": self.mean_tasks_per_head,
            "mean tasks per used head": self.mean_tasks_per_used_head,
            "kept by all": len(self.kept_by_all),
            "kept by none": len(self.kept_by_none),
        }

    def to_markdown(self) -> str:
        summary = self.summary()
        distribution = self.distribution()["heads"].tolist()
        lines = [
            f"Tasks per head over {self.n_masks} masks ({', '.join(self.names)})"
            + (f" on {self.model}" if self.model else ""),
            "",
            *(
                f"- {key}: {value:.2f}" if isinstance(value, float) else f"- {key}: {value}"
                for key, value in summary.items()
            ),
            "",
            f"Kept by all ({len(self.kept_by_all)}): {', '.join(self.kept_by_all) or '-'}",
            "",
            f"Kept by none ({len(self.kept_by_none)}): {', '.join(self.kept_by_none) or '-'}",
            "",
            "| masks keeping a head | " + " | ".join(map(str, range(self.n_masks + 1))) + " |",
            "|---|" + "---|" * (self.n_masks + 1),
            "| heads | " + " | ".join(map(str, distribution)) + " |",
        ]
        return "\n".join(lines) + "\n"

    def plot(self) -> Any:
        """Layer x head heat map of the number of masks keeping each head."""
        import plotly.graph_objects as go

        from lens_heads.core.internal import head_grid_layout

        counts = self.counts
        n_layers, n_heads = counts.shape
        figure = go.Figure(
            go.Heatmap(
                z=counts.tolist(),
                x=[f"H{h}" for h in range(n_heads)],
                y=[f"L{layer}" for layer in range(n_layers)],
                text=counts.tolist(),
                texttemplate="%{text}",
                zmin=0,
                zmax=self.n_masks,
                colorscale="Viridis",
                colorbar={"title": "masks"},
                hovertemplate="%{y}%{x}: kept by %{z} masks<extra></extra>",
            )
        )
        figure.update_layout(
            title=f"Masks keeping each head (of {self.n_masks}; mean "
            f"{self.mean_tasks_per_head:.2f} per head)"
            + (f" on {self.model}" if self.model else ""),
            **head_grid_layout(n_layers, n_heads),
        )
        return figure


def tasks_per_head(masks: MaskSet) -> TasksPerHead:
    """Count, for each head, the masks of ``masks`` (a folder or ``name -> HeadMask``) that
    keep it (Heads up! §4).

    >>> import lens_heads as lh
    >>> masks = {"a": lh.HeadMask.ones(1, 2), "b": lh.HeadMask.zeros(1, 2)}
    >>> tasks_per_head(masks).counts.tolist()
    [[1, 1]]
    """
    chosen = mask_set(masks, "masks")
    return TasksPerHead(names=list(chosen), values=stack_masks(chosen), model=common_model(chosen))
