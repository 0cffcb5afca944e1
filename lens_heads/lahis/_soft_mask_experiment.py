"""LAHIS experiment (c): a soft mask on a language's top heads against no mask and against soft
masks on random heads of the same size, each trained on the same translation examples
(:func:`lens_heads.train_mask` with ``TrainingConfig(soft=True, trainable=heads)``) and
evaluated on the same held-out sentences (:func:`lens_heads.evaluate`).

>>> top_heads(["L1H0", "L0H3", "L1H2"], (2, 4), fraction=0.25)
['L1H0', 'L0H3']
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
import torch
from torch import Tensor

from lens_heads.core import (
    Fingerprint,
    HeadScale,
    InputError,
    Task,
    claim_folder,
    configure,
    format_head,
    get_task,
    head_shape,
)
from lens_heads.core.internal import (
    BatchSetting,
    HeldOutSetting,
    MaskShapeError,
    ModelLike,
    NewTokensSetting,
    ProgressSetting,
    RandomControlsSetting,
    SplitSetting,
    check_int,
    model_name,
    own_checks,
    parse_head,
    seeds_from_count,
)
from lens_heads.engine import (
    EvaluationConfig,
    EvaluationResult,
    MaskTrainingResult,
    TrainingConfig,
    evaluate,
    train_mask,
    train_or_resume,
)
from lens_heads.lahis._importance import HeadImportance
from lens_heads.lahis._languages import LanguageHeads, load_texts_by_language
from lens_heads.lahis._soft_mask_result import SoftMaskExperiment

__all__ = [
    "SoftMaskConfig",
    "SoftMaskExperiment",
    "random_heads",
    "ranking_documents",
    "soft_mask_config",
    "soft_mask_experiment",
    "top_heads",
]

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
    _check_fraction(fraction)
    return max(1, round(fraction * n_total))


def _check_fraction(fraction: Any) -> None:
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)):
        raise InputError(f"fraction must be a number in (0, 1], got {fraction!r}")
    if not 0 < fraction <= 1:
        raise InputError(
            f"fraction must lie in (0, 1] (0.02 = the top 2 % of heads, LAHIS's), got {fraction}"
        )


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
            raise InputError(
                f"language heads rank heads per language: pass language= one of "
                f"{ranking.languages} (got {language!r})"
            )
        return ranking.ranking(language)[:k]
    if isinstance(ranking, str):
        raise InputError("ranking must be a list of head labels like ['L3H7'], not one string")
    labels = [format_head(*parse_head(label, n_layers, n_heads)) for label in ranking]
    if len(set(labels)) != len(labels):
        raise InputError(f"the ranking names a head twice: {labels}")
    if len(labels) < k:
        raise InputError(
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
        raise InputError(
            f"cannot draw {k} random heads outside the {len(excluded)} top heads: only "
            f"{len(candidates)} heads remain; use a smaller fraction"
        )
    generator = torch.Generator().manual_seed(int(seed))
    chosen = sorted(torch.randperm(len(candidates), generator=generator)[:k].tolist())
    return [format_head(*candidates[i]) for i in chosen]


def ranking_documents(
    task: Task,
    language: str | None = None,
    *,
    n_docs: int = 32,
    n_eval: int = 20,
    split_seed: int | None = None,
) -> list[str]:
    """The built-in corpus sentences to rank the heads of ``language`` (default: the task's
    target language) on: the first ``n_docs`` that are neither input nor answer of the task's
    ``n_eval`` held-out examples, so the ranking never sees what the experiment evaluates.

    >>> docs = ranking_documents(get_task("en-fr"), n_docs=4)
    >>> len(docs), docs[0] in get_task("en-fr").split(n_eval=20)[1].outputs
    (4, False)
    """
    language = language or task.target_lang
    corpus = load_texts_by_language()
    if language not in corpus:
        raise InputError(
            f"language {language!r} is not in the built-in corpus ({list(corpus)}); rank the "
            "heads on your own text (lens-heads importance, then --importance DIR)"
        )
    _, held_out = task.split(n_eval=n_eval, seed=split_seed)
    excluded = set(held_out.outputs) | set(held_out.inputs)
    return [text for text in corpus[language] if text not in excluded][:n_docs]


# -- the experiment -----------------------------------------------------------------------------


def _split(task: Task, n_train: int, n_eval: int, split_seed: int | None) -> tuple[Task, Task]:
    """``(pool, held_out)``: the task's training split and its last ``n_eval`` examples."""
    if len(task) < 2 * n_eval or len(task) - n_eval < n_train:
        raise InputError(
            f"task {task.name!r} has {len(task)} examples: too few for n_eval={n_eval} held-out "
            f"and n_train={n_train} training examples (it needs max(n_train + n_eval, "
            f"2 * n_eval) = {max(n_train + n_eval, 2 * n_eval)}); lower n_train or n_eval, or "
            "give more examples"
        )
    return task.split(n_eval=n_eval, seed=split_seed)


