"""The figures of the engine's results: the settings table, mask-weight trajectories (Heads up!
Figure 3), the mask heat map and the training curve.

>>> import pandas as pd
>>> table = pd.DataFrame({"accuracy": [0.2, 0.9], "accuracy std": [float("nan"), 0.05]},
...                      index=pd.Index(["Original", "w/ M"], name="setting"))
>>> len(evaluation_figure(table, ["accuracy"]).data)
2
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from lens_heads.core import InputError
from lens_heads.core.internal import UnknownNameError, head_grid_layout

__all__ = [
    "evaluation_figure",
    "mask_heatmap_figure",
    "mask_trajectory_figure",
    "training_curve_figure",
]

_KEPT_COLOUR, _REMOVED_COLOUR = "#1f77b4", "#d62728"


# -- evaluation: the settings table (issue 3) ---------------------------------------------------
def evaluation_figure(table: pd.DataFrame, metrics: Sequence[str], *, title: str = "") -> go.Figure:
    """Grouped bars of an evaluation table: one panel per metric, one bar (and colour) per
    setting, error bars from the ``"<metric> std"`` columns (std over random seeds).

    ``table`` is :meth:`lens_heads.engine.EvaluationResult.to_frame` (index: settings).
    """
    if not len(metrics):
        raise InputError("evaluation_figure needs at least one metric column")
    missing = [m for m in metrics if m not in table.columns]
    if missing:
        raise UnknownNameError(
            f"the table has no column(s) {missing}; it has {list(table.columns)}"
        )
    figure = make_subplots(rows=1, cols=len(metrics), subplot_titles=list(metrics))
    palette = [
        "#4C78A8",
        "#F58518",
        "#B279A2",
        "#54A24B",
        "#E45756",
        "#72B7B2",
        "#EECA3B",
        "#9D755D",
    ]
    for position, (setting, row) in enumerate(table.iterrows()):
        for column, metric in enumerate(metrics, start=1):
            std = row.get(f"{metric} std", math.nan)
            has_std = std is not None and not (isinstance(std, float) and math.isnan(std))
            figure.add_trace(
                go.Bar(
                    x=[str(setting)],
                    y=[row[metric]],
                    name=str(setting),
                    legendgroup=str(setting),
                    showlegend=column == 1,
                    marker_color=palette[position % len(palette)],
                    error_y={"type": "data", "array": [std], "visible": True} if has_std else None,
                    hovertemplate=f"{setting}<br>{metric}: %{{y:.4g}}<extra></extra>",
                ),
                row=1,
                col=column,
            )
    figure.update_xaxes(showticklabels=False)
    figure.update_layout(
        title=title or None,
        barmode="group",
        template="plotly_white",
        height=420,
        width=max(520, 300 * len(metrics)),
        legend_title_text="setting",
    )
    return figure


def mask_trajectory_figure(trajectory: Any, steps: Sequence[int], *, title: str = "") -> go.Figure:
    """Figure 3: ``sigmoid(W)`` of every head against the training step.

    ``trajectory`` is ``[n_samples, n_layers, n_heads]`` (sampled after ``steps[i]`` updates).
    Heads kept at the end (last sample >= 0.5) are blue, removed heads red; heads whose value
    crosses 0.5 more than once are drawn bold, one legend entry each.

    >>> import torch
    >>> values = torch.tensor([[[0.9, 0.9, 0.9]], [[0.4, 0.8, 0.9]], [[0.6, 0.2, 0.9]]])
    >>> figure = mask_trajectory_figure(values, [0, 1, 2])
    >>> [trace.name for trace in figure.data]
    ['kept (1)', 'removed (1)', 'L0H0 (2 crossings)']
    """
    import torch

    values = torch.as_tensor(trajectory).float()
    if values.ndim != 3 or values.shape[0] != len(steps):
        raise InputError(
            f"trajectory must be [n_samples, n_layers, n_heads] with one sample per step "
            f"({len(steps)}), got {tuple(values.shape)}"
        )
    above = values >= 0.5
    crossings = (above[1:] != above[:-1]).sum(dim=0)
    kept = above[-1]
    n_layers, n_heads = values.shape[1:]
    x = [int(s) for s in steps]
    groups: dict[bool, tuple[list[Any], list[Any], list[Any]]] = {
        True: ([], [], []),
        False: ([], [], []),
    }
    bold = []
    for layer in range(n_layers):
        for head in range(n_heads):
            label = f"L{layer}H{head}"
            if int(crossings[layer, head]) > 1:
                bold.append((layer, head, label))
                continue
            xs, ys, texts = groups[bool(kept[layer, head])]
            xs += [*x, None]
            ys += [*values[:, layer, head].tolist(), None]
            texts += [label] * len(x) + [None]
    figure = go.Figure()
    for is_kept in (True, False):
        xs, ys, texts = groups[is_kept]
        count = sum(1 for t in texts if t is None)
        figure.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                text=texts,
                mode="lines",
                name=f"{'kept' if is_kept else 'removed'} ({count})",
                line={"color": _KEPT_COLOUR if is_kept else _REMOVED_COLOUR, "width": 1},
                opacity=0.45,
                hovertemplate="%{text}<br>step %{x}<br>sigmoid(W) %{y:.3f}<extra></extra>",
            )
        )
    for layer, head, label in bold:
        is_kept = bool(kept[layer, head])
        figure.add_trace(
            go.Scatter(
                x=x,
                y=values[:, layer, head].tolist(),
                mode="lines",
                name=f"{label} ({int(crossings[layer, head])} crossings)",
                line={"color": _KEPT_COLOUR if is_kept else _REMOVED_COLOUR, "width": 3.5},
                hovertemplate=f"{label}<br>step %{{x}}<br>sigmoid(W) %{{y:.3f}}<extra></extra>",
            )
        )
    figure.add_hline(y=0.5, line={"color": "grey", "dash": "dot", "width": 1})
    figure.update_layout(
        title=title or None,
        xaxis_title="training step",
        yaxis_title="sigmoid(W)",
        yaxis_range=[-0.02, 1.02],
        template="plotly_white",
        height=460,
        width=820,
    )
    return figure


def mask_heatmap_figure(probabilities: Any, *, title: str = "") -> go.Figure:
    """Figure 7: ``sigmoid(W)`` as a layer x head heat map (kept heads >= 0.5 marked "x").

    >>> import torch
    >>> mask_heatmap_figure(torch.tensor([[0.9, 0.1], [0.2, 0.7]])).data[0].z.shape
    (2, 2)
    """
    import numpy as np
    import torch

    values = torch.as_tensor(probabilities).float()
    if values.ndim != 2:
        raise InputError(f"probabilities must be [n_layers, n_heads], got {tuple(values.shape)}")
    n_layers, n_heads = values.shape
    marks = [["x" if v >= 0.5 else "" for v in row] for row in values.tolist()]
    figure = go.Figure(
        go.Heatmap(
            z=np.asarray(values.tolist()),
            x=[f"H{h}" for h in range(n_heads)],
            y=[f"L{layer}" for layer in range(n_layers)],
            text=marks,
            texttemplate="%{text}",
            zmin=0.0,
            zmax=1.0,
            colorscale="RdBu",
            colorbar={"title": "sigmoid(W)"},
            hovertemplate="%{y}%{x}<br>sigmoid(W) %{z:.3f}<extra></extra>",
        )
    )
    figure.update_layout(title=title or None, **head_grid_layout(n_layers, n_heads))
    return figure


def training_curve_figure(history: pd.DataFrame, *, title: str = "") -> go.Figure:
    """Loss, temperature and heads kept per training step (``MaskTrainingResult.history``).

    >>> history = pd.DataFrame({"step": [1, 2], "loss": [2.0, 1.0], "tau": [4.0, 2.0],
    ...                         "lr": [0.1, 0.1], "kept": [8, 7]})
    >>> len(training_curve_figure(history).data)
    3
    """
    missing = [c for c in ("step", "loss", "tau", "kept") if c not in history.columns]
    if missing:
        raise UnknownNameError(
            f"history has no column(s) {missing}; it has {list(history.columns)}"
        )
    figure = make_subplots(
        rows=3, cols=1, shared_xaxes=True, subplot_titles=["loss", "tau", "kept"]
    )
    for row, column in enumerate(("loss", "tau", "kept"), start=1):
        figure.add_trace(
            go.Scatter(x=history["step"], y=history[column], mode="lines", name=column),
            row=row,
            col=1,
        )
    figure.update_layout(
        title=title or None, template="plotly_white", height=620, width=760, showlegend=False
    )
    figure.update_xaxes(title_text="training step", row=3, col=1)
    return figure
