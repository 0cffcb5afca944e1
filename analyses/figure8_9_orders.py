"""Heads up! Figures 8 and 9: the removal sweep in three orders on one prompt -- ascending trained
weight (Figure 2's order), the *influential* order (each head ranked by how much removing it alone
from the full model raises the answer's rank, applied to the first 31 % of the ascending order as
the paper does; Figure 8) and the ascending weight of a mask trained
from a low init (Figure 9; the paper's negative init is -3, which does not train on SmolLM2 in a
CPU schedule, so the default here is ``--negative-init 0``: see ``docs/reproduction.md``)
-- with the step where the answer becomes top-1 and stays (the switch) marked and reported for
each.

    python -m analyses.figure8_9_orders --task capitalize --out runs/figure8-9

Same options as :mod:`analyses.figure2_sweep`, plus the low-init schedule, or
``--negative-mask DIR`` to reuse a mask trained elsewhere. Resumable.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from analyses import figure2_sweep
from analyses._common import (
    LazyModel,
    command_line,
    help_of,
    markdown_table,
    mask_of,
    stages_of,
    write_outputs,
)
from analyses.figure8_many_words import PAPER_FRACTION
from lens_heads.heads_up import SweepResult, plot_sweeps


@dataclass
class Config(figure2_sweep.Config):
    negative_init: float = field(default=0.0, metadata=help_of("init mean of the second mask"))
    negative_steps: int = field(default=200, metadata=help_of("its training steps"))
    negative_lr: float = field(default=0.1, metadata=help_of("its peak learning rate"))
    negative_mask: str | None = field(
        default=None,
        metadata=help_of("a negative-init training folder to reuse instead of training one"),
    )
    out: str = field(default="runs/figure8-9", metadata=help_of("output folder"))


def run(config: Config) -> dict[str, SweepResult]:
    model = LazyModel(config.model)
    stages = stages_of(config, model)
    training = mask_of(config, stages, model)
    negative = mask_of(
        config,
        stages,
        model,
        name="training_negative",
        mask=config.negative_mask,
        init_mean=config.negative_init,
        steps=config.negative_steps,
        lr=config.negative_lr,
    )
    sweeps = {
        "ascending weight": figure2_sweep.sweep_of(config, stages, model, training.W),
        # the paper re-orders the first 320 of 1,024 heads of the ascending order (C.3.1)
        "influential": figure2_sweep.sweep_of(
            config,
            stages,
            model,
            training.W,
            name="sweep_influential_prefix",
            influential_k=round(PAPER_FRACTION * training.W.numel()),
        ),
        f"mask from init {negative.config.init_mean:g}": figure2_sweep.sweep_of(
            config, stages, model, negative.W, name="sweep_negative"
        ),
    }
    rows = []
    for label, sweep in sweeps.items():
        info = sweep.summary()
        rows.append(
            {
                "order": label,
                "switch step": info.get("switch_step"),
                "rank at start": info.get("target_rank_start"),
                "best rank": info.get("target_rank_best"),
                "best at": info.get("best_at_n_removed"),
                "rank at end": info.get("target_rank_end"),
            }
        )
    import pandas as pd

    table = pd.DataFrame(rows)
    first = next(iter(sweeps.values()))
    text = (
        f"Prompt {first.prompt!r}, answer {first.target!r}; the positive-init mask keeps "
        f"{training.mask.n_selected} heads, the one from init {negative.config.init_mean:g} "
        f"{negative.mask.n_selected} "
        f"(its final training loss {negative.final_loss:.2f} against {training.final_loss:.2f})."
        f"\n\n{markdown_table(table, floatfmt='.0f', index=False)}"
    )
    positive = sweeps["ascending weight"]
    figures = {
        "figure8_orders": plot_sweeps(
            {"ascending weight": positive, "influential": sweeps["influential"]}
        ),
        "figure9_negative_init": plot_sweeps(
            {label: sweep for label, sweep in sweeps.items() if label != "influential"}
        ),
    }
    write_outputs(
        config.out,
        title=f"Figures 8 and 9: removal orders ({config.task}, {positive.model})",
        markdown=text,
        figures=figures,
        numbers={
            "prompt": first.prompt,
            "target": first.target,
            "heads kept": {
                "positive init": training.mask.n_selected,
                f"init {negative.config.init_mean:g}": negative.mask.n_selected,
            },
            "final loss": {
                "positive init": training.final_loss,
                f"init {negative.config.init_mean:g}": negative.final_loss,
            },
            "heads": int(training.W.numel()),
            "rows": rows,
        },
    )
    return sweeps


main = command_line(Config, run, __doc__)

if __name__ == "__main__":
    raise SystemExit(main())


#: a run on a tiny model (the tests add ``--steps 3 --n-eval 4 --no-progress --out DIR``) and
#: the figure it must write (tests/unit/tools/test_analyses_modules.py runs each analysis's)
EXAMPLE = (
    ["--task", "capitalize", "--every", "8", "--max-new-tokens", "0", "--negative-steps", "3"],
    "figure9_negative_init",
)