def _check_plan(folder: Path, model: ModelLike, task: Task, plan: dict[str, Any]) -> None:
    """Write ``plan.json``, or check that the one already there is this experiment's: the same
    model (weights, tokenizer), task examples and plan."""
    claim_folder(
        folder,
        Fingerprint.of(model, plan, {"task": task}),
        record=_PLAN,
        what="a soft-mask experiment",
        remedy="resume with the same model, task and arguments, or choose another out folder",
    )


def _epoch_losses(history: pd.DataFrame, per_epoch: int) -> tuple[float, float]:
    losses = history["loss"].astype(float).tolist()
    if not losses:
        return math.nan, math.nan
    first = losses[:per_epoch]
    last = losses[-per_epoch:]
    return sum(first) / len(first), sum(last) / len(last)


@own_checks  # __post_init__ checks every field: users and the tests see the same clear errors
@dataclass(frozen=True, kw_only=True)
class SoftMaskConfig(
    ProgressSetting,
    SplitSetting,
    RandomControlsSetting.with_defaults(random_seeds=(0, 1)),
    BatchSetting,
    HeldOutSetting.with_defaults(n_eval=20),
    NewTokensSetting,
):
    """The settings of :func:`soft_mask_experiment`."""

    fraction: float = 0.02
    """The share of heads trained: the top ``fraction`` of the ranking (at least one head)."""
    n_train: int = 200
    """Training examples (the same for every condition)."""
    epochs: int | None = 2
    """Passes over the training examples (None: the training config's own steps)."""
    training: TrainingConfig | None = None
    """The soft training schedule (default: soft_mask_config(); its trainable heads are set per
    condition)."""

    RENAMED: ClassVar[dict[str, str]] = {"eval_batch_size": "batch_size"}

    def __post_init__(self) -> None:
        super().__post_init__()  # the shared parts' checks
        _check_fraction(self.fraction)
        if not self.random_seeds:
            raise InputError("random_seeds is empty: the experiment needs at least one random mask")
        check_int("n_train", self.n_train, minimum=1)
        if self.epochs is not None:
            check_int("epochs", self.epochs, minimum=1)
        base = self.base()
        if not base.soft:
            raise InputError(
                "the experiment trains soft masks: pass a training config with soft=True "
                "(soft_mask_config())"
            )
        if base.trainable is not None:
            raise InputError(
                "the experiment chooses the trainable heads itself: leave training.trainable None"
            )
        if self.n_train < base.batch_size:
            raise InputError(
                f"n_train={self.n_train} is smaller than the batch size {base.batch_size}: no "
                "full batch to train on; raise n_train or lower training.batch_size"
            )

    def base(self) -> TrainingConfig:
        """The soft training config before the trainable heads are set."""
        return soft_mask_config() if self.training is None else self.training

    def check(self, task: Task) -> None:
        """The split against ``task``, without a model (the command line calls it first)."""
        _split(task, self.n_train, self.n_eval, self.split_seed)


def _old_options(options: dict[str, Any], config: Any) -> tuple[dict[str, Any], Any]:
    """Before 0.2.0 ``config`` was the training config and ``n_random_seeds=k`` the seeds
    ``0 .. k - 1``; both still work, with a :class:`DeprecationWarning`."""
    options = dict(options)
    if isinstance(config, TrainingConfig):
        warnings.warn(
            "soft_mask_experiment: config= is now the experiment's SoftMaskConfig; pass the "
            "training config as training=; the old use goes away in lens_heads 0.3.0",
            DeprecationWarning,
            stacklevel=3,
        )
        options["training"], config = config, None
    options = seeds_from_count(options, "soft_mask_experiment", "n_random_seeds", 2, first=None)
    return options, config


