"""Dependent changes in mask training (Heads up! Figure 3): heads that join the mask late, that
leave it, or that change more than once, and whether their changes coincide with other heads'.

A head's path is read from the sampled keep probabilities ``sigmoid(W)`` of a
:class:`~lens_heads.engine.MaskTrainingResult` (``trajectory``): it is *in* at a sample when
its probability is at least 0.5. Each head is ``stayed in``/``stayed out`` (never crossed),
``joined`` (out, then in once), ``dropped`` (in, then out once) or ``changed more than once``.
The paper reads such changes as evidence that the heads depend on each other: a head is
dropped as others join. :func:`dependent_changes` also tests that reading: do the crossings of
different heads fall closer together in time than if each head's crossings were shifted at
random along the training (a permutation test, each head shifted as a whole)? Shifting also
moves crossings away from the schedule every head shares (the temperature and learning rate
fall for all heads together), so it favours finding coincidences. The second null keeps that
schedule: each head's crossings are redrawn from the pooled crossing times of all heads, as if
the heads crossed independently under the same schedule; only coincidence beyond it counts.

>>> import torch
>>> from lens_heads.engine import MaskTrainingResult
>>> result = MaskTrainingResult.example()
>>> changes = dependent_changes(result, shuffles=50)
>>> changes.counts()["changed more than once"], changes.to_frame().shape[0]
(1, 2)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import pandas as pd
import torch
from torch import Tensor

from lens_heads.core import format_head, markdown_table
from lens_heads.core.internal import FolderResult
from lens_heads.engine import MaskTrainingResult

__all__ = ["KINDS", "SCHEDULE_SPREAD", "DependentChanges", "dependent_changes"]

#: how far (a share of the run's samples) a redrawn crossing may move from the pooled time it
#: was drawn from: wide enough to dissolve coincidences of a window, narrow beside the schedule
SCHEDULE_SPREAD = 0.1

KINDS = ("stayed in", "stayed out", "joined", "dropped", "changed more than once")


def _kind(start: bool, end: bool, crossings: int) -> str:
    if crossings == 0:
        return "stayed in" if start else "stayed out"
    if crossings == 1:
        return "joined" if end else "dropped"
    return "changed more than once"


def coincidence(events: list[list[int]], window: int) -> float:
    """Mean number of *other* heads' crossings within ``window`` samples of a crossing.

    >>> coincidence([[10], [11], [50]], window=2)  # the first two heads cross together
    0.6666666666666666
    """
    times = torch.tensor([t for ts in events for t in ts], dtype=torch.long)
    if times.numel() < 2:
        return 0.0
    heads = torch.tensor([h for h, ts in enumerate(events) for _ in ts], dtype=torch.long)
    near = (times[:, None] - times[None, :]).abs() <= window
    near &= heads[:, None] != heads[None, :]
    return float(near.sum()) / times.numel()


def _resampled(
    events: list[list[int]], pool: Tensor, spread: int, length: int, generator: torch.Generator
) -> list[list[int]]:
    """Each head's crossings redrawn from the shared schedule: a crossing time of any head
    (``pool``) moved by up to ``spread`` samples either way (so that the pool's own coincident
    pairs do not carry over), kept inside the run: independent heads under one schedule."""
    count = sum(map(len, events))
    draws = pool[torch.randint(0, len(pool), (count,), generator=generator)]
    moved = draws + torch.randint(-spread, spread + 1, (count,), generator=generator)
    times, start = moved.clamp(0, length - 1).tolist(), 0
    out = []
    for head in events:
        out.append(sorted(times[start : start + len(head)]))
        start += len(head)
    return out


def _shifted(events: list[list[int]], length: int, generator: torch.Generator) -> list[list[int]]:
    shifts = torch.randint(0, length, (len(events),), generator=generator).tolist()
    return [
        sorted((t + s) % length for t in times) for times, s in zip(events, shifts, strict=True)
    ]


@dataclass(repr=False)
class DependentChanges(FolderResult):
    """Per head: its kind, its crossings of 0.5 (training steps) and its final probability;
    and the coincidence of the crossings against shifted ones (``p_value``: the share of
    shuffles whose coincidence is at least the observed one) and against crossings redrawn
    under the shared schedule (``schedule_mean``, ``schedule_p_value``; None in results saved
    before that null existed)."""

    _format: ClassVar[str] = "lens_heads.dependent_changes/1"

    model: str
    task: str
    heads: pd.DataFrame
    window_steps: int
    coincidence: float
    shuffled_mean: float
    p_value: float
    shuffles: int
    schedule_mean: float | None = None
    schedule_p_value: float | None = None

    def to_frame(self) -> pd.DataFrame:
        """The heads that crossed 0.5 at least once (``label, kind, crossings, steps, p``)."""
        return self.heads[self.heads["crossings"] > 0].reset_index(drop=True)

    def counts(self) -> dict[str, int]:
        """How many heads of each kind."""
        found = self.heads["kind"].value_counts()
        return {kind: int(found.get(kind, 0)) for kind in KINDS}

    def summary(self) -> dict[str, Any]:
        return {
            **self.counts(),
            "window (steps)": self.window_steps,
            "coincidence": round(self.coincidence, 3),
            "coincidence, shifted at random (mean)": round(self.shuffled_mean, 3),
            "p (crossings coincide more than at random)": self.p_value,
            "coincidence, same schedule (mean)": None
            if self.schedule_mean is None
            else round(self.schedule_mean, 3),
            "p (crossings coincide more than under the shared schedule)": self.schedule_p_value,
        }

    def to_markdown(self) -> str:
        return (
            f"**dependent changes** in the {self.task} mask of **{self.model}**\n\n"
            + markdown_table(pd.DataFrame([self.summary()]), floatfmt=".3g", index=False)
            + "\n\n"
            + markdown_table(self.to_frame(), floatfmt=".3f", index=False)
            + "\n"
        )

    def plot(self) -> Any:
        """When each head crossed 0.5: one marker per crossing, coloured by the head's kind."""
        import plotly.graph_objects as go

        figure = go.Figure()
        for kind in KINDS[2:]:
            rows = self.heads[self.heads["kind"] == kind]
            steps = [int(s) for text in rows["steps"] for s in str(text).split() if s]
            labels = [label for label, text in zip(rows["label"], rows["steps"], strict=True)
                      for s in str(text).split() if s]  # fmt: skip
            figure.add_scatter(x=steps, y=labels, mode="markers", name=kind)
        figure.update_layout(
            title=f"crossings of 0.5 during training ({self.task}, {self.model})",
            xaxis_title="training step",
            yaxis_title="head",
            template="plotly_white",
        )
        return figure

    def _to_saved(self) -> tuple[dict[str, Any], dict[str, Any]]:
        meta = {key: getattr(self, key) for key in (
            "model", "task", "window_steps", "coincidence", "shuffled_mean", "p_value", "shuffles",
            "schedule_mean", "schedule_p_value",
        )}  # fmt: skip
        meta["heads"] = self.heads.to_dict(orient="list")
        return meta, {}

    @classmethod
    def _from_saved(cls, meta: dict[str, Any], tensors: dict[str, Any]) -> DependentChanges:
        return cls(heads=pd.DataFrame(meta.pop("heads")), **meta)


