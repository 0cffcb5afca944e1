"""What the functional-pathways experiment records (:class:`PathwaysResult`, Heads up! Table 6):
each task of a family evaluated with the heads every mask keeps removed, with the heads no mask
keeps removed, and with random head sets of the same sizes; with tables, a figure and
save/load."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from lens_heads.core import write_atomic
from lens_heads.core.internal import FolderResult, mean_std_table

__all__ = ["CONDITIONS", "RANDOM_CONDITIONS", "TABLE_METRICS", "PathwaysResult"]


#: The metrics of the table, in column order (those the runs have).
#: Condition keys, in table order, with their row labels.
CONDITIONS: dict[str, str] = {
    "full": "full model",
    "shared": "remove shared (a)",
    "random_shared": "remove random, size of (a)",
    "unused": "remove unused (b)",
    "random_unused": "remove random, size of (b)",
}
TABLE_METRICS = ("answer_ce", "accuracy", "exact_match", "chrf", "bleu")

RANDOM_CONDITIONS = {"random_shared": "shared", "random_unused": "unused"}


# -- the result -----------------------------------------------------------------------------------
@dataclass(repr=False)
class PathwaysResult(FolderResult):
    """Table 6: each family task evaluated with its instruction on the full model and with
    (a) the shared heads, (b) the unused heads, or random head sets of their sizes removed.

    ``runs`` has one row per (task, condition, seed) with ``heads removed`` and the metrics of
    :func:`lens_heads.evaluate` (``answer_ce``, ``accuracy``, ``exact_match``, ...); random
    conditions have one run per seed, the others seed -1. ``shared``/``unused`` label (a)/(b);
    ``random_sets[condition][i]`` labels the heads removed with seed ``seeds[i]``.

    >>> result = PathwaysResult.example()
    >>> result.summary()[["CE shared", "CE random shared", "shared hurts more"]].values.tolist()
    [[3.0, 2.0, True]]
    """

    _format: ClassVar[str] = "lens_heads.pathways/1"

    model: str
    tasks: list[str]
    shape: list[int]
    mask_sizes: dict[str, int]
    shared: list[str]
    unused: list[str]
    seeds: list[int]
    random_sets: dict[str, list[list[str]]]
    runs: pd.DataFrame
    config: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def example(cls) -> PathwaysResult:
        """A small hand-made result (for documentation and tests)."""
        rows = [
            ("full", -1, 0, 0.5, 1.0),
            ("shared", -1, 1, 0.0, 3.0),
            ("random_shared", 0, 1, 0.5, 1.5),
            ("random_shared", 1, 1, 0.5, 2.5),
            ("unused", -1, 2, 0.5, 0.9),
            ("random_unused", 0, 2, 0.0, 4.0),
            ("random_unused", 1, 2, 0.5, 2.0),
        ]
        runs = pd.DataFrame(
            [
                {"task": "upper", "condition": c, "seed": s, "heads removed": n}
                | {"accuracy": acc, "answer_ce": ce}
                for c, s, n, acc, ce in rows
            ]
        )
        return cls(
            model="tiny",
            tasks=["upper"],
            shape=[1, 4],
            mask_sizes={"upper": 2},
            shared=["L0H0"],
            unused=["L0H2", "L0H3"],
            seeds=[0, 1],
            random_sets={
                "random_shared": [["L0H1"], ["L0H3"]],
                "random_unused": [["L0H1", "L0H3"], ["L0H0", "L0H2"]],
            },
            runs=runs,
        )

    @property
    def metrics(self) -> list[str]:
        """The metric keys of the table that the runs have."""
        return [key for key in TABLE_METRICS if key in self.runs.columns]

    def _rows(self, task: str, condition: str) -> pd.DataFrame:
        runs = self.runs
        return runs[(runs["task"] == task) & (runs["condition"] == condition)]

    def to_frame(self) -> pd.DataFrame:
        """One row per (task, condition) -- index ``(task, condition label)`` -- with ``heads
        removed``, ``seeds`` and, per metric, the mean over seeds and a ``... std`` column (the
        sample standard deviation over seeds; NaN for single runs)."""
        from lens_heads.engine import METRICS

        rows = []
        for task in self.tasks:
            for key, label in CONDITIONS.items():
                runs = self._rows(task, key)
                if not len(runs):
                    continue
                row: dict[str, Any] = {"task": task, "condition": label}
                row["heads removed"] = int(runs["heads removed"].iloc[0])
                row["seeds"] = len(runs)
                for metric in self.metrics:
                    values = runs[metric].astype(float)
                    row[METRICS[metric]] = float(values.mean())
                    row[f"{METRICS[metric]} std"] = (
                        float(values.std()) if len(values) > 1 else math.nan
                    )
                rows.append(row)
        return pd.DataFrame(rows).set_index(["task", "condition"])

    def _mean(self, task: str, condition: str, metric: str) -> float:
        return float(self._rows(task, condition)[metric].astype(float).mean())

    def summary(self) -> pd.DataFrame:
        """Per task: the answer CE of each condition, its change from the full model, and the
        two readings of the claim -- ``shared hurts more`` (removing (a) raises the CE more than
        the mean of its random controls) and ``unused does not hurt`` (removing (b) does not
        raise the CE above the full model's)."""
        rows = []
        for task in self.tasks:
            ce = {key: self._mean(task, key, "answer_ce") for key in CONDITIONS}
            rows.append(
                {
                    "task": task,
                    "CE full": ce["full"],
                    "CE shared": ce["shared"],
                    "CE random shared": ce["random_shared"],
                    "CE unused": ce["unused"],
                    "CE random unused": ce["random_unused"],
                    "shared hurts more": ce["shared"] > ce["random_shared"],
                    "unused does not hurt": ce["unused"] <= ce["full"],
                }
            )
        return pd.DataFrame(rows).set_index("task")

    def verdict(self) -> str:
        """Two sentences on the measured direction of (a) and (b), whatever it is."""
        table = self.summary()
        n = len(table)
        delta = {key: float((table[f"CE {key}"] - table["CE full"]).mean()) for key in _COLUMNS}
        shared_more, unused_ok = (
            int(table["shared hurts more"].sum()),
            int(table["unused does not hurt"].sum()),
        )
        first = (
            f"Removing the {_heads(len(self.shared))} shared by all {len(self.mask_sizes)} masks "
            f"changes the answer CE by {delta['shared']:+.3f} on average (random sets of "
            f"{_heads(len(self.shared))}: {delta['random shared']:+.3f}); it hurts more than its "
            f"random control on {shared_more}/{n} tasks"
            + (" (the paper's direction)." if shared_more == n else ".")
        )
        if not self.shared:
            first = "No head is kept by every mask: (a) is empty and removing it changes nothing."
        second = (
            f"Removing the {_heads(len(self.unused))} no mask uses changes it by "
            f"{delta['unused']:+.3f} (random sets of {_heads(len(self.unused))}: "
            f"{delta['random unused']:+.3f}); it does not raise the CE on {unused_ok}/{n} tasks"
            + (" (the paper's direction)." if unused_ok == n else ".")
        )
        return f"{first} {second}"

    def to_markdown(self, digits: int = 3) -> str:
        from lens_heads.engine import METRICS

        metrics = [METRICS[m] for m in self.metrics]
        table = mean_std_table(self.to_frame(), metrics, keep=["heads removed"], digits=digits)
        n_heads = self.shape[0] * self.shape[1]
        sizes = ", ".join(f"{task} {size}" for task, size in self.mask_sizes.items())
        intro = [
            f"# Functional pathways (Heads up! Table 6) on {self.model}",
            "",
            f"Family: {', '.join(self.tasks)}; heads kept per mask (of {n_heads}): {sizes}. "
            f"(a) shared by all masks: {_heads(len(self.shared))} "
            f"({', '.join(self.shared) or '-'}); (b) used by no mask: {_heads(len(self.unused))}. "
            f"Random sets of the same sizes over seeds {', '.join(map(str, self.seeds))} "
            "(mean ± sd). Each task is evaluated with its instruction on "
            f"{self.config.get('n_eval', '?')} held-out examples; answer CE is the paper's "
            "'PPL' (mean answer-token cross-entropy).",
            "",
        ]
        timing = []
        if "seconds" in self.runs.columns:
            evaluated = int((self.runs["seconds"] > 0).sum())
            timing = [
                "",
                f"Evaluation wall time: {self.runs['seconds'].sum():.1f} s for {evaluated} "
                "evaluations (lh.evaluate, batched over examples).",
            ]
        return "\n".join([*intro, table, "", self.verdict(), *timing]) + "\n"

    def plot(self) -> Any:
        """Grouped bars: one panel per metric (answer CE, accuracy, ...), the tasks on the x
        axis, one bar per condition (error bars: std over the random seeds)."""
        return _pathways_figure(self)

    # -- io ---------------------------------------------------------------------------------------
    def _to_saved(self) -> tuple[dict[str, Any], dict[str, Any]]:
        meta, tensors = super()._to_saved()
        meta["runs"] = self.runs.to_dict(orient="records")
        return meta, tensors

    @classmethod
    def _from_saved(cls, meta: dict[str, Any], tensors: dict[str, Any]) -> PathwaysResult:
        meta["runs"] = pd.DataFrame(meta["runs"])
        return cls(**meta, **tensors)

    def save(self, directory: str | os.PathLike[str], *, png: bool = False) -> list[Path]:
        """The :class:`FolderResult` folder plus ``runs.csv`` (one row per run)
        and ``summary.csv``."""
        written = super().save(directory, png=png)
        folder = Path(directory)
        return [
            *written,
            write_atomic(folder / "runs.csv", self.runs.to_csv(index=False)),
            write_atomic(folder / "summary.csv", self.summary().to_csv()),
        ]


_COLUMNS = ("shared", "random shared", "unused", "random unused")


def _heads(n: int) -> str:
    return f"{n} head" + ("" if n == 1 else "s")


_PALETTE = ["#4C78A8", "#E45756", "#F2A0A0", "#54A24B", "#A8D5A2"]


def _pathways_figure(result: PathwaysResult) -> Any:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from lens_heads.engine import METRICS

    table = result.to_frame()
    metrics = [METRICS[m] for m in result.metrics if m in ("answer_ce", "accuracy", "chrf")]
    figure = make_subplots(rows=1, cols=len(metrics), subplot_titles=metrics)
    for position, label in enumerate(CONDITIONS.values()):
        rows = table.xs(label, level="condition")
        for column, metric in enumerate(metrics, start=1):
            std = rows[f"{metric} std"]
            figure.add_trace(
                go.Bar(
                    x=list(rows.index),
                    y=rows[metric].tolist(),
                    name=label,
                    legendgroup=label,
                    showlegend=column == 1,
                    marker_color=_PALETTE[position],
                    error_y={"type": "data", "array": std.fillna(0).tolist(), "visible": True}
                    if std.notna().any()
                    else None,
                    hovertemplate=f"%{{x}}<br>{label}<br>{metric}: %{{y:.4g}}<extra></extra>",
                ),
                row=1,
                col=column,
            )
    figure.update_layout(
        title=f"Functional pathways on {result.model}: {len(result.shared)} shared heads (a), "
        f"{len(result.unused)} unused heads (b)",
        barmode="group",
        template="plotly_white",
        height=440,
        width=max(560, 120 * len(result.tasks) * len(metrics) + 240),
        legend_title_text="condition",
    )
    return figure
