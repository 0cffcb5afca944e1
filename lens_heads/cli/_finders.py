"""``lens-heads benchmark-finders MODEL --tasks ioi,capitalize --out DIR``: the faithfulness of
every head finder (issue 46), its flags generated from
:class:`lens_heads.finders.BenchmarkConfig` and :class:`lens_heads.finders.MethodConfig`."""

from __future__ import annotations

import argparse
from typing import Any

from lens_heads.cli import _common as common
from lens_heads.cli._options import add_settings, settings_from

__all__ = ["COMMANDS", "EXAMPLES"]


def _names(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if not names:
        raise argparse.ArgumentTypeError("give at least one name, comma-separated")
    return names


def _add_benchmark(sub: Any) -> None:
    from lens_heads.finders import DEFAULT_METHODS, METHODS, BenchmarkConfig, MethodConfig

    parser = sub.add_parser(
        "benchmark-finders",
        help="faithfulness (MIB's CPR and CMD) of every head finder on tasks with counterfactuals",
        description="For each task, draws held-out prompt pairs with counterfactuals, scores the "
        "heads with each method on the task's training part, and measures each ranking's "
        "faithfulness. Writes <out>/benchmark (table.csv, table.md, curves.html, cost.html, "
        "result.json: FinderBenchmark.load) and one stage per task and method; a killed run "
        "resumes. --mib DIR also writes each method in MIB's node-level submission format: a "
        "ranking's scores, or a method's own circuits, one per size.",
    )
    common.add_model_argument(parser, dtype=False)
    parser.add_argument(
        "--tasks", type=_names, default=("ioi",), help="ioi, task names or files [ioi]"
    )
    parser.add_argument(
        "--methods",
        type=_names,
        default=DEFAULT_METHODS,
        help=f"head finders, comma-separated, of: {', '.join(METHODS)}",
    )
    # the protocol hash is written by run_protocol, never typed (its runs: analyses.finder_protocol)
    add_settings(parser, BenchmarkConfig, skip=("method_settings", "protocol"))
    add_settings(parser, MethodConfig)
    parser.add_argument(
        "--mib", help="also write every method here in MIB's node format (scores or circuits)"
    )
    common.add_out_argument(parser)
    common.add_overwrite_argument(parser)
    common.add_progress_argument(parser)


def _cmd_benchmark(args: argparse.Namespace) -> int:
    from lens_heads.core import InputError, get_task
    from lens_heads.finders import (
        METHODS,
        BenchmarkConfig,
        MethodConfig,
        head_finder_benchmark,
        write_mib_curve,
    )

    methods = settings_from(args, MethodConfig)
    config = settings_from(args, BenchmarkConfig, method_settings=methods)
    unknown = [name for name in args.methods if name not in METHODS]
    if unknown:
        raise InputError(f"--methods: unknown {unknown}; the finders: {', '.join(METHODS)}")
    for task in args.tasks:
        if task != "ioi":
            get_task(task)  # an unknown task before the model loads
    common.check_model(args)
    with common.writing(args.out) as out:
        model = common.load_model(args)
        result = head_finder_benchmark(
            model, args.tasks, args.methods, config, out=out, progress=not args.no_progress,
            overwrite=args.overwrite,
        )  # fmt: skip
        if args.mib:
            for key, curve in result.curves.items():
                method = key.split("/", 1)[1]
                write_mib_curve(
                    curve, f"{args.mib}/{method}", result.model, d_model=int(model.cfg.d_model)
                )
        print(result.to_markdown())
        print(f"-> {out / 'benchmark'}")
    return 0


COMMANDS = [("benchmark-finders", _add_benchmark, _cmd_benchmark)]

#: each command's examples, run by the tests (common.Examples: the placeholders)
EXAMPLES = {
    "benchmark-finders": common.Examples(
        bad="{M} --tasks capitalize --methods effects-zero --bootstrap 1 --out {out}",
        message="--bootstrap: must be at least 10",
        good="{M} --tasks capitalize --methods effects-zero,random-0 --n-pairs 4 "
        "--n-train-pairs 4 --n-eval 60 --bootstrap 10 --sizes 0.25,0.5,1 --out {out}",
    ),
}
