"""The atlas's interactive page: a measure menu over an L × H heat map, a sortable and filterable
table of every head × measure (value, rank, chance level), a card per head (its exact single-head
effects first, then every other score, its attention on the example sequence) and the agreement
matrix of the measures, whose cells open the two measures' scatter over the heads.

Everything is drawn in the browser from one compact JSON block: four significant digits per
value, the example attention as bytes (lower triangle, 1/255 steps, base64). plotly.js is in the
page or loaded from a file beside it (``plotly_js``).

>>> from lens_heads.atlas import HeadAtlas
>>> page = atlas_page(HeadAtlas.example(), plotly_js="plotly.min.js")
>>> 'src="plotly.min.js"' in page and 'id="atlas-table"' in page
True
"""

from __future__ import annotations

import base64
import functools
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lens_heads.core import InputError

__all__ = ["atlas_page", "page_data"]

#: the columns that name a head rather than measure it (as in :data:`HEAD_COLUMNS`)
_NAMING = ("label", "layer", "head", "kv group")


def _round(value: Any) -> float | None:
    """A finite number to four significant digits; None for NaN, infinities and missing."""
    if value is None or pd.isna(value):
        return None
    number = float(value)
    if not math.isfinite(number):
        return None
    return float(f"{number:.4g}")


def page_data(atlas: Any, agreement: pd.DataFrame | None = None) -> dict[str, Any]:
    """What the page draws of ``atlas`` (a :class:`HeadAtlas`), as JSON-able data: per head
    its label, layer, head and key-value group; per measure its values, ranks (1: highest),
    chance level and note; the text columns; the agreement table's pairs; the example
    attention as base64 bytes."""
    frame = atlas.frame.reset_index(drop=True)
    measures = atlas.measures
    ranks = atlas.ranks().reset_index(drop=True)
    texts = [c for c in frame.columns if c not in _NAMING and c not in measures]
    n_layers, n_heads = int(frame["layer"].max()) + 1, int(frame["head"].max()) + 1
    data: dict[str, Any] = {
        "model": atlas.model,
        "n_layers": n_layers,
        "n_heads": n_heads,
        "labels": frame["label"].astype(str).tolist(),
        "layer": frame["layer"].astype(int).tolist(),
        "head": frame["head"].astype(int).tolist(),
        "kv": frame["kv group"].astype(int).tolist(),
        "measures": measures,
        "values": {m: [_round(v) for v in frame[m]] for m in measures},
        "ranks": {m: [None if pd.isna(r) else int(r) for r in ranks[m]] for m in measures},
        "texts": {c: ["" if pd.isna(v) else str(v) for v in frame[c]] for c in texts},
        "chance": {k: _round(v) for k, v in atlas.chance.items()},
        "notes": dict(atlas.notes),
        "pairs": [],
        "attention": None,
    }
    if agreement is not None and len(agreement) and "spearman" in agreement:
        for _, row in agreement.iterrows():
            data["pairs"].append(
                {
                    "first": row["first"],
                    "second": row["second"],
                    "spearman": _round(row["spearman"]),
                    "low": _round(row.get("ci low")),
                    "high": _round(row.get("ci high")),
                    "p_holm": _round(row.get("p (Holm)")),
                    "overlap": _round(row.get("top-k overlap")),
                    "random": _round(row.get("random overlap")),
                    "heads": _round(row.get("heads")),
                }
            )
    if atlas.example_attention is not None:
        attention = atlas.example_attention.float().numpy()
        n = attention.shape[-1]
        if attention.shape[:2] != (n_layers, n_heads):
            raise InputError(
                f"the example attention has {attention.shape[:2]} layers × heads, the frame "
                f"{(n_layers, n_heads)}: save the atlas from one run"
            )
        rows, cols = np.tril_indices(n)
        per_head = attention[frame["layer"].to_numpy(int), frame["head"].to_numpy(int)]
        quantized = np.clip(np.rint(per_head[:, rows, cols] * 255), 0, 255).astype(np.uint8)
        data["attention"] = {
            "tokens": list(atlas.example_tokens),
            "n": n,
            "bytes": base64.b64encode(quantized.tobytes()).decode("ascii"),
        }
    return data


