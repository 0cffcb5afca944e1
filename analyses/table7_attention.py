"""Heads up! Table 7: attention from the last position to the answer word in the input (tasks
that choose one of the given words, e.g. ``fruit_v_animal_3``), per head, in the original,
instructed and masked runs -- the mean over all heads, over the heads the mask keeps and over
those it removes.

    python -m analyses.table7_attention --task fruit_v_animal_3 --out runs/table7

Resumable (training and attention stages are reused).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import lens_heads as lh
from analyses._common import (
    LazyModel,
    MaskedTaskConfig,
    command_line,
    help_of,
    markdown_table,
    mask_of,
    stages_of,
    write_outputs,
)
from lens_heads.heads_up.attention import AttentionResult


@dataclass
class Config(MaskedTaskConfig):
    task: str = field(default="fruit_v_animal_3", metadata=help_of("a choose-a-word task"))
    n_prompts: int = field(default=40, metadata=help_of("held-out inputs"))
    out: str = field(default="runs/table7", metadata=help_of("output folder"))


def run(config: Config) -> AttentionResult:
    stages, model = stages_of(config), LazyModel(config.model)
    training = mask_of(config, stages, model)

    def compute(where: Path) -> AttentionResult:
        task = config.task_object()
        examples = [e for e in config.held_out().examples if e.output in e.input]
        if not examples:
            raise ValueError(
                f"no held-out input of {task.name!r} contains its answer; Table 7 needs a task "
                "that chooses one of the given words (e.g. fruit_v_animal_3)"
            )
        examples = examples[-config.n_prompts :]
        result = lh.attention_on_target(
            model(),
            [e.input for e in examples],
            [e.output for e in examples],
            mask=training.mask,
            instruction=task.instruction,
            progress=config.progress,
        )
        result.save(where)
        return result

    attention = stages("attention", compute, AttentionResult.load)
    means = attention.means()
    numbers = {setting: means.loc[setting].round(5).to_dict() for setting in means.index}
    text = (
        f"{len(attention.prompts)} held-out prompts; mean attention of the last position on "
        "the answer word's tokens:\n\n"
        f"{markdown_table(means.reset_index(), floatfmt='.4f', index=False)}\n\n"
        f"Top heads (masked run):\n\n"
        + markdown_table(
            attention.top_heads(attention.settings[-1], k=10), floatfmt=".4f", index=False
        )
    )
    write_outputs(
        config.out,
        title=f"Table 7: attention on the target ({config.task}, {attention.model})",
        markdown=text,
        figures={"table7_attention": attention.plot()},
        numbers=numbers,
    )
    return attention


main = command_line(Config, run, __doc__)

if __name__ == "__main__":
    raise SystemExit(main())
