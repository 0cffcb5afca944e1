"""Arguments and helpers every ``lens-heads`` command shares: the model and mask arguments,
argument types checked while parsing (before any model loads), the ``--out`` check and the
one-line list of written files.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "MASK_HELP",
    "add_chat_argument",
    "add_match_argument",
    "add_model_argument",
    "chat_choice",
    "check_out",
    "deprecated",
    "finite",
    "int_at_least",
    "load_mask",
    "load_model",
    "non_negative",
    "output_dir",
    "positive",
    "print_written",
    "resolve_chat",
]


def add_model_argument(parser: argparse.ArgumentParser, default: str | None = None) -> None:
    parser.add_argument(
        "--model",
        default=default,
        required=default is None,
        help="alias (smollm2-135m-instruct, gemma-3-270m), .gguf file, checkpoint dir or HF id",
    )
    parser.add_argument(
        "--dtype", default="float32", choices=["float32", "bfloat16"], help="weights dtype"
    )


MASK_HELP = "head-mask file, or a train-mask output folder (its mask.safetensors)"


def load_model(args: argparse.Namespace) -> Any:
    """The model of ``--model`` in the ``--dtype`` of its weights (the one place every command
    loads a model: tests patch it here)."""
    import torch

    from lens_heads.core import models

    return models.load_model(args.model, dtype=getattr(torch, args.dtype))


def load_mask(path: str | None, model: Any) -> Any:
    """A head-mask file, or the ``mask.safetensors`` of a train-mask output folder."""
    from lens_heads.core.checks import resolve_mask

    return resolve_mask(path, model)


def chat_choice(value: str) -> bool | None:
    return {"auto": None, "yes": True, "no": False}[value]


def add_chat_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--chat",
        choices=["auto", "yes", "no"],
        nargs="?",
        const="yes",
        default="auto",
        help="use the chat template: auto (default: when the tokenizer has one), yes (also "
        "plain --chat) or no",
    )


def resolve_chat(args: argparse.Namespace, model: Any) -> bool:
    """``--chat auto`` resolved: the chat template when the model's tokenizer has one."""
    from lens_heads.core.prompts import has_chat_template

    chat = chat_choice(args.chat)
    return has_chat_template(model.tokenizer) if chat is None else chat


# -- argument checks: before any model loads (issue 17) ------------------------------------------
def int_at_least(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    parse.__name__ = f"integer >= {minimum}"
    return parse


positive = int_at_least(1)
non_negative = int_at_least(0)


def finite(text: str) -> float:
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def deprecated(parser: Any, old: str, new: str, dest: str, const: Any = None, **kw: Any) -> None:
    """Keep ``old`` as a deprecated spelling of ``new``: it sets ``dest`` and says so once."""

    class Alias(argparse.Action):
        def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
            print(f"lens-heads: {old} is deprecated; use {new}", file=sys.stderr)
            setattr(namespace, self.dest, const if const is not None else values)

    nargs = {"nargs": 0} if const is not None else {}
    parser.add_argument(old, dest=dest, action=Alias, help=f"deprecated: use {new}", **nargs, **kw)


def check_out(path: str | Path) -> Path:
    """Refuse an ``--out`` that cannot become a writable folder, before any compute."""
    import os

    out = Path(path)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file; give a folder (existing or new)")
    existing = out
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ValueError(f"--out {out}: {existing} is a file, so the folder cannot be created")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"--out {out}: {existing} is not writable; choose another folder")
    return out


def add_match_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--match",
        choices=["startswith", "contains"],
        help="the accuracy rule (default: the task's own; for a task file, the paper's rule by "
        "its name: startswith for capitalize*, lowercase*, next_*, prev_*, *_v_*_N, choose_*, "
        "conll2003_*, contains otherwise)",
    )


def print_written(paths: Sequence[Path]) -> None:
    print("wrote " + ", ".join(str(path) for path in paths))


def output_dir(path: str | Path) -> Path:
    """Create and return an output directory."""
    directory = Path(path)
    directory.mkdir(parents=True, exist_ok=True)
    return directory
