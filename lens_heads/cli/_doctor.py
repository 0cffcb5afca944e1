"""``lens-heads doctor MODEL``: does lens_heads compute the right numbers on this model?

It loads ``MODEL`` as every command does (an alias, a ``.gguf`` file, a checkpoint folder or a
Hugging Face id) and the same checkpoint in plain ``transformers``, and runs the checks of
:mod:`lens_heads.core._compatibility`: a mask of ones changes nothing, zeroing a query head
equals zeroing its slice of the output projection's input, ``lh.generate`` gives
``transformers``' greedy tokens on the checkpoint's own tokenization, and ``hook_pattern``
equals the eager attention weights. It prints each verdict and exits 0 only when all pass.
"""

from __future__ import annotations

import argparse
from typing import Any

from lens_heads.cli import _common as common

__all__ = ["COMMANDS"]


def _add_doctor(sub: Any) -> None:
    parser = sub.add_parser(
        "doctor", help="check lens_heads against plain transformers on a model (checks 1-4)"
    )
    common.add_model_argument(parser, dtype=False)
    parser.add_argument(
        "--transformer-lens-bos",
        action="store_true",
        help="load with TransformerLens's BOS convention (a BOS before every text) to see what "
        "it changes",
    )


def _cmd_doctor(args: argparse.Namespace) -> int:
    from lens_heads.core.internal import doctor

    common.check_model(args)  # a bad spec is a one-line error before anything loads
    report = doctor(args.model, transformer_lens_bos=args.transformer_lens_bos)
    print(report.to_text())
    return 0 if report.ok else 1


COMMANDS = [("doctor", _add_doctor, _cmd_doctor)]


#: each command's examples, run by the tests (common.Examples: the placeholders)
EXAMPLES = {
    "doctor": common.Examples(
        bad="'{out}/no-model.gguf'",
        message="does not exist",
    ),
}
