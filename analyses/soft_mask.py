"""LAHIS soft mask on translation (the LAHIS README's soft-mask experiment): the heads of the
target language are ranked once by their importance on built-in corpus sentences that are not
held out; then, for each fraction of all heads, a soft mask (multipliers from 1) is trained on
the top heads and one per seed on as many random heads, and each is compared with no mask on
the same held-out sentences (answer CE, chrF++).

    python -m analyses.soft_mask --model gemma-3-270m --task en-fr --out runs/soft-mask

The stored numbers (``numbers.json``) are what ``docs/reproduction.md``'s LAHIS soft-mask row
reads. Resumable: the ranking and each fraction's experiment are stages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lens_heads as lh
from analyses._common import (
    LazyModel,
    command_line,
    help_of,
    precision_field,
    stages_of,
    write_outputs,
)
from lens_heads.engine import METRICS
from lens_heads.lahis import (
    HeadImportance,
    SoftMaskConfig,
    SoftMaskExperiment,
    ranking_documents,
    soft_mask_config,
    soft_mask_experiment,
)

#: the conditions of a stored row, in the order its lists hold them
_ROW = ("no mask", "soft mask, top heads", "soft mask, random heads")


@dataclass
class Config:
    model: str = field(default="gemma-3-270m", metadata=help_of("model alias or path"))
    task: str = field(default="en-fr", metadata=help_of("translation task"))
    language: str | None = field(
        default=None, metadata=help_of("language whose heads are ranked (default: the target)")
    )
    n_docs: int = field(default=32, metadata=help_of("corpus sentences for the ranking"))
    fractions: tuple[float, ...] = field(
        default=(0.02, 0.05), metadata=help_of("top shares of all heads, one experiment each")
    )
    random_seeds: tuple[int, ...] = field(default=(0, 1), metadata=help_of("random head sets"))
    n_train: int = field(default=200, metadata=help_of("training examples"))
    epochs: int = field(default=2, metadata=help_of("passes over the training examples"))
    n_eval: int = field(default=20, metadata=help_of("held-out sentences"))
    shots: int = field(default=1, metadata=help_of("demonstrations in every prompt"))
    max_new_tokens: int = field(default=32, metadata=help_of("greedy tokens per output"))
    precision: str = precision_field()
    progress: bool = field(default=True, metadata=help_of("progress bars"))
    out: str = field(default="runs/soft-mask", metadata=help_of("output folder"))


def _experiment_config(config: Config, fraction: float) -> SoftMaskConfig:
    return SoftMaskConfig(
        fraction=fraction,
        random_seeds=config.random_seeds,
        n_train=config.n_train,
        epochs=config.epochs,
        training=soft_mask_config(shots=config.shots, precision=config.precision),
        n_eval=config.n_eval,
        max_new_tokens=config.max_new_tokens,
        progress=config.progress,
    )


def row_numbers(result: SoftMaskExperiment) -> dict[str, Any]:
    """One fraction's stored numbers: trained multipliers per mask, training steps, and answer
    CE and chrF++ as (no mask, top heads, random mean, random std)."""
    table = result.to_frame()
    numbers: dict[str, Any] = {
        "trained parameters": len(result.top_heads),
        "steps": int(result.config["steps"]),
        "held-out sentences": result.n_eval,
    }
    for key, name in (("answer_ce", "answer CE"), ("chrf", "chrF++")):
        column = METRICS[key]
        values = [float(table.loc[condition, column]) for condition in _ROW]
        values.append(float(table.loc[_ROW[2], f"{column} std"]))
        numbers[f"{name} (no mask, top heads, random mean, random std)"] = [
            round(v, 3) for v in values
        ]
    return numbers


def run(config: Config) -> dict[str, Any]:
    model = LazyModel(config.model)
    stages = stages_of(config, model)
    task = lh.get_task(config.task)
    for fraction in config.fractions:  # bad settings fail before the model loads
        _experiment_config(config, fraction).check(task)
    documents = ranking_documents(task, config.language, n_docs=config.n_docs, n_eval=config.n_eval)
    ranking = stages(
        "importance",
        lambda where: _saved(
            lh.head_importance(model(), documents, progress=config.progress), where
        ),
        HeadImportance.load,
    )
    numbers: dict[str, Any] = {"task": config.task, "language": config.language or task.target_lang}
    sections, figures = [], {}
    for fraction in config.fractions:
        settings = _experiment_config(config, fraction)

        def experiment(where: Path, settings: SoftMaskConfig = settings) -> SoftMaskExperiment:
            return soft_mask_experiment(
                model(), task, ranking, language=config.language, out=where, config=settings
            )

        result = stages(f"fraction-{fraction}", experiment, SoftMaskExperiment.load)
        numbers[f"fraction {fraction}"] = row_numbers(result)
        sections.append(f"## Top {fraction:.0%} of the heads\n\n{result.to_markdown()}")
        figures[f"soft_mask_fraction_{fraction}"] = result.plot()
    write_outputs(
        config.out,
        title=f"LAHIS soft mask on {config.task} ({config.model})",
        markdown="\n\n".join(sections),
        figures=figures,
        numbers=numbers,
    )
    return numbers


def _saved(ranking: HeadImportance, where: Path) -> HeadImportance:
    ranking.save(where, png=False)
    return ranking


main = command_line(Config, run, __doc__)
EXAMPLE = (
    [
        *("--n-docs", "4", "--n-train", "8", "--epochs", "1", "--max-new-tokens", "2"),
        *("--fractions", "0.25", "--random-seeds", "0"),
    ],
    "soft_mask_fraction_0.25",
)

if __name__ == "__main__":
    raise SystemExit(main())
