"""Heads up! Table 7: does the mask pick the heads that attend to the answer word? On each
choose-a-word task (``*_v_*_3``: the input offers three words, the answer is one of them), the
attention of the last position on the answer word, normalised over the three candidate words
(a head attending uniformly scores 1/3, as in the paper), averaged over all heads, the heads the
mask keeps (M) and the heads it removes (1-M): bare, instructed and under the mask.

    python -m analyses.table7_attention --out runs/table7

The masks are the shipped ones (``data/masks/<model>/mask-table``, ``--masks DIR``; a task
without a mask file is trained with the short schedule). The paper's claims (Llama3.1-8B-inst,
Table 7 and its section title): (1) the instruction raises the attention on the answer; (2)
under the instruction the heads in M do *not* attend more than the heads in 1-M, so the mask
does not select heads by attention; (3) under the mask the switched-off heads attend to the
answer even more than the kept ones. Each is tested per task, one-sided and paired over
prompts. Resumable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from scipy import stats

import lens_heads as lh
from analyses._common import (
    LEVEL,
    LazyModel,
    MaskedTaskConfig,
    command_line,
    help_of,
    markdown_table,
    mask_of,
    note_mask_precision,
    stages_of,
    write_outputs,
)
from lens_heads.heads_up import AttentionResult, candidate_words

MASKS = Path(__file__).resolve().parents[1] / "data" / "masks"

#: The paper's Table 7 (Llama3.1-8B-inst) for the tasks the project has.
PAPER = {
    "fruit_v_animal_3": {
        "Original, all heads": 0.347,
        "w/ instruction, all heads": 0.468,
        "w/ instruction, heads in M": 0.462,
        "w/ instruction, heads in 1-M": 0.494,
        "w/ M, heads in M": 0.566,
        "w/ M, heads in 1-M": 0.607,
    },
    "object_v_concept_3": {
        "Original, all heads": 0.306,
        "w/ instruction, all heads": 0.363,
        "w/ instruction, heads in M": 0.356,
        "w/ instruction, heads in 1-M": 0.386,
        "w/ M, heads in M": 0.471,
        "w/ M, heads in 1-M": 0.537,
    },
}


@dataclass
class Config(MaskedTaskConfig):
    task: str = field(default="", metadata=help_of("one task instead of --tasks"))
    tasks: tuple[str, ...] = field(
        default=("color_v_animal_3", "fruit_v_animal_3", "object_v_concept_3"),
        metadata=help_of("choose-a-word tasks"),
    )
    masks: str | None = field(  # --mask gives the mask of a single --task
        default=None,
        metadata=help_of("folder of <task>.safetensors masks [data/masks/<model>/mask-table]"),
    )
    n_prompts: int = field(default=40, metadata=help_of("held-out inputs per task"))
    out: str = field(default="runs/table7", metadata=help_of("output folder"))


def _mask(config: Config, task: str, stages: Any, model: LazyModel) -> lh.HeadMask:
    if config.mask is not None:  # one task: its training folder or mask file
        from lens_heads.core import resolve_mask

        return resolve_mask(note_mask_precision(config.mask), model())
    folder = Path(config.masks) if config.masks else MASKS / Path(config.model).name / "mask-table"
    path = folder / f"{task}.safetensors"
    if path.is_file():
        shipped = lh.HeadMask.load(path)
        if shipped.shape == lh.head_shape(model()):
            return shipped
        print(f"{path} is for another model's shape; training a mask for {task}")
    per_task = Config(**{**config.__dict__, "task": task})
    return mask_of(per_task, stages, model, name=f"training_{task}").mask


def _rows(attention: AttentionResult) -> dict[str, torch.Tensor]:
    """Per prompt, the mean score of each row of the paper's table."""
    assert attention.mask is not None
    inside = attention.mask.selected

    per_prompt = attention.per_prompt  # [setting, prompt, layer, head]
    original, instructed, masked = (
        attention.settings.index(s) for s in ("original", "instructed", "masked")
    )
    return {
        "Original, all heads": per_prompt[original].mean(dim=(1, 2)),
        "w/ instruction, all heads": per_prompt[instructed].mean(dim=(1, 2)),
        "w/ instruction, heads in M": per_prompt[instructed][:, inside].mean(dim=1),
        "w/ instruction, heads in 1-M": per_prompt[instructed][:, ~inside].mean(dim=1),
        "w/ M, heads in M": per_prompt[masked][:, inside].mean(dim=1),
        "w/ M, heads in 1-M": per_prompt[masked][:, ~inside].mean(dim=1),
    }


