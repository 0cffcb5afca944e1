"""Scaled masks (Heads up! §5, Figure 6 and Table 8): the heads a mask removes are scaled by
``alpha`` instead, from removed (``alpha = 0``, the hard mask M) to the full model (``alpha =
1``), and the task is evaluated with its instruction at each ``alpha``.

* :func:`alpha_curve` -- answer CE, accuracy, exact match (and BLEU/chrF++ for sentence tasks)
  per alpha with the instruction, plus the un-instructed masked point (``alpha = 0``, no
  instruction) that Figure 6 draws as a reference line; all alphas of one prompt set are
  decoded in one batched pass with one per-example mask per row.
* :func:`table8` -- instructed original vs instructed with M vs instructed with the best
  ``alpha`` M, the best ``alpha`` chosen on examples other than the held-out ones it reports.

>>> import lens_heads as lh
>>> from lens_heads.core._tasks import Example, Task
>>> model = lh.tiny_model(n_layers=2, n_heads=4)
>>> task = Task("upper", tuple(Example(w, w.upper()) for w in "abcdefgh"), instruction="Upper.")
>>> mask = lh.HeadMask.from_heads(["L0H1", "L1H2"], n_layers=2, n_heads=4)
>>> curve = alpha_curve(model, task, mask, alphas=(0, 0.5, 1), n_eval=4, progress=False)
>>> curve.alphas, curve.best_alpha in curve.alphas
([0.0, 0.5, 1.0], True)
>>> curve.to_frame()["setting"].tolist()
['w/ M + instruction', 'w/ 0.5M + instruction', 'w/ instruction', 'w/ M']
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from lens_heads.core import (
    HeadMask,
    InputError,
    MaskSource,
    Task,
    configure,
    get_task,
    markdown_table,
    resolve_mask,
    write_atomic,
)
from lens_heads.core.internal import (
    FolderResult,
    ModelLike,
    UnknownNameError,
    check_int,
    model_name,
)
from lens_heads.engine import (
    METRICS,
    TRANSLATION_METRICS,
    WORD_METRICS,
    EvaluationConfig,
    EvaluationRun,
    mask_info,
    run_plan,
)

__all__ = ["DEFAULT_ALPHAS", "AlphaCurve", "alpha_curve", "check_alphas", "table8"]

#: The alphas of Figure 6: 0, 0.1, ..., 1.
DEFAULT_ALPHAS: tuple[float, ...] = tuple(round(0.1 * i, 1) for i in range(11))

#: The columns of Table 8 (metric keys of :data:`lens_heads.engine.METRICS`).
TABLE8_METRICS = ("answer_ce", "accuracy", "exact_match")


def _label(alpha: float, instructed: bool) -> str:
    """The row label of a run: ``w/ instruction`` (alpha 1: the full model), ``w/ M +
    instruction`` (alpha 0), ``w/ 0.3M + instruction``; without instruction ``w/ M`` ..."""
    if alpha == 1:
        return "w/ instruction" if instructed else "Original"
    scaled = "M" if alpha == 0 else f"{alpha:g}M"
    return f"w/ {scaled}" + (" + instruction" if instructed else "")


def check_alphas(alphas: Any, *, binary: bool = True) -> list[float]:
    """The alphas as floats in [0, 1], each once; clear errors otherwise (before any compute).

    >>> check_alphas((0, 0.5, 1))
    [0.0, 0.5, 1.0]
    """
    if isinstance(alphas, (int, float)):
        alphas = [alphas]
    values = list(alphas)
    if not values:
        raise InputError("alphas is empty; give at least one value in [0, 1], e.g. (0, 0.5, 1)")
    checked = []
    for alpha in values:
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
            raise InputError(f"alpha must be a number in [0, 1], got {alpha!r}")
        if not math.isfinite(alpha) or not 0 <= alpha <= 1:
            kind = "0/1 mask" if binary else "mask"
            raise InputError(
                f"alpha {alpha} is outside [0, 1]: for a {kind}, alpha scales the heads it "
                "removes, from removed (0) to the full model (1). Scales above 1 (or any "
                "per-head factor) belong to lh.HeadScale (lens_heads/core/_scales.py): e.g. "
                "lh.HeadScale.ones(model).scaled(['L3H7'], 3.0), evaluated with "
                "lh.evaluate(model, task, ['mask'], mask=scale)"
            )
        checked.append(float(alpha))
    if len(set(checked)) != len(checked):
        raise InputError(f"alphas repeat: {values}; give each value once")
    return checked


def _check_mask(mask: Any, model: ModelLike) -> HeadMask:
    from lens_heads.core import HeadScale

    if mask is None:
        raise InputError("alpha_curve needs the trained mask M: pass a HeadMask or a mask file")
    if isinstance(mask, HeadScale):
        raise InputError(
            "alpha_curve scales the heads a HeadMask removes; a HeadScale has its own factors "
            "and no alpha: evaluate it directly with lh.evaluate(model, task, ['mask'], "
            "mask=scale)"
        )
    resolved = resolve_mask(mask, model)  # checks the shape against the model
    assert resolved is not None
    return resolved


# -- the result ----------------------------------------------------------------------------------
@dataclass(repr=False)
class AlphaCurve(FolderResult):
    """The task's metrics at each alpha (Figure 6), from :func:`alpha_curve`.

    ``runs`` has one row per evaluated run: ``setting`` (row label), ``alpha``, ``instructed``,
    ``heads`` (heads of M) and each metric key of :data:`lens_heads.engine.METRICS` that the
    task kind has; the curve's rows come first (in the order of the alphas asked for), then
    the un-instructed masked point (``alpha = 0``, ``instructed`` False) when it was
    evaluated. ``records`` has the evaluator's per-example rows of every run, with ``alpha``
    and ``instructed``.

    >>> curve = AlphaCurve.example()
    >>> curve.best_alpha, curve.uninstructed_ce
    (0.5, 0.9)
    >>> curve.table8_frame()["answer CE (paper: PPL)"].tolist()
    [2.0, 1.2, 1.1]
    """

    _format: ClassVar[str] = "lens_heads.alpha_curve/1"

    model: str
    task: str
    kind: str
    runs: pd.DataFrame
    records: pd.DataFrame = field(default_factory=pd.DataFrame)
    config: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        missing = [c for c in ("setting", "alpha", "instructed", "answer_ce") if c not in self.runs]
        if missing:
            raise InputError(f"runs lack the column(s) {missing}; they have {list(self.runs)}")

    @classmethod
    def example(cls) -> AlphaCurve:
        """A small hand-made curve (for documentation and tests)."""
        runs = pd.DataFrame(
            {
                "setting": [_label(0.0, True), _label(0.5, True), _label(1.0, True), "w/ M"],
                "alpha": [0.0, 0.5, 1.0, 0.0],
                "instructed": [True, True, True, False],
                "heads": [2, 2, 2, 2],
                "accuracy": [0.5, 0.75, 0.25, 1.0],
                "exact_match": [0.25, 0.5, 0.0, 0.75],
                "answer_ce": [1.2, 1.1, 2.0, 0.9],
            }
        )
        return cls("tiny", "upper", "word", runs, config={"n_eval": 4})

    # -- views --------------------------------------------------------------------------------
    @property
    def metrics(self) -> list[str]:
        """The metric keys the runs have, in :data:`lens_heads.engine.METRICS` order."""
        keys = TRANSLATION_METRICS if self.kind == "translation" else WORD_METRICS
        return [key for key in keys if key in self.runs.columns]

    @property
    def curve(self) -> pd.DataFrame:
        """The instructed runs (or, for an un-instructed curve, all runs), ascending alpha."""
        instructed = bool(self.config.get("instructed", True))
        rows = self.runs[self.runs["instructed"] == instructed]
        return rows.sort_values("alpha", kind="stable").reset_index(drop=True)

    @property
    def alphas(self) -> list[float]:
        return [float(alpha) for alpha in self.curve["alpha"]]

    @property
    def best_alpha(self) -> float:
        """The alpha with the lowest answer CE on the curve (the smallest such alpha on ties)."""
        curve = self.curve
        best = min(range(len(curve)), key=lambda i: (curve["answer_ce"][i], curve["alpha"][i]))
        return float(curve["alpha"][best])

    @property
    def uninstructed(self) -> pd.Series | None:
        """The metrics of the masked model without instruction (``alpha = 0``), if evaluated."""
        if not bool(self.config.get("instructed", True)):
            return None
        rows = self.runs[~self.runs["instructed"].astype(bool)]
        return None if rows.empty else rows.iloc[0]

    @property
    def uninstructed_ce(self) -> float | None:
        row = self.uninstructed
        return None if row is None else float(row["answer_ce"])

    def value(self, alpha: float | int, metric: str = "answer_ce") -> float:
        """One metric of the curve at ``alpha`` (e.g. ``curve.value(0.2, "accuracy")``)."""
        curve = self.curve
        rows = curve[curve["alpha"] == float(alpha)]
        if rows.empty:
            raise UnknownNameError(f"alpha {alpha} is not on this curve; it has {self.alphas}")
        if metric not in self.metrics:
            raise UnknownNameError(f"metric {metric!r} is not in this curve; it has {self.metrics}")
        return float(rows[metric].iloc[0])

    def to_frame(self) -> pd.DataFrame:
        """One row per run (the curve by ascending alpha, then the un-instructed point):
        ``setting, alpha, instruction, heads of M`` and each metric's column name of
        :data:`~lens_heads.engine.METRICS`."""
        frame = pd.concat([self.curve, self.runs[self.runs["instructed"] != self._instructed]])
        columns = ["setting", "alpha", "instructed", "heads", *self.metrics]
        frame = frame[[c for c in columns if c in frame.columns]].reset_index(drop=True)
        return frame.rename(columns={"instructed": "instruction", "heads": "heads of M", **METRICS})

    @property
    def _instructed(self) -> bool:
        return bool(self.config.get("instructed", True))

    def table8_frame(self, alpha: float | int | None = None) -> pd.DataFrame:
        """Table 8: the instructed full model (alpha 1), instructed with M (alpha 0) and
        instructed with the ``alpha`` M (default :attr:`best_alpha`), with answer CE,
        accuracy and exact match (and BLEU/chrF++ for sentence tasks); index: the settings.

        On a curve from :func:`table8` the alpha was chosen on other examples; on any other
        curve the best alpha is chosen on the same examples it reports (optimistic)."""
        if not self._instructed:
            raise InputError("Table 8 compares instructed runs; this curve has no instruction")
        chosen = self.config.get("best_alpha") if alpha is None else alpha
        chosen = self.best_alpha if chosen is None else float(chosen)
        missing = [a for a in (1.0, 0.0, chosen) if a not in self.alphas]
        if missing:
            raise InputError(
                f"Table 8 needs alphas 1, 0 and {chosen:g} on the curve; {missing} are missing "
                f"(it has {self.alphas}): use lens_heads.heads_up.table8(...)"
            )
        keys = [*TABLE8_METRICS, *(k for k in ("bleu", "chrf") if k in self.metrics)]
        rows = []
        for value, best in [(1.0, False), (0.0, False), (chosen, True)]:
            row = self.curve[self.curve["alpha"] == value].iloc[0]
            label = f"{_label(value, True)} (best alpha)" if best else str(row["setting"])
            entry: dict[str, Any] = {"setting": label, "alpha": value}
            entry.update({METRICS[k]: float(row[k]) for k in keys if k in row})
            rows.append(entry)
        return pd.DataFrame(rows).set_index("setting")

    def to_markdown(self, digits: int = 3, *, table8: bool = True) -> str:
        """The curve as a markdown table, then (with ``table8``, when the curve has alphas 0
        and 1 with the instruction) :meth:`table8_markdown`."""
        n = self.config.get("n_eval", "?")
        lines = [
            f"**{self.task}** on **{self.model}**: mask with {self._heads()} heads, the others "
            f"scaled by alpha ({n} held-out examples; answer CE = mean answer-token "
            "cross-entropy, the paper's 'PPL')",
            "",
            markdown_table(self.to_frame().set_index("setting"), floatfmt=f".{digits}f"),
            "",
            f"Lowest answer CE on this curve at alpha {self.best_alpha:g}.",
        ]
        if table8 and self._instructed and {0.0, 1.0} <= set(self.alphas):
            lines += ["", self.table8_markdown(digits=digits)]
        return "\n".join(lines) + "\n"

    def table8_markdown(self, alpha: float | int | None = None, *, digits: int = 3) -> str:
        """:meth:`table8_frame` as markdown, after a line saying how its alpha was chosen."""
        chosen = self.config.get("best_alpha") if alpha is None else alpha
        if chosen is None:
            how = f"alpha {self.best_alpha:g}: the lowest answer CE on these same examples"
        elif alpha is None:
            how = f"alpha {chosen:g}: {self.config.get('best_alpha_selection', 'given')}"
        else:
            how = f"alpha {chosen:g}: given"
        frame = self.table8_frame(alpha)
        return f"Table 8 ({how}):\n\n" + markdown_table(frame, floatfmt=f".{digits}f") + "\n"

    def _heads(self) -> str:
        total = self.config.get("total_heads")
        heads = int(self.runs["heads"].iloc[0]) if "heads" in self.runs else "?"
        return f"{heads}/{total}" if total else str(heads)

    def plot(self) -> Any:
        """Figure 6: answer CE (and accuracy, or BLEU for sentence tasks) against alpha with the
        instruction, the un-instructed masked point as a marker at alpha 0 and a dashed line,
        the best alpha starred."""
        from lens_heads.heads_up._figures import alpha_curve_figure

        second = "bleu" if "bleu" in self.metrics else "accuracy"
        point = self.uninstructed
        return alpha_curve_figure(
            self.curve,
            metrics={key: METRICS[key] for key in ("answer_ce", second) if key in self.metrics},
            reference=None if point is None else {k: float(point[k]) for k in self.metrics},
            reference_label=f"{_label(0.0, False)}, no instruction (alpha 0)",
            best_alpha=self.best_alpha,
            title=f"{self.task} on {self.model}: scaled mask ({self._heads()} heads kept)",
        )

    # -- io -----------------------------------------------------------------------------------
    def _to_saved(self) -> tuple[dict[str, Any], dict[str, Any]]:
        meta = {
            "model": self.model,
            "task": self.task,
            "kind": self.kind,
            "runs": self.runs.to_dict(orient="records"),
            "records": self.records.to_dict(orient="records"),
            "config": self.config,
        }
        return meta, {}

    @classmethod
    def _from_saved(cls, meta: dict[str, Any], tensors: dict[str, Any]) -> AlphaCurve:
        del tensors
        return cls(
            model=meta["model"],
            task=meta["task"],
            kind=meta["kind"],
            runs=pd.DataFrame(meta["runs"]),
            records=pd.DataFrame(meta["records"]),
            config=dict(meta["config"]),
        )

    def save(self, directory: str | os.PathLike[str], *, png: bool = False) -> list[Path]:
        """The result folder of :class:`~lens_heads.core._storage.FolderResult` (``table.csv``,
        ``table.md``, ``result.json``, ``figure.html``) plus ``records.csv``; atomically."""
        written = super().save(directory, png=png)
        records = self.records.to_csv(index=False)
        return [*written, write_atomic(Path(directory) / "records.csv", records)]


# -- the curve -----------------------------------------------------------------------------------
def _instruction_shape(
    instruction: str | bool | None, instructed: bool, what: str
) -> tuple[str | None, bool]:
    """``(instruction text or None for the task's own, instructed)``; a bool ``instruction``
    is the form before 0.2.0 (``True``: the task's own, ``False``: none), accepted with a
    :class:`DeprecationWarning`."""
    if isinstance(instruction, bool):
        warnings.warn(
            f"{what}: instruction={instruction} is now instructed={instruction} (instruction= "
            "takes the text, None: the task's own); the old form goes away in lens_heads 0.3.0",
            DeprecationWarning,
            stacklevel=3,
        )
        return None, instruction
    if instruction is not None and not isinstance(instruction, str):
        raise InputError(f"instruction must be a string or None, got {instruction!r}")
    return instruction, instructed


def _resolve_task(
    task: Task | str | os.PathLike[str], instruction: str | None, instructed: bool
) -> Task:
    task = task if isinstance(task, Task) else get_task(task)
    if instruction is not None:
        if not instruction.strip():
            raise InputError("instruction is an empty string; pass None for the task's own")
        task = replace(task, instruction=instruction)
    if instructed and not task.instruction:
        raise InputError(
            f"task {task.name!r} has no instruction; pass instruction='...' (or instructed="
            "False for an un-instructed curve)"
        )
    return task


def alpha_curve(
    model: ModelLike,
    task: Task | str | os.PathLike[str],
    mask: MaskSource,
    config: EvaluationConfig | None = None,
    *,
    alphas: Sequence[float | int] = DEFAULT_ALPHAS,
    instruction: str | bool | None = None,
    instructed: bool = True,
    uninstructed: bool = True,
    **overrides: Any,
) -> AlphaCurve:
    """Evaluate ``task`` on its last ``n_eval`` examples with ``mask`` scaled by each alpha.

    ``config`` (an :class:`~lens_heads.engine.EvaluationConfig`, its fields also as keywords:
    ``n_eval=40``) says how each alpha is evaluated; the alphas are always decoded stacked.

    At ``alpha`` the heads M keeps stay at x1 and the others are multiplied by ``alpha``
    (:meth:`HeadMask.with_alpha`; the mask's own alpha is ignored): ``alpha = 1`` is the full
    model, ``alpha = 0`` the hard mask. Each run is scored by :func:`lens_heads.evaluate`'s
    rules (greedy, the task's match rule; answer CE teacher forced; BLEU/chrF++ for sentence
    tasks), with an instruction (``instructed``, the default): the task's own, or the text
    ``instruction`` gives, as every function takes an instruction; ``instructed=False`` runs
    the curve without one. With ``uninstructed`` (and an instruction) the masked model without
    instruction at ``alpha = 0`` is evaluated too: Figure 6's reference point.

    All alphas are decoded together: a batch holds ``batch_size`` prompts (default 16) with
    every alpha, one per-example mask per row, and each alpha's shared prompt prefix runs once.
    The results are those of a loop of ``lh.evaluate`` calls, one per alpha: the same
    generations and scores, the answer CE to float rounding (a matrix product's sums may
    depend on how many rows its batch has).

    >>> import lens_heads as lh
    >>> model = lh.load_model("smollm2-135m-instruct")  # doctest: +SKIP
    >>> mask = lh.train_mask(model, "capitalize", lh.TrainingConfig.short()).mask  # doctest: +SKIP
    >>> curve = lh.alpha_curve(model, "capitalize", mask, n_eval=40)  # doctest: +SKIP
    >>> curve.best_alpha, curve.plot()  # doctest: +SKIP
    """
    config = replace(
        configure(EvaluationConfig, config, overrides, "alpha_curve"), stack_masks=True
    )
    instruction, instructed = _instruction_shape(instruction, instructed, "alpha_curve")
    task = _resolve_task(task, instruction, instructed)
    mask_ = _check_mask(mask, model)
    values = check_alphas(alphas, binary=mask_.is_binary)
    plan = [
        EvaluationRun(_label(a, instructed), -1, mask_.with_alpha(a), instructed) for a in values
    ]
    if uninstructed and instructed:
        plan.append(EvaluationRun(_label(0.0, False), -1, mask_.with_alpha(0.0), False))
    run_rows, record_rows, stored = run_plan(model, task, plan, config)
    runs = pd.DataFrame(run_rows).drop(columns=["seed"])
    runs.insert(1, "alpha", [_alpha_of(run) for run in plan])
    runs.insert(2, "instructed", [run.instructed for run in plan])
    records = pd.DataFrame(record_rows).drop(columns=["seed"])
    by_setting = {run.setting: run for run in plan}
    records.insert(1, "alpha", [_alpha_of(by_setting[s]) for s in records["setting"]])
    records.insert(2, "instructed", [by_setting[s].instructed for s in records["setting"]])
    n_layers, n_heads = mask_.shape
    stored.update(
        instructed=instructed,
        alphas=values,
        total_heads=n_layers * n_heads,
        mask=mask_info(mask, mask_),
    )
    return AlphaCurve(model_name(model), task.name, task.kind, runs, records, stored)


def _alpha_of(run: EvaluationRun) -> float:
    assert run.mask is not None
    return float(run.mask.alpha)


def table8(
    model: ModelLike,
    task: Task | str | os.PathLike[str],
    mask: MaskSource,
    config: EvaluationConfig | None = None,
    *,
    best_alpha: float | int | AlphaCurve | None = None,
    alphas: Sequence[float | int] = DEFAULT_ALPHAS,
    n_select: int | None = None,
    instruction: str | bool | None = None,
    **overrides: Any,
) -> AlphaCurve:
    """Heads up! Table 8 on the last ``n_eval`` (held-out) examples: instructed original
    (alpha 1) vs instructed with M (alpha 0) vs instructed with the best-alpha M, as an
    :class:`AlphaCurve` of those alphas; read it with :meth:`AlphaCurve.table8_frame` or
    :meth:`AlphaCurve.to_markdown`.

    ``best_alpha``: a number, a curve (its :attr:`AlphaCurve.best_alpha`), or None: then the
    alpha with the lowest instructed answer CE among ``alphas`` is chosen on the
    ``n_select`` examples (default ``n_eval``) just before the held-out ones, so that the
    reported examples played no part in the choice. ``instruction``: the text of every
    instructed run (None: the task's own). ``config`` (its fields also as keywords) is the
    :class:`~lens_heads.engine.EvaluationConfig` of every evaluation.

    >>> import lens_heads as lh
    >>> model = lh.load_model("smollm2-135m-instruct")  # doctest: +SKIP
    >>> table = table8(model, "capitalize", "runs/capitalize", n_eval=40)  # doctest: +SKIP
    >>> print(table.to_markdown())  # doctest: +SKIP
    """
    config = configure(EvaluationConfig, config, overrides, "table8")
    instruction, instructed = _instruction_shape(instruction, True, "table8")
    if not instructed:
        raise InputError("Table 8 compares instructed runs: give an instruction, or None")
    resolved = _resolve_task(task, instruction, True)
    mask_ = _check_mask(mask, model)
    n_eval = config.n_eval
    if isinstance(best_alpha, AlphaCurve):
        chosen = best_alpha.best_alpha
        selection = f"the lowest answer CE of a given curve ({best_alpha.task})"
    elif best_alpha is None:
        n_select = n_eval if n_select is None else check_int("n_select", n_select, minimum=1)
        rest, _ = resolved.split(n_eval=n_eval, seed=config.split_seed)
        select = alpha_curve(
            model,
            rest,
            mask_,
            alphas=alphas,
            instruction=instruction,
            uninstructed=False,
            config=replace(config, n_eval=n_select),
        )
        chosen = select.best_alpha
        n = select.config["n_eval"]
        selection = f"the lowest answer CE on the {n} examples before the held-out ones"
    else:
        chosen, selection = check_alphas([best_alpha], binary=mask_.is_binary)[0], "given"
    table_alphas = sorted({0.0, chosen, 1.0})
    result = alpha_curve(
        model,
        resolved,
        mask_,
        alphas=table_alphas,
        instruction=instruction,
        uninstructed=False,
        config=config,
    )
    result.config.update(best_alpha=chosen, best_alpha_selection=selection)
    return result
