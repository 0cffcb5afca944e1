"""Which head finder to trust (issue 46): every head ranking of the toolkit, measured by its
faithfulness (MIB's CPR and CMD at the level of heads) on held-out prompts with counterfactuals.

    python -m analyses.head_finders --model smollm2-135m-instruct --tasks ioi,capitalize \\
        --out runs/finders/smollm2

Each method ranks the heads from the task's training part; each ranking's circuits of MIB's sizes
keep their top heads and patch every other head with its output on the counterfactual prompt.
Writes ``summary.md``, ``numbers.json`` (the leaderboard, per task and method: CPR and CMD with
their intervals, the cost, the comparison with the best gradient method), the figures, and the
benchmark's stages and result (``<out>/benchmark``; a killed run resumes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import lens_heads as lh
from analyses._common import DEFAULT_MODEL, command_line, help_of, write_outputs
from lens_heads.finders import (
    DEFAULT_METHODS,
    SIZES,
    BenchmarkConfig,
    FinderBenchmark,
    MethodConfig,
    head_finder_benchmark,
)


@dataclass
class Config:
    model: str = field(default=DEFAULT_MODEL, metadata=help_of("model alias or path"))
    tasks: tuple[str, ...] = field(
        default=("ioi", "capitalize", "country-capital", "antonym"),
        metadata=help_of("ioi and toolkit task names or files"),
    )
    methods: tuple[str, ...] = field(
        default=DEFAULT_METHODS, metadata=help_of("head finders (lens_heads.finders.METHODS)")
    )
    n_pairs: int = field(default=40, metadata=help_of("held-out pairs per task"))
    n_train_pairs: int = field(default=40, metadata=help_of("training pairs per task"))
    n_calibration_pairs: int = field(
        default=0, metadata=help_of("pairs the calibrated methods cut on (0: the training pairs)")
    )
    n_eval: int = field(default=200, metadata=help_of("examples held out of every method"))
    bootstrap: int = field(default=1000, metadata=help_of("bootstrap resamples"))
    sizes: tuple[float, ...] = field(default=SIZES, metadata=help_of("circuit sizes"))
    mask_steps: int = field(default=100, metadata=help_of("Heads up! training steps"))
    chg_steps: int = field(default=100, metadata=help_of("steps of each CHG fit"))
    ig_steps: int = field(default=16, metadata=help_of("integrated-gradient midpoints"))
    precision: str = field(default="auto", metadata=help_of("training precision"))
    progress: bool = field(default=True, metadata=help_of("progress bars"))
    out: str = field(default="runs/head-finders", metadata=help_of("output folder"))


def benchmark_config(config: Config) -> BenchmarkConfig:
    methods = MethodConfig(
        mask_steps=config.mask_steps, chg_steps=config.chg_steps, ig_steps=config.ig_steps,
        precision=config.precision,
    )  # fmt: skip
    return BenchmarkConfig(
        n_pairs=config.n_pairs, n_train_pairs=config.n_train_pairs, n_eval=config.n_eval,
        n_calibration_pairs=config.n_calibration_pairs,
        bootstrap=config.bootstrap, sizes=config.sizes, method_settings=methods,
    )  # fmt: skip


#: the leaderboard's numbers a stored run keeps per task and method
_STORED = ("CPR", "CPR low", "CPR high", "CMD", "CMD low", "CMD high", "seconds", "forwards")
_STORED += ("backwards", "vs gradient", "p (Holm)", "best gradient")


def _plain(value: Any) -> Any:
    """A JSON value: NaN as null, numpy numbers as Python's."""
    if isinstance(value, str) or value is None:
        return value
    value = float(value)
    return None if value != value else value


def numbers_of(result: FinderBenchmark) -> dict[str, Any]:
    """The stored leaderboard: per task, each method's numbers (best CMD first); and per task and
    method the curve (sizes, head counts and the heads its circuits kept, signed and absolute
    faithfulness, for circuits chosen by it ``f`` on the training pairs, the removal curve,
    ``m`` of the full and the empty circuit) and the ranking's head scores, so that a reader
    can plot and compare them from ``results/`` alone."""
    found: dict[str, Any] = {"model": result.model, "tasks": {}, "curves": {}}
    for task in dict.fromkeys(result.frame["task"]):
        board = result.leaderboard(task)
        found["tasks"][task] = {
            row["method"]: {key: _plain(row[key]) for key in _STORED} for _, row in board.iterrows()
        }
        found["tasks"][task]["pairs"] = int(result.settings["n_pairs"])
    for key, curve in result.curves.items():
        found["curves"][key] = {
            "sizes": [float(s) for s in curve.sizes],
            "counts": [int(c) for c in curve.counts],
            "kept": [int(c) for c in curve.kept] or [int(c) for c in curve.counts],
            **({"f fitted": [_plain(v) for v in curve.fitted]} if curve.fitted else {}),
            "f signed": [_plain(v) for v in curve.f_signed],
            "f absolute": [_plain(v) for v in curve.f_absolute],
            "removal": [_plain(v) for v in curve.removal],
            "m full": _plain(curve.m_full),
            "m empty": _plain(curve.m_empty),
            "scores": [[round(float(v), 6) for v in row] for row in curve.scores.tolist()],
        }
    return found


def run(config: Config) -> FinderBenchmark:
    model = lh.load_model(config.model)
    result = head_finder_benchmark(
        model, config.tasks, config.methods, benchmark_config(config),
        out=config.out, progress=config.progress,
    )  # fmt: skip
    write_outputs(
        config.out,
        title=f"Head finders' faithfulness ({config.model})",
        markdown=result.to_markdown(),
        figures={"curves": result.plot(), "cost": result.plot_cost()},
        numbers=numbers_of(result),
    )
    return result


#: a run on a tiny model and the figure it must write (the tests run it: test_analyses_modules)
EXAMPLE = (
    ["--tasks", "capitalize", "--methods", "effects-zero,attribution,random-0", "--n-pairs", "4",
     "--n-train-pairs", "4", "--n-eval", "60", "--bootstrap", "10", "--sizes", "0.25,0.5,1"],
    "curves",
)  # fmt: skip

main = command_line(Config, run, __doc__)

if __name__ == "__main__":
    raise SystemExit(main())
