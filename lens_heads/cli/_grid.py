"""The `lens-heads grid CONFIG --out DIR [--address ...]` command (:mod:`lens_heads.scale._grid`).

Unlike the other commands it takes no lock on the whole ``--out``: two grid runs with the same
config share the folder by design, each cell under its own claim (:mod:`lens_heads.core._locks`);
a run with other settings is refused before any cell starts."""

from __future__ import annotations

import argparse
from typing import Any

from lens_heads.cli import _common as common

__all__ = ["COMMANDS"]


def _add_grid(sub: Any) -> None:
    parser = sub.add_parser(
        "grid",
        help="run a grid of mask trainings (models x tasks x seeds x schedules) on Ray",
        description="Train, evaluate (and sweep) every cell of a TOML/YAML grid config as Ray "
        "tasks; complete cells are skipped, interrupted ones resume. See docs/scale.md.",
    )
    parser.add_argument("config", help="the grid config (.toml or .yaml)")
    common.add_out_argument(parser, "output folder (one sub-folder per cell)")
    parser.add_argument(
        "--address",
        default=None,
        help="Ray cluster: 'auto' (the running cluster), 'ray://host:10001' (a Ray client), "
        "'local' (no Ray: cells run in this process); default: a local Ray sized to this machine",
    )
    parser.add_argument(
        "--check", action="store_true", help="only validate the config and list its cells"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def _cmd_grid(args: argparse.Namespace) -> int:
    from lens_heads.cli import _common as common
    from lens_heads.scale import GridConfig, run_grid
    from lens_heads.scale.internal import check_grid_folder

    config = GridConfig.load(args.config)
    check_grid_folder(config, common.check_out(args.out))
    if args.check:
        for cell in config.cells:
            print(f"{cell.key}  ->  {args.out}/{cell.path}")
        print(f"{len(config.cells)} cells; config OK")
        return 0
    result = run_grid(config, args.out, address=args.address, progress=not args.quiet)
    print(result.to_markdown())
    print(f"wrote {args.out}/table.md and table.csv ({result.seconds:.0f} s)")
    return 1 if len(result.failures) else 0


COMMANDS = [("grid", _add_grid, _cmd_grid)]


#: each command's examples, run by the tests (common.Examples: the placeholders)
EXAMPLES = {
    "grid": common.Examples(
        bad="{grid_yaml} --out {out}",
        message="not valid YAML (line 3, column",
    ),
}
