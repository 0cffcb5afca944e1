"""What every figure shares: the layer x head grid layout, and the per-head score heat map that
the attention, translation-score and importance results plot.

>>> head_grid_layout(2, 4)["yaxis_title"]
'layer'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from lens_heads.core._errors import InputError

__all__ = ["head_grid_layout", "head_score_figure"]


def head_grid_layout(n_layers: int, n_heads: int) -> dict[str, Any]:
    """Layout of a layer x head heat map: heads across, layer 0 on top, sized to the grid."""
    return {
        "xaxis_title": "head",
        "yaxis_title": "layer",
        "yaxis_autorange": "reversed",
        "template": "plotly_white",
        "height": max(320, 22 * n_layers + 120),
        "width": max(360, 48 * n_heads + 200),
    }


# -- per-head scores (attention on target, Table 7; translation scores; importance) ------------
def head_score_figure(
    scores: Any,
    *,
    panels: Sequence[str],
    outline: Any = None,
    colorbar_title: str = "score",
    title: str = "",
) -> go.Figure:
    """Heat maps of per-head scores ``[n_panels, n_layers, n_heads]``: layers as rows (layer 0
    at the top), heads as columns, one panel per entry of ``panels``; heads where ``outline``
    ``[n_layers, n_heads]`` is true are marked with a dot (e.g. the heads of a mask M).

    >>> import torch
    >>> figure = head_score_figure(torch.rand(2, 3, 4), panels=["original", "masked"],
    ...                            outline=torch.eye(3, 4, dtype=torch.bool))
    >>> [trace.type for trace in figure.data]
    ['heatmap', 'scatter', 'heatmap', 'scatter']
    """
    import torch

    values = torch.as_tensor(scores).float()
    if values.ndim != 3 or values.shape[0] != len(panels):
        raise InputError(
            f"scores must be [n_panels={len(panels)}, n_layers, n_heads], got {tuple(values.shape)}"
        )
    n_layers, n_heads = values.shape[1:]
    figure = make_subplots(rows=1, cols=len(panels), subplot_titles=list(panels))
    top = float(values.max()) if values.numel() else 1.0
    marked = None if outline is None else torch.as_tensor(outline).bool().nonzero().tolist()
    for column, name in enumerate(panels, start=1):
        figure.add_trace(
            go.Heatmap(
                z=values[column - 1].numpy(),
                x=list(range(n_heads)),
                y=list(range(n_layers)),
                zmin=0.0,
                zmax=top if top > 0 else 1.0,
                colorscale="Viridis",
                showscale=column == 1,
                colorbar={"title": colorbar_title},
                hovertemplate="L%{y}H%{x}<br>%{z:.4f}<extra>" + name + "</extra>",
            ),
            row=1,
            col=column,
        )
        if marked is not None:
            figure.add_trace(
                go.Scatter(
                    x=[head for _, head in marked],
                    y=[layer for layer, _ in marked],
                    mode="markers",
                    marker={"size": 4, "color": "white", "line": {"width": 0}},
                    name="heads in M",
                    showlegend=column == 1,
                    hoverinfo="skip",
                ),
                row=1,
                col=column,
            )
        figure.update_xaxes(title_text="head", row=1, col=column)
        figure.update_yaxes(autorange="reversed", row=1, col=column)
    figure.update_yaxes(title_text="layer", row=1, col=1)
    figure.update_layout(
        title=title or None,
        template="plotly_white",
        height=max(360, 14 * n_layers + 160),
        width=max(420, len(panels) * max(260, 26 * n_heads + 120)),
    )
    return figure
