"""What LAHIS's soft-mask experiment records (:class:`SoftMaskExperiment`): per condition (no
mask, a soft mask on the top heads, soft masks on random heads) the trained multipliers, the
training losses and the held-out scores, with tables, figures and save/load.

>>> result = SoftMaskExperiment.example()
>>> result.to_frame()["answer CE (paper: PPL)"].round(2).tolist()
[3.0, 2.5, 2.95]
>>> result.top_heads, result.random_heads
(['L1H0'], [['L0H1'], ['L1H1']])"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pandas as pd
import torch
from jaxtyping import Float
from torch import Tensor

from lens_heads.core import HeadScale
from lens_heads.core.internal import FolderResult, mean_std_table
from lens_heads.engine import (
    METRICS,
)

__all__ = ["CONDITIONS", "SoftMaskExperiment"]


#: Condition keys, in table order, with their row labels.
CONDITIONS: dict[str, str] = {
    "none": "no mask",
    "top": "soft mask, top heads",
    "random": "soft mask, random heads",
}


# -- the result ---------------------------------------------------------------------------------
@dataclass(repr=False)
class SoftMaskExperiment(FolderResult):
    """No mask / a soft mask on the top heads / soft masks on random heads (one per seed),
    evaluated on the same held-out examples.

    ``runs`` has one row per (condition, seed) with the trained ``heads`` and their
    ``multipliers``, the mean training loss of the first and last epoch and every metric the
    evaluator reported (:data:`lens_heads.engine.METRICS` keys: ``answer_ce``, ``chrf``,
    ``bleu``...). ``multipliers[i]`` is the trained soft mask of ``mask_names[i]`` (``"top"``,
    ``"random-<seed>"``): exactly 1 on every head it did not train. ``outputs`` holds each
    held-out example's prediction per run, ``history`` the training loss per step.

    >>> result = SoftMaskExperiment.example()
    >>> result.masks()["top"].values.tolist()
    [[1.0, 1.0], [1.25, 1.0]]
    """

    runs: pd.DataFrame
    multipliers: Float[Tensor, "n_masks n_layers n_heads"]
    mask_names: list[str]
    model: str
    task: str
    language: str | None
    fraction: float
    top_heads: list[str]
    random_heads: list[list[str]]
    random_seeds: list[int]
    n_train: int
    n_eval: int
    config: dict[str, Any]
    outputs: pd.DataFrame = field(default_factory=pd.DataFrame)
    history: pd.DataFrame = field(default_factory=pd.DataFrame)
    notes: list[str] = field(default_factory=list)

    _format: ClassVar[str] = "lens_heads.soft_mask_experiment/1"

    @classmethod
    def example(cls) -> SoftMaskExperiment:
        """A small hand-made result (documentation and tests)."""
        runs = pd.DataFrame(
            {
                "condition": ["none", "top", "random", "random"],
                "seed": [-1, -1, 0, 1],
                "n_heads": [0, 1, 1, 1],
                "heads": ["", "L1H0", "L0H1", "L1H1"],
                "multipliers": ["", "L1H0=1.25", "L0H1=0.9", "L1H1=1.1"],
                "answer_ce": [3.0, 2.5, 2.9, 3.0],
                "chrf": [30.0, 36.0, 31.0, 29.0],
            }
        )
        multipliers = torch.ones(3, 2, 2)
        multipliers[0, 1, 0], multipliers[1, 0, 1], multipliers[2, 1, 1] = 1.25, 0.9, 1.1
        return cls(
            runs=runs,
            multipliers=multipliers,
            mask_names=["top", "random-0", "random-1"],
            model="example",
            task="en-fr",
            language="fr",
            fraction=0.25,
            top_heads=["L1H0"],
            random_heads=[["L0H1"], ["L1H1"]],
            random_seeds=[0, 1],
            n_train=8,
            n_eval=4,
            config={},
        )

    @property
    def metrics(self) -> list[str]:
        """The metric keys the runs have, in :data:`~lens_heads.engine.METRICS` order."""
        return [key for key in METRICS if key in self.runs.columns]

    def masks(self) -> dict[str, HeadScale]:
        """Each trained soft mask as a :class:`HeadScale` (``"top"``, ``"random-<seed>"``)."""
        meta = {"model": self.model, "task": self.task, "trained_with": "soft"}
        return {
            name: HeadScale(values.clone(), metadata={**meta, "condition": name})
            for name, values in zip(self.mask_names, self.multipliers, strict=True)
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per condition (index: ``no mask``, ``soft mask, top heads``, ``soft mask,
        random heads``) with ``heads`` (trained heads per mask), ``seeds`` and each metric
        (column names of :data:`~lens_heads.engine.METRICS`); random heads show the mean over
        seeds and a ``"<metric> std"`` column (sample standard deviation; NaN for single runs)."""
        rows = []
        for key, label in CONDITIONS.items():
            runs = self.runs[self.runs["condition"] == key]
            if runs.empty:
                continue
            row: dict[str, Any] = {
                "condition": label,
                "trained heads": int(runs["n_heads"].iloc[0]),
                "seeds": len(runs),
            }
            for metric in self.metrics:
                values = runs[metric].astype(float)
                row[METRICS[metric]] = float(values.mean())
                row[f"{METRICS[metric]} std"] = float(values.std()) if len(values) > 1 else math.nan
            rows.append(row)
        return pd.DataFrame(rows).set_index("condition")

    def differences(self) -> dict[str, float]:
        """Answer CE (and chrF++ when reported) of the top-heads mask minus no mask and minus the
        mean of the random masks (negative CE differences: the top heads help)."""
        table = self.to_frame()
        top, none, rand = (CONDITIONS[k] for k in ("top", "none", "random"))
        found: dict[str, float] = {}
        for metric, name in (("answer_ce", "ce"), ("chrf", "chrf")):
            column = METRICS[metric]
            if column not in table.columns or top not in table.index:
                continue
            for other, suffix in ((none, "none"), (rand, "random")):
                if other in table.index:
                    found[f"{name}_top_minus_{suffix}"] = float(
                        table.loc[top, column] - table.loc[other, column]
                    )
        return found

    def to_markdown(self, digits: int = 3) -> str:
        """The table, ``mean ± std`` for the random heads, with the heads and differences."""
        metrics = [METRICS[m] for m in self.metrics]
        table = mean_std_table(self.to_frame(), metrics, keep=["trained heads"], digits=digits)
        trained = self.runs[self.runs["condition"] != "none"]
        heads = "".join(
            f"\n- {CONDITIONS[c]}{'' if s < 0 else f' (seed {s})'}: {m}"
            for c, s, m in zip(
                trained["condition"], trained["seed"], trained["multipliers"], strict=True
            )
        )
        differences = ", ".join(f"{k} = {v:+.{digits}f}" for k, v in self.differences().items())
        notes = "".join(f"\n- {note}" for note in self.notes)
        steps = self.config.get("steps", "?")
        title = (
            f"Soft mask on the top {self.fraction:g} of heads "
            f"({self.language or 'ranking'}) vs random heads: **{self.task}** on "
            f"**{self.model}** ({self.n_train} training examples, {steps} steps at batch "
            f"{self.config.get('batch_size', '?')}, lr {self.config.get('lr', '?')}; "
            f"{self.n_eval} held-out examples; random seeds {self.random_seeds})"
        )
        return (
            title
            + "\n\n"
            + table
            + "\n\nTrained multipliers:"
            + heads
            + (f"\n\nDifferences: {differences}" if differences else "")
            + ("\n\nNotes:" + notes if notes else "")
            + "\n"
        )

    def plot(self) -> Any:
        """Bars per condition for answer CE, chrF++ and BLEU (those reported; error bars: std
        over the random seeds)."""
        from lens_heads.engine import evaluation_figure

        wanted = [m for m in ("answer_ce", "chrf", "bleu") if m in self.metrics] or self.metrics
        return evaluation_figure(
            self.to_frame(),
            [METRICS[m] for m in wanted],
            title=f"Soft masks: top vs random heads, {self.task} on {self.model}",
        )

    # -- io -------------------------------------------------------------------------------------
    def _to_saved(self) -> tuple[dict[str, Any], dict[str, Any]]:
        meta = {
            "runs": self.runs.to_dict("list"),
            "mask_names": self.mask_names,
            "model": self.model,
            "task": self.task,
            "language": self.language,
            "fraction": self.fraction,
            "top_heads": self.top_heads,
            "random_heads": self.random_heads,
            "random_seeds": self.random_seeds,
            "n_train": self.n_train,
            "n_eval": self.n_eval,
            "config": self.config,
            "outputs": self.outputs.to_dict("list"),
            "history": self.history.to_dict("list"),
            "notes": self.notes,
        }
        return meta, {"multipliers": self.multipliers}

    @classmethod
    def _from_saved(cls, meta: dict[str, Any], tensors: dict[str, Any]) -> SoftMaskExperiment:
        frames = {key: pd.DataFrame(meta.pop(key)) for key in ("runs", "outputs", "history")}
        return cls(multipliers=tensors["multipliers"], **frames, **meta)