def atlas_page(
    atlas: Any, *, plotly_js: str = "inline", agreement: pd.DataFrame | None = None
) -> str:
    """The atlas as one HTML page. ``plotly_js``: ``"inline"`` (the page opens on its own,
    about 5 MB more) or the address of a plotly.js file, relative to the page (for example
    ``"plotly.min.js"``, as :meth:`HeadAtlas.save` writes it); ``agreement``: the table of
    :meth:`HeadAtlas.agreement` (computed when None and the atlas has two measures or more)."""
    if agreement is None and len(atlas.measures) > 1:
        agreement = atlas.agreement()
    if plotly_js == "inline":
        from plotly.offline import get_plotlyjs

        script = f"<script>{get_plotlyjs()}</script>"
    elif plotly_js.endswith(".js") and '"' not in plotly_js:
        script = f'<script src="{plotly_js}"></script>'
    else:
        raise InputError(
            f"plotly_js must be 'inline' or the address of a .js file, not {plotly_js!r}"
        )
    text = json.dumps(page_data(atlas, agreement), allow_nan=False, separators=(",", ":"))
    text = text.replace("</", "<\\/")
    parts = {"model": _escape(atlas.model), "plotly": script, "data": text, "script": _script()}
    return re.sub(r"\{\{(\w+)\}\}", lambda match: parts[match[1]], _PAGE)


@functools.cache
def _script() -> str:
    """The page's JavaScript (``atlas_page.js``, beside this module)."""
    return (Path(__file__).with_name("atlas_page.js")).read_text(encoding="utf-8")


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Head atlas: {{model}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 1.5em; max-width: 1200px; }
.row { display: flex; flex-wrap: wrap; gap: 1.5em; align-items: flex-start; }
#atlas-card { border: 1px solid #ccc; border-radius: 6px; padding: 0.5em 1em; min-width: 320px; }
#atlas-card table, #atlas-table { border-collapse: collapse; font-size: 13px; }
#atlas-card td, #atlas-card th { padding: 2px 8px; border-bottom: 1px solid #eee; }
#atlas-table th, #atlas-table td { padding: 2px 6px; border-bottom: 1px solid #eee; }
#atlas-table th { cursor: pointer; position: sticky; top: 0; background: #fafafa; }
#atlas-table tr.chance td { color: #777; font-style: italic; }
#atlas-table tbody tr.head:hover { background: #eef; cursor: pointer; }
#atlas-table tr.selected { background: #fee; }
.rank { color: #888; font-size: 11px; }
.scroll { max-height: 480px; overflow: auto; border: 1px solid #ddd; }
#atlas-note, #atlas-pair-stats { color: #444; }
</style>
{{plotly}}
</head><body>
<h1>Head atlas: {{model}}</h1>
<p>Choose a measure to colour the map. Click a head, on the map or in the table, to open its card.
Click a cell of the agreement matrix to see the two measures head by head.</p>
<label>measure <select id="atlas-measure"></select></label>
<p id="atlas-note"></p>
<div class="row"><div id="atlas-map"></div>
<div id="atlas-card"><em>No head selected.</em></div></div>
<div id="atlas-pattern"></div>
<h2>Every head</h2>
<p>Click a column to sort by it (again to reverse); the grey row is each measure's chance level;
the small number is the head's rank on that measure (1: highest).
<label>filter <input id="atlas-filter" placeholder="e.g. L14 or H3"></label>
<span id="atlas-count"></span></p>
<div class="scroll"><table id="atlas-table"><thead></thead><tbody></tbody></table></div>
<h2>Agreement of the measures</h2>
<p>Spearman's rank correlation of each pair over the heads both measure.</p>
<div class="row"><div id="atlas-agreement"></div><div>
<div id="atlas-pair"></div><p id="atlas-pair-stats"></p></div></div>
<script id="atlas-data" type="application/json">{{data}}</script>
<script>{{script}}</script>
</body></html>
"""
