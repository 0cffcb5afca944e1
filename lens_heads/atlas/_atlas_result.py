"""The head atlas as a result: one row per query head, a column per measure, the agreement of the
measures, an L × H heat map per column, and a self-contained interactive page.

>>> atlas = HeadAtlas.example()
>>> atlas.to_frame()[["label", "kv group", "previous token"]].head(2).values.tolist()
[['L0H0', 0, 0.9], ['L0H1', 0, 0.1]]
>>> "atlas-card" in atlas.to_html()
True
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import torch
from torch import Tensor

from lens_heads.atlas._agreement import AgreementConfig, agreement
from lens_heads.atlas._atlas_page import atlas_page
from lens_heads.core import InputError, markdown_table, write_atomic, write_plotly_js
from lens_heads.core.internal import PLOTLY_JS, FolderResult, PlotlyJs

__all__ = ["HEAD_COLUMNS", "HeadAtlas"]

#: the columns that name a head rather than measure it
HEAD_COLUMNS = ("label", "layer", "head", "kv group")


@dataclass(repr=False)
class HeadAtlas(FolderResult):
    """``frame``: one row per query head (:data:`HEAD_COLUMNS`, then one column per measure,
    NaN where a measure does not apply, and text columns such as ``top OV tokens``);
    ``chance``: a measure's score at chance, where it has one; ``notes``: what each measure is;
    ``example_tokens`` and ``example_attention`` ``[n_layers, n_heads, pos, pos]``: every head's
    attention on one generated sequence (the page's head card); ``settings``: how it was made."""

    model: str
    frame: pd.DataFrame
    chance: dict[str, float] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    example_tokens: list[str] = field(default_factory=list)
    example_attention: Tensor | None = None
    settings: dict[str, Any] = field(default_factory=dict)

    _format: ClassVar[str] = "lens_heads.head_atlas/1"
    _plotly_js: ClassVar[PlotlyJs] = "beside"

    @classmethod
    def example(cls) -> HeadAtlas:
        """A two-layer, two-head atlas with made-up numbers (for docs and tests)."""
        frame = pd.DataFrame(
            {
                "label": ["L0H0", "L0H1", "L1H0", "L1H1"],
                "layer": [0, 0, 1, 1],
                "head": [0, 1, 0, 1],
                "kv group": [0, 0, 0, 0],
                "previous token": [0.9, 0.1, 0.2, 0.3],
                "induction": [0.0, 0.1, 0.8, 0.2],
                "zero-ablation effect": [0.5, 0.0, 1.5, 0.1],
                "top OV tokens": ["a b", "c d", "e f", "g h"],
            }
        )
        attention = torch.tril(torch.ones(2, 2, 3, 3))
        attention = attention / attention.sum(-1, keepdim=True)
        return cls(
            "example",
            frame,
            chance={"previous token": 0.3, "induction": 0.1},
            notes={"previous token": "share of attention on the previous token"},
            example_tokens=["<s>", "x", "y"],
            example_attention=attention,
        )

    # -- reading ----------------------------------------------------------------------------------
    @property
    def measures(self) -> list[str]:
        """The numeric measure columns, in order."""
        return [
            c
            for c in self.frame.columns
            if c not in HEAD_COLUMNS and pd.api.types.is_numeric_dtype(self.frame[c])
        ]

    def to_frame(self) -> pd.DataFrame:
        return self.frame.copy()

    def ranks(self) -> pd.DataFrame:
        """Each measure's rank per head (1: the highest value; NaN where undefined)."""
        return self.frame[self.measures].rank(ascending=False, method="min")

    def matrix(self, column: str) -> Tensor:
        """``column`` as an ``[n_layers, n_heads]`` tensor."""
        if column not in self.frame.columns:
            raise InputError(f"the atlas has no column {column!r}; it has {self.measures}")
        n_layers, n_heads = int(self.frame["layer"].max()) + 1, int(self.frame["head"].max()) + 1
        values = torch.full((n_layers, n_heads), float("nan"))
        for layer, head, value in zip(
            self.frame["layer"], self.frame["head"], self.frame[column], strict=True
        ):
            values[int(layer), int(head)] = float(value)
        return values

    def agreement(
        self, columns: list[str] | None = None, config: AgreementConfig | None = None
    ) -> pd.DataFrame:
        """Every pair of measures: Spearman, permutation p, Holm, bootstrap interval, top-k
        overlap against random (:func:`lens_heads.atlas.agreement`)."""
        if config is None:
            names = ("k", "permutations", "bootstrap", "seed")
            config = AgreementConfig(**{k: self.settings[k] for k in names if k in self.settings})
        return agreement(self.frame, columns or self.measures, config=config)

    def agreement_sentences(self, table: pd.DataFrame | None = None) -> list[str]:
        """In words: which measures agree (positive rank correlation after Holm) and which not."""
        table = self.agreement() if table is None else table
        if "p (Holm)" not in table:
            return ["no pair of measures could be compared"]
        sentences = []
        for _, row in table.dropna(subset=["p (Holm)"]).iterrows():
            verb = "agree" if row["agree"] else "do not agree"
            sentences.append(
                f"{row['first']} and {row['second']} {verb}: Spearman {row['spearman']:.2f} "
                f"[{row['ci low']:.2f}, {row['ci high']:.2f}], Holm p = {row['p (Holm)']:.2g}; "
                f"{int(row['top-k overlap'])} heads in both top sets against "
                f"{row['random overlap']:.1f} at random"
            )
        return sentences

    def to_markdown(self) -> str:
        top = self.frame.copy()
        return f"**head atlas** of **{self.model}**\n\n" + markdown_table(
            top, floatfmt=".3g", index=False
        )

    # -- figures ----------------------------------------------------------------------------------
    def plot(self, column: str | None = None) -> Any:
        """An L × H heat map of one measure, with a menu that switches to every other one."""
        import plotly.graph_objects as go

        measures = self.measures
        if not measures:
            raise InputError("the atlas has no numeric measure to draw")
        first = column or measures[0]
        labels = self.matrix("layer").clone()
        text = [
            [f"L{int(layer)}H{head}" for head in range(labels.shape[1])]
            for layer in range(labels.shape[0])
        ]
        figure = go.Figure(
            go.Heatmap(
                z=self.matrix(first).tolist(),
                text=text,
                colorscale="Viridis",
                hovertemplate="%{text}: %{z:.3g}<extra></extra>",
            )
        )
        buttons = [
            {
                "label": name,
                "method": "update",
                # plotly.js 3 reads a title as {"text": ...}; a bare string is ignored
                "args": [
                    {"z": [self.matrix(name).tolist()]},
                    {"title": {"text": f"{name} ({self.model})"}},
                ],
            }
            for name in measures
        ]
        figure.update_layout(
            title={"text": f"{first} ({self.model})"},
            height=max(380, 110 + 18 * labels.shape[0]),
            xaxis={"title": {"text": "head"}, "dtick": 1, "tickfont": {"size": 10}},
            yaxis={"title": {"text": "layer"}, "dtick": 1, "tickfont": {"size": 10}},
            template="plotly_white",
            updatemenus=[{"buttons": buttons, "x": 1.0, "y": 1.15, "xanchor": "right"}],
        )
        return figure

    def to_html(self, *, plotly_js: str = "inline", agreement: pd.DataFrame | None = None) -> str:
        """The interactive page (:func:`lens_heads.atlas._atlas_page.atlas_page`): the heat map
        with its measure menu, a sortable table of every head, a card per head (its exact
        single-head effects, every score with its rank and chance level, its attention on the
        example sequence) and the agreement matrix, whose cells open the pair's scatter."""
        return atlas_page(self, plotly_js=plotly_js, agreement=agreement)

    # -- storage ----------------------------------------------------------------------------------
    def save(self, directory: str | Any, *, png: bool = False) -> list[Path]:
        """The result folder (:class:`FolderResult`; ``table.csv`` is the per-head table),
        ``atlas.html``, ``agreement.csv`` and one ``plotly.min.js`` that both pages load."""
        written = super().save(directory, png=png)
        folder = Path(directory)
        table = self.agreement() if len(self.measures) > 1 else pd.DataFrame()
        page = self.to_html(plotly_js=PLOTLY_JS, agreement=table)
        written.append(write_atomic(folder / "atlas.html", page))
        written.append(write_plotly_js(folder))
        written.append(write_atomic(folder / "agreement.csv", table.to_csv(index=False)))
        return written

    def _to_saved(self) -> tuple[dict[str, Any], dict[str, Any]]:
        meta = {
            "model": self.model,
            "frame": json.loads(self.frame.to_json(orient="split", index=False)),
            "chance": self.chance,
            "notes": self.notes,
            "example_tokens": self.example_tokens,
            "settings": self.settings,
        }
        tensors = {}
        if self.example_attention is not None:
            tensors["example_attention"] = self.example_attention
        return meta, tensors

    @classmethod
    def _from_saved(cls, meta: dict[str, Any], tensors: dict[str, Any]) -> HeadAtlas:
        split = meta.pop("frame")
        frame = pd.DataFrame(split["data"], columns=split["columns"])
        return cls(frame=frame, example_attention=tensors.get("example_attention"), **meta)
