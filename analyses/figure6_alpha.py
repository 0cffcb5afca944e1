"""Heads up! Figure 6 and Table 8: the heads a trained mask M removes are scaled by alpha
instead (0: M, 1: the full model) and the task is evaluated with its instruction at each alpha;
the un-instructed masked model is the reference point. Table 8 compares, on held-out examples,
the instructed full model, the instructed model with M and with the best-alpha M (alpha chosen
on the examples just before the held-out ones).

    python -m analyses.figure6_alpha --model smollm2-135m-instruct --task capitalize \\
        --out runs/figure6/capitalize
    python -m analyses.figure6_alpha --mask runs/mask-table/smollm2/capitalize --out DIR

Without ``--mask`` (or with ``--mask train``) a mask is trained first with
:func:`lens_heads.train_mask` on the short schedule (``--steps``, checkpointed in
``<out>/mask/``, resumed if interrupted); ``--mask`` takes a mask file or a train-mask output
folder instead. ``<out>`` then holds ``curve/`` (the :class:`~lens_heads.AlphaCurve` of
Figure 6), ``table8/`` (the curve at alphas 0, best, 1 on the held-out examples),
``figure6.html``, ``summary.md`` and ``summary.json``. Finished parts are reused, so the
command can be re-run until it completes; ``<out>/config.json`` guards against mixing two
configurations in one folder.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lens_heads as lh
from analyses._common import check_config, note_mask_precision, parse, provenance_of
from lens_heads.core import HeadMask, resolve_mask, write_atomic
from lens_heads.engine import train_or_resume
from lens_heads.heads_up import DEFAULT_ALPHAS, AlphaCurve, check_alphas, table8

__all__ = ["Config", "Figure6Result", "main", "run"]

#: Measured before this module (issue 15, an independent script), for comparison.
#: the paper's own reading (Heads up! Figure 6 and Table 8), beside every run's numbers
PAPER = (
    "The paper (Llama3.1-8B-inst, instructed translation): the hard mask (alpha 0) is below the "
    "full model (alpha 1) on all six XNLI pairs of Figure 6, the lowest PPL is near alpha 0.2-0.3, "
    "and on IWSLT2017 (Table 8) M raises BLEU on every pair with a tiny further gain from the "
    "scaled mask (en-fr 0.699 / 0.716 / 0.717)."
)


@dataclass
class Config:
    """One Figure 6 run. Defaults are small (minutes on a CPU); ``steps``, ``train_batch_size``,
    ``lr`` and ``holdout`` only matter when the mask is trained here."""

    model: str = "smollm2-135m-instruct"
    """The model (an alias, a .gguf file or a checkpoint folder)."""
    task: str = "capitalize"
    """A built-in task or a task file."""
    out: str = "runs/figure6"
    """The output folder."""
    mask: str | None = None
    """A mask file or a train-mask folder (None or 'train': train one here)."""
    alphas: tuple[float, ...] = DEFAULT_ALPHAS
    """The scales of the removed heads' outputs."""
    n_eval: int = 40
    """Held-out examples evaluated."""
    n_select: int = 40
    """Examples before the held-out ones on which Table 8's alpha is chosen."""
    batch_size: int = 16
    """Prompts decoded together in the evaluation."""
    steps: int = 200
    """Training steps."""
    train_batch_size: int = 8
    """Training batch size."""
    lr: float = 0.1
    """Training learning rate."""
    holdout: int = 100
    """Examples held out of training."""
    seed: int = 0
    """Training seed."""
    shots: int = 0
    """Demonstrations (without instruction) before every prompt, in training and evaluation."""
    progress: bool = True
    """Show progress bars (not part of the stored configuration)."""

    def __post_init__(self) -> None:
        if self.mask == "train":
            self.mask = None
        self.alphas = tuple(check_alphas(self.alphas))  # before any training
        if self.trains and self.n_eval + self.n_select > self.holdout:
            raise ValueError(
                f"n_eval + n_select ({self.n_eval} + {self.n_select}) exceed the {self.holdout} "
                "examples held out of training: raise --holdout or lower --n-eval/--n-select"
            )

    @property
    def trains(self) -> bool:
        return self.mask is None


