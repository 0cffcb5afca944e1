"""Token alignment heads across language pairs (paper Figures 5 and 28: Jaccard of the top-k
sets) and across models or checkpoints (Figure 6: proportion and layer positions).

>>> import lens_heads as lh
>>> model = lh.tiny_model()
>>> result = alignment_consistency(model, ["en", "fr", "de"], k=3, n_eval=2, shots=1)
>>> result.jaccard.shape, round(result.expected, 3)
((6, 6), 0.259)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pandas as pd

from lens_heads.alignment._score_config import ScoreConfig
from lens_heads.alignment._scores import translation_scores
from lens_heads.core import (
    HeadMask,
    InputError,
    configure,
    expected_random_jaccard,
    head_shape,
    jaccard,
    markdown_table,
)
from lens_heads.core.internal import FolderResult, model_name

__all__ = ["AcrossModels", "Consistency", "alignment_consistency", "alignment_heads_across_models"]


@dataclass(repr=False)
class Consistency(FolderResult):
    """Top-``k`` heads of each ordered language pair and their pairwise Jaccard similarity,
    with the Jaccard two random ``k``-head sets would have (``expected``)."""

    model: str
    k: int
    n_layers: int
    n_heads: int
    top: dict[str, list[str]]
    settings: dict[str, Any] = field(default_factory=dict)

    _format: ClassVar[str] = "lens_heads.alignment_consistency/1"

    @property
    def pairs(self) -> list[str]:
        return list(self.top)

    @property
    def expected(self) -> float:
        return expected_random_jaccard(self.k, self.k, n_heads=self.n_layers * self.n_heads)

    @property
    def jaccard(self) -> pd.DataFrame:
        """``[pairs, pairs]`` Jaccard similarity of the top-k sets."""
        masks = {
            pair: HeadMask.from_heads(heads, n_layers=self.n_layers, n_heads=self.n_heads)
            for pair, heads in self.top.items()
        }
        values = [[jaccard(masks[a], masks[b]) for b in masks] for a in masks]
        return pd.DataFrame(values, index=self.pairs, columns=self.pairs)

    def to_frame(self) -> pd.DataFrame:
        return self.jaccard

    def mean_off_diagonal(self) -> float:
        frame = self.jaccard
        n = len(frame)
        total = float(frame.to_numpy().sum()) - n
        return total / (n * (n - 1)) if n > 1 else 1.0

    def min_off_diagonal(self) -> float:
        """The lowest Jaccard of two different pairs (the paper's floor: 0.6)."""
        frame = self.jaccard
        values = [frame.iloc[i, j] for i in range(len(frame)) for j in range(len(frame)) if i != j]
        return float(min(values)) if values else 1.0

    def to_markdown(self) -> str:
        return (
            f"**{self.model}**: Jaccard of top-{self.k} heads; mean off-diagonal "
            f"{self.mean_off_diagonal():.3f}, random expectation {self.expected:.3f}\n\n"
            + markdown_table(self.jaccard, floatfmt=".2f", index=True)
            + "\n"
        )

    def plot(self) -> Any:
        """Figure 5: the Jaccard matrix as a heat map, random expectation in the title."""
        import plotly.graph_objects as go

        frame = self.jaccard
        figure = go.Figure(
            go.Heatmap(
                z=frame.to_numpy(),
                x=list(frame.columns),
                y=list(frame.index),
                zmin=0,
                zmax=1,
                colorscale="Blues",
                text=frame.round(2).to_numpy(),
                texttemplate="%{text}",
            )
        )
        figure.update_layout(
            title=f"Top-{self.k} alignment heads, Jaccard across pairs ({self.model}); "
            f"random: {self.expected:.3f}",
            template="plotly_white",
            yaxis_autorange="reversed",
        )
        return figure


def alignment_consistency(
    model: Any,
    languages: Sequence[str] = ("en", "fr", "es", "de", "zh"),
    config: ScoreConfig | None = None,
    *,
    k: int = 20,
    **options: Any,
) -> Consistency:
    """Translation scores of every ordered pair of ``languages`` of the built-in corpus (under
    ``config``, a :class:`ScoreConfig`, or its fields as keywords), their top-``k`` sets and
    Jaccard."""
    config = configure(ScoreConfig, config, options, "alignment_consistency")
    if len(set(languages)) < 2:
        raise InputError(f"need at least two languages, got {list(languages)}")
    n_layers, n_heads = head_shape(model)
    if not 0 < k <= n_layers * n_heads:
        raise InputError(f"k must lie in [1, {n_layers * n_heads}], got {k}")
    top = {}
    for source in languages:
        for target in languages:
            if source != target:
                scores = translation_scores(model, f"{source}-{target}", config=config)
                top[f"{source}-{target}"] = scores.top(k)
    return Consistency(
        model=model_name(model),
        k=k,
        n_layers=n_layers,
        n_heads=n_heads,
        top=top,
        settings={key: str(value) for key, value in options.items()},
    )


@dataclass(repr=False)
class AcrossModels(FolderResult):
    """Per model: the proportion of heads above ``threshold`` and the relative depths
    (layer / (n_layers - 1)) of those heads."""

    pair: str
    threshold: float
    rows: list[dict[str, Any]]

    _format: ClassVar[str] = "lens_heads.alignment_across_models/1"

    def to_frame(self) -> pd.DataFrame:
        frame = pd.DataFrame(self.rows)
        return frame.set_index("model") if len(frame) else frame

    def to_markdown(self) -> str:
        columns = {"model": "model", "n_heads": "heads", "n_alignment": "alignment heads"}
        columns |= {"proportion": "proportion", "layers": "layers"}
        frame = pd.DataFrame(self.rows, columns=list(columns)).rename(columns=columns)
        table = markdown_table(frame, index=False)
        return f"**{self.pair}**, threshold {self.threshold}\n\n" + table + "\n"

    def plot(self) -> Any:
        """Figure 6: proportion of alignment heads per model, and their relative depths."""
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots

        figure = make_subplots(
            rows=1, cols=2, subplot_titles=["proportion of heads", "relative depth"]
        )
        names = [row["model"] for row in self.rows]
        figure.add_trace(
            go.Bar(x=names, y=[row["proportion"] for row in self.rows], name="proportion"),
            row=1,
            col=1,
        )
        for row in self.rows:
            figure.add_trace(
                go.Box(y=row["relative_depths"], name=row["model"], boxpoints="all"), row=1, col=2
            )
        figure.update_layout(
            title=f"Alignment heads across models ({self.pair}, TS > {self.threshold})",
            template="plotly_white",
            showlegend=False,
        )
        return figure


def alignment_heads_across_models(
    models: Sequence[Any],
    pair: str = "en-fr",
    config: ScoreConfig | None = None,
    *,
    threshold: float = 0.1,
    **options: Any,
) -> AcrossModels:
    """Translation scores of ``pair`` on each model (a loaded model or a spec for
    :func:`~lens_heads.load_model`, e.g. HF revisions of one model); each is loaded, scored
    and released in turn."""
    from lens_heads.core import load_model

    config = configure(ScoreConfig, config, options, "alignment_heads_across_models")
    rows = []
    for spec in models:
        model = load_model(spec) if isinstance(spec, (str, os.PathLike)) else spec
        scores = translation_scores(model, pair, config=config)
        heads = scores.alignment_heads(threshold)
        layers = [int(h[1:].split("H")[0]) for h in heads]
        depth = max(scores.n_layers - 1, 1)
        rows.append(
            {
                "model": scores.model,
                "n_heads": scores.n_layers * scores.n_heads,
                "n_alignment": len(heads),
                "proportion": len(heads) / (scores.n_layers * scores.n_heads),
                "layers": sorted(set(layers)),
                "n_layers": scores.n_layers,
                "relative_depths": [layer / depth for layer in layers],
                "heads": heads,
            }
        )
        del model
    return AcrossModels(pair=pair, threshold=threshold, rows=rows)
