"""The faithfulness of a head ranking, as the Mechanistic Interpretability Benchmark (MIB, Mueller
et al. 2025) measures circuits, at the level of attention heads.

For a circuit ``C`` of heads, every head outside it is ablated -- by default patched with its own
output ``z`` on the counterfactual prompt (MIB's setting), else set to its mean output or to
zero -- and the task metric ``m`` is the logit difference between the answer's first token and
the counterfactual answer's at the prompt's last position, averaged over the pairs. Then

    f(C) = (m(C) - m(empty)) / (m(all heads) - m(empty))

with ``empty`` every head ablated (MLPs and embeddings stay: the ranking is of heads only) -- a
ratio of means, not clipped. A ranking gives the circuits of its top ``k = int(s * n)`` heads for
MIB's sizes ``s`` (0.1 % to 100 % of the ``n`` heads); **CPR** is the area under ``f`` and
**CMD** the area between ``|1 - f|`` and 0, both by the trapezoid rule over the linear size
``s`` from 0.001 to 1, divided by that width (MIB leaves it at 0.999: a perfect circuit has
CPR 1 and CMD 0 here, 0.999 and 0 there). As in MIB, CPR ranks heads by their signed score and
CMD by its absolute value. Bootstrap intervals resample the pairs.
Beside MIB's linear weighting, **CPR log** and **CMD log** weight the same trapezoids by the
natural log of the sizes, divided by the log width (``ln 1 - ln 0.001``): every decade of sizes
counts alike, so the smallest circuits -- a sliver of the linear axis -- weigh as much as the
largest (:func:`area`). The removal curve (remove the top ``k``, keep the rest) is measured
beside it, and each size's circuits are stored, so that a circuit can be re-scored or exported.

>>> import torch, lens_heads as lh
>>> from lens_heads.finders._counterfactuals import counterfactual_pairs
>>> model = lh.tiny_model()
>>> pairs = counterfactual_pairs(model, "capitalize", n=4, n_eval=60)
>>> curve = faithfulness(model, pairs, torch.randn(2, 4), "random", sizes=(0.25, 0.5, 1.0))
>>> curve.counts, round(curve.f_signed[-1], 6)
([2, 4, 8], 1.0)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import torch
from jaxtyping import Float
from torch import Tensor

from lens_heads.core import InputError, answer_logits, head_shape, mask_hooks, pad_token_id
from lens_heads.core.internal import (
    AblationSetting,
    BatchSetting,
    BootstrapSetting,
    FolderResult,
    ModelLike,
    SeedSetting,
    head_outputs,
    mean_head_outputs,
    own_checks,
    right_padded,
)
from lens_heads.finders._counterfactuals import CounterfactualSet

__all__ = [
    "ABLATIONS",
    "SCALES",
    "SIZES",
    "CircuitSetting",
    "FaithfulnessConfig",
    "FaithfulnessCurve",
    "PairScorer",
    "area",
    "faithfulness",
    "head_counts",
]

#: MIB's circuit sizes, as fractions of the heads ranked
SIZES = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
#: what a head outside the circuit outputs
ABLATIONS = ("counterfactual", "mean", "zero")


@own_checks
@dataclass(frozen=True, kw_only=True)
class CircuitSetting(AblationSetting.with_defaults(ablation="counterfactual")):
    """The part of a settings class that measures circuits: their sizes, and what the heads left
    out of a circuit output.

    >>> CircuitSetting(sizes=(0.5, 0.1))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lens_heads.core._errors.InputError: sizes must be at least two increasing fractions ...
    """

    ALLOWED_ABLATIONS = ABLATIONS
    ABLATION_WHERE = "faithfulness"

    sizes: tuple[float, ...] = SIZES
    """Circuit sizes as fractions of the heads (MIB's: 0.1 % to 100 %)."""

    def __post_init__(self) -> None:
        try:
            sizes = tuple(float(s) for s in self.sizes)
        except (TypeError, ValueError):
            sizes = ()
        if len(sizes) < 2 or any(not 0 < s <= 1 for s in sizes) or list(sizes) != sorted(sizes):
            raise InputError(
                f"sizes must be at least two increasing fractions in (0, 1], got {self.sizes!r}"
            )
        object.__setattr__(self, "sizes", sizes)
        super().__post_init__()


@own_checks
@dataclass(frozen=True, kw_only=True)
class FaithfulnessConfig(
    CircuitSetting, BootstrapSetting, SeedSetting, BatchSetting.with_defaults(batch_size=64)
):
    """How a ranking's faithfulness is measured."""


def head_counts(sizes: Sequence[float], n_heads: int) -> list[int]:
    """The heads in each circuit: ``int(s * n)``, rounded down as MIB rounds.

    >>> head_counts(SIZES, 270)
    [0, 0, 1, 2, 5, 13, 27, 54, 135, 270]
    """
    return [int(size * n_heads + 1e-9) for size in sizes]


#: the weightings of the sizes :func:`area` knows
SCALES = ("linear", "log")


def area(sizes: Sequence[float], values: Sequence[float], scale: str = "linear") -> float:
    """The trapezoid area under ``values`` over the ``sizes``, divided by the width of the
    sizes, so that a curve at 1 everywhere has area 1: over the linear sizes (MIB's weighting;
    its width 0.999 for its sizes), or with ``scale="log"`` over their natural log (width
    ``ln 1 - ln 0.001``), where each decade of sizes weighs alike.

    MIB's own evaluation (``evaluate_area_under_curve`` in ``evaluate_graph.py`` of
    hannamw/MIB-circuit-track, until February 2025) has a ``log_scale`` flag that takes the log
    of a trapezoid's two sizes but then multiplies by the difference of the sizes themselves, so
    there the flag changes no number. The log weighting here is the one the flag's name
    describes (the code that replaced that file, ``MIB_circuit_track/evaluation.py``, uses the
    difference of the logs when the flag is on, undivided by their width, and leaves it off by
    default).

    >>> round(area(SIZES, [1.0] * len(SIZES)), 12), area((0.5, 0.75, 1.0), (0.0, 0.5, 1.0))
    (1.0, 0.5)
    >>> ones = [1.0] * len(SIZES)
    >>> round(area(SIZES, ones, "log"), 12), area((0.01, 0.1, 1.0), (0.0, 1.0, 1.0), "log")
    (1.0, 0.75)
    """
    if scale not in SCALES:
        raise InputError(f"scale must be one of {', '.join(SCALES)}, got {scale!r}")
    x, y = np.asarray(sizes, float), np.asarray(values, float)
    if scale == "log":
        if (x <= 0).any():
            raise InputError(
                f"a log-scaled area needs sizes above 0, got {x[x <= 0][0]:g} in {list(sizes)}"
            )
        x = np.log(x)
    return float(np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2) / (x[-1] - x[0]))


