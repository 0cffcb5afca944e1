"""LAHIS experiment (c): a soft mask on a language's top heads against no mask and against soft
masks on random heads of the same size, each trained on the same translation examples
(:func:`lens_heads.train_mask` with ``TrainingConfig(soft=True, trainable=heads)``) and
evaluated on the same held-out sentences (:func:`lens_heads.engine.evaluation`).

>>> from lens_heads.lahis.soft_mask_experiment import SoftMaskExperiment
>>> result = SoftMaskExperiment.example()
>>> result.to_frame()["answer CE (paper: PPL)"].round(2).tolist()
[3.0, 2.5, 2.95]
>>> result.top_heads, result.random_heads
(['L1H0'], [['L0H1'], ['L1H1']])
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import torch
from jaxtyping import Float
from torch import Tensor

from lens_heads.core.checks import check_int
from lens_heads.core.masks import MaskShapeError, format_head, parse_head
from lens_heads.core.models import ModelLike, head_shape, model_name
from lens_heads.core.scales import HeadScale
from lens_heads.core.storage import FolderResult, check_settings, record_settings
from lens_heads.core.tables import mean_std_table
from lens_heads.core.tasks import Task, get_task
from lens_heads.engine import (
    METRICS,
    EvaluationResult,
    MaskTrainingResult,
    TrainingConfig,
    evaluate,
    train_mask,
)
from lens_heads.lahis.importance import HeadImportance
from lens_heads.lahis.languages import LanguageHeads

__all__ = [
    "SoftMaskExperiment",
    "random_heads",
    "soft_mask_config",
    "soft_mask_experiment",
    "top_heads",
]

#: Condition keys, in table order, with their row labels.
CONDITIONS: dict[str, str] = {
    "none": "no mask",
    "top": "soft mask, top heads",
    "random": "soft mask, random heads",
}
_PLAN = "plan.json"
_OUTPUT_COLUMNS = ("index", "input", "answer", "prediction", "answer_ce")


def soft_mask_config(**overrides: Any) -> TrainingConfig:
    """The experiment's default schedule: soft multipliers from 1, AdamW at a constant
    ``lr=1e-2`` (no warm-up, no decay, no weight decay), batch 8. ``steps`` is a placeholder:
    :func:`soft_mask_experiment` sets it from ``epochs`` (2 epochs of 200 examples at batch 8 =
    50 steps); ``overrides`` replace single fields.

    >>> config = soft_mask_config()
    >>> config.soft, config.lr, config.min_lr, config.batch_size
    (True, 0.01, 0.01, 8)
    """
    values: dict[str, Any] = {
        "soft": True,
        "lr": 1e-2,
        "min_lr": 1e-2,
        "warmup_fraction": 0.0,
        "batch_size": 8,
        "steps": 50,
        "n_eval": 0,
    }
    values.update(overrides)
    if "lr" in overrides and "min_lr" not in overrides:
        values["min_lr"] = values["lr"]  # keep the rate constant
    return TrainingConfig(**values)


# -- the head sets ------------------------------------------------------------------------------
def _n_top(fraction: float, n_total: int) -> int:
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)):
        raise ValueError(f"fraction must be a number in (0, 1], got {fraction!r}")
    if not 0 < fraction <= 1:
        raise ValueError(
            f"fraction must lie in (0, 1] (0.02 = the top 2 % of heads, LAHIS's), got {fraction}"
        )
    return max(1, round(fraction * n_total))


def top_heads(
    ranking: HeadImportance | LanguageHeads | Sequence[str],
    shape: tuple[int, int],
    fraction: float = 0.02,
    *,
    language: str | None = None,
) -> list[str]:
    """The top ``fraction`` of all ``n_layers * n_heads`` heads (at least one) of a ranking:
    a :class:`HeadImportance`, ``language``'s scores in a :class:`LanguageHeads`, or head labels
    ordered most important first.

    >>> top_heads(["L1H1", "L0H0", "L0H1", "L1H0"], (2, 2), 0.5)
    ['L1H1', 'L0H0']
    """
    n_layers, n_heads = shape
    k = _n_top(fraction, n_layers * n_heads)
    if isinstance(ranking, (HeadImportance, LanguageHeads)):
        if ranking.shape != shape:
            raise MaskShapeError(
                f"this ranking is for a {ranking.shape[0]}x{ranking.shape[1]} model "
                f"({ranking.model}), not {n_layers}x{n_heads}; compute it for this model"
            )
        if isinstance(ranking, HeadImportance):
            return ranking.ranking()[:k]
        if language is None or language not in ranking.languages:
            raise ValueError(
                f"language heads rank heads per language: pass language= one of "
                f"{ranking.languages} (got {language!r})"
            )
        return ranking.ranking(language)[:k]
    if isinstance(ranking, str):
        raise ValueError("ranking must be a list of head labels like ['L3H7'], not one string")
    labels = [format_head(*parse_head(label, n_layers, n_heads)) for label in ranking]
    if len(set(labels)) != len(labels):
        raise ValueError(f"the ranking names a head twice: {labels}")
    if len(labels) < k:
        raise ValueError(
            f"the ranking has {len(labels)} heads but the top {fraction:g} of {n_layers * n_heads} "
            f"heads is {k}; give a longer ranking or a smaller fraction"
        )
    return labels[:k]


def random_heads(exclude: Sequence[str], shape: tuple[int, int], k: int, seed: int) -> list[str]:
    """``k`` heads drawn uniformly (``torch.Generator`` seeded with ``seed``) from the heads not
    in ``exclude``, in layer-major order.

    >>> random_heads(["L0H0"], (2, 2), 2, seed=0) == random_heads(["L0H0"], (2, 2), 2, seed=0)
    True
    """
    n_layers, n_heads = shape
    excluded = {parse_head(label, n_layers, n_heads) for label in exclude}
    candidates = [
        (layer, head)
        for layer in range(n_layers)
        for head in range(n_heads)
        if (layer, head) not in excluded
    ]
    if k > len(candidates):
        raise ValueError(
            f"cannot draw {k} random heads outside the {len(excluded)} top heads: only "
            f"{len(candidates)} heads remain; use a smaller fraction"
        )
    generator = torch.Generator().manual_seed(int(seed))
    chosen = sorted(torch.randperm(len(candidates), generator=generator)[:k].tolist())
    return [format_head(*candidates[i]) for i in chosen]


# -- the result ---------------------------------------------------------------------------------
@dataclass
class SoftMaskExperiment(FolderResult):
    """No mask / a soft mask on the top heads / soft masks on random heads (one per seed),
    evaluated on the same held-out examples.

    ``runs`` has one row per (condition, seed) with the trained ``heads`` and their
    ``multipliers``, the mean training loss of the first and last epoch and every metric the
    evaluator reported (:data:`lens_heads.engine.evaluation.METRICS` keys: ``answer_ce``, ``chrf``,
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
        """The metric keys the runs have, in :data:`~lens_heads.engine.evaluation.METRICS` order."""
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
        (column names of :data:`~lens_heads.engine.evaluation.METRICS`); random heads show the mean over
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


# -- the experiment -----------------------------------------------------------------------------


def _split(task: Task, n_train: int, n_eval: int, split_seed: int | None) -> tuple[Task, Task]:
    """``(pool, held_out)``: the task's training split and its last ``n_eval`` examples."""
    if len(task) < 2 * n_eval or len(task) - n_eval < n_train:
        raise ValueError(
            f"task {task.name!r} has {len(task)} examples: too few for n_eval={n_eval} held-out "
            f"and n_train={n_train} training examples (it needs max(n_train + n_eval, "
            f"2 * n_eval) = {max(n_train + n_eval, 2 * n_eval)}); lower n_train or n_eval, or "
            "give more examples"
        )
    return task.split(n_eval=n_eval, seed=split_seed)


def _check_plan(folder: Path, plan: dict[str, Any]) -> None:
    """Write ``plan.json``, or check that the one already there is this experiment's."""
    record_settings(
        folder / _PLAN,
        plan,
        what="a soft-mask experiment",
        remedy="resume with the same arguments, or choose another out folder",
    )


def _epoch_losses(history: pd.DataFrame, per_epoch: int) -> tuple[float, float]:
    losses = history["loss"].astype(float).tolist()
    if not losses:
        return math.nan, math.nan
    first = losses[:per_epoch]
    last = losses[-per_epoch:]
    return sum(first) / len(first), sum(last) / len(last)


def soft_mask_experiment(
    model: ModelLike,
    task: Task | str | os.PathLike[str],
    ranking: HeadImportance | LanguageHeads | Sequence[str],
    *,
    language: str | None = None,
    fraction: float = 0.02,
    n_random_seeds: int = 2,
    config: TrainingConfig | None = None,
    n_train: int = 200,
    epochs: int | None = 2,
    n_eval: int = 20,
    split_seed: int | None = None,
    eval_batch_size: int = 16,
    max_new_tokens: int | None = None,
    out: str | os.PathLike[str] | None = None,
    progress: bool = True,
) -> SoftMaskExperiment:
    """LAHIS's soft-mask experiment: train a soft mask on the top ``fraction`` of heads of
    ``ranking`` (at least one head) and, for each of ``n_random_seeds`` seeds (0, 1, ...), one on
    as many random heads drawn outside that top set, all on the same ``n_train`` training
    examples of ``task``; then evaluate no mask and every trained mask on the same ``n_eval``
    held-out examples (greedy, the first line scored: answer CE, and chrF++/BLEU/ROUGE-L for a
    translation task).

    ``ranking``: a :class:`HeadImportance`, a :class:`LanguageHeads` (``language``'s ranking;
    default: the task's target language) or head labels ordered most important first.
    ``config`` is a soft :class:`TrainingConfig` (default :func:`soft_mask_config`: AdamW at a
    constant lr 1e-2, batch 8); the experiment sets its ``trainable`` heads per condition,
    ``n_eval=0`` (it holds the examples out itself) and, with ``epochs``, ``steps = epochs *
    (n_train // batch_size)`` -- the paper's "2 epochs of 200 examples" is 50 steps at batch 8.
    ``config.shots``, ``chat`` and ``separator`` shape the training and the evaluation prompts.

    With ``out`` every piece is saved as it is done and reused by a later call with the same
    arguments: ``out/none``, ``out/top`` and ``out/random-<seed>`` hold each condition's
    training (``MaskTrainingResult``; a finished one is loaded, not retrained; an interrupted
    one resumes from its checkpoint) and ``evaluation``; the result itself is saved to ``out``.

    >>> import lens_heads as lh
    >>> from lens_heads.lahis.languages import load_texts_by_language
    >>> model = lh.load_model("gemma-3-270m")  # doctest: +SKIP
    >>> french = load_texts_by_language()["fr"][:32]  # not the held-out last 20
    >>> importance = lh.head_importance(model, french)  # doctest: +SKIP
    >>> result = soft_mask_experiment(model, "en-fr", importance, out="runs/soft")  # doctest: +SKIP
    >>> result.to_frame()  # doctest: +SKIP
    """
    task = task if isinstance(task, Task) else get_task(task)
    shape = head_shape(model)
    check_int("n_random_seeds", n_random_seeds, minimum=1)
    check_int("n_train", n_train, minimum=1)
    check_int("n_eval", n_eval, minimum=1)
    if epochs is not None:
        check_int("epochs", epochs, minimum=1)
    base = soft_mask_config() if config is None else config
    if not base.soft:
        raise ValueError(
            "the experiment trains soft masks: pass a config with soft=True (soft_mask_config())"
        )
    if base.trainable is not None:
        raise ValueError(
            "the experiment chooses the trainable heads itself: leave config.trainable None"
        )
    if n_train < base.batch_size:
        raise ValueError(
            f"n_train={n_train} is smaller than the batch size {base.batch_size}: no full batch "
            "to train on; raise n_train or lower config.batch_size"
        )
    per_epoch = n_train // base.batch_size
    steps = base.steps if epochs is None else epochs * per_epoch
    base = replace(base, steps=steps, n_eval=0, split_seed=None)
    language = language or task.target_lang
    top = top_heads(ranking, shape, fraction, language=language)
    seeds = list(range(n_random_seeds))
    randoms = [random_heads(top, shape, len(top), seed) for seed in seeds]
    pool, held_out = _split(task, n_train, n_eval, split_seed)
    train = replace(pool.head(n_train), name=f"{task.name}:train{n_train}")
    # evaluate() holds out the last n_eval examples: the pool (demonstrations) then the held-out
    evaluation_task = replace(task, examples=pool.examples + held_out.examples)
    evaluation_args: dict[str, Any] = {
        "n_eval": len(held_out),
        "batch_size": eval_batch_size,
        "chat": base.chat,
        "shots": base.shots,
        "separator": base.separator,
        "max_new_tokens": max_new_tokens,
        "progress": progress,
    }

    folder = None if out is None else Path(out)
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        plan = {
            "model": model_name(model),
            "shape": list(shape),
            "task": task.name,
            "task_fingerprint": task.fingerprint(),
            "language": language,
            "fraction": fraction,
            "top_heads": top,
            "random_seeds": seeds,
            "random_heads": randoms,
            "n_train": n_train,
            "n_eval": n_eval,
            "split_seed": split_seed,
            "max_new_tokens": max_new_tokens,
            "config": base.to_dict(),
        }
        _check_plan(folder, plan)

    def trained(name: str, heads: list[str]) -> MaskTrainingResult:
        config = replace(base, trainable=tuple(heads))
        place = None if folder is None else folder / name
        if place is not None and (place / "training.json").is_file():
            done = MaskTrainingResult.load(place)
            check_settings(
                {"trainable": done.config.trainable, "steps": done.config.steps},
                {"trainable": config.trainable, "steps": config.steps},
                where=place,
                what="a soft mask",
                remedy="delete it or choose another out folder",
            )
            return done
        result = train_mask(
            model,
            train,
            config,
            checkpoint_dir=None if place is None else place / "checkpoints",
            resume=place is not None,
            progress=progress,
        )
        if place is not None:
            result.save(place)
        return result

    def evaluated(name: str, mask: HeadScale | None) -> EvaluationResult:
        place = None if folder is None else folder / name / "evaluation"
        if place is not None and (place / "result.json").is_file():
            return EvaluationResult.load(place)
        setting = "original" if mask is None else "mask"
        result = evaluate(model, evaluation_task, [setting], mask=mask, **evaluation_args)
        if place is not None:
            result.save(place)
        return result

    plan_runs: list[tuple[str, str, int, list[str]]] = [("none", "none", -1, [])]
    plan_runs.append(("top", "top", -1, top))
    for seed, heads in zip(seeds, randoms, strict=True):
        plan_runs.append(("random", f"random-{seed}", seed, heads))
    rows, outputs, histories, multipliers, names = [], [], [], [], []
    for condition, name, seed, heads in plan_runs:
        row: dict[str, Any] = {
            "condition": condition,
            "seed": seed,
            "n_heads": len(heads),
            "heads": " ".join(heads),
            "multipliers": "",
        }
        mask = None
        if heads:
            training = trained(name, heads)
            mask = training.mask
            assert isinstance(mask, HeadScale)
            values = mask.values
            row["multipliers"] = " ".join(
                f"{label}={float(values[parse_head(label)]):.4g}" for label in heads
            )
            row["train_loss_first_epoch"], row["train_loss_last_epoch"] = _epoch_losses(
                training.history, per_epoch
            )
            row["train_seconds"] = float(training.timing.get("seconds", math.nan))
            multipliers.append(values.float())
            names.append(name)
            history = training.history[["step", "loss"]].copy()
            history.insert(0, "mask", name)
            histories.append(history)
        evaluation = evaluated(name, mask)
        run = evaluation.runs.iloc[0]
        row.update({metric: float(run[metric]) for metric in evaluation.metrics})
        rows.append(row)
        records = evaluation.records[list(_OUTPUT_COLUMNS)]
        outputs.append(records.assign(condition=condition, seed=seed))

    output_frame = pd.concat(outputs, ignore_index=True)
    output_frame = output_frame[["condition", "seed", *_OUTPUT_COLUMNS]]
    notes = []
    if len(top) == 1:
        notes.append(
            f"the top {fraction:g} of {shape[0] * shape[1]} heads is a single head; pass a larger "
            "fraction to train more"
        )
    result = SoftMaskExperiment(
        runs=pd.DataFrame(rows),
        multipliers=torch.stack(multipliers),
        mask_names=names,
        model=model_name(model),
        task=task.name,
        language=language,
        fraction=float(fraction),
        top_heads=top,
        random_heads=randoms,
        random_seeds=seeds,
        n_train=n_train,
        n_eval=len(held_out),
        config={k: v for k, v in base.to_dict().items() if k != "trainable"},
        outputs=output_frame,
        history=pd.concat(histories, ignore_index=True),
        notes=notes,
    )
    if folder is not None:
        result.save(folder)
    return result
