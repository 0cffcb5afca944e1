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
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import torch
from torch import Tensor

from lens_heads.atlas.agreement import AgreementConfig, agreement
from lens_heads.core.errors import InputError
from lens_heads.core.storage import FolderResult, write_atomic
from lens_heads.core.tables import markdown_table

__all__ = ["HEAD_COLUMNS", "HeadAtlas"]

#: the columns that name a head rather than measure it
HEAD_COLUMNS = ("label", "layer", "head", "kv group")


@dataclass
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
        overlap against random (:func:`lens_heads.atlas.agreement.agreement`)."""
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
                "args": [{"z": [self.matrix(name).tolist()]}, {"title": f"{name} ({self.model})"}],
            }
            for name in measures
        ]
        figure.update_layout(
            title=f"{first} ({self.model})",
            xaxis={"title": "head", "dtick": 1},
            yaxis={"title": "layer", "dtick": 1},
            template="plotly_white",
            updatemenus=[{"buttons": buttons, "x": 1.0, "y": 1.15, "xanchor": "right"}],
        )
        return figure

    def to_html(self) -> str:
        """A self-contained page: the heat map with its measure menu; clicking a head opens its
        card (every score and its rank, its attention on the example sequence, its top OV
        tokens)."""
        figure = self.plot()
        ranks = self.ranks()
        heads = {}
        for index, row in self.frame.iterrows():
            values = {
                c: (None if pd.isna(row[c]) else row[c])
                for c in self.frame.columns
                if c not in HEAD_COLUMNS
            }
            heads[row["label"]] = {
                "values": values,
                "ranks": {c: (None if pd.isna(r) else int(r)) for c, r in ranks.loc[index].items()},
                "layer": int(row["layer"]),
                "head": int(row["head"]),
                "kv group": int(row["kv group"]),
            }
        attention = self.example_attention.tolist() if self.example_attention is not None else None
        data = {
            "model": self.model,
            "heads": heads,
            "chance": self.chance,
            "notes": self.notes,
            "tokens": self.example_tokens,
            "attention": attention,
        }
        plot = figure.to_html(full_html=False, include_plotlyjs=True, div_id="atlas-map")
        text = json.dumps(_json_safe(data), allow_nan=False).replace("</", "<\\/")
        return _PAGE.format(model=self.model, plot=plot, data=text)

    # -- storage ----------------------------------------------------------------------------------
    def save(self, directory: str | Any, *, png: bool = False) -> list[Path]:
        """The result folder (:class:`FolderResult`), ``atlas.html`` and ``agreement.csv``."""
        written = super().save(directory, png=png)
        folder = Path(directory)
        written.append(write_atomic(folder / "atlas.html", self.to_html()))
        table = self.agreement() if len(self.measures) > 1 else pd.DataFrame()
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


def _json_safe(value: Any) -> Any:
    """``value`` with NaN and infinities as null (JSON has no NaN) and numpy scalars as Python's."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Head atlas: {model}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.5em; }}
#atlas-card {{ border: 1px solid #ccc; border-radius: 6px; padding: 1em; margin-top: 1em; }}
#atlas-card table {{ border-collapse: collapse; }}
#atlas-card td, #atlas-card th {{ padding: 2px 10px; border-bottom: 1px solid #eee; }}
</style></head>
<body>
<h1>Head atlas: {model}</h1>
<p>Pick a measure in the menu; click a head to open its card.</p>
{plot}
<div id="atlas-card"><em>No head selected.</em></div>
<div id="atlas-pattern"></div>
<script id="atlas-data" type="application/json">{data}</script>
<script>
const ATLAS = JSON.parse(document.getElementById("atlas-data").textContent);
function fmt(v) {{
  if (typeof v !== "number") return v ?? "—";
  return Number.isInteger(v) ? v : v.toPrecision(3);
}}
function showHead(label) {{
  const head = ATLAS.heads[label];
  if (!head) return;
  let rows = "";
  for (const [name, value] of Object.entries(head.values)) {{
    const rank = head.ranks[name];
    const chance = (name in ATLAS.chance) ? fmt(ATLAS.chance[name]) : "";
    const shown = (rank === undefined || rank === null) ? "" : "rank " + rank;
    rows += `<tr><td>${{name}}</td><td class="value">${{fmt(value)}}</td>` +
            `<td>${{shown}}</td><td>${{chance}}</td></tr>`;
  }}
  document.getElementById("atlas-card").innerHTML =
    `<h2 id="atlas-card-title">${{label}}</h2><p>layer ${{head.layer}}, head ${{head.head}}, ` +
    `key-value group ${{head["kv group"]}}</p><table><tr><th>measure</th><th>value</th>` +
    `<th>rank</th><th>chance</th></tr>${{rows}}</table>`;
  if (ATLAS.attention) {{
    const ticks = ATLAS.tokens.map((token, i) => `${{i}} ${{token}}`);
    const axis = {{tickvals: ATLAS.tokens.map((_, i) => i), ticktext: ticks}};
    Plotly.newPlot("atlas-pattern", [{{z: ATLAS.attention[head.layer][head.head],
      type: "heatmap", colorscale: "Blues"}}],
      {{title: `attention of ${{label}} on the example sequence (query rows, key columns)`,
        xaxis: axis, yaxis: {{...axis, autorange: "reversed"}}}});
  }}
}}
document.getElementById("atlas-map").on("plotly_click", (event) => {{
  const point = event.points[0];
  showHead(`L${{point.y}}H${{point.x}}`);
}});
</script>
</body></html>
"""
