"""Functional pathways (Heads up! Table 6): the heads a family of related tasks shares.

Masks trained with a negative initialisation (``TrainingConfig(init_mean=-3)``: every head
starts removed and only the heads a task needs are switched on) on a family of related tasks
(capitalisation variants, translation pairs) leave (a) heads used by *all* the masks and (b)
heads used by *none*. :func:`functional_pathways` removes from the full model (a), (b) and random
head sets of the same sizes (several seeds), and evaluates each family task *with* its
instruction through :func:`lens_heads.evaluate`. The paper's claim: removing (a) hurts far more
than removing as many random heads, and removing (b) does not hurt (it slightly helps).

>>> import lens_heads as lh
>>> from lens_heads.core._tasks import Example, Task
>>> model = lh.tiny_model(n_layers=2, n_heads=4)
>>> words = "cat dog owl bee ant cow pig elk".split()
>>> tasks = [Task(n, tuple(Example(w, f(w)) for w in words), instruction=n.title() + ".")
...          for n, f in (("upper", str.upper), ("title", str.title))]
>>> masks = {"upper": lh.HeadMask.from_heads(["L0H0", "L1H1"], n_layers=2, n_heads=4),
...          "title": lh.HeadMask.from_heads(["L0H0", "L1H2"], n_layers=2, n_heads=4)}
>>> result = functional_pathways(model, tasks, masks, n_random_seeds=2, n_eval=2,
...                              progress=False)
>>> result.shared, result.unused
(['L0H0'], ['L0H1', 'L0H2', 'L0H3', 'L1H0', 'L1H3'])
>>> result.to_frame()["heads removed"].tolist()
[0, 1, 1, 5, 5, 0, 1, 1, 5, 5]
"""

from __future__ import annotations

import json
import logging
import os
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

from lens_heads.core import HeadMask, InputError, Task, configure, get_task, write_atomic
from lens_heads.core.internal import (
    InputTypeError,
    MaskShapeError,
    ModelLike,
    model_name,
    seeds_from_count,
)
from lens_heads.engine import EvaluationConfig, MaskTrainingResult, TrainingConfig
from lens_heads.heads_up._pathways_result import CONDITIONS, RANDOM_CONDITIONS, PathwaysResult

__all__ = [
    "CONDITIONS",
    "PathwaysResult",
    "functional_pathways",
    "pathway_heads",
    "train_family_masks",
]

logger = logging.getLogger(__name__)


# -- the head sets ---------------------------------------------------------------------------------
def pathway_heads(masks: Mapping[str, HeadMask] | Sequence[HeadMask]) -> tuple[HeadMask, HeadMask]:
    """``(shared, unused)``: the heads every mask keeps (a) and the heads no mask keeps (b).

    >>> a = HeadMask.from_heads(["L0H0", "L0H1"], n_layers=1, n_heads=4)
    >>> b = HeadMask.from_heads(["L0H0", "L0H2"], n_layers=1, n_heads=4)
    >>> shared, unused = pathway_heads([a, b])
    >>> shared.labels, unused.labels
    (['L0H0'], ['L0H3'])
    """
    items = list(masks.values()) if isinstance(masks, Mapping) else list(masks)
    if not items:
        raise InputError("no masks given")
    shared, used = items[0], items[0]
    for mask in items[1:]:
        shared, used = shared & mask, used | mask  # MaskShapeError for mixed shapes
    return HeadMask(shared.selected.float()), ~used


def _random_removal(size_of: HeadMask, seed: int) -> HeadMask:
    """A random head set (the heads to remove) with as many heads as ``size_of``."""
    return HeadMask(HeadMask.random_like(size_of, seed=seed).values)


# -- evaluation -----------------------------------------------------------------------------------
def _family(tasks: Sequence[Task | str | os.PathLike[str]]) -> list[Task]:
    if isinstance(tasks, (str, os.PathLike, Task)):
        tasks = [tasks]
    family = [task if isinstance(task, Task) else get_task(task) for task in tasks]
    names = [task.name for task in family]
    if len(family) < 2:
        raise InputError(
            f"a task family needs at least two related tasks, got {len(family)} ({names}): "
            "shared and unused heads are defined across masks of several tasks, e.g. "
            "['capitalize', 'capitalize_first_letter', 'lowercase_last_letter']"
        )
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise InputError(f"tasks repeat in the family: {repeated}")
    missing = [task.name for task in family if not task.instruction]
    if missing:
        raise InputError(
            f"Table 6 evaluates each task with its instruction, but {missing} have none; give "
            "each Task an instruction= (built-in tasks have one)"
        )
    return family


