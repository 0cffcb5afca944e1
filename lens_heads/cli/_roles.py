"""The commands of causal head roles (issue 36), their flags generated from the settings objects:

* ``lens-heads roles MODEL --task TASK --out DIR``: facilitating, interfering and irrelevant
  heads from three gate fits (:class:`lens_heads.heads_up.RolesConfig`);
* ``lens-heads sweep-estimates --model M --task TASK (--mask DIR | --heads ...) --out DIR``: the
  errors of a removal sweep's gradient estimates over the task's prompts
  (:class:`lens_heads.heads_up.EstimateErrorsConfig`)."""

from __future__ import annotations

import argparse
from typing import Any

from lens_heads.cli import _common as common
from lens_heads.cli._options import add_settings, settings_from
from lens_heads.core import markdown_table, write_atomic
from lens_heads.core.internal import ABLATIONS, FIXED
from lens_heads.heads_up import EstimateErrorsConfig, RolesConfig

__all__ = ["COMMANDS", "EXAMPLES"]


def _add_roles(sub: Any) -> None:
    parser = sub.add_parser(
        "roles",
        help="facilitating, interfering and irrelevant heads of a task (three gate fits)",
        description="Writes <out>/roles/ (table.csv, table.md, figure.html, result.json: "
        "HeadRoles.load) and one folder per fit (free, down, up) and for the evaluation of the "
        "sets found; a killed run resumes where it stopped.",
    )
    common.add_model_argument(parser, dtype=False)
    common.add_inputs(parser, task={"required": True})
    add_settings(
        parser,
        RolesConfig,
        choices={"precision": common.PRECISION_CHOICES, "ablation": FIXED},
    )
    common.add_out_argument(parser)
    common.add_overwrite_argument(parser)
    common.add_progress_argument(parser)


def _cmd_roles(args: argparse.Namespace) -> int:
    from lens_heads.core import get_task
    from lens_heads.heads_up import head_roles

    config = settings_from(args, RolesConfig)  # checked before the model loads
    task = get_task(args.task)
    common.check_model(args)
    with common.writing(args.out) as out:
        model = common.load_model(args)
        roles = head_roles(
            model, task, config, out=out, progress=not args.no_progress, overwrite=args.overwrite
        )
        counts = ", ".join(f"{n} {name}" for name, n in roles.counts().items())
        print(f"{task.name} on {roles.model}: {counts} -> {out / 'roles'}")
        for role in ("facilitating", "interfering"):
            heads = roles.heads(role)
            more = f" ... ({len(heads)} in all)" if len(heads) > 12 else ""
            print(f"  {role}: {' '.join(heads[:12]) or 'none'}{more}")
    return 0


def _add_estimates(sub: Any) -> None:
    parser = sub.add_parser(
        "sweep-estimates",
        help="errors of first-order and integrated-gradient estimates of a removal sweep",
        description="Runs the removal sweep of --mask (ascending trained weight) or --heads on "
        "the task's last --n-eval examples exactly and by both gradient estimates; writes "
        "<out>/errors (EstimateErrors.load), summary.md (the error table and the heads where "
        "each estimate fails), steps.csv (the errors step by step) and figure.html.",
    )
    common.add_model_argument(parser)
    common.add_inputs(parser, task={"required": True})
    order = parser.add_mutually_exclusive_group(required=True)
    common.add_inputs(
        order,
        mask={"help": "a train-mask output folder (ascending trained weight W) or a mask file"},
        heads={"help": "the removal order, e.g. L3H7,L0H1 (or a file of labels)"},
    )
    parser.set_defaults(influential=False)
    add_settings(parser, EstimateErrorsConfig, skip=("progress",), choices={"ablation": ABLATIONS})
    common.add_out_argument(parser)
    common.add_progress_argument(parser)


def _cmd_estimates(args: argparse.Namespace) -> int:
    from lens_heads.cli._heads_up import _sweep_order
    from lens_heads.core import get_task
    from lens_heads.heads_up import ESTIMATES, estimate_errors

    config = settings_from(args, EstimateErrorsConfig, progress=not args.no_progress)
    task = get_task(args.task)
    task.split(n_eval=config.n_eval)  # enough examples, before the model loads
    order = _sweep_order(args, common.check_model(args))
    with common.writing(args.out) as out:
        model = common.load_model(args)
        errors = estimate_errors(model, task, order, config)
        errors.save(out / "errors")
        failures = [errors.failures(name) for name in ESTIMATES]
        tables = [markdown_table(frame, floatfmt=".3g", index=False) for frame in failures]
        summary = "\n\n".join([errors.to_markdown(), *tables])
        write_atomic(out / "summary.md", summary + "\n")
        write_atomic(out / "steps.csv", errors.by_step().to_csv(index=False))
        write_atomic(out / "figure.html", errors.plot().to_html(include_plotlyjs="cdn"))
        print(errors.to_markdown())
    return 0


COMMANDS = [
    ("roles", _add_roles, _cmd_roles),
    ("sweep-estimates", _add_estimates, _cmd_estimates),
]

#: each command's examples, run by the tests (common.Examples: the placeholders)
EXAMPLES = {
    "roles": common.Examples(
        bad="{M} --task capitalize --n-masks 0 --out {out}",
        message="--n-masks: must be",
        good="{M} --task capitalize --steps 2 --pulled-steps 2 --n-masks 2 --batch-size 2 "
        "--n-eval 2 --no-evaluate --out {out}",
    ),
    "sweep-estimates": common.Examples(
        bad="--model {M} --task capitalize --heads L0H1,L0H2 --ig-steps 0 --out {out}",
        message="--ig-steps: must be",
        good="--model {M} --task capitalize --heads L0H1,L1H2,L0H3 --n-eval 2 --ig-steps 2",
    ),
}