@dataclass
class _Runner:
    """Trains and evaluates one condition at a time, reusing what ``folder`` already holds."""

    model: ModelLike
    base: TrainingConfig
    train: Task
    evaluation_task: Task
    evaluation: EvaluationConfig
    per_epoch: int
    folder: Path | None
    rows: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[pd.DataFrame] = field(default_factory=list)
    histories: list[pd.DataFrame] = field(default_factory=list)
    multipliers: list[Tensor] = field(default_factory=list)
    names: list[str] = field(default_factory=list)

    def trained(self, name: str, heads: list[str]) -> MaskTrainingResult:
        config = replace(self.base, trainable=tuple(heads))
        if self.folder is None:
            return train_mask(self.model, self.train, config, progress=self.evaluation.progress)
        return train_or_resume(
            self.model,
            self.train,
            config,
            self.folder / name,
            progress=self.evaluation.progress,
            remedy="delete it or choose another out folder",
        )

    def evaluated(self, name: str, mask: HeadScale | None) -> EvaluationResult:
        place = None if self.folder is None else self.folder / name / "evaluation"
        if place is not None and (place / "result.json").is_file():
            return EvaluationResult.load(place)
        setting = "original" if mask is None else "mask"
        task = self.evaluation_task
        result = evaluate(self.model, task, [setting], mask=mask, config=self.evaluation)
        if place is not None:
            result.save(place)
        return result

    def run(self, condition: str, name: str, seed: int, heads: list[str]) -> None:
        """Train (when ``heads``) and evaluate one condition; append its row and outputs."""
        row: dict[str, Any] = {
            "condition": condition,
            "seed": seed,
            "n_heads": len(heads),
            "heads": " ".join(heads),
            "multipliers": "",
        }
        mask = None
        if heads:
            training = self.trained(name, heads)
            mask = training.mask
            assert isinstance(mask, HeadScale)
            values = mask.values
            row["multipliers"] = " ".join(
                f"{label}={float(values[parse_head(label)]):.4g}" for label in heads
            )
            row["train_loss_first_epoch"], row["train_loss_last_epoch"] = _epoch_losses(
                training.history, self.per_epoch
            )
            row["train_seconds"] = float(training.timing.get("seconds", math.nan))
            self.multipliers.append(values.float())
            self.names.append(name)
            history = training.history[["step", "loss"]].copy()
            history.insert(0, "mask", name)
            self.histories.append(history)
        evaluation = self.evaluated(name, mask)
        run = evaluation.runs.iloc[0]
        row.update({metric: float(run[metric]) for metric in evaluation.metrics})
        self.rows.append(row)
        records = evaluation.records[list(_OUTPUT_COLUMNS)]
        self.outputs.append(records.assign(condition=condition, seed=seed))


