"""Heads up! Table 3: one mask trained on a *hybrid multi-task few-shot* set (examples of several
tasks shuffled together, each preceded by demonstrations of its own task), then evaluated on each
task's held-out queries in the same k-shot format: Original (demonstrations only), w/ random M
and w/ M -- does one mask help the model infer each task from its demonstrations?

    python -m analyses.table3_few_shot --tasks capitalize,next_item,antonym --out runs/table3

Resumable (training and each task's evaluation are stages).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

import lens_heads as lh
from analyses._common import (
    DEFAULT_MODEL,
    LazyModel,
    command_line,
    help_of,
    markdown_table,
    stages_of,
    trained_mask,
    write_outputs,
)
from lens_heads.core.prompts import hybrid_few_shot
from lens_heads.engine import EvaluationResult

HOLDOUT = 100  # each task's last examples, never used as training queries or demonstrations


@dataclass
class Config:
    model: str = field(default=DEFAULT_MODEL, metadata=help_of("model alias or path"))
    tasks: tuple[str, ...] = field(
        default=("capitalize", "next_item", "antonym"), metadata=help_of("the task family")
    )
    shots: int = field(default=3, metadata=help_of("demonstrations per query"))
    n_per_task: int = field(default=200, metadata=help_of("training queries per task"))
    steps: int = field(default=100, metadata=help_of("training steps"))
    lr: float = field(default=0.2, metadata=help_of("peak learning rate"))
    seed: int = field(default=0, metadata=help_of("training and sampling seed"))
    n_eval: int = field(default=40, metadata=help_of("held-out queries per task"))
    random_seeds: tuple[int, ...] = field(default=(0, 1), metadata=help_of("random-M seeds"))
    progress: bool = field(default=True, metadata=help_of("progress bars"))
    out: str = field(default="runs/table3", metadata=help_of("output folder"))

    def __post_init__(self) -> None:
        if len(self.tasks) < 2:
            raise ValueError(
                f"a hybrid multi-task set needs at least two tasks, got {list(self.tasks)}; "
                "pass --tasks a,b[,c]"
            )


def run(config: Config) -> pd.DataFrame:
    stages, model = stages_of(config), LazyModel(config.model)
    mixture = hybrid_few_shot(
        config.tasks,
        shots=config.shots,
        n_per_task=config.n_per_task,
        n_eval=HOLDOUT,
        split="train",
        seed=config.seed,
    )
    training = trained_mask(
        stages,
        model,
        mixture,
        steps=config.steps,
        lr=config.lr,
        seed=config.seed,
        progress=config.progress,
        n_eval=0,
    )
    rows = []
    for name in config.tasks:
        queries = hybrid_few_shot(
            [name],
            shots=config.shots,
            n_per_task=2 * config.n_eval,
            n_eval=HOLDOUT,
            split="eval",
            seed=config.seed,
            name=f"{name} ({config.shots}-shot)",
        )

        def compute(where: Path, queries: lh.Task = queries) -> EvaluationResult:
            result = lh.evaluate(
                model(),
                queries,
                ["original", "random", "mask"],
                mask=training.mask,
                n_eval=config.n_eval,
                random_seeds=config.random_seeds,
                progress=config.progress,
            )
            result.save(where)
            return result

        evaluation = stages(f"eval_{name}", compute, EvaluationResult.load)
        frame = evaluation.to_frame().reset_index()
        frame.insert(0, "task", name)
        rows.append(frame)
    table = pd.concat(rows, ignore_index=True)
    table = table[[c for c in table.columns if not c.endswith(" std") or table[c].notna().any()]]
    table.to_csv(Path(config.out) / "table.csv", index=False)
    text = (
        f"Mask trained on a {config.shots}-shot mixture of {', '.join(config.tasks)} "
        f"({training.mask.n_selected}/{training.W.numel()} heads kept, {config.steps} steps); "
        f"each task evaluated on {config.n_eval} held-out queries in the same format.\n\n"
        + markdown_table(table, floatfmt=".3f", index=False)
    )
    write_outputs(
        config.out,
        title=f"Table 3: a hybrid few-shot mask on {training.model}",
        markdown=text,
        figures={"training_loss": training.plot_loss()},
        numbers={"rows": table.to_dict(orient="records")},
    )
    return table


main = command_line(Config, run, __doc__)

if __name__ == "__main__":
    raise SystemExit(main())
