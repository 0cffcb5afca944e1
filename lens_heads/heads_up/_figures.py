"""The figures of the Heads up! analyses: removal sweeps (Figures 2 and 5), the logit lens (Table
41), layer similarity (Figure 4), top tokens (Table 4b) and alpha curves (Figure 6)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from lens_heads.core import InputError
from lens_heads.core.internal import UnknownNameError

__all__ = [
    "alpha_curve_figure",
    "logit_lens_figure",
    "similarity_figure",
    "sweep_overlay_figure",
    "sweep_rank_figure",
    "sweep_similarity_figure",
    "top_tokens_figure",
]


# -- removal sweep: token ranks (Fig. 2 left) and hidden-state similarity (Fig. 5) (issue 5) ----
_TARGET_COLOUR = "#d62728"

_ORIGINAL_BLUES = ["#08306b", "#08519c", "#2171b5", "#4292c6", "#6baed6", "#9ecae1"]


def sweep_rank_figure(
    frame: pd.DataFrame, *, switch: int | None = None, title: str = ""
) -> go.Figure:
    """Figure 2 (left): the rank of each tracked token (log axis) against the heads removed;
    the target in red, the original top tokens in shades of blue, a dashed line at the switch.

    ``frame`` is :meth:`lens_heads.heads_up.SweepResult.to_frame` (columns ``n_removed, token,
    token_id, role, rank`` and, for the hover text, ``top1`` and ``output``).

    >>> frame = pd.DataFrame({"n_removed": [0, 0, 1, 1], "token": ["A", "b"] * 2,
    ...                       "token_id": [1, 2] * 2, "role": ["target", "original"] * 2,
    ...                       "rank": [4, 1, 1, 2]})
    >>> [trace.name for trace in sweep_rank_figure(frame, switch=1).data]
    ["'A' (target)", "'b'"]
    """
    missing = [c for c in ("n_removed", "token", "token_id", "role", "rank") if c not in frame]
    if missing:
        raise UnknownNameError(
            f"the sweep frame has no column(s) {missing}; it has {list(frame.columns)}"
        )
    figure = go.Figure()
    originals = 0
    for (token_id, role), rows in frame.groupby(["token_id", "role"], sort=False):
        token = str(rows["token"].iloc[0])
        is_target = role == "target"
        colour = _TARGET_COLOUR if is_target else _ORIGINAL_BLUES[originals % len(_ORIGINAL_BLUES)]
        originals += 0 if is_target else 1
        hover = [
            f"top-1 {row.get('top1', '')!r}<br>output {str(row.get('output', ''))[:60]!r}"
            for _, row in rows.iterrows()
        ]
        figure.add_trace(
            go.Scatter(
                x=rows["n_removed"],
                y=rows["rank"],
                mode="lines",
                name=f"{token!r} (target)" if is_target else repr(token),
                text=hover,
                line={"color": colour, "width": 3 if is_target else 1.5},
                hovertemplate=f"{token!r} (id {token_id})<br>%{{x}} heads removed<br>"
                "rank %{y}<br>%{text}<extra></extra>",
            )
        )
    if switch is not None:
        figure.add_vline(
            x=switch,
            line={"color": "grey", "dash": "dash", "width": 1.5},
            annotation_text=f"switch: {switch} heads",
            annotation_position="top right",
        )
    figure.update_layout(
        title=title or None,
        xaxis_title="heads removed",
        yaxis_title="rank (log)",
        yaxis_type="log",
        template="plotly_white",
        height=460,
        width=820,
        legend_title_text="token",
    )
    return figure


_SWEEP_PALETTE = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]


def sweep_overlay_figure(
    curves: Sequence[dict[str, Any]], *, title: str = "", stay: int = 3
) -> go.Figure:
    """Figures 8 and 9: the target's rank (log axis) against the heads removed for several
    sweeps on one plot, each sweep's switch step a dotted vertical line in its colour and
    reported in the legend.

    ``curves``: one dict per sweep with ``label``, ``n_removed``, ``ranks`` (the target's rank
    per step), ``switch`` (heads removed at the switch, or None) and optionally ``target``.

    >>> fig = sweep_overlay_figure([
    ...     {"label": "ascending weight", "n_removed": [0, 1, 2], "ranks": [9, 3, 1], "switch": 2},
    ...     {"label": "influential", "n_removed": [0, 1, 2], "ranks": [9, 1, 1], "switch": None},
    ... ])
    >>> [trace.name for trace in fig.data]
    ['ascending weight (switch: 2 heads)', 'influential (no switch)']
    """
    if not curves:
        raise InputError("sweep_overlay_figure needs at least one sweep")
    figure = go.Figure()
    for index, curve in enumerate(curves):
        colour = _SWEEP_PALETTE[index % len(_SWEEP_PALETTE)]
        switch = curve.get("switch")
        reported = "no switch" if switch is None else f"switch: {switch} heads"
        target = curve.get("target")
        figure.add_trace(
            go.Scatter(
                x=list(curve["n_removed"]),
                y=list(curve["ranks"]),
                mode="lines",
                name=f"{curve['label']} ({reported})",
                line={"color": colour, "width": 2.5},
                hovertemplate=f"{curve['label']}"
                + (f", target {target!r}" if target is not None else "")
                + "<br>%{x} heads removed<br>rank %{y}<extra></extra>",
            )
        )
        if switch is not None:
            figure.add_vline(x=switch, line={"color": colour, "dash": "dot", "width": 1.5})
    figure.update_layout(
        title=title or None,
        xaxis_title="heads removed",
        yaxis_title="target rank (log)",
        yaxis_type="log",
        template="plotly_white",
        height=460,
        width=820,
        legend_title_text=f"order (switch: top-1 for {stay} steps)",
    )
    return figure


def sweep_similarity_figure(frame: pd.DataFrame, *, title: str = "") -> go.Figure:
    """Figure 5: cosine similarity to the reference run against the heads removed, one line per
    layer (darker for later layers), one panel per hidden state (decoder / attention output).

    ``frame`` is :meth:`SweepResult.similarity_frame` (columns ``n_removed,
    layer, kind, cosine``).

    >>> frame = pd.DataFrame({"n_removed": [0, 1] * 2, "layer": [0, 0, 1, 1],
    ...                       "kind": ["decoder output"] * 4, "cosine": [1.0, 0.9, 1.0, 0.5]})
    >>> [trace.name for trace in sweep_similarity_figure(frame).data]
    ['L0', 'L1']
    """
    from plotly.colors import sample_colorscale

    missing = [c for c in ("n_removed", "layer", "kind", "cosine") if c not in frame]
    if missing:
        raise UnknownNameError(f"the similarity frame has no column(s) {missing}")
    if frame.empty:
        raise InputError("the similarity frame is empty (a sweep without reference_prompt?)")
    kinds = list(dict.fromkeys(frame["kind"]))
    layers = sorted(int(layer) for layer in frame["layer"].unique())
    top = max(1, layers[-1])
    figure = make_subplots(rows=1, cols=len(kinds), subplot_titles=kinds, shared_yaxes=True)
    for column, kind in enumerate(kinds, start=1):
        part = frame[frame["kind"] == kind]
        for layer in layers:
            rows = part[part["layer"] == layer]
            colour = sample_colorscale("Blues", [0.25 + 0.75 * layer / top])[0]
            figure.add_trace(
                go.Scatter(
                    x=rows["n_removed"],
                    y=rows["cosine"],
                    mode="lines",
                    name=f"L{layer}",
                    legendgroup=f"L{layer}",
                    showlegend=column == 1,
                    line={"color": colour, "width": 1.5},
                    hovertemplate=f"layer {layer}, {kind}<br>%{{x}} heads removed<br>"
                    "cosine %{y:.4f}<extra></extra>",
                ),
                row=1,
                col=column,
            )
        figure.update_xaxes(title_text="heads removed", row=1, col=column)
    figure.update_yaxes(title_text="cosine similarity to the reference", row=1, col=1)
    figure.update_layout(
        title=title or None,
        template="plotly_white",
        height=460,
        width=max(520, 480 * len(kinds)),
        legend_title_text="layer",
    )
    return figure


# -- logit lens (Table 41) and layer similarity (Figure 4) (issue 6) ----------------------------
# One hue per comparison: dark for decoder outputs, light for attention outputs.
_PAIRED = [("#08519c", "#9ecae1"), ("#a63603", "#fdae6b"), ("#006d2c", "#a1d99b"),
           ("#54278f", "#bcbddc"), ("#252525", "#bdbdbd")]  # fmt: skip


def logit_lens_figure(
    target_probs: Any,
    top1: Sequence[Sequence[str]],
    *,
    settings: Sequence[str],
    layers: Sequence[str],
    targets: Sequence[str],
    title: str = "",
) -> go.Figure:
    """Heat map of the probability of each target token after every layer (columns) in each
    setting (rows), each cell annotated with that layer's logit-lens top-1 token; one panel per
    target.

    ``target_probs`` is ``[n_settings, n_layers, n_targets]``; ``top1[s][l]`` the top-1 token.

    >>> import torch
    >>> probs = torch.tensor([[[0.1], [0.7]], [[0.2], [0.9]]])
    >>> figure = logit_lens_figure(probs, [["a", "B"], ["a", "B"]], settings=["original",
    ...     "masked"], layers=["embed", "L0"], targets=["B"])
    >>> figure.data[0].z.shape
    (2, 2)
    """
    import torch

    probs = torch.as_tensor(target_probs).float()
    if probs.ndim != 3 or probs.shape[:2] != (len(settings), len(layers)):
        raise InputError(
            f"target_probs must be [n_settings={len(settings)}, n_layers={len(layers)}, "
            f"n_targets], got {tuple(probs.shape)}"
        )
    if probs.shape[2] != len(targets):
        raise InputError(f"{probs.shape[2]} target columns but {len(targets)} target names")
    figure = make_subplots(
        rows=len(targets),
        cols=1,
        subplot_titles=[f"P({target!r})" for target in targets],
        vertical_spacing=0.12 if len(targets) > 1 else 0.0,
    )
    # cells show the top-1 token cut to 5 characters (cells are narrow), hover the whole token
    text = [[str(token) for token in row] for row in top1]
    short = [[_short_token(token) for token in row] for row in text]
    for index, target in enumerate(targets):
        figure.add_trace(
            go.Heatmap(
                z=probs[:, :, index].numpy(),
                x=list(layers),
                y=list(settings),
                text=short,
                customdata=text,
                texttemplate="%{text}",
                textfont={"size": 9},
                zmin=0.0,
                zmax=1.0,
                colorscale="Blues",
                showscale=index == 0,
                colorbar={"title": "probability"},
                hovertemplate=f"%{{y}}, after %{{x}}<br>P({target!r}) = %{{z:.3g}}<br>"
                "top-1 %{customdata}<extra></extra>",
            ),
            row=index + 1,
            col=1,
        )
        figure.update_yaxes(autorange="reversed", row=index + 1, col=1)
        figure.update_xaxes(tickfont={"size": 9}, row=index + 1, col=1)
    figure.update_layout(
        title=title or None,
        template="plotly_white",
        height=140 + len(targets) * (60 + 38 * len(settings)),
        width=max(640, 48 * len(layers) + 200),
    )
    return figure


def _short_token(text: str, limit: int = 5) -> str:
    """A token cut to ``limit`` characters (the last one an ellipsis) to fit a narrow cell."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _short_label(label: str, limit: int = 5) -> str:
    """Each ``<br>`` line of a tick label cut to ``limit`` characters."""
    return "<br>".join(_short_token(line, limit) for line in label.split("<br>"))


