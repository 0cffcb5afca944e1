"""``lens-heads roles MODEL --task TASK --out DIR``: facilitating, interfering and irrelevant
heads from three gate fits (its flags generated from :class:`lens_heads.heads_up.RolesConfig`)."""

from __future__ import annotations

import argparse
from typing import Any

from lens_heads.cli import common
from lens_heads.cli.options import add_settings, settings_from
from lens_heads.core.ablation import FIXED
from lens_heads.heads_up import RolesConfig

__all__ = ["COMMANDS", "EXAMPLES"]

#: the training precision is --precision on the command line (--dtype is the weights')
_RENAMED = {"dtype": "precision"}
_PRECISIONS = ("auto", "bf16", "fp32", "bfloat16", "float32")


def _add_roles(sub: Any) -> None:
    parser = sub.add_parser(
        "roles",
        help="facilitating, interfering and irrelevant heads of a task (three gate fits)",
        description="Writes <out>/roles/ (table.csv, table.md, figure.html, result.json: "
        "HeadRoles.load) and one folder per fit (free, down, up) and for the evaluation of the "
        "sets found; a killed run resumes where it stopped.",
    )
    parser.add_argument(
        "model", help="alias (smollm2-135m-instruct, gemma-3-270m), checkpoint dir or HF id"
    )
    parser.add_argument("--task", required=True, help="task name or JSON file")
    add_settings(
        parser, RolesConfig, rename=_RENAMED, choices={"dtype": _PRECISIONS, "ablation": FIXED}
    )
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def _cmd_roles(args: argparse.Namespace) -> int:
    from lens_heads.core.tasks import get_task
    from lens_heads.heads_up import head_roles

    config = settings_from(args, RolesConfig, rename=_RENAMED)  # checked before the model loads
    task = get_task(args.task)
    common.check_model(args)
    with common.writing(args.out) as out:
        model = common.load_model(args)
        roles = head_roles(model, task, config, out=out, progress=not args.no_progress)
        counts = ", ".join(f"{n} {name}" for name, n in roles.counts().items())
        print(f"{task.name} on {roles.model}: {counts} -> {out / 'roles'}")
        for role in ("facilitating", "interfering"):
            heads = roles.heads(role)
            more = f" ... ({len(heads)} in all)" if len(heads) > 12 else ""
            print(f"  {role}: {' '.join(heads[:12]) or 'none'}{more}")
    return 0


COMMANDS = [("roles", _add_roles, _cmd_roles)]

#: each command's examples, run by the tests (common.Examples: the placeholders)
EXAMPLES = {
    "roles": common.Examples(
        bad="{M} --task capitalize --n-masks 0 --out {out}",
        message="--n-masks: must be",
        good="{M} --task capitalize --steps 2 --pulled-steps 2 --n-masks 2 --batch-size 2 "
        "--n-eval 2 --no-evaluate --out {out}",
    ),
}
