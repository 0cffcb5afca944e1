"""The settings comparison of the paper's Tables 1, 2 and 6: a task evaluated bare, instructed,
under a trained head mask M, a random mask of the same size, and a mask of another model.

>>> import lens_heads as lh
>>> from lens_heads.core._tasks import Example, Task
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
from dataclasses import replace
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

from lens_heads.core import (
    HeadMask,
    MaskSource,
    Task,
    ablated,
    configure,
    get_task,
    resolve_mask,
)
from lens_heads.core.internal import EncodedExample, ModelLike, model_name, refuse_random_weights
from lens_heads.engine import _scoring as scoring
from lens_heads.engine._evaluation_config import INSTRUCTED, MASK_SETTINGS, EvaluationConfig
from lens_heads.engine._evaluation_result import EvaluationResult
from lens_heads.engine._scoring import EvaluationRun

__all__ = ["evaluate", "mask_info", "run_plan"]


def _plan(
    settings: Sequence[str],
    mask: HeadMask | None,
    other_mask: HeadMask | None,
    random_seeds: Sequence[int],
    task: Task,
) -> list[EvaluationRun]:
    runs = []
    for setting in settings:  # checked by EvaluationConfig.check
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
                    setting, -1, mask if setting in MASK_SETTINGS else None, setting in INSTRUCTED
                )
            )
    return runs


def evaluate(
    model: ModelLike,
    task: Task | str | os.PathLike[str],
    settings: Sequence[str] | str | None = None,
    config: EvaluationConfig | None = None,
    *,
    mask: MaskSource | None = None,
    other_mask: MaskSource | None = None,
    instruction: str | None = None,
    **overrides: Any,
) -> EvaluationResult:
    """Evaluate ``task`` on its last ``n_eval`` examples under each setting.

    Settings (rows of the paper's Tables 1, 2 and 6): ``"original"`` (bare input, no mask),
    ``"instruction"``, ``"random"`` (a random mask with as many heads as ``mask``, one run per
    seed of ``random_seeds``), ``"mask"``, ``"mask+instruction"`` and ``"other_mask"`` (a mask
    trained on another model of the same shape). By default: every setting the arguments allow.

    ``config`` (an :class:`EvaluationConfig`) holds how the evaluation runs; its fields may also
    be given as keywords (``n_eval=40``), which override it. Each run generates greedily in
    left-padded batches (``task.max_new_tokens``: 10 for word tasks, 50 for sentences) and
    scores the first line of the output with the task's match rule; the answer CE is computed
    teacher forced under the same mask, on the prompt's KV cache. Prompts use the model's chat
    template when its tokenizer has one (``chat=None``), else the base-model format
    ``{input}\\n\\n``; ``shots=k`` prepends k demonstrations drawn (seeded by ``shot_seed``,
    per example) from the task's training split.

    ``stack_masks=True`` decodes the runs that share a prompt set (e.g. Original, the random
    masks and M, all uninstructed) in one pass with one per-example mask per row: fewer,
    larger batches; the same generations and scores, the answer CE to float rounding (a
    matrix product's sums may depend on how many rows its batch has).

    >>> import lens_heads as lh
    >>> model = lh.load_model("smollm2-135m-instruct")  # doctest: +SKIP
    >>> lh.evaluate(model, "country-capital", n_eval=40).to_frame()  # doctest: +SKIP
    """
    config = configure(EvaluationConfig, config, overrides, "evaluate")
    task = task if isinstance(task, Task) else get_task(task, instruction=instruction)
    if instruction is not None and task.instruction != instruction:
        task = replace(task, instruction=instruction)
    mask_ = resolve_mask(mask, model)
    other_ = resolve_mask(other_mask, model)
    unseen = EvaluationConfig.unseen(task, mask_, other_)
    chosen = config.check(
        task,
        settings,
        mask_given=mask_ is not None,
        other_given=other_ is not None,
        unseen=unseen,
    )
    plan = _plan(chosen, mask_, other_, config.random_seeds, task)
    run_rows, record_rows, stored = run_plan(model, task, plan, config, unseen=unseen)
    stored["random_seeds"] = list(config.random_seeds) if "random" in chosen else []
    stored["mask"] = mask_info(mask, mask_)
    stored["other_mask"] = mask_info(other_mask, other_)
    return EvaluationResult(
        model=model_name(model),
        task=task.name,
        kind=task.kind,
        settings=chosen,
        runs=pd.DataFrame(run_rows),
        records=pd.DataFrame(record_rows),
        config=stored,
    )


def run_plan(
    model: ModelLike,
    task: Task,
    plan: Sequence[EvaluationRun],
    config: EvaluationConfig,
    *,
    unseen: bool = False,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """Generate and score every run of ``plan`` on the task's held-out examples: ``(runs,
    records, config)`` rows of :class:`EvaluationResult`. With ``config.stack_masks`` the runs
    that share a prompt set are decoded together, one per-example mask per row; ``unseen``:
    the masks were trained on another task (:meth:`Task.split`)."""
    refuse_random_weights(model, "evaluation (accuracy, answer CE)")
    split = dict(n_eval=config.n_eval, seed=config.split_seed, unseen=unseen)
    train, evaluation = task.split(**split)
    chat = config.chat
    if chat is None:
        from lens_heads.core import has_chat_template

        chat = has_chat_template(model.tokenizer)
    new_tokens = task.max_new_tokens if config.max_new_tokens is None else config.max_new_tokens
    prompts: dict[bool, list[EncodedExample]] = {}
    for instructed in dict.fromkeys(run.instructed for run in plan):  # every prompt, before compute
        prompts[instructed] = scoring.encode_prompts(
            model,
            evaluation,
            instructed=instructed,
            chat=chat,
            shots=config.shots,
            shot_pool=train,
            shot_seed=config.shot_seed,
            separator=config.separator,
        )
        scoring.check_fits(model, prompts[instructed], evaluation, new_tokens)
    baseline = scoring.task_baseline(
        model, config.ablation, train, evaluation, chat=chat, separator=config.separator
    )
    with ablated(model, baseline):
        outputs = _generate(model, task.name, plan, prompts, config, new_tokens, len(evaluation))
    run_rows: list[dict[str, Any]] = []
    record_rows: list[dict[str, Any]] = []
    for i, run in enumerate(plan):
        metrics, records = scoring.score_run(
            model, task, evaluation, prompts[run.instructed], run, outputs[i], config.first_line
        )
        run_rows.append(metrics)
        record_rows += records
    stored = config.stored()
    stored.pop("random_seeds")
    stored.update(
        n_eval=len(evaluation),
        unseen=unseen,
        chat=chat,
        max_new_tokens=new_tokens,
        match=task.match,
        instruction=task.instruction,
    )
    return run_rows, record_rows, stored


def _generate(
    model: ModelLike,
    name: str,
    plan: Sequence[EvaluationRun],
    prompts: dict[bool, list[EncodedExample]],
    config: EvaluationConfig,
    new_tokens: int,
    n_examples: int,
) -> dict[int, scoring.RunOutputs]:
    """Decode and score every run of ``plan`` (stacked when ``config.stack_masks``)."""
    # the bar counts examples over all settings (a setting can take minutes)
    bar = tqdm(
        total=len(plan) * n_examples,
        desc=f"evaluating {name}",
        unit="example",
        disable=not config.progress,
    )
    decode = dict(newline_stops=config.first_line, on_rows=bar.update)
    outputs: dict[int, scoring.RunOutputs] = {}
    batch_size = config.batch_size
    if config.stack_masks:
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
    return outputs


def mask_info(source: Any, mask: Any) -> dict[str, Any] | None:
    """What a result records of its mask: its heads, alpha, file (when ``source`` is one),
    model and task; ``mask`` is any form of :func:`~lens_heads.core.resolve_mask`."""
    mask = resolve_mask(mask)
    if mask is None:
        return None
    info: dict[str, Any] = {"heads": mask.n_selected, "alpha": mask.alpha}
    if isinstance(source, (str, os.PathLike)):
        info["file"] = os.fspath(source)
    for key in ("model", "task"):
        if key in mask.metadata:
            info[key] = mask.metadata[key]
    return info
