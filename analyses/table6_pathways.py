"""Heads up! Table 6: functional pathways shared by a family of related tasks.

Trains one mask per family task from a low init (every head starts mostly removed and the task
switches on the heads it needs), then removes from the full model (a) the
heads every mask keeps, (b) the heads no mask keeps, and random head sets of the same sizes
(``--seeds`` seeds), and evaluates each task *with* its instruction on held-out examples
(answer CE, accuracy, exact match) through :func:`lens_heads.evaluate`. The paper's claim:
(a) hurts far more than its random control; (b) does not hurt (slightly helps).

    python -m analyses.table6_pathways --model smollm2-135m-instruct --out runs/table6/smollm2
    python -m analyses.table6_pathways --model gemma-3-270m --out runs/table6/gemma

The init: the paper's negative init is W ~ N(-3, 0.02). Under the paper's noise a head at -3 is
sampled on with probability 2e-9, so training starts from the all-heads-off model; on SmolLM2 the
gradient there is mostly noise and switching on a few heads raises the loss, so -3, -1 and -0.5
end 200 steps at a loss of 15.0, 11.5 and 10.3 (the full model: 5.2) -- see
``scripts/negative_init_diagnosis.py`` and ``docs/reproduction.md``, row 10. The default here is
``--init-mean 0`` (each head sampled on in 37 % of the examples, against 98 % from the usual
+4), the lowest of -3, -1, -0.5 and 0 that trains on SmolLM2 in the CPU schedule;
``--init-mean -3`` is the paper's.

Default families: on SmolLM2 the letter tasks capitalize, capitalize_first_letter and
lowercase_last_letter; on Gemma 3 270M (and any other model) the built-in sentence translation
pairs en-fr, en-de and en-es (``--tasks`` picks others). Writes ``<out>/masks/<task>/`` (the
training results; a finished task is reused, an interrupted one resumes from its checkpoint),
``<out>/runs/<task>/<condition>.json`` (each evaluation, reused by a re-run with the same heads
and settings), and the result folder itself: ``table.md`` (with the verdict), ``table.csv``,
``runs.csv``, ``summary.csv``, ``result.json``, ``figure.html``, ``numbers.json`` (the stored
result, the family under ``--name``); ``tasks-per-head/`` shows where the family's masks overlap.
``--masks DIR`` uses masks trained elsewhere instead of training.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lens_heads as lh
from analyses._common import parse
from analyses.table5_mask_stats import short_name
from lens_heads.core import write_atomic

#: The default family of each offline model (others get the translation pairs).
FAMILIES = {
    "smollm2-135m-instruct": ("capitalize", "capitalize_first_letter", "lowercase_last_letter"),
    "gemma-3-270m": ("en-fr", "en-de", "en-es"),
}
TRANSLATION_FAMILY = ("en-fr", "en-de", "en-es")
#: the name a default family is stored under (``numbers.json``); others are named with --name
FAMILY_NAMES = {FAMILIES["smollm2-135m-instruct"]: "letter", TRANSLATION_FAMILY: "translation"}


@dataclass(frozen=True)
class Config:
    """What :func:`run` trains and evaluates; the training is the short CPU schedule from
    ``init_mean`` (``holdout`` examples per task are never trained on; ``n_eval`` of them,
    at most ``holdout``, are evaluated)."""

    model: str = "smollm2-135m-instruct"
    """The model (an alias, a .gguf file or a checkpoint folder)."""
    tasks: tuple[str, ...] | None = None
    """The family of tasks (None: the model's family, see above)."""
    out: str | None = None
    """The output folder (None: runs/table6/<model>)."""
    masks: str | None = None
    """Use the masks of this folder instead of training them."""
    steps: int = 200
    """Training steps per mask."""
    lr: float = 0.1
    """Training learning rate."""
    batch_size: int = 8
    """Training batch size."""
    holdout: int = 100
    """Examples per task never trained on."""
    init_mean: float = 0.0
    """Mean of the mask logits at the start of training."""
    n_eval: int = 40
    """Held-out examples evaluated per task (at most holdout)."""
    seeds: int = 3
    """Random head sets per size."""
    eval_batch_size: int = 16
    """Prompts decoded together in the evaluation."""
    device: str = "cpu"
    """cpu, cuda or auto."""
    dtype: str = "float32"
    """The model's weights dtype: float32, auto, ..."""
    name: str | None = None
    """What numbers.json calls the family (None: by family)."""

    @property
    def family(self) -> tuple[str, ...]:
        return self.tasks or FAMILIES.get(self.model, TRANSLATION_FAMILY)

    @property
    def family_name(self) -> str:
        """What ``numbers.json`` calls the family (``--name``, else its default name)."""
        return self.name or FAMILY_NAMES.get(tuple(self.family), "family")

    @property
    def out_folder(self) -> Path:
        if self.out is not None:
            return Path(self.out)
        return Path("runs/table6") / short_name(self.model)

    def implied_settings(self) -> dict[str, Any]:
        """The task family a default resolves to (whose data the provenance hashes)."""
        return {"tasks": self.family}

    def training_config(self) -> lh.TrainingConfig:
        return lh.TrainingConfig.short(
            steps=self.steps,
            lr=self.lr,
            batch_size=self.batch_size,
            n_eval=self.holdout,
            init_mean=self.init_mean,
        )


def run(config: Config) -> lh.PathwaysResult:
    """Train (or reuse) the family's masks, evaluate Table 6 and write it all to
    ``config.out_folder``."""
    if len(config.family) < 2:
        raise ValueError(
            f"a task family needs at least two related tasks, got {list(config.family)}; "
            "give --tasks a,b[,c]"
        )
    if config.n_eval > config.holdout:
        raise ValueError(
            f"n_eval ({config.n_eval}) exceeds holdout ({config.holdout}): the evaluation would "
            "see training examples; lower --n-eval or raise --holdout"
        )
    out = config.out_folder
    model = lh.load_model(config.model, device=config.device, dtype=config.dtype)
    if config.masks is not None:
        masks = lh.load_masks(config.masks)
    else:
        masks = lh.train_family_masks(
            model, config.family, config.training_config(), out=out / "masks"
        )
    result = lh.functional_pathways(
        model,
        config.family,
        masks,
        random_seeds=tuple(range(config.seeds)),
        n_eval=config.n_eval,
        batch_size=config.eval_batch_size,
        cache_dir=out / "runs",
    )
    result.config.update(
        training=None if config.masks else config.training_config().to_dict(),
        masks_folder=config.masks,
    )
    result.save(out)
    family_masks = {name: masks[name] for name in result.tasks}
    lh.tasks_per_head(family_masks).save(out / "tasks-per-head")
    provenance = _provenance(config, result.tasks)
    numbers = {config.family_name: numbers_of(result), "provenance": provenance}
    write_atomic(out / "numbers.json", json.dumps(numbers, indent=2, default=str))
    return result


def numbers_of(result: lh.PathwaysResult) -> dict[str, Any]:
    """The stored numbers of one family: the sizes of (a) and (b), the mean change of the
    instructed answer CE when each is removed and when random sets of their sizes are, and on
    how many tasks (a) hurts more than random and (b) lowers the CE below the full model's."""
    table = result.summary()

    def mean(column: str) -> float:
        return round(float((table[f"CE {column}"] - table["CE full"]).mean()), 2)

    return {
        "shared heads": len(result.shared),
        "unused heads": len(result.unused),
        "shared: CE rise": mean("shared"),
        "shared: random CE rise": mean("random shared"),
        "shared: tasks worse than random": int(table["shared hurts more"].sum()),
        "unused: CE change": mean("unused"),
        "unused: random CE change": mean("random unused"),
        "unused: tasks improved": int((table["CE unused"] < table["CE full"]).sum()),
        "tasks": len(table),
    }


def _provenance(config: Config, tasks: Sequence[str]) -> dict[str, Any]:
    """The command, code, machine and the masks' training precision."""
    from analyses._common import note_mask_precision, provenance_of

    folder = Path(config.masks) if config.masks is not None else config.out_folder / "masks"
    for task in tasks:
        note_mask_precision(folder / task)
    return provenance_of(["python", "-m", "analyses.table6_pathways", *sys.argv[1:]], config=config)


def main(argv: Sequence[str] | None = None) -> int:
    config = parse(Config, argv, __doc__)
    run(config)
    print((config.out_folder / "table.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


#: where this analysis runs on a tiny model (it needs more than the shared tiny-run example)
TESTED_BY = "tests/unit/heads_up/test_pathways.py"
