"""``lens-heads models``, ``generate`` and ``tasks``: the offline models, greedy generation
under a head mask, and the built-in tasks."""

from __future__ import annotations

import argparse
from typing import Any

from lens_heads.cli import _common as common
from lens_heads.cli._options import add_settings, settings_from
from lens_heads.core import GenerationConfig

__all__ = ["COMMANDS"]


def _add_models(sub: Any) -> None:
    parser = sub.add_parser("models", help="list the offline model aliases; --prepare caches one")
    parser.add_argument("--prepare", metavar="ALIAS", help="dequantize and cache this alias now")


def _cmd_models(args: argparse.Namespace) -> int:
    from lens_heads.core import MODEL_ALIASES
    from lens_heads.core.internal import cache_dir, cached_aliases, prepare_model

    if args.prepare is not None:
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
    common.add_model_argument(parser)
    common.add_inputs(
        parser,
        "mask",
        prompt={"action": "append", "required": True, "help": "the input text (repeat: a batch)"},
    )
    # the command's defaults: the chat template when the model has one, longer continuations
    add_settings(
        parser, GenerationConfig, skip=("progress",), defaults={"chat": None, "max_new_tokens": 30}
    )


def _cmd_generate(args: argparse.Namespace) -> int:
    from lens_heads.core import generate

    config = settings_from(args, GenerationConfig)
    mask = common.mask_before_model(args.mask, common.check_model(args))
    model = common.load_model(args)
    mask = common.load_mask(mask, model)
    outputs = generate(model, args.prompt, config, mask=mask)
    for prompt, output in zip(args.prompt, outputs, strict=True):
        print(f"> {prompt}\n{output.text}")
    return 0


# -- tasks (issue 3) ----------------------------------------------------------------------------
def _add_tasks(sub: Any) -> None:
    parser = sub.add_parser(
        "tasks",
        help="list the built-in tasks (examples, kind, match rule), or show what a task file holds",
    )
    parser.add_argument("--kind", choices=["word", "translation"], help="only this kind")
    common.add_inputs(parser, "show")


def _cmd_tasks(args: argparse.Namespace) -> int:
    from lens_heads.core import get_task, list_tasks

    if args.show is not None:
        print(get_task(args.show).describe())
        return 0

    print(f"{'task':28s} {'examples':>8s}  {'kind':11s} {'match':10s} instruction")
    for name in list_tasks(args.kind):
        task = get_task(name)
        instruction = (task.instruction or "")[:60]
        print(f"{name:28s} {len(task):8d}  {task.kind:11s} {task.match:10s} {instruction}")
    return 0


COMMANDS = [
    ("models", _add_models, _cmd_models),
    ("generate", _add_generate, _cmd_generate),
    ("tasks", _add_tasks, _cmd_tasks),
]


#: each command's examples, run by the tests (common.Examples: the placeholders)
EXAMPLES = {
    "models": common.Examples(
        bad="--prepare no-such-alias",
        message="unknown alias 'no-such-alias'",
    ),
    "generate": common.Examples(
        bad="--model {M} --prompt apple --mask {nan}",
        message="NaN",
    ),
    "tasks": common.Examples(
        bad="--kind sentence",
        message="invalid choice: 'sentence'",
    ),
}