def similarity_figure(
    cosine: Any,
    *,
    comparisons: Sequence[str],
    hooks: Sequence[str],
    tick_labels: Sequence[str] | None = None,
    tick_title: str = "layer",
    title: str = "",
    band: tuple[Any, Any] | None = None,
) -> go.Figure:
    """Figure 4: cosine similarity per layer, one hue per comparison, the first hook (decoder
    outputs) dark and solid, the others (attention outputs) light and dotted; ``tick_labels``
    replace the layer numbers (e.g. with the logit-lens top-1 tokens under them).

    ``cosine`` is ``[n_comparisons, n_hooks, n_layers]``; ``band=(low, high)`` of the same shape
    shades an interval around each line (e.g. the 95 % interval over prompts).

    >>> import torch
    >>> figure = similarity_figure(torch.ones(2, 2, 3), comparisons=["a vs b", "a vs c"],
    ...                            hooks=["decoder", "attention"])
    >>> [trace.name for trace in figure.data]
    ['a vs b (decoder)', 'a vs b (attention)', 'a vs c (decoder)', 'a vs c (attention)']
    """
    import torch

    values = torch.as_tensor(cosine).float()
    if values.ndim != 3 or values.shape[:2] != (len(comparisons), len(hooks)):
        raise InputError(
            f"cosine must be [n_comparisons={len(comparisons)}, n_hooks={len(hooks)}, n_layers], "
            f"got {tuple(values.shape)}"
        )
    n_layers = values.shape[2]
    if tick_labels is not None and len(tick_labels) != n_layers:
        raise InputError(f"{len(tick_labels)} tick labels for {n_layers} layers")
    bands = None
    if band is not None:
        bands = [torch.as_tensor(b).float() for b in band]
        if any(b.shape != values.shape for b in bands):
            raise InputError(f"band must be (low, high), each of shape {tuple(values.shape)}")
    figure = go.Figure()
    x = list(range(n_layers))
    for c, comparison in enumerate(comparisons):
        dark, light = _PAIRED[c % len(_PAIRED)]
        for h, hook in enumerate(hooks):
            if bands is not None:
                figure.add_trace(
                    go.Scatter(
                        x=x + x[::-1],
                        y=bands[1][c, h].tolist() + bands[0][c, h].tolist()[::-1],
                        fill="toself",
                        fillcolor=dark if h == 0 else light,
                        opacity=0.18,
                        line={"width": 0},
                        hoverinfo="skip",
                        showlegend=False,
                        name=f"{comparison} ({hook}) 95 %",
                    )
                )
            figure.add_trace(
                go.Scatter(
                    x=x,
                    y=values[c, h].tolist(),
                    mode="lines+markers",
                    name=f"{comparison} ({hook})",
                    line={
                        "color": dark if h == 0 else light,
                        "width": 2.5 if h == 0 else 1.5,
                        "dash": "solid" if h == 0 else "dot",
                    },
                    marker={"size": 4},
                    hovertemplate=f"{comparison}, {hook}<br>layer %{{x}}<br>"
                    "cosine %{y:.4f}<extra></extra>",
                )
            )
    # upright labels, each line at most 5 characters: rotated multi-line labels overlap
    figure.update_xaxes(
        title_text=tick_title,
        tickmode="array",
        tickvals=x,
        ticktext=[_short_label(t) for t in tick_labels]
        if tick_labels is not None
        else [str(i) for i in x],
        tickangle=0,
        tickfont={"size": 9},
    )
    figure.update_layout(
        title=title or None,
        yaxis_title="cosine similarity",
        template="plotly_white",
        height=520 if tick_labels is not None else 440,
        width=max(760, 34 * n_layers + 240),
        legend_title_text="comparison",
    )
    return figure


