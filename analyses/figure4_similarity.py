"""Heads up! Figure 4 over many prompts: per layer, the cosine similarity of the last position's
residual stream between the masked run and the instructed run, against the original (bare) run
and the instructed run -- mean and 95 % interval over held-out inputs, and the paired test of the
paper's claim (masked closer to instructed than the original is) over the later half of layers.

    python -m analyses.figure4_similarity --task capitalize --n-prompts 40 --out runs/figure4
    python -m analyses.figure4_similarity --answer-end none --out runs/figure4-answer-only

``--answer-end none`` trains the mask on the answer alone (no end-of-turn token in the target),
the setting under which issue 12 saw the direction reverse. Resumable (training and
similarity stages are reused).
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
    mask_of,
    stages_of,
    write_outputs,
)
from lens_heads.heads_up import SimilarityStats


@dataclass
class Config(MaskedTaskConfig):
    n_prompts: int = field(default=40, metadata=help_of("held-out inputs compared"))
    answer_end: str = field(
        default="auto",
        metadata=help_of("what closes each training target: auto (end of turn) or none"),
    )
    out: str = field(default="runs/figure4", metadata=help_of("output folder"))


def run(config: Config) -> SimilarityStats:
    model = LazyModel(config.model)
    stages = stages_of(config, model)
    if config.answer_end != "auto" and config.mask is not None:
        raise ValueError("--answer-end trains a mask; it cannot apply to a given --mask")
    training = mask_of(config, stages, model, answer_end=config.answer_end)

    def compute(where: Path) -> SimilarityStats:
        task = config.task_object()
        if not task.instruction:
            raise ValueError(f"task {task.name!r} has no instruction to compare with")
        result = lh.figure4_similarity(
            model(),
            config.held_out(),
            task.instruction,
            training.mask,
            n_prompts=config.n_prompts,
            progress=config.progress,
        )
        result.save(where)
        return result

    stats = stages("similarity", compute, SimilarityStats.load)
    write_outputs(
        config.out,
        title=f"Figure 4: layer similarity over {stats.n_prompts} prompts ({config.task})",
        markdown=stats.to_markdown() + "\n" + stats.verdict(),
        figures={"figure4_similarity": stats.plot()},
        numbers=stats.difference(),
    )
    return stats


main = command_line(Config, run, __doc__)

if __name__ == "__main__":
    raise SystemExit(main())


#: a run on a tiny model (the tests add ``--steps 3 --n-eval 4 --no-progress --out DIR``) and
#: the figure it must write (tests/unit/tools/test_analyses_modules.py runs each analysis's)
EXAMPLE = (["--task", "capitalize", "--n-prompts", "3"], "figure4_similarity")