def _family_masks(
    masks: Mapping[str, HeadMask] | Sequence[HeadMask] | str | os.PathLike[str],
    family: Sequence[Task],
    model: ModelLike,
) -> dict[str, HeadMask]:
    if isinstance(masks, (str, os.PathLike)):
        from lens_heads.heads_up._mask_sets import load_masks

        masks = load_masks(masks)
    names = [task.name for task in family]
    if isinstance(masks, Mapping):
        missing = [name for name in names if name not in masks]
        if missing:
            raise InputError(
                f"no mask for {missing} (masks given for {sorted(masks)}); train them with "
                "train_family_masks(model, tasks, out=out)"
            )
        chosen = {name: masks[name] for name in names}
    else:
        items = list(masks)
        if len(items) != len(names):
            raise InputError(f"got {len(items)} masks for {len(names)} tasks {names}")
        chosen = dict(zip(names, items, strict=True))
    for name, mask in chosen.items():
        if not isinstance(mask, HeadMask):
            raise InputTypeError(f"the mask of {name!r} is a {type(mask).__name__}, not a HeadMask")
        try:
            mask.check_model(model)
        except MaskShapeError as error:
            raise MaskShapeError(f"the mask of {name!r}: {error}") from None
    return chosen


def _cached_run(
    cache: Path | None,
    key: dict[str, Any],
    compute: Any,
) -> dict[str, Any]:
    """The run row of ``key`` from ``cache`` (when it was computed with the same key), else
    ``compute()`` -> (row, records), written to the cache atomically."""
    if cache is None:
        return compute()[0]
    name = key["condition"] + (f"-seed{key['seed']}" if key["seed"] >= 0 else "")
    path = cache / key["task"] / f"{name}.json"
    if path.is_file():
        try:
            stored = json.loads(path.read_text(encoding="utf-8"))
            if stored.get("key") == key:
                return dict(stored["run"])
            logger.info("recomputing %s: it was computed with other settings", path)
        except (ValueError, KeyError) as error:
            logger.warning("recomputing %s: unreadable (%s)", path, error)
    row, records = compute()
    write_atomic(path.with_suffix(".csv"), records.to_csv(index=False))
    write_atomic(path, json.dumps({"key": key, "run": row}, indent=1, default=str))
    return row


#: the evaluation of Table 6 by default: 40 held-out examples, three random sets per size
PATHWAYS = EvaluationConfig(n_eval=40, random_seeds=(0, 1, 2))