def top_tokens_figure(frame: pd.DataFrame, *, title: str = "") -> go.Figure:
    """Table 4b as bars: one panel per setting, its top tokens' logits (rank 1 at the top),
    each bar labelled with the token's rank change relative to the reference setting.

    ``frame`` is :meth:`lens_heads.heads_up._lens.TopTokensResult.to_frame`.

    >>> frame = pd.DataFrame({"setting": ["a", "a"], "rank": [1, 2], "token": ["x", "y"],
    ...                       "logit": [3.0, 2.0], "rank change": [0, 5]})
    >>> list(top_tokens_figure(frame).data[0].text)
    ['x', 'y ↑5']
    """
    missing = [c for c in ("setting", "rank", "token", "logit", "rank change") if c not in frame]
    if missing:
        raise UnknownNameError(f"the frame has no column(s) {missing}")
    settings = list(dict.fromkeys(frame["setting"]))
    figure = make_subplots(rows=1, cols=len(settings), subplot_titles=settings)
    for column, setting in enumerate(settings, start=1):
        rows = frame[frame["setting"] == setting].sort_values("rank")
        labels = [
            token + ("" if change == 0 else (f" ↑{change}" if change > 0 else f" ↓{-change}"))
            for token, change in zip(rows["token"], rows["rank change"], strict=True)
        ]
        figure.add_trace(
            go.Bar(
                x=rows["logit"],
                y=[f"{rank}" for rank in rows["rank"]],
                orientation="h",
                text=labels,
                textposition="auto",
                marker_color=["#d62728" if c > 0 else "#4C78A8" for c in rows["rank change"]],
                showlegend=False,
                hovertemplate="%{text}<br>logit %{x:.3f}<extra>" + setting + "</extra>",
            ),
            row=1,
            col=column,
        )
        figure.update_yaxes(autorange="reversed", title_text="rank", row=1, col=column)
        figure.update_xaxes(title_text="logit", row=1, col=column)
    figure.update_layout(
        title=title or None,
        template="plotly_white",
        height=max(320, 32 * int(frame["rank"].max()) + 140),
        width=max(420, 320 * len(settings)),
    )
    return figure


