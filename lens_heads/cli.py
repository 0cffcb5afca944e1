"""The ``lens-heads`` command.

Each subcommand is a ``_cmd_<name>(args)`` function plus an ``_add_<name>(subparsers)`` that
declares its arguments; :data:`COMMANDS` lists them in the order ``--help`` shows.

    lens-heads models [--prepare ALIAS]
    lens-heads generate --model smollm2-135m-instruct --prompt "apple" --chat [--mask m.safetensors]
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["main"]


def _add_model_argument(parser: argparse.ArgumentParser, default: str | None = None) -> None:
    parser.add_argument(
        "--model",
        default=default,
        required=default is None,
        help="alias (smollm2-135m-instruct, gemma-3-270m), .gguf file, checkpoint dir or HF id",
    )
    parser.add_argument(
        "--dtype", default="float32", choices=["float32", "bfloat16"], help="weights dtype"
    )


def _load(args: argparse.Namespace) -> Any:
    import torch

    from lens_heads.models import load_model

    return load_model(args.model, dtype=getattr(torch, args.dtype))


def _load_mask(path: str | None, model: Any) -> Any:
    if path is None:
        return None
    from lens_heads.masks import HeadMask

    return HeadMask.load(path, model=model)


# -- models -----------------------------------------------------------------------------------
def _add_models(sub: Any) -> None:
    parser = sub.add_parser("models", help="list the offline model aliases; --prepare caches one")
    parser.add_argument("--prepare", metavar="ALIAS", help="dequantize and cache this alias now")


def _cmd_models(args: argparse.Namespace) -> int:
    from lens_heads.models import MODEL_ALIASES, cache_dir, cached_aliases, prepare_model

    if args.prepare:
        directory = prepare_model(args.prepare)
        print(f"{args.prepare}: cached at {directory}")
        return 0
    cached = cached_aliases()
    print(f"cache: {cache_dir()}")
    for alias, source in MODEL_ALIASES.items():
        installed = "installed" if source.installed() else f"not installed ({source.install})"
        state = "cached" if cached[alias] else "not cached"
        print(f"{alias:24s} {installed}; {state}\n{'':24s} {source.description}")
    return 0


# -- generate ---------------------------------------------------------------------------------
def _add_generate(sub: Any) -> None:
    parser = sub.add_parser("generate", help="greedy generation, optionally under a head mask")
    _add_model_argument(parser)
    parser.add_argument("--prompt", action="append", required=True, help="repeat for a batch")
    parser.add_argument("--mask", help="head-mask file (.safetensors) to apply")
    parser.add_argument("--chat", action="store_true", help="wrap the prompt in the chat template")
    parser.add_argument("--max-new-tokens", type=int, default=30)


def _cmd_generate(args: argparse.Namespace) -> int:
    from lens_heads.generation import generate

    model = _load(args)
    mask = _load_mask(args.mask, model)
    outputs = generate(
        model, args.prompt, chat=args.chat, max_new_tokens=args.max_new_tokens, mask=mask
    )
    for prompt, output in zip(args.prompt, outputs, strict=True):
        print(f"> {prompt}\n{output.text}")
    return 0


COMMANDS: list[tuple[str, Callable[[Any], None], Callable[[argparse.Namespace], int]]] = [
    ("models", _add_models, _cmd_models),
    ("generate", _add_generate, _cmd_generate),
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lens-heads", description="Attention-head masks and analyses with TransformerLens."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    sub = parser.add_subparsers(dest="command", required=True)
    for _, add, _ in COMMANDS:
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    handlers = {name: command for name, _, command in COMMANDS}
    try:
        return handlers[args.command](args)
    except (ValueError, KeyError, FileNotFoundError, RuntimeError) as error:
        message = error.args[0] if isinstance(error, KeyError) and error.args else error
        print(f"lens-heads {args.command}: error: {message}", file=sys.stderr)
        return 2


def output_dir(path: str | Path) -> Path:
    """Create and return an output directory."""
    directory = Path(path)
    directory.mkdir(parents=True, exist_ok=True)
    return directory


if __name__ == "__main__":
    raise SystemExit(main())