def functional_pathways(
    model: ModelLike,
    tasks: Sequence[Task | str | os.PathLike[str]],
    masks: Mapping[str, HeadMask] | Sequence[HeadMask] | str | os.PathLike[str],
    config: EvaluationConfig | None = None,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    **overrides: Any,
) -> PathwaysResult:
    """Table 6 for a family of related ``tasks`` (two or more) and their ``masks`` (``name ->
    HeadMask``, a list in task order, or a folder for :func:`lens_heads.load_masks`), trained
    with a negative init (``TrainingConfig(init_mean=-3)``; :func:`train_family_masks`).

    (a) are the heads every mask keeps, (b) the heads no mask keeps. Each task is evaluated with
    its instruction (:func:`lens_heads.evaluate`, setting ``"instruction"`` for the full model
    and ``"mask+instruction"`` with the kept heads otherwise) on its last ``n_eval`` examples --
    held out of training when ``n_eval`` is at most the training's -- with nothing removed, (a)
    removed, (b) removed, and random sets of ``|a|`` and ``|b|`` heads removed
    (``HeadMask.random_like``, one per seed of ``random_seeds``, the same sets for every task).
    An empty set removes nothing: its rows repeat the full model's run. ``config`` (an
    :class:`~lens_heads.EvaluationConfig`, default :data:`PATHWAYS`: 40 examples, seeds 0, 1,
    2; its fields also as keywords) is every evaluation's.

    With ``cache_dir`` each run is written to ``<cache_dir>/<task>/<condition>[-seed<k>].json``
    (and its per-example records to ``.csv``) and reused by a later call with the same heads and
    settings, so an interrupted table resumes.

    >>> import lens_heads as lh
    >>> model = lh.load_model("smollm2-135m-instruct")  # doctest: +SKIP
    >>> family = ["capitalize", "capitalize_first_letter", "lowercase_last_letter"]
    >>> masks = lh.train_family_masks(model, family, out="runs/table6/masks")  # doctest: +SKIP
    >>> lh.functional_pathways(model, family, masks).to_frame()  # doctest: +SKIP
    """
    from lens_heads.engine import evaluate

    overrides = seeds_from_count(overrides, "functional_pathways", "n_random_seeds", 3)
    config = configure(EvaluationConfig, config or PATHWAYS, overrides, "functional_pathways")
    family = _family(tasks)
    chosen = _family_masks(masks, family, model)
    if not config.random_seeds:
        raise InputError("random_seeds is empty: Table 6 needs at least one random set")
    shared, unused = pathway_heads(chosen)
    seeds = list(config.random_seeds)
    progress = config.progress
    removed: dict[str, list[HeadMask]] = {"full": [HeadMask.zeros(*shared.shape)]}
    removed["shared"], removed["unused"] = [shared], [unused]
    removed["random_shared"] = [_random_removal(shared, s) for s in seeds]
    removed["random_unused"] = [_random_removal(unused, s) for s in seeds]
    # what a cached run is keyed on (the names of lens_heads 0.1, so its caches stay valid)
    keyed = {
        name: getattr(config, name)
        for name in ("n_eval", "split_seed", "batch_size", "max_new_tokens", "chat", "shots")
    }
    quiet = replace(config, progress=False)
    plan = [
        (task, key, seeds[i] if key in RANDOM_CONDITIONS else -1, heads)
        for task in family
        for key in CONDITIONS
        for i, heads in enumerate(removed[key])
    ]
    rows: list[dict[str, Any]] = []
    full_rows: dict[str, dict[str, Any]] = {}
    started = time.perf_counter()
    for task, key, run_seed, heads in tqdm(plan, desc="Table 6 runs", disable=not progress):
        if heads.n_selected == 0 and key != "full":  # removes nothing: the full model's run
            row = dict(full_rows[task.name], seconds=0.0)
        else:
            cache_key = {
                "model": model_name(model),
                "task": task.name,
                "instruction": task.instruction,
                "examples": task.fingerprint(),
                "condition": key,
                "seed": run_seed,
                "removed": heads.labels,
                **keyed,
            }

            def compute(task: Task = task, heads: HeadMask = heads) -> tuple[dict[str, Any], Any]:
                tick = time.perf_counter()
                result = evaluate(
                    model,
                    task,
                    ["instruction"] if heads.n_selected == 0 else ["mask+instruction"],
                    mask=None if heads.n_selected == 0 else ~heads,
                    config=quiet,
                )
                run = {
                    k: v.item() if hasattr(v, "item") else v  # numpy scalars -> JSON-able
                    for k, v in result.runs.iloc[0].to_dict().items()
                    if k not in ("setting", "seed", "heads")
                }
                run["seconds"] = time.perf_counter() - tick
                return run, result.records

            row = _cached_run(None if cache_dir is None else Path(cache_dir), cache_key, compute)
        row.update(
            task=task.name, condition=key, seed=run_seed, **{"heads removed": heads.n_selected}
        )
        if key == "full":
            full_rows[task.name] = row
        rows.append(row)
    first = ["task", "condition", "seed", "heads removed"]
    runs = pd.DataFrame(rows)
    runs = runs[first + [c for c in runs.columns if c not in first]]
    return PathwaysResult(
        model=model_name(model),
        tasks=[task.name for task in family],
        shape=list(shared.shape),
        mask_sizes={name: mask.n_selected for name, mask in chosen.items()},
        shared=shared.labels,
        unused=unused.labels,
        seeds=seeds,
        random_sets={key: [m.labels for m in removed[key]] for key in RANDOM_CONDITIONS},
        runs=runs,
        config={**keyed, "n_random_seeds": len(seeds), "seed": seeds[0], "random_seeds": seeds}
        | {"seconds": time.perf_counter() - started},
    )