def soft_mask_experiment(
    model: ModelLike,
    task: Task | str | os.PathLike[str],
    ranking: HeadImportance | LanguageHeads | Sequence[str],
    config: SoftMaskConfig | None = None,
    *,
    language: str | None = None,
    out: str | os.PathLike[str] | None = None,
    **options: Any,
) -> SoftMaskExperiment:
    """LAHIS's soft-mask experiment: train a soft mask on the top ``fraction`` of heads of
    ``ranking`` (at least one head) and, for each seed of ``random_seeds``, one on as many
    random heads drawn outside that top set, all on the same ``n_train`` training
    examples of ``task``; then evaluate no mask and every trained mask on the same ``n_eval``
    held-out examples (greedy, the first line scored: answer CE, and chrF++/BLEU/ROUGE-L for a
    translation task).

    ``ranking``: a :class:`HeadImportance`, a :class:`LanguageHeads` (``language``'s ranking;
    default: the task's target language) or head labels ordered most important first.
    ``config`` (a :class:`SoftMaskConfig`; its fields also as keywords) holds the settings; its
    ``training`` is a soft :class:`TrainingConfig` (default :func:`soft_mask_config`: AdamW at a
    constant lr 1e-2, batch 8); the experiment sets its ``trainable`` heads per condition,
    ``n_eval=0`` (it holds the examples out itself) and, with ``epochs``, ``steps = epochs *
    (n_train // batch_size)`` -- the paper's "2 epochs of 200 examples" is 50 steps at batch 8.
    The training config's ``shots``, ``chat`` and ``separator`` shape the training and the
    evaluation prompts.

    With ``out`` every piece is saved as it is done and reused by a later call with the same
    arguments: ``out/none``, ``out/top`` and ``out/random-<seed>`` hold each condition's
    training (``MaskTrainingResult``; a finished one is loaded, not retrained; an interrupted
    one resumes from its checkpoint) and ``evaluation``; the result itself is saved to ``out``.

    >>> import lens_heads as lh
    >>> from lens_heads.lahis._languages import load_texts_by_language
    >>> model = lh.load_model("gemma-3-270m")  # doctest: +SKIP
    >>> french = load_texts_by_language()["fr"][:32]  # not the held-out last 20
    >>> importance = lh.head_importance(model, french)  # doctest: +SKIP
    >>> result = soft_mask_experiment(model, "en-fr", importance, out="runs/soft")  # doctest: +SKIP
    >>> result.to_frame()  # doctest: +SKIP
    """
    options, config = _old_options(options, config)
    config = configure(SoftMaskConfig, config, options, "soft_mask_experiment")
    task = task if isinstance(task, Task) else get_task(task)
    shape = head_shape(model)
    n_train, n_eval, fraction = config.n_train, config.n_eval, config.fraction
    base = config.base()
    per_epoch = n_train // base.batch_size
    steps = base.steps if config.epochs is None else config.epochs * per_epoch
    base = replace(base, steps=steps, n_eval=0, split_seed=None)
    language = language or task.target_lang
    top = top_heads(ranking, shape, fraction, language=language)
    seeds = list(config.random_seeds)
    randoms = [random_heads(top, shape, len(top), seed) for seed in seeds]
    pool, held_out = _split(task, n_train, n_eval, config.split_seed)
    runner = _Runner(
        model=model,
        base=base,
        train=replace(pool.head(n_train), name=f"{task.name}:train{n_train}"),
        # evaluate() holds out the last n_eval examples: the pool (demonstrations), the held-out
        evaluation_task=replace(task, examples=pool.examples + held_out.examples),
        evaluation=EvaluationConfig(
            n_eval=len(held_out),
            batch_size=config.batch_size,
            chat=base.chat,
            shots=base.shots,
            separator=base.separator,
            max_new_tokens=config.max_new_tokens,
            progress=config.progress,
        ),
        per_epoch=per_epoch,
        folder=None if out is None else Path(out),
    )
    if runner.folder is not None:
        runner.folder.mkdir(parents=True, exist_ok=True)
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
            "split_seed": config.split_seed,
            "max_new_tokens": config.max_new_tokens,
            "config": base.to_dict(),
        }
        _check_plan(runner.folder, model, task, plan)

    conditions = [("none", "none", -1, []), ("top", "top", -1, top)]
    conditions += [
        ("random", f"random-{s}", s, heads) for s, heads in zip(seeds, randoms, strict=True)
    ]
    for condition in conditions:
        runner.run(*condition)
    notes = []
    if len(top) == 1:
        notes.append(
            f"the top {fraction:g} of {shape[0] * shape[1]} heads is a single head; pass a larger "
            "fraction to train more"
        )
    outputs = pd.concat(runner.outputs, ignore_index=True)
    result = SoftMaskExperiment(
        runs=pd.DataFrame(runner.rows),
        multipliers=torch.stack(runner.multipliers),
        mask_names=runner.names,
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
        outputs=outputs[["condition", "seed", *_OUTPUT_COLUMNS]],
        history=pd.concat(runner.histories, ignore_index=True),
        notes=notes,
    )
    if runner.folder is not None:
        result.save(runner.folder)
    return result