# -- scaled masks: Figure 6 ----------------------------------------------------------------------
def alpha_curve_figure(
    curve: pd.DataFrame,
    metrics: dict[str, str],
    *,
    reference: dict[str, float] | None = None,
    reference_label: str = "no instruction",
    best_alpha: float | None = None,
    title: str = "",
) -> go.Figure:
    """Figure 6: each metric against alpha (one panel per metric), the un-instructed reference
    point as a diamond at alpha 0 with a dashed horizontal line, the best alpha starred.

    ``curve`` has an ``alpha`` column and one column per key of ``metrics`` (key -> axis
    title); ``reference`` maps the same keys to the reference point's values.

    >>> curve = pd.DataFrame({"alpha": [0.0, 0.5, 1.0], "answer_ce": [1.2, 1.1, 2.0]})
    >>> fig = alpha_curve_figure(curve, {"answer_ce": "answer CE"}, reference={"answer_ce": 0.9},
    ...                          best_alpha=0.5)
    >>> [trace.name for trace in fig.data]
    ['with instruction', 'no instruction', 'best alpha 0.5']
    """
    missing = [key for key in ["alpha", *metrics] if key not in curve.columns]
    if missing:
        raise UnknownNameError(
            f"the curve has no column(s) {missing}; it has {list(curve.columns)}"
        )
    if not metrics:
        raise InputError("alpha_curve_figure needs at least one metric")
    figure = make_subplots(rows=1, cols=len(metrics), subplot_titles=list(metrics.values()))
    for column, (key, name) in enumerate(metrics.items(), start=1):
        first = column == 1
        figure.add_trace(
            go.Scatter(
                x=curve["alpha"],
                y=curve[key],
                mode="lines+markers",
                name="with instruction",
                legendgroup="curve",
                showlegend=first,
                line={"color": "#1f77b4", "width": 2.5},
                hovertemplate=f"alpha %{{x:g}}<br>{name}: %{{y:.4g}}<extra>with instruction"
                "</extra>",
            ),
            row=1,
            col=column,
        )
        if reference is not None and key in reference:
            value = reference[key]
            figure.add_trace(
                go.Scatter(
                    x=[0.0],
                    y=[value],
                    mode="markers",
                    name=reference_label,
                    legendgroup="reference",
                    showlegend=first,
                    marker={"color": "#d62728", "symbol": "diamond", "size": 11},
                    hovertemplate=f"{reference_label}<br>{name}: %{{y:.4g}}<extra></extra>",
                ),
                row=1,
                col=column,
            )
            figure.add_hline(
                y=value, line={"color": "#d62728", "dash": "dash", "width": 1.5}, row=1, col=column
            )
        if best_alpha is not None and key == "answer_ce":
            best = curve[curve["alpha"] == best_alpha]
            figure.add_trace(
                go.Scatter(
                    x=best["alpha"],
                    y=best[key],
                    mode="markers",
                    name=f"best alpha {best_alpha:g}",
                    marker={"color": "#2ca02c", "symbol": "star", "size": 15},
                    hovertemplate=f"best alpha %{{x:g}}<br>{name}: %{{y:.4g}}<extra></extra>",
                ),
                row=1,
                col=column,
            )
    figure.update_xaxes(title_text="alpha (scale of the heads M removes)", range=[-0.05, 1.05])
    figure.update_layout(
        title=title or None,
        template="plotly_white",
        height=440,
        width=max(560, 460 * len(metrics)),
    )
    return figure