def claims(rows: dict[str, torch.Tensor]) -> dict[str, Any]:
    """One-sided paired p-values (Wilcoxon over prompts) of the paper's three claims."""

    def greater(a: str, b: str) -> float:
        """NaN when a row has no heads (a mask that keeps every head has no 1-M)."""
        if bool(rows[a].isnan().any() or rows[b].isnan().any()):
            return float("nan")
        return float(stats.wilcoxon(rows[a], rows[b], alternative="greater").pvalue)

    p_instruction = greater("w/ instruction, all heads", "Original, all heads")
    p_m_more = greater("w/ instruction, heads in M", "w/ instruction, heads in 1-M")
    p_off_more = greater("w/ M, heads in 1-M", "w/ M, heads in M")
    return {
        "(1) instruction raises attention: p": p_instruction,
        "(1) supported": p_instruction < LEVEL,
        "(2) instructed, M attends more than 1-M: p": p_m_more,
        "(2) supported (M not more)": bool(p_m_more >= LEVEL),  # False when NaN
        "(3) under M, 1-M attends more than M: p": p_off_more,
        "(3) supported": p_off_more < LEVEL,
    }


def run(config: Config) -> dict[str, AttentionResult]:
    model = LazyModel(config.model)
    stages = stages_of(config, model)
    results, tables, numbers = {}, [], {}
    for name in (config.task,) if config.task else config.tasks:
        mask = _mask(config, name, stages, model)

        def compute(where: Path, name: str = name, mask: lh.HeadMask = mask) -> AttentionResult:
            task = lh.get_task(name)
            held_out = task.split(n_eval=config.n_eval)[1]
            examples = [e for e in held_out.examples if e.output in candidate_words(e.input)]
            if not examples:
                raise ValueError(
                    f"task {name!r} is not a task that chooses one of the given words (no "
                    "answer is a word of its input); use e.g. fruit_v_animal_3"
                )
            examples = examples[-config.n_prompts :]
            result = lh.attention_on_target(
                model(),
                [e.input for e in examples],
                [e.output for e in examples],
                mask=mask,
                instruction=task.instruction,
                candidates=[candidate_words(e.input) for e in examples],
                progress=config.progress,
            )
            result.save(where)
            return result

        attention = stages(f"attention_{name}", compute, AttentionResult.load)
        results[name] = attention
        rows = _rows(attention)
        means = {row: float(values.mean()) for row, values in rows.items()}
        found = claims(rows)
        paper = PAPER.get(name, {})
        tables.append(
            pd.DataFrame(
                {
                    "task": name,
                    "row": list(means),
                    "ours": list(means.values()),
                    "paper (Llama3.1-8B-inst)": [paper.get(row, float("nan")) for row in means],
                }
            )
        )
        numbers[name] = {
            "rows": means,
            "claims": found,
            "heads in M": attention.mask.n_selected,
            "prompts": len(attention.prompts),
        }
    table = pd.concat(tables, ignore_index=True)
    verdicts = pd.DataFrame({name: value["claims"] for name, value in numbers.items()}).T
    text = (
        "Attention of the last position on the answer word, normalised over the three candidate "
        "words (uniform: 0.333), mean over held-out prompts and over the heads of each row.\n\n"
        + markdown_table(table, floatfmt=".3f", index=False)
        + f"\n\nThe paper's claims, one-sided Wilcoxon over prompts at {LEVEL}:\n\n"
        + markdown_table(verdicts, floatfmt=".3g", index=True)
    )
    write_outputs(
        config.out,
        title=f"Table 7: attention on the answer word ({config.model})",
        markdown=text,
        figures={
            "table7_attention" + (f"_{name}" if i else ""): result.plot()
            for i, (name, result) in enumerate(results.items())
        },
        numbers=numbers,
    )
    return results


main = command_line(Config, run, __doc__)

if __name__ == "__main__":
    raise SystemExit(main())


#: a run on a tiny model (the tests add ``--steps 3 --n-eval 4 --no-progress --out DIR``) and
#: the figure it must write (tests/unit/tools/test_analyses_modules.py runs each analysis's)
EXAMPLE = (["--task", "fruit_v_animal_3", "--n-prompts", "3"], "table7_attention")
