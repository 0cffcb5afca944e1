"""``lens-heads atlas MODEL --out DIR``: the head atlas of a model (its flags generated from
:class:`lens_heads.atlas.AtlasConfig`)."""

from __future__ import annotations

import argparse
from typing import Any

from lens_heads.atlas import AtlasConfig
from lens_heads.cli import _common as common
from lens_heads.cli._options import add_settings, settings_from

__all__ = ["COMMANDS", "EXAMPLES"]


def _add_atlas(sub: Any) -> None:
    parser = sub.add_parser(
        "atlas",
        help="every measure of each head in one table, their agreement and an interactive page",
        description="Writes <out>/atlas/ (table.csv, agreement.csv, atlas.html, figure.html, the "
        "plotly.min.js both pages load, "
        "result.json: HeadAtlas.load) and one folder per stage (detectors, readouts, effects), "
        "reused when the command runs again, so a killed run resumes.",
    )
    common.add_model_argument(parser, dtype=False)
    add_settings(parser, AtlasConfig)
    common.add_out_argument(parser)
    common.add_overwrite_argument(parser)
    common.add_progress_argument(parser)


def _cmd_atlas(args: argparse.Namespace) -> int:
    from lens_heads.atlas import head_atlas

    config = settings_from(args, AtlasConfig)  # checked before the model loads
    shape = common.check_model(args)
    tokenizer = None
    if config.task is not None and "resample" in config.ablations:  # donors: token counts only
        from lens_heads.core.internal import load_tokenizer

        tokenizer = load_tokenizer(args.model)
    config.check(shape, tokenizer)  # the task, k, the saved results against the shape, donors
    with common.writing(args.out) as out:
        model = common.load_model(args)
        atlas = head_atlas(
            model, config, out=out, progress=not args.no_progress, overwrite=args.overwrite
        )
        print(f"{len(atlas.frame)} heads, {len(atlas.measures)} measures -> {out / 'atlas'}")
        for sentence in atlas.agreement_sentences()[:10]:
            print("  " + sentence)
    return 0


COMMANDS = [("atlas", _add_atlas, _cmd_atlas)]

#: each command's examples, run by the tests (common.Examples: the placeholders)
EXAMPLES = {
    "atlas": common.Examples(
        bad="{M} --n-eval 0 --out {out}",
        message="--n-eval: must be at least 1",
        good="{M} --task none --n-sequences 2 --length 4 --k 4 --permutations 10 --bootstrap 10 "
        "--out {out}",
    ),
}