# -- training the family's masks ------------------------------------------------------------------
def train_family_masks(
    model: ModelLike,
    tasks: Sequence[Task | str | os.PathLike[str]],
    config: TrainingConfig | str | os.PathLike[str] | None = None,
    *legacy: Any,
    out: str | os.PathLike[str] | None = None,
    progress: bool = True,
    **overrides: Any,
) -> dict[str, HeadMask]:
    """Train one mask per task with :func:`lens_heads.train_mask` -- by default the short CPU
    schedule with the paper's negative init of Table 6, ``TrainingConfig.short(init_mean=-3.0)``,
    which does not train on SmolLM2 (``init_mean=0`` does; a mask that did not learn is warned
    about) -- into ``<out>/<task>/`` (the training result, as ``analyses.mask_table`` lays it
    out), and return the masks by task name.

    Resumable: a task whose ``mask.safetensors`` exists is read, not retrained (it must have been
    trained with the same config, up to ``precision``, else a ValueError says which fields differ);
    an interrupted one resumes from ``<out>/<task>/checkpoints``.

    >>> import tempfile, lens_heads as lh
    >>> from lens_heads.core._tasks import Example, Task
    >>> model = lh.tiny_model(n_layers=2, n_heads=4)
    >>> task = Task("upper", tuple(Example(w, w.upper()) for w in "abcdefghijkl"))
    >>> config = lh.TrainingConfig(steps=2, batch_size=4, n_eval=4, init_mean=-3.0)
    >>> masks = train_family_masks(model, [task], config, out=tempfile.mkdtemp(), progress=False)
    >>> list(masks), masks["upper"].shape
    (['upper'], (2, 4))

    ``config`` is a :class:`~lens_heads.TrainingConfig` (its fields also as keywords); the old
    order ``(model, tasks, out, config)`` still works, with a :class:`DeprecationWarning`.
    """
    from lens_heads.core import configure
    from lens_heads.engine import train_or_resume

    if isinstance(config, (str, os.PathLike)):  # the order of 0.1: (model, tasks, out, config)
        warnings.warn(
            "train_family_masks(model, tasks, out, config) is now train_family_masks(model, "
            "tasks, config, out=out); the old order goes away in lens_heads 0.3.0",
            DeprecationWarning,
            stacklevel=2,
        )
        out, config = config, (legacy[0] if legacy else None)
    elif legacy:
        raise InputError("train_family_masks takes (model, tasks, config=None, *, out=...)")
    if out is None:
        raise InputError("train_family_masks needs out=: the folder the masks are trained into")
    config = configure(TrainingConfig, config or TrainingConfig.short(init_mean=-3.0), overrides,
                       "train_family_masks")  # fmt: skip
    if isinstance(tasks, (str, os.PathLike, Task)):
        tasks = [tasks]
    family = [task if isinstance(task, Task) else get_task(task) for task in tasks]
    root = Path(out)
    masks: dict[str, HeadMask] = {}
    for task in family:
        result = train_or_resume(
            model,
            task,
            config,
            root / task.name,
            progress=progress,
            remedy="use another output folder, or delete that task's folder to retrain",
        )
        _warn_if_untrained(result)
        masks[task.name] = result.mask
    return masks


def _warn_if_untrained(result: MaskTrainingResult) -> None:
    """Warn when a low-init mask did not learn: its loss over the last tenth of the steps is
    above 80 % of the first tenth's, or it keeps fewer than 5 % of the heads."""
    losses = [float(x) for x in result.history["loss"]]
    tenth = max(1, len(losses) // 10)
    first, last = sum(losses[:tenth]) / tenth, sum(losses[-tenth:]) / tenth
    kept, total = result.mask.n_selected, result.mask.values.numel()
    if last > 0.8 * first or kept < 0.05 * total:
        init = result.config.init_mean
        why = (
            f"from init_mean={init:g} training starts at the all-heads-off model, which small "
            "models cannot leave in a short schedule; train from init_mean=0 or with more steps"
            if init < 0
            else "train with more steps"
        )
        warnings.warn(
            f"the {result.task} mask did not learn (training loss {first:.2f} -> {last:.2f}, "
            f"{kept}/{total} heads kept): {why} (docs/reproduction.md, row 10)",
            stacklevel=3,
        )
