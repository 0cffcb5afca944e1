"""Heads up! logit-lens tables (Table 41 and Table 4b): the top-1 token of the residual stream
after every layer (final norm applied) in the original, instructed and masked runs of one
held-out prompt, and the probability and rank of the answer token per layer.

    python -m analyses.logit_lens_tables --task capitalize --out runs/logit-lens

The prompt is ``--word`` or the first held-out input whose answer is one token. Resumable.
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
from lens_heads.core import has_chat_template
from lens_heads.heads_up import LogitLensResult, sweep_example


@dataclass
class Config(MaskedTaskConfig):
    word: str | None = field(default=None, metadata=help_of("held-out input to read"))
    out: str = field(default="runs/logit-lens", metadata=help_of("output folder"))


def run(config: Config) -> LogitLensResult:
    model = LazyModel(config.model)
    stages = stages_of(config, model)
    training = mask_of(config, stages, model)

    def compute(where: Path) -> LogitLensResult:
        task = config.task_object()
        chat = has_chat_template(model().tokenizer)
        if config.word is None:
            example = sweep_example(model(), config.held_out(), chat)
        else:
            example = next((e for e in task.examples if e.input == config.word), None)
            if example is None:
                raise ValueError(f"{config.word!r} is not an input of task {task.name!r}")
        result = lh.logit_lens(
            model(),
            example.input,
            mask=training.mask,
            instruction=task.instruction,
            targets=[example.output],
            chat=chat,
        )
        result.save(where)
        return result

    lens = stages("logit_lens", compute, LogitLensResult.load)
    frame = lens.to_frame().reset_index()
    target = lens.targets[0]
    final = frame[frame["layer"] == lens.layers[-1]]
    numbers = {
        row["setting"]: {"top-1": row["top-1"], f"rank({target})": int(row[f"rank({target})"])}
        for _, row in final.iterrows()
    }
    ranks = frame.pivot(index="layer", columns="setting", values=f"rank({target})")
    ranks = ranks.reindex(lens.layers)[lens.settings]
    text = (
        f"Prompt {lens.prompts[0]!r}, answer {target!r}.\n\n"
        f"Table 41 (top-1 token and its probability per layer):\n\n{lens.to_markdown()}\n\n"
        f"Table 4b (rank of the answer token per layer):\n\n"
        + markdown_table(ranks.reset_index(), floatfmt=".0f", index=False)
    )
    write_outputs(
        config.out,
        title=f"Logit lens ({config.task}, {lens.model})",
        markdown=text,
        figures={"logit_lens": lens.plot()},
        numbers=numbers,
    )
    return lens


main = command_line(Config, run, __doc__)

if __name__ == "__main__":
    raise SystemExit(main())


#: a run on a tiny model (the tests add ``--steps 3 --n-eval 4 --no-progress --out DIR``) and
#: the figure it must write (tests/unit/tools/test_analyses_modules.py runs each analysis's)
EXAMPLE = (["--task", "capitalize"], "logit_lens")
