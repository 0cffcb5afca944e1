"""Heads up! Figure 3: the keep probability sigmoid(W) of every head during mask training, and
its *dependent changes*: heads that join the mask late, heads dropped after being kept, heads
that change more than once -- and whether different heads' changes fall together in time more
than chance (:func:`lens_heads.heads_up.dependent_changes`). The paper reads such
changes as evidence that heads depend on each other; it gives no counts.

    python -m analyses.figure3_trajectories --task capitalize --out runs/figure3
    python -m analyses.figure3_trajectories --init-mean -1 --steps 400 --out runs/figure3-init-1

``--init-mean`` starts the mask lower than the paper's +4 (every head in), so that heads have
to join. Resumable: an interrupted training continues from its checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

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
from lens_heads.heads_up import dependent_changes


@dataclass
class Config(MaskedTaskConfig):
    init_mean: float = field(default=4.0, metadata=help_of("mean of the W init (paper: 4)"))
    out: str = field(default="runs/figure3", metadata=help_of("output folder"))


def run(config: Config) -> MaskTrainingResult:
    model = LazyModel(config.model)
    stages = stages_of(config, model)
    training = mask_of(config, stages, model, init_mean=config.init_mean)
    changes = dependent_changes(training)
    summary = training.summary()
    numbers = {
        **summary,
        "init_mean": training.config.init_mean,
        "dependent changes": changes.summary(),
        "heads crossing 0.5 more than once": changes.counts()["changed more than once"],
        "heads that never crossed 0.5": int((changes.heads["crossings"] == 0).sum()),
    }
    text = "\n".join(f"- {key}: {value}" for key, value in summary.items())
    text += (
        f"\n- init mean: {training.config.init_mean:g}\n\nDependent changes "
        f"(crossings of 0.5 within {changes.window_steps} steps count as together; p from "
        f"{changes.shuffles} random shifts of each head's crossings):\n\n"
        + markdown_table(changes.to_frame(), floatfmt=".3f", index=False)
        + "\n\n"
        + markdown_table(pd.DataFrame([changes.summary()]), floatfmt=".3g", index=False)
    )
    write_outputs(
        config.out,
        title=f"Figure 3: mask weights during training ({config.task}, {training.model})",
        markdown=text,
        figures={
            "figure3_trajectories": training.plot_trajectories(),
            "dependent_changes": changes.plot(),
            "training_loss": training.plot_loss(),
        },
        numbers=numbers,
    )
    return training


main = command_line(Config, run, __doc__)

if __name__ == "__main__":
    raise SystemExit(main())


#: a run on a tiny model (the tests add ``--steps 3 --n-eval 4 --no-progress --out DIR``) and
#: the figure it must write (tests/unit/tools/test_analyses_modules.py runs each analysis's)
EXAMPLE = (["--task", "capitalize"], "figure3_trajectories")