@dataclass
class Figure6Result:
    """The curve (Figure 6), Table 8 and the mask they scale."""

    config: Config
    mask: HeadMask
    curve: AlphaCurve
    table: AlphaCurve
    written: list[Path] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        curve, table = self.curve, self.table
        return {
            "model": curve.model,
            "task": curve.task,
            "heads_kept": self.mask.n_selected,
            "heads": self.mask.values.numel(),
            "n_eval": curve.config.get("n_eval"),
            "shots": curve.config.get("shots", 0),
            "answer_ce_alpha_1": curve.value(1.0) if 1.0 in curve.alphas else None,
            "answer_ce_alpha_0": curve.value(0.0) if 0.0 in curve.alphas else None,
            "best_alpha_on_curve": curve.best_alpha,
            "answer_ce_best": curve.value(curve.best_alpha),
            "answer_ce_uninstructed_alpha_0": curve.uninstructed_ce,
            "table8_alpha": table.config.get("best_alpha"),
            "table8_alpha_selection": table.config.get("best_alpha_selection"),
            "table8": table.table8_frame().reset_index().to_dict(orient="records"),
        }

    def to_markdown(self) -> str:
        config = self.config
        source = "trained here (short schedule)" if config.trains else f"from {config.mask}"
        return "\n".join(
            [
                f"# Figure 6 and Table 8: {self.curve.task} on {self.curve.model}",
                "",
                f"Mask {source}: {self.mask.n_selected}/{self.mask.values.numel()} heads kept.",
                "",
                "## Figure 6: answer CE against alpha (with instruction)",
                "",
                self.curve.to_markdown(table8=False),
                "## Table 8 (held-out examples)",
                "",
                self.table.table8_markdown(),
                "## The paper",
                "",
                PAPER,
                "",
            ]
        )


def _mask(config: Config, model: Any, out: Path) -> HeadMask:
    """The mask: given (a file or a train-mask folder), or trained, resumably, in
    ``<out>/mask``."""
    if not config.trains:
        return resolve_mask(note_mask_precision(config.mask), model)
    schedule = lh.TrainingConfig.short(
        steps=config.steps,
        batch_size=config.train_batch_size,
        lr=config.lr,
        n_eval=config.holdout,
        seed=config.seed,
        shots=config.shots,
    )
    task = lh.get_task(config.task)
    result = train_or_resume(
        model, task, schedule, out / "mask", progress=config.progress, figures=True
    )
    return note_mask_precision(result).mask


def _cached(folder: Path, compute: Any) -> AlphaCurve:
    """The curve saved in ``folder``, or ``compute()`` saved there."""
    if (folder / "result.json").is_file():
        return AlphaCurve.load(folder)
    curve = compute()
    curve.save(folder)
    return curve


def run(config: Config, model: Any = None, command: Sequence[str] = ()) -> Figure6Result:
    """Train or load the mask, compute the curve and Table 8 (each reused when saved), write
    ``figure6.html``, ``summary.md`` and ``summary.json``."""
    started = time.monotonic()
    command = list(command) or ["(run from Python)"]
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    model = lh.load_model(config.model) if model is None else model
    check_config(config, model)  # the model, its inputs and settings, before anything reused
    mask = _mask(config, model, out)
    evaluation = dict(
        n_eval=config.n_eval,
        batch_size=config.batch_size,
        progress=config.progress,
        shots=config.shots,
    )
    curve = _cached(
        out / "curve",
        lambda: lh.alpha_curve(model, config.task, mask, alphas=config.alphas, **evaluation),
    )
    table = _cached(
        out / "table8",
        lambda: table8(
            model,
            config.task,
            mask,
            alphas=config.alphas,
            n_select=config.n_select,
            **evaluation,  # type: ignore[arg-type]
        ),
    )
    result = Figure6Result(config, mask, curve, table)
    result.written = [
        write_atomic(out / "figure6.html", curve.plot().to_html(include_plotlyjs=True)),
        write_atomic(out / "summary.md", result.to_markdown()),
        write_atomic(out / "summary.json", json.dumps(result.summary(), indent=1, default=str)),
        write_atomic(
            out / "numbers.json",
            json.dumps(
                {**result.summary(), "provenance": provenance_of(command, started, config)},
                indent=1,
                default=str,
            ),
        ),
    ]
    return result


def main(argv: Sequence[str] | None = None) -> int:
    config = parse(Config, argv, __doc__)
    arguments = list(sys.argv[1:] if argv is None else argv)
    result = run(config, command=["python", "-m", "analyses.figure6_alpha", *arguments])
    print(result.to_markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


#: where this analysis runs on a tiny model (it needs more than the shared tiny-run example)
TESTED_BY = "tests/unit/heads_up/test_alpha.py"
