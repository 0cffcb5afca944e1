"""What :func:`lens_heads.head_roles` returns: :class:`HeadRoles` (the gates of the three fits,
each head's class and how many seeds agree, the sets evaluated), with its table, figure and
save/load.

>>> roles = HeadRoles.example()
>>> frame = roles.to_frame()
>>> list(frame["class"]), list(frame["agreement"])
(['facilitating', 'interfering', 'no majority', 'irrelevant'], [1.0, 1.0, 0.5, 1.0])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import pandas as pd
import torch
from jaxtyping import Bool, Float
from torch import Tensor

from lens_heads.core import format_head
from lens_heads.core.internal import FolderResult
from lens_heads.heads_up._roles_agreement import agreement_within, majority

__all__ = ["CLASSES", "FITS", "MAJORITY_CLASSES", "HeadRoles", "classify"]

#: the three fits, in the order of ``HeadRoles.gates``
FITS = ("free", "down", "up")
#: the classes one mask gives a head
CLASSES = ("facilitating", "interfering", "irrelevant", "inconsistent")
#: the classes of a head over its masks: the one most masks give, or none when two or more tie
MAJORITY_CLASSES = (*CLASSES, "no majority")


def classify(
    gates: Float[Tensor, "3 seeds n_layers n_heads"], threshold: float = 0.5
) -> torch.Tensor:
    """Class index (into :data:`CLASSES`) of every head in every seed: facilitating when the
    down gate stays open (>= ``threshold``), interfering when the up gate closes, irrelevant
    when neither, inconsistent when both.

    >>> gates = torch.tensor([0.5, 0.9, 0.9]).reshape(3, 1, 1, 1)  # free, down, up
    >>> CLASSES[int(classify(gates)[0, 0, 0])]
    'facilitating'
    """
    down_open = gates[1] >= threshold
    up_closed = gates[2] < threshold
    index = torch.full(down_open.shape, CLASSES.index("irrelevant"), dtype=torch.long)
    index[down_open] = CLASSES.index("facilitating")
    index[up_closed] = CLASSES.index("interfering")
    index[down_open & up_closed] = CLASSES.index("inconsistent")
    return index


@dataclass(repr=False)
class HeadRoles(FolderResult):
    """Gates of the three fits ``[fit, seed, layer, head]`` (fits in :data:`FITS` order), the
    threshold that opens a gate, the settings and each fit's seconds; ``evaluation`` (when run)
    has one row per head set and prompt kind with the evaluator's metrics."""

    model: str
    task: str
    gates: Float[Tensor, "3 seeds n_layers n_heads"]
    threshold: float = 0.5
    settings: dict[str, Any] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    evaluation: pd.DataFrame | None = None

    _format: ClassVar[str] = "lens_heads.head_roles/1"

    @classmethod
    def example(cls) -> HeadRoles:
        """A hand-made result: 2 layers x 2 heads, 2 seeds."""
        free = [[[0.9, 0.2], [0.6, 0.5]], [[0.9, 0.3], [0.5, 0.5]]]
        down = [[[0.9, 0.1], [0.2, 0.1]], [[0.8, 0.1], [0.7, 0.1]]]
        up = [[[0.95, 0.1], [0.9, 0.9]], [[0.9, 0.2], [0.9, 0.9]]]
        return cls("tiny", "upper", torch.tensor([free, down, up]))

    # -- per head ----------------------------------------------------------------------------
    @property
    def n_masks(self) -> int:
        return int(self.gates.shape[1])

    @property
    def per_mask(self) -> torch.Tensor:
        """Class index of every head in every seed ``[seed, layer, head]``."""
        return classify(self.gates, self.threshold)

    @property
    def classes(self) -> torch.Tensor:
        """The class most seeds give each head, as an index into :data:`MAJORITY_CLASSES`: a
        tie between classes is ``no majority`` (not the first of them, which would count the
        tie as agreement)."""
        return majority(self.per_mask, len(CLASSES))

    @property
    def agreement(self) -> torch.Tensor:
        """The share of seeds that give each head its most frequent class (with no majority:
        the share of each of the tied classes)."""
        counts = torch.stack([(self.per_mask == i).sum(dim=0) for i in range(len(CLASSES))])
        return counts.max(dim=0).values.float() / self.n_masks

    def mask_agreement(self) -> list[dict[str, Any]]:
        """How far the seeds' masks agree on the heads' classes, beside chance: single mask
        against single mask, and majority against majority of equal halves of the masks
        (:func:`~lens_heads.heads_up.agreement_within`; rows with ``observed``, ``chance``,
        ``kappa`` and ``pairs``). The mean of :attr:`agreement` is no such measure: a head's
        majority agrees with itself, so it never falls below one half, whatever the masks.

        >>> [row["compared"] for row in HeadRoles.example().mask_agreement()]
        ['single mask']
        """
        return agreement_within(self.per_mask, len(CLASSES))

    def majority_open(self, fit: str) -> Bool[Tensor, "n_layers n_heads"]:
        """Heads whose gate in ``fit`` is open in at least half of the seeds."""
        opened = (self.gates[FITS.index(fit)] >= self.threshold).float().mean(dim=0)
        return opened >= 0.5

    def heads(self, role: str) -> list[str]:
        """Labels of the heads of class ``role``."""
        chosen = (self.classes == MAJORITY_CLASSES.index(role)).nonzero().tolist()
        return [format_head(layer, head) for layer, head in chosen]

    # -- views -------------------------------------------------------------------------------
    def to_frame(self) -> pd.DataFrame:
        """One row per head (layer-major): each fit's gate (mean over seeds), the class, the
        agreement and how many seeds give each class."""
        n_layers, n_heads = self.gates.shape[-2:]
        mean = self.gates.mean(dim=1)
        classes, agreement, per_mask = self.classes, self.agreement, self.per_mask
        rows = []
        for layer in range(n_layers):
            for head in range(n_heads):
                row: dict[str, Any] = {
                    "layer": layer,
                    "head": head,
                    "label": format_head(layer, head),
                }
                row |= {f"gate {fit}": float(mean[i, layer, head]) for i, fit in enumerate(FITS)}
                row["class"] = MAJORITY_CLASSES[int(classes[layer, head])]
                row["agreement"] = float(agreement[layer, head])
                for i, name in enumerate(CLASSES):
                    row[f"masks {name}"] = int((per_mask[:, layer, head] == i).sum())
                rows.append(row)
        return pd.DataFrame(rows)

    def counts(self) -> dict[str, int]:
        """Heads per class."""
        found = self.to_frame()["class"].value_counts()
        return {name: int(found.get(name, 0)) for name in MAJORITY_CLASSES}

    def to_markdown(self) -> str:
        from lens_heads.core import markdown_table

        frame = self.to_frame()
        chosen = frame[frame["class"] != "irrelevant"]
        columns = ["label", *[f"gate {fit}" for fit in FITS], "class", "agreement"]
        return markdown_table(chosen[columns], floatfmt=".3g", index=False)

    def plot(self) -> Any:
        """Each head's class on the layer x head grid (hover: the three gates, the agreement)."""
        import plotly.graph_objects as go

        frame = self.to_frame()
        n_layers, n_heads = self.gates.shape[-2:]
        colours = ["#2166ac", "#b2182b", "#d9d9d9", "#fdb863", "#8c8c8c"]
        scale = []
        for i, colour in enumerate(colours):
            scale += [(i / len(colours), colour), ((i + 1) / len(colours), colour)]
        text = [
            f"{r['label']}: {r['class']} ({r['agreement']:.0%} of masks)<br>"
            f"gates free {r['gate free']:.2f}, down {r['gate down']:.2f}, up {r['gate up']:.2f}"
            for _, r in frame.iterrows()
        ]
        figure = go.Figure(
            go.Heatmap(
                z=self.classes.float().tolist(),
                zmin=-0.5,
                zmax=len(MAJORITY_CLASSES) - 0.5,
                colorscale=scale,
                text=[text[i * n_heads : (i + 1) * n_heads] for i in range(n_layers)],
                hoverinfo="text",
                colorbar={
                    "tickvals": list(range(len(MAJORITY_CLASSES))),
                    "ticktext": list(MAJORITY_CLASSES),
                },
            )
        )
        counts = ", ".join(f"{n} {name}" for name, n in self.counts().items() if n)
        figure.update_layout(
            title=f"Head roles: {self.task} on {self.model} ({counts})",
            xaxis_title="head",
            yaxis_title="layer",
            template="plotly_white",
        )
        return figure

    # -- io ----------------------------------------------------------------------------------
    def _to_saved(self) -> tuple[dict[str, Any], dict[str, Any]]:
        meta, tensors = super()._to_saved()
        if self.evaluation is not None:
            meta["evaluation"] = self.evaluation.to_dict("records")
        return meta, tensors

    @classmethod
    def _from_saved(cls, meta: dict[str, Any], tensors: dict[str, Any]) -> HeadRoles:
        evaluation = meta.pop("evaluation", None)
        frame = None if evaluation is None else pd.DataFrame(evaluation)
        return cls(**meta, **tensors, evaluation=frame)
