"""The ``lens-heads`` command: one module per research line, each listing its subcommands as
``(name, add_arguments, run)`` in ``COMMANDS``; :mod:`lens_heads.cli._common` holds the arguments
they share; :func:`add_settings` and :func:`settings_from` generate a command's flags from its
settings class and read them back (an analysis's own command is made the same way). Layer 5: it
may import every layer below (and the demo); nothing in it imports this module, so there is no
import circle.

    lens-heads demo --out demo-report      # the end-to-end demo on the offline default model
    lens-heads models [--prepare ALIAS]
    lens-heads doctor MODEL                # checks 1-4 of docs/compatibility.md on any model
    lens-heads generate smollm2-135m-instruct --prompt "apple" --chat [--mask m.safetensors]
    lens-heads tasks
    lens-heads eval smollm2-135m-instruct --task country-capital --mask m.safetensors
                    --out results/country-capital
    lens-heads train-mask smollm2-135m-instruct --task capitalize --steps 200
                          --out results/capitalize [--resume]
    lens-heads sweep smollm2-135m-instruct --mask results/capitalize --prompt apple
                     --target Apple --instruction "Capitalize the given word."
                     --out results/sweep-apple
    lens-heads logit-lens smollm2-135m-instruct --prompt apple --mask results/capitalize
                          --instruction "Capitalize the given word." --out results/lens-apple
    lens-heads similarity smollm2-135m-instruct --prompt apple --mask results/capitalize
                          --instruction "Capitalize the given word." --out results/fig4-apple
    lens-heads attention smollm2-135m-instruct --task fruit_v_animal_3 --mask m.safetensors
                         --out results/table7
    lens-heads grid docs/grids/laptop.toml --out runs/laptop [--address auto|ray://...|local]
    lens-heads plan llama-3.1-8b-instruct --job train-mask --batch-size 16 --device cuda
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from lens_heads.cli import _common as common
from lens_heads.cli._options import add_settings, settings_from
from lens_heads.core import LensHeadsError
from lens_heads.core.internal import InputWarning, each_warning_once

__all__ = ["COMMANDS", "EXAMPLES", "add_settings", "build_parser", "main", "settings_from"]

#: the modules of ``lens_heads.cli`` and the subcommands each holds, in the order ``--help``
#: lists them (a test checks this against each module's ``COMMANDS``): a command imports its
#: own module only, so ``lens-heads plan`` starts without torch
MODULES: dict[str, tuple[str, ...]] = {
    "core": ("models", "generate", "tasks"),
    "doctor": ("doctor",),
    "engine": ("eval", "train-mask"),
    "heads_up": ("sweep", "logit-lens", "similarity", "attention", "demo"),
    "grid": ("grid",),
    "lahis": (
        "importance", "language-heads", "language-perplexity", "transfer", "soft-mask-experiment"
    ),
    "alignment": ("translation-scores", "ablate-heads", "trater"),
    "atlas": ("atlas",),
    "roles": ("roles", "sweep-estimates"),
    "finders": ("benchmark-finders",),
    "plan": ("plan",),
}  # fmt: skip

Command = tuple[str, Callable[[Any], None], Callable[[argparse.Namespace], int]]

#: every subcommand as ``(name, add_arguments, run)``, in the order ``--help`` lists them
#: (gathered from the command modules on first use: declared here, set by ``__getattr__``)
COMMANDS: list[Command]
#: every subcommand's valid example call (``common.Examples``), kept beside the command itself
EXAMPLES: dict[str, common.Examples]


def _module(name: str) -> Any:
    return importlib.import_module(f"lens_heads.cli._{name}")


def __getattr__(name: str) -> Any:
    """``COMMANDS`` (every subcommand as ``(name, add_arguments, run)``, in the order ``--help``
    lists them) and ``EXAMPLES`` (every subcommand's :class:`common.Examples`, kept beside the
    command itself), gathered from the command modules on first use."""
    if name == "COMMANDS":
        value: Any = [command for module in MODULES for command in _module(module).COMMANDS]
    elif name == "EXAMPLES":
        value = {key: e for module in MODULES for key, e in _module(module).EXAMPLES.items()}
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def _commands(only: str | None = None) -> list[Command]:
    """Every command (``COMMANDS``, as patched if it is), or the one named ``only`` from its
    own module."""
    if only is None or "COMMANDS" in globals():
        commands: list[Command] = sys.modules[__name__].COMMANDS
        return commands
    module = next(module for module, names in MODULES.items() if only in names)
    return [command for command in _module(module).COMMANDS if command[0] == only]


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``lens-heads`` parser: every subcommand, or only the one named ``only``."""
    parser = common.Parser(
        prog="lens-heads", description="Attention-head masks and analyses with TransformerLens."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    sub = parser.add_subparsers(dest="command", required=True)
    for _, add, _ in _commands(only):
        add(sub)
    return parser


def _named_command(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names, when it is a known one."""
    first = next((item for item in argv if not item.startswith("-")), None)
    return first if any(first in names for names in MODULES.values()) else None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    only = _named_command(argv)
    args = build_parser(only).parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    handlers = {name: command for name, _, command in _commands(only)}

    def one_line(message: Any, category: type, *rest: Any, **kw: Any) -> str:
        kind = "note" if issubclass(category, DeprecationWarning) else "warning"
        return f"lens-heads {args.command}: {kind}: {message}\n"

    def show(message: Any, category: type, *rest: Any, **kw: Any) -> None:
        print(one_line(message, category), end="", file=sys.stderr)

    # A warning is one line on stderr, whoever else listens to warnings (a notebook, pytest):
    # the command installs its own display for its duration; input warnings are said each
    # time (each_warning_once keeps one of each message per command).
    with warnings.catch_warnings():
        warnings.showwarning = show
        warnings.simplefilter("always", InputWarning)
        try:
            with each_warning_once():
                return handlers[args.command](args)
        except (LensHeadsError, ValueError, KeyError, OSError, RuntimeError) as error:  # one line
            message = error.args[0] if isinstance(error, KeyError) and error.args else error
            message = " ".join(str(message).split())  # one line even for multi-line messages
            print(f"lens-heads {args.command}: error: {message}", file=sys.stderr)
            return 2