def top_heads(scores: Tensor, k: int) -> Tensor:
    """A ``[n_layers, n_heads]`` 0/1 mask of the ``k`` highest scores (ties: the first head in
    layer-major order first)."""
    flat = scores.flatten().float()
    order = torch.argsort(-flat, stable=True)
    keep = torch.zeros_like(flat)
    keep[order[:k]] = 1.0
    return keep.view_as(scores)


class PairScorer:
    """Measures ``m`` (the logit difference of each pair) under any set of head masks: each mask
    keeps its 1-heads and ablates its 0-heads to the configured baseline."""

    def __init__(self, model: ModelLike, pairs: CounterfactualSet, ablation: str, batch_size: int):
        self.model, self.pairs, self.ablation = model, pairs.pairs, ablation
        self.batch_size = batch_size
        self.pad = pad_token_id(model.tokenizer)
        self.shape = head_shape(model)
        self.mean = None
        if ablation == "mean":
            self.mean = mean_head_outputs(model, [p.tokens for p in self.pairs]).to(
                model.cfg.device
            )
        self.forwards = 0

    def baseline(self, chunk: Sequence[Any]) -> Tensor | None:
        """The ablation baseline of a chunk of pairs (right padded like their prompts)."""
        if self.ablation == "zero":
            return None
        if self.ablation == "mean":
            return self.mean
        batch, _ = right_padded([p.counterfactual_tokens for p in chunk], self.pad)
        self.forwards += len(chunk)
        return head_outputs(self.model, batch.to(self.model.cfg.device))

    @torch.no_grad()
    def metrics(
        self, masks: Float[Tensor, "n_masks n_layers n_heads"]
    ) -> Float[Tensor, "n_masks n_pairs"]:
        """``m`` of every pair under every mask."""
        device = self.model.cfg.device
        masks, inverse = torch.unique(masks.float(), dim=0, return_inverse=True)
        n_masks = masks.shape[0]  # each distinct mask once: sizes often repeat a count
        per_chunk = max(1, self.batch_size // max(1, n_masks))
        found = []
        for start in range(0, len(self.pairs), per_chunk):
            chunk = self.pairs[start : start + per_chunk]
            baseline = self.baseline(chunk)
            tokens, last = right_padded([p.tokens for p in chunk], self.pad)
            found.append(self._chunk(chunk, tokens, last, baseline, masks.to(device)))
        return torch.cat(found, dim=1)[inverse]

    def _chunk(
        self, chunk: Sequence[Any], tokens: Tensor, last: Tensor, baseline: Tensor | None,
        masks: Tensor,
    ) -> Tensor:  # fmt: skip
        device = self.model.cfg.device
        n_masks, rows = masks.shape[0], len(chunk)
        answers = torch.tensor([[p.answer, p.counterfactual_answer] for p in chunk])
        values = torch.empty(n_masks, rows)
        step = max(1, self.batch_size // rows)
        for first in range(0, n_masks, step):
            group = masks[first : first + step]
            m = group.shape[0]
            # rows: mask-major, then pair; one padding column so the last position predicts
            batch = torch.cat([tokens, torch.full((rows, 1), self.pad)], dim=1).repeat(m, 1)
            where = torch.zeros_like(batch, dtype=torch.bool)
            where[torch.arange(m * rows), last.repeat(m) + 1] = True
            factor = group.repeat_interleave(rows, dim=0)
            base = None
            if baseline is not None and baseline.ndim == 5:
                pad = torch.zeros_like(baseline[:, :1])
                base = torch.cat([baseline, pad], dim=1).repeat(m, 1, 1, 1, 1)
            elif baseline is not None:
                base = baseline
            hooks = mask_hooks(factor, self.model, baseline=base)
            logits = answer_logits(
                self.model, batch.to(device), where.to(device), hooks, partial=True
            ).float()
            pair = answers.repeat(m, 1).to(logits.device)
            picked = logits.gather(1, pair)
            values[first : first + m] = (picked[:, 0] - picked[:, 1]).view(m, rows).cpu()
            self.forwards += m * rows
        return values


@dataclass(repr=False)
class FaithfulnessCurve(FolderResult):
    """One ranking's faithfulness on one task: ``f_signed`` (circuits of the top heads by signed
    score, CPR's ranking) and ``f_absolute`` (by absolute score, CMD's) at ``sizes`` (``counts``
    heads each), the ``removal`` curve (faithfulness with the top ``k`` signed heads removed and
    the rest kept), ``m_full`` and ``m_empty``, the CPR and CMD (and ``cpr_log``, ``cmd_log``:
    over log-scaled sizes, :func:`area`) with their bootstrap intervals (``intervals``: ``"CPR"``,
    ``"CMD"``, ``"CPR log"``, ``"CMD log"``, the same resamples for all four), ``scores`` (the
    ranking, ``[n_layers, n_heads]``) and the circuits measured at each size."""

    method: str
    task: str
    sizes: list[float]
    counts: list[int]
    f_signed: list[float]
    f_absolute: list[float]
    removal: list[float]
    m_full: float
    m_empty: float
    cpr: float
    cmd: float
    intervals: dict[str, list[float]]
    scores: Tensor
    pair_metrics: Tensor
    """``m`` of every pair (columns) under every circuit measured (rows): all heads, none, the
    signed circuits, the absolute ones and the removals (for paired comparisons)."""
    settings: dict[str, Any] = field(default_factory=dict)
    kept: list[int] = field(default_factory=list)
    """Heads in each size's circuit: ``counts`` for a ranking's top heads, fewer where a method
    builds a smaller circuit within the budget (a calibrated one)."""
    fitted: list[float] = field(default_factory=list)
    """Where a method chose each circuit by its faithfulness on the training pairs (a
    calibrated one): that ``f``, beside this held-out one; else empty."""
    cpr_log: float = math.nan
    cmd_log: float = math.nan
    circuits: Tensor | None = None
    """The 0/1 circuits ``f_signed`` measured, ``[n_sizes, n_layers, n_heads]``: a ranking's top
    heads by signed score, or a method's own circuits (None: a curve saved before they were
    stored)."""
    circuits_absolute: Tensor | None = None
    """The circuits ``f_absolute`` measured (by absolute score; a method's own circuits again)."""

    _format: ClassVar[str] = "lens_heads.faithfulness_curve/1"

    @classmethod
    def _from_saved(cls, meta: dict[str, Any], tensors: dict[str, Any]) -> FaithfulnessCurve:
        # saved before the log weighting: its areas follow exactly from the per-pair metrics;
        # its intervals do not (the seed of its resamples was not recorded): missing (NaN)
        if "cpr_log" not in meta:
            areas = _areas(tensors["pair_metrics"], meta["sizes"])
            meta |= {"cpr_log": areas[2], "cmd_log": areas[3]}
            meta["intervals"] |= {"CPR log": [math.nan] * 2, "CMD log": [math.nan] * 2}
        return cls(**meta, **tensors)

    def resampled(self, index: Tensor) -> tuple[float, float, float, float]:
        """``(CPR, CMD, CPR log, CMD log)`` on the pairs ``index`` (a bootstrap resample)."""
        return _areas(self.pair_metrics[:, index], self.sizes)

    def bands(self) -> pd.DataFrame:
        """``f`` at each size (``curve``: ``"signed"``, ``"absolute"``, ``"removal"``) with its
        bootstrap band (``low``, ``high``: 2.5 and 97.5 % over resamples of the pairs, the ones
        the intervals drew where the curve records their seed)."""
        values = self.pair_metrics
        draws = _draws(values.shape[1], self.settings.get("bootstrap", 1000),
                       self.settings.get("seed", 0))  # fmt: skip
        means = values[:, torch.from_numpy(np.stack(draws))].mean(-1)  # [rows, resamples]
        boot = ((means[2:] - means[1]) / (means[0] - means[1])).numpy()
        n = len(self.sizes)
        return pd.DataFrame(
            {
                "curve": np.repeat(["signed", "absolute", "removal"], n),
                "size": self.sizes * 3,
                "f": [*self.f_signed, *self.f_absolute, *self.removal],
                "low": np.nanpercentile(boot, 2.5, axis=1),
                "high": np.nanpercentile(boot, 97.5, axis=1),
            }
        )

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "size": self.sizes,
                "heads": self.counts,
                "heads kept": self.kept or self.counts,
                "faithfulness (signed)": self.f_signed,
                "faithfulness (absolute)": self.f_absolute,
                "removal": self.removal,
            }
        )

    def to_markdown(self) -> str:
        from lens_heads.core import markdown_table

        values = {"CPR": self.cpr, "CMD": self.cmd, "CPR log": self.cpr_log}
        values["CMD log"] = self.cmd_log
        parts = [
            f"{name} {value:.3f} [{self.intervals[name][0]:.3f}, {self.intervals[name][1]:.3f}]"
            for name, value in values.items()
        ]
        head = f"{self.method} on {self.task}: " + ", ".join(parts)
        return head + "\n\n" + markdown_table(self.to_frame(), floatfmt=".3g", index=False)

    def plot(self) -> Any:
        """``f`` per size with its bootstrap band (:meth:`bands`), on a log axis of sizes."""
        import plotly.graph_objects as go

        figure = go.Figure()
        names = {"signed": "circuit (signed)", "absolute": "circuit (absolute)"}
        bands = self.bands()
        for index, (curve, rows) in enumerate(bands.groupby("curve", sort=False)):
            _band(figure, rows, names.get(curve, curve), index)
        figure.add_hline(y=1.0, line_dash="dot")
        return figure.update_layout(
            title={"text": f"Faithfulness of {self.method} on {self.task}"},
            xaxis={"title": {"text": "circuit size (share of heads)"}, "type": "log"},
            yaxis={"title": {"text": "faithfulness"}},
        )


