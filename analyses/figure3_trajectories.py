"""Heads up! Figure 3: the keep probability sigmoid(W) of every head during mask training --
most heads settle early; a few cross 0.5 more than once.

    python -m analyses.figure3_trajectories --task capitalize --out runs/figure3

Resumable: an interrupted training continues from its checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
from lens_heads.engine import MaskTrainingResult


@dataclass
class Config(MaskedTaskConfig):
    out: str = field(default="runs/figure3", metadata=help_of("output folder"))


def run(config: Config) -> MaskTrainingResult:
    stages = stages_of(config)
    training = mask_of(config, stages, LazyModel(config.model))
    heads = training.to_frame()
    changed = heads[heads["crossings"] > 1].sort_values("crossings", ascending=False)
    summary = training.summary()
    numbers = {
        **summary,
        "heads crossing 0.5 more than once": len(changed),
        "heads that never crossed 0.5": int((heads["crossings"] == 0).sum()),
    }
    text = "\n".join(f"- {key}: {value}" for key, value in numbers.items())
    text += "\n\nHeads that changed their mind (crossed 0.5 more than once):\n\n"
    text += markdown_table(
        changed[["label", "p", "kept", "crossings"]].head(15), floatfmt=".3f", index=False
    )
    write_outputs(
        config.out,
        title=f"Figure 3: mask weights during training ({config.task}, {training.model})",
        markdown=text,
        figures={
            "figure3_trajectories": training.plot_trajectories(),
            "training_loss": training.plot_loss(),
        },
        numbers=numbers,
    )
    return training


main = command_line(Config, run, __doc__)

if __name__ == "__main__":
    raise SystemExit(main())
