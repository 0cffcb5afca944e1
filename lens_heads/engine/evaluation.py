"""The settings comparison of the paper's Tables 1, 2 and 6: a task evaluated bare, instructed,
under a trained head mask M, a random mask of the same size, and a mask of another model.

>>> import lens_heads as lh
>>> from lens_heads.core.tasks import Example, Task
>>> model = lh.tiny_model(n_layers=2, n_heads=4)
>>> task = Task("upper", tuple(Example(w, w.upper()) for w in "abcdefgh"), instruction="Upper.")
>>> mask = lh.HeadMask.from_heads(["L0H1", "L1H2"], n_layers=2, n_heads=4)
>>> result = lh.evaluate(model, task, mask=mask, n_eval=4, random_seeds=(0, 1), progress=False)
>>> list(result.to_frame().index)
['Original', 'w/ instruction', 'w/ random M', 'w/ M', 'w/ M + instruction']
>>> result.to_frame()["heads"].tolist()
[8, 8, 2, 2, 2]
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

from lens_heads.core.checks import check_int, resolve_mask
from lens_heads.core.masks import HeadMask
from lens_heads.core.models import ModelLike, model_name
from lens_heads.core.prompts import (
    EncodedExample,
)
from lens_heads.core.tasks import Task, get_task
from lens_heads.engine import scoring
from lens_heads.engine.evaluation_result import SETTINGS, EvaluationResult
from lens_heads.engine.scoring import EvaluationRun

__all__ = ["check_evaluation", "check_evaluation_arguments", "evaluate", "mask_info", "run_plan"]


_MASK_SETTINGS = {"random": "mask", "mask": "mask", "mask+instruction": "mask"}
_INSTRUCTED = {"instruction", "mask+instruction"}


def check_evaluation_arguments(*, batch_size: Any, n_eval: Any, max_new_tokens: Any) -> None:
    check_int("batch_size", batch_size, minimum=1)
    check_int("n_eval", n_eval, minimum=1)
    if max_new_tokens is not None:
        check_int("max_new_tokens", max_new_tokens, minimum=1)


def check_evaluation(
    task: Task,
    settings: Sequence[str] | str | None,
    *,
    mask_given: bool,
    other_given: bool = False,
    random_seeds: Sequence[int] = (0, 1, 2),
    n_eval: int = 100,
    split_seed: int | None = None,
    shots: int = 0,
) -> list[str]:
    """Check what :func:`evaluate` would run, without a model: the settings (known, not
    repeated, each with what it needs), the split (``n_eval`` against the task) and ``shots``
    against the training split. Returns the settings chosen. The command line calls it before
    the model loads."""
    if isinstance(settings, str):
        settings = [s.strip() for s in settings.split(",") if s.strip()]
    if settings is None:
        chosen = ["original"] + (["instruction"] if task.instruction else [])
        if mask_given:
            chosen += ["random", "mask"] + (["mask+instruction"] if task.instruction else [])
        chosen += ["other_mask"] if other_given else []
    else:
        chosen = list(settings)
    if not chosen:
        raise ValueError(f"no settings to evaluate; choose from {', '.join(SETTINGS)}")
    if len(set(chosen)) != len(chosen):
        raise ValueError(f"settings repeat: {chosen}")
    for setting in chosen:
        if setting not in SETTINGS:
            raise ValueError(
                f"unknown setting {setting!r}; choose from {', '.join(SETTINGS)} (comma-separated "
                "on the command line)"
            )
        if setting in _INSTRUCTED and not task.instruction:
            raise ValueError(
                f"setting {setting!r} needs an instruction but task {task.name!r} has none; pass "
                "instruction=... (--instruction on the command line)"
            )
        if setting in _MASK_SETTINGS and not mask_given:
            raise ValueError(
                f"setting {setting!r} needs the trained mask M: pass mask=HeadMask or a mask file "
                "(--mask FILE on the command line)"
            )
        if setting == "other_mask" and not other_given:
            raise ValueError(
                "setting 'other_mask' needs a mask trained on another model of the same shape: "
                "pass other_mask= (--other-mask FILE on the command line)"
            )
        if setting == "random" and not random_seeds:
            raise ValueError("setting 'random' needs at least one seed in random_seeds")
    if shots < 0:
        raise ValueError(f"shots must be >= 0, got {shots}")
    train, _ = task.split(n_eval=n_eval, seed=split_seed)
    if shots > len(train):
        raise ValueError(
            f"shots={shots} demonstrations, but only {len(train)} examples are left for them "
            f"after holding out n_eval; use at most {len(train)} shots"
        )
    return chosen


def _plan(
    settings: Sequence[str],
    mask: HeadMask | None,
    other_mask: HeadMask | None,
    random_seeds: Sequence[int],
    task: Task,
) -> list[EvaluationRun]:
    runs = []
    for setting in settings:  # checked by check_evaluation
        if setting == "random":
            assert mask is not None
            runs += [
                EvaluationRun(setting, s, HeadMask.random_like(mask, seed=s), False)
                for s in random_seeds
            ]
        elif setting == "other_mask":
            runs.append(EvaluationRun(setting, -1, other_mask, False))
        else:
            runs.append(
                EvaluationRun(
                    setting, -1, mask if setting in _MASK_SETTINGS else None, setting in _INSTRUCTED
                )
            )
    return runs


def evaluate(
    model: ModelLike,
    task: Task | str | os.PathLike[str],
    settings: Sequence[str] | str | None = None,
    *,
    mask: HeadMask | str | os.PathLike[str] | None = None,
    other_mask: HeadMask | str | os.PathLike[str] | None = None,
    n_eval: int = 100,
    split_seed: int | None = None,
    random_seeds: Sequence[int] = (0, 1, 2),
    batch_size: int = 16,
    chat: bool | None = None,
    instruction: str | None = None,
    shots: int = 0,
    shot_seed: int = 0,
    separator: str = "\n\n",
    max_new_tokens: int | None = None,
    first_line: bool = True,
    stack_masks: bool = False,
    progress: bool = True,
) -> EvaluationResult:
    """Evaluate ``task`` on its last ``n_eval`` examples under each setting.

    Settings (rows of the paper's Tables 1, 2 and 6): ``"original"`` (bare input, no mask),
    ``"instruction"``, ``"random"`` (a random mask with as many heads as ``mask``, one run per
    seed of ``random_seeds``), ``"mask"``, ``"mask+instruction"`` and ``"other_mask"`` (a mask
    trained on another model of the same shape). By default: every setting the arguments allow.

    Each run generates greedily in left-padded batches (``task.max_new_tokens``: 10 for word
    tasks, 50 for sentences) and scores the first line of the output with the task's match
    rule; the answer CE is computed teacher forced under the same mask, on the prompt's KV cache.
    Prompts use the model's chat template when its tokenizer has one (``chat=None``), else the
    base-model format ``{input}\\n\\n``; ``shots=k`` prepends k demonstrations drawn (seeded by
    ``shot_seed``, per example) from the task's training split.

    ``stack_masks=True`` decodes the runs that share a prompt set (e.g. Original, the random
    masks and M, all uninstructed) in one pass with one per-example mask per row: fewer,
    larger batches; the same generations and scores, the answer CE to float rounding (a
    matrix product's sums may depend on how many rows its batch has).

    >>> import lens_heads as lh
    >>> model = lh.load_model("smollm2-135m-instruct")  # doctest: +SKIP
    >>> lh.evaluate(model, "country-capital", n_eval=40).to_frame()  # doctest: +SKIP
    """
    task = task if isinstance(task, Task) else get_task(task, instruction=instruction)
    if instruction is not None and task.instruction != instruction:
        from dataclasses import replace

        task = replace(task, instruction=instruction)
    check_evaluation_arguments(batch_size=batch_size, n_eval=n_eval, max_new_tokens=max_new_tokens)
    mask_ = resolve_mask(mask, model)
    other_ = resolve_mask(other_mask, model)
    chosen = check_evaluation(
        task,
        settings,
        mask_given=mask_ is not None,
        other_given=other_ is not None,
        random_seeds=random_seeds,
        n_eval=n_eval,
        split_seed=split_seed,
        shots=shots,
    )
    plan = _plan(chosen, mask_, other_, random_seeds, task)
    run_rows, record_rows, config = run_plan(
        model,
        task,
        plan,
        n_eval=n_eval,
        split_seed=split_seed,
        batch_size=batch_size,
        chat=chat,
        shots=shots,
        shot_seed=shot_seed,
        separator=separator,
        max_new_tokens=max_new_tokens,
        first_line=first_line,
        stack_masks=stack_masks,
        progress=progress,
    )
    config["random_seeds"] = list(random_seeds) if "random" in chosen else []
    config["mask"] = mask_info(mask, mask_)
    config["other_mask"] = mask_info(other_mask, other_)
    return EvaluationResult(
        model=model_name(model),
        task=task.name,
        kind=task.kind,
        settings=chosen,
        runs=pd.DataFrame(run_rows),
        records=pd.DataFrame(record_rows),
        config=config,
    )


def run_plan(
    model: ModelLike,
    task: Task,
    plan: Sequence[EvaluationRun],
    *,
    n_eval: int,
    split_seed: int | None,
    batch_size: int,
    chat: bool | None,
    shots: int,
    shot_seed: int,
    separator: str,
    max_new_tokens: int | None,
    first_line: bool,
    stack_masks: bool,
    progress: bool,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """Generate and score every run of ``plan`` on the task's held-out examples: ``(runs,
    records, config)`` rows of :class:`EvaluationResult`. With ``stack_masks`` the runs that
    share a prompt set are decoded together, one per-example mask per row."""
    train, evaluation = task.split(n_eval=n_eval, seed=split_seed)
    if chat is None:
        from lens_heads.core.prompts import has_chat_template

        chat = has_chat_template(model.tokenizer)
    if shots < 0:
        raise ValueError(f"shots must be >= 0, got {shots}")
    new_tokens = task.max_new_tokens if max_new_tokens is None else max_new_tokens
    prompts: dict[bool, list[EncodedExample]] = {}
    for instructed in dict.fromkeys(run.instructed for run in plan):  # every prompt, before compute
        prompts[instructed] = scoring.encode_prompts(
            model,
            evaluation,
            instructed=instructed,
            chat=chat,
            shots=shots,
            shot_pool=train,
            shot_seed=shot_seed,
            separator=separator,
        )
        scoring.check_fits(model, prompts[instructed], evaluation, new_tokens)
    # the bar counts examples over all settings (a setting can take minutes)
    bar = tqdm(
        total=len(plan) * len(evaluation),
        desc=f"evaluating {task.name}",
        unit="example",
        disable=not progress,
    )
    decode = dict(newline_stops=first_line, on_rows=bar.update)
    outputs: dict[int, scoring.RunOutputs] = {}
    if stack_masks:
        for instructed, encoded in prompts.items():
            members = [i for i, run in enumerate(plan) if run.instructed == instructed]
            bar.set_postfix_str(f"{len(members)} runs stacked")
            stacked = scoring.generate_stacked(
                model, encoded, [plan[i].mask for i in members], new_tokens, batch_size, **decode
            )
            outputs.update(zip(members, stacked, strict=True))
    else:
        for i, run in enumerate(plan):
            bar.set_postfix_str(f"{run.setting}" + (f" seed {run.seed}" if run.seed >= 0 else ""))
            outputs[i] = scoring.generate_and_score(  # the CE raises if not finite
                model, prompts[run.instructed], run.mask, new_tokens, batch_size, **decode
            )
    bar.close()
    run_rows: list[dict[str, Any]] = []
    record_rows: list[dict[str, Any]] = []
    for i, run in enumerate(plan):
        metrics, records = scoring.score_run(
            model, task, evaluation, prompts[run.instructed], run, outputs[i], first_line
        )
        run_rows.append(metrics)
        record_rows += records
    config = {
        "n_eval": len(evaluation),
        "split_seed": split_seed,
        "batch_size": batch_size,
        "chat": chat,
        "shots": shots,
        "shot_seed": shot_seed,
        "separator": separator,
        "max_new_tokens": new_tokens,
        "first_line": first_line,
        "match": task.match,
        "instruction": task.instruction,
        "stack_masks": stack_masks,
    }
    return run_rows, record_rows, config


def mask_info(source: Any, mask: HeadMask | None) -> dict[str, Any] | None:
    if mask is None:
        return None
    info: dict[str, Any] = {"heads": mask.n_selected, "alpha": mask.alpha}
    if not isinstance(source, HeadMask):
        info["file"] = os.fspath(source)
    for key in ("model", "task"):
        if key in mask.metadata:
            info[key] = mask.metadata[key]
    return info