def _f(values: Tensor, full: Tensor, empty: Tensor) -> Tensor:
    """Faithfulness of each row of per-pair metrics (a ratio of means over the pairs)."""
    return (values.mean(-1) - empty.mean(-1)) / (full.mean(-1) - empty.mean(-1))


def _band(figure: Any, rows: pd.DataFrame, name: str, index: int, **where: Any) -> None:
    """One curve of :meth:`FaithfulnessCurve.bands` rows: its line and its band, one color,
    one legend entry (``where``: the subplot)."""
    import plotly.express as px

    color = px.colors.qualitative.Plotly[index % len(px.colors.qualitative.Plotly)]
    red, green, blue = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    shared = {"x": rows["size"], "legendgroup": name, "hoverinfo": "skip", "showlegend": False}
    figure.add_scatter(y=rows["high"], mode="lines", line={"width": 0}, **shared, **where)
    figure.add_scatter(
        y=rows["low"], mode="lines", line={"width": 0}, fill="tonexty",
        fillcolor=f"rgba({red}, {green}, {blue}, 0.2)", **shared, **where,
    )  # fmt: skip
    figure.add_scatter(
        x=rows["size"], y=rows["f"], mode="lines+markers", name=name, legendgroup=name,
        line={"color": color}, showlegend=where.get("col", 1) == 1, **where,
    )  # fmt: skip