def dependent_changes(
    result: MaskTrainingResult, *, window: int | None = None, shuffles: int = 1000, seed: int = 0
) -> DependentChanges:
    """The dependent changes of a trained mask's trajectory; ``window`` (samples; default 2 %
    of the samples, at least 1) is how close two crossings must be to coincide."""
    trajectory: Tensor = result.trajectory  # [sample, layer, head]
    steps = list(result.trajectory_steps)
    above = (trajectory >= 0.5).flatten(1)  # [sample, head]
    n_samples, n_heads = above.shape
    per_layer = trajectory.shape[2]
    window = window if window is not None else max(1, round(0.02 * n_samples))
    events, rows = [], []
    for index in range(n_heads):
        changes = (above[1:, index] != above[:-1, index]).nonzero().flatten() + 1
        times = changes.tolist()
        events.append(times)
        rows.append(
            {
                "label": format_head(index // per_layer, index % per_layer),
                "kind": _kind(bool(above[0, index]), bool(above[-1, index]), len(times)),
                "crossings": len(times),
                "steps": " ".join(str(steps[t]) for t in times),
                "p": float(trajectory[-1].flatten()[index]),
            }
        )
    observed = coincidence(events, window)
    generator = torch.Generator().manual_seed(seed)
    shuffled = [
        coincidence(_shifted(events, n_samples, generator), window) for _ in range(shuffles)
    ]
    at_least = sum(value >= observed for value in shuffled)
    pool = torch.tensor([t for times in events for t in times], dtype=torch.long)
    # the schedule moves on the scale of the whole run, a coincidence on the scale of the window
    spread = max(2 * window + 1, round(SCHEDULE_SPREAD * n_samples))
    redrawn = [
        coincidence(_resampled(events, pool, spread, n_samples, generator), window)
        if len(pool)
        else 0.0
        for _ in range(shuffles)
    ]
    schedule_at_least = sum(value >= observed for value in redrawn)
    step_size = (steps[-1] - steps[0]) / max(1, n_samples - 1)
    return DependentChanges(
        model=result.model,
        task=result.task,
        heads=pd.DataFrame(rows),
        window_steps=round(window * step_size),
        coincidence=observed,
        shuffled_mean=sum(shuffled) / len(shuffled) if shuffled else 0.0,
        p_value=(at_least + 1) / (len(shuffled) + 1),
        shuffles=shuffles,
        schedule_mean=sum(redrawn) / len(redrawn) if redrawn else 0.0,
        schedule_p_value=(schedule_at_least + 1) / (len(redrawn) + 1),
    )
