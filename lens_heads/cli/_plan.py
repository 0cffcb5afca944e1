"""``lens-heads plan MODEL --job JOB ...``: a job's predicted peak memory per device and its
time, from the model's configuration alone (no weights, no download), its flags generated from
:class:`lens_heads.PlanConfig`. Every command that loads a model checks the same plan first
(:func:`lens_heads.cli._common.check_plan`)."""

from __future__ import annotations

import argparse
from typing import Any

from lens_heads.cli import _common as common
from lens_heads.cli._options import add_settings, settings_from
from lens_heads.core.internal import DTYPES
from lens_heads.scale import PlanConfig
from lens_heads.scale.internal import GPUS, JOBS

__all__ = ["COMMANDS", "EXAMPLES"]


def _add_plan(sub: Any) -> None:
    parser = sub.add_parser(
        "plan",
        help="predicted peak memory per device and time of a job, before any weight loads",
        description="Reads the model's configuration (a shipped one: llama-3.1-8b-instruct, "
        "qwen2.5-7b-instruct, ...; an offline alias; a checkpoint folder) and prints the job's "
        "predicted peak memory by component on each device, the memory available there and the "
        "time per step or head; exits 1 when the run does not fit, naming the fix. The memory "
        "model is written out in docs/scale.md. --out also writes the plan (Plan.load).",
    )
    common.add_model_argument(
        parser,
        dtype=False,
        help="shipped configuration, alias (smollm2-135m-instruct, ...) or checkpoint dir "
        "(first argument, or --model)",
    )
    add_settings(
        parser,
        PlanConfig,
        choices={
            "job": JOBS,
            "dtype": DTYPES,
            "precision": ("auto", "bfloat16", "float32"),
            "gpu": ("auto", *GPUS),
        },
    )
    parser.add_argument("--out", help="also save the plan in this folder")


def _cmd_plan(args: argparse.Namespace) -> int:
    from lens_heads.scale import plan

    config = settings_from(args, PlanConfig)
    common.check_model(args)
    found = plan(args.model, config.job, config=config)
    if args.out is not None:
        with common.writing(args.out) as out:
            written = found.save(out)
    print("\n".join(found.lines()))
    if args.out is not None:
        common.print_written(written)
    if not found.fits:
        from lens_heads.scale import PlanDoesNotFitError

        try:
            found.check()
        except PlanDoesNotFitError as error:
            print(f"does not fit: {error}")
        return 1
    return 0


COMMANDS = [("plan", _add_plan, _cmd_plan)]

#: each command's examples, run by the tests (common.Examples: the placeholders)
EXAMPLES = {
    "plan": common.Examples(
        bad="{M} --job sweeep",
        message="invalid choice: 'sweeep'",
        good="{M} --job eval --batch-size 2",
    ),
}