def _draws(n_pairs: int, bootstrap: int, seed: int) -> list[np.ndarray]:
    """The bootstrap resamples of the pairs (indices), in the order they are drawn."""
    rng = np.random.default_rng(seed)
    return [rng.integers(0, n_pairs, n_pairs) for _ in range(bootstrap)]


def _areas(values: Tensor, sizes: Sequence[float]) -> tuple[float, float, float, float]:
    """``(CPR, CMD, CPR log, CMD log)`` of the per-pair metrics ``values`` (rows as
    :class:`FaithfulnessCurve` stores them)."""
    n = len(sizes)
    full, empty = values[0], values[1]
    signed = _f(values[2 : 2 + n], full, empty).tolist()
    distance = (1.0 - _f(values[2 + n : 2 + 2 * n], full, empty)).abs().tolist()
    cpr, cmd = area(sizes, signed), area(sizes, distance)
    return cpr, cmd, area(sizes, signed, "log"), area(sizes, distance, "log")


def faithfulness(
    model: ModelLike,
    pairs: CounterfactualSet,
    scores: Float[Tensor, "n_layers n_heads"],
    method: str,
    config: FaithfulnessConfig | None = None,
    *,
    scorer: PairScorer | None = None,
    circuits: Float[Tensor, "n_sizes n_layers n_heads"] | None = None,
    fitted: Sequence[float] | None = None,
    **overrides: Any,
) -> FaithfulnessCurve:
    """The faithfulness curve, CPR and CMD of ranking ``scores`` (higher: more important) on
    ``pairs``; see the module. ``circuits`` gives one mask per size instead of the ranking's top
    heads (a method that builds each circuit itself, e.g. a mask trained for each size), and
    ``fitted`` the ``f`` it chose them by on the training pairs (kept beside). ``scorer``
    reuses one :class:`PairScorer` (and its baselines) across rankings."""
    from lens_heads.core import configure

    config = configure(FaithfulnessConfig, config, overrides, "faithfulness")
    n_layers, n_heads = head_shape(model)
    if tuple(scores.shape) != (n_layers, n_heads):
        raise InputError(
            f"scores have shape {tuple(scores.shape)}, the model {n_layers}x{n_heads} heads"
        )
    scorer = scorer or PairScorer(model, pairs, config.ablation, config.batch_size)
    counts = head_counts(config.sizes, n_layers * n_heads)
    scores = scores.detach().float().cpu()
    signed = (
        circuits if circuits is not None else torch.stack([top_heads(scores, k) for k in counts])
    )
    absolute = (
        signed
        if circuits is not None
        else torch.stack([top_heads(scores.abs(), k) for k in counts])
    )  # a method's own circuits are its circuits for CPR and CMD alike
    removal = 1.0 - signed
    ends = torch.stack([torch.ones(n_layers, n_heads), torch.zeros(n_layers, n_heads)])
    values = scorer.metrics(torch.cat([ends, signed, absolute, removal]))
    full, empty = values[0], values[1]
    n = len(counts)
    parts = {"signed": values[2 : 2 + n], "absolute": values[2 + n : 2 + 2 * n]}
    parts["removal"] = values[2 + 2 * n :]
    curves = {name: _f(rows, full, empty) for name, rows in parts.items()}
    sizes = list(config.sizes)
    cpr, cmd, cpr_log, cmd_log = _areas(values, sizes)
    draws = _draws(full.shape[0], config.bootstrap, config.seed)
    boot = np.array([_areas(values[:, index], sizes) for index in draws])
    intervals = {
        name: [float(np.nanpercentile(boot[:, i], 2.5)), float(np.nanpercentile(boot[:, i], 97.5))]
        for i, name in enumerate(("CPR", "CMD", "CPR log", "CMD log"))
    }
    return FaithfulnessCurve(
        method=method,
        task=pairs.task,
        sizes=sizes,
        counts=counts,
        f_signed=curves["signed"].tolist(),
        f_absolute=curves["absolute"].tolist(),
        removal=curves["removal"].tolist(),
        m_full=float(full.mean()),
        m_empty=float(empty.mean()),
        cpr=cpr,
        cmd=cmd,
        intervals=intervals,
        scores=scores,
        pair_metrics=values,
        settings={"ablation": config.ablation, "pairs": len(pairs), "bootstrap": config.bootstrap}
        | {"seed": config.seed},  # the resamples' seed: the bands draw the same ones
        kept=[int(circuit.sum()) for circuit in absolute],
        fitted=[float(value) for value in fitted or []],
        cpr_log=cpr_log,
        cmd_log=cmd_log,
        circuits=signed.float().cpu(),
        circuits_absolute=absolute.float().cpu().clone(),  # its own copy, own circuits too
    )


def is_degenerate(curve: FaithfulnessCurve) -> bool:
    """Whether ``m(all heads)`` equals ``m(empty)``: faithfulness is then undefined (NaN)."""
    return math.isclose(curve.m_full, curve.m_empty, abs_tol=1e-9)
