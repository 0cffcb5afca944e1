"""What a command reads and where it writes: its inputs, as opposed to its settings (those are
generated from the settings objects by :mod:`lens_heads.cli._options`). Each input is declared
once here -- its flag, how its value is read, its help -- so ``--mask`` or ``--prompt`` means the
same and reads the same in every command; a command names the inputs it takes and, where its use
differs, what differs (``required``, a narrower ``help``, a repeatable ``action``).

>>> import argparse
>>> parser = argparse.ArgumentParser()
>>> add_inputs(parser, "task", prompt={"action": "append"})
>>> parser.parse_args(["--task", "capitalize", "--prompt", "a", "--prompt", "b"]).prompt
['a', 'b']
>>> add_inputs(parser, "tsak")
Traceback (most recent call last):
...
lens_heads.core._errors.UnknownNameError: "no input 'tsak' (did you mean 'task'?)"
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Callable, Mapping
from typing import Any

from lens_heads.core.internal import UnknownNameError

__all__ = ["INPUTS", "MASK_HELP", "MODEL_HELP", "add_inputs", "int_at_least", "text"]


def text(value: str) -> str:
    """A text argument that is not empty or blank."""
    if not value.strip():
        raise argparse.ArgumentTypeError("must not be empty or blank")
    return value


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An integer argument of at least ``minimum``."""

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


MODEL_HELP = "alias (smollm2-135m-instruct, gemma-3-270m), .gguf file, checkpoint dir or HF id"
MASK_HELP = "head-mask file, or a train-mask output folder (its mask.safetensors)"

#: every shared input: its flags (the first names the dest), then add_argument's options
INPUTS: dict[str, dict[str, Any]] = {
    # the model: first argument or --model, one argument either way (common.add_model_argument
    # merges the two into args.model and says when it is missing or named twice)
    "model": {
        "flags": ("model",),
        "nargs": "?",
        "default": argparse.SUPPRESS,
        "metavar": "MODEL",
        "help": MODEL_HELP + " (first argument, or --model)",
    },
    "model_option": {
        "flags": ("--model",),
        "dest": "model_option",
        "default": argparse.SUPPRESS,
        "metavar": "MODEL",
        "help": "the model, as --model MODEL instead of the first argument",
    },
    "dtype": {
        "flags": ("--dtype",),
        "default": "float32",
        "choices": ["float32", "bfloat16"],
        "help": "weights dtype",
    },
    "task": {"help": "built-in task name or a .json/.jsonl task file"},
    "show": {
        "metavar": "TASK",
        "help": "print what a task file (or a built-in name) gives: each field and where it came "
        "from (the file, a default or the built-in)",
    },
    "mask": {"help": MASK_HELP},
    "other_mask": {"help": "a mask trained on another model of the same shape (file or folder)"},
    "control_task": {"help": "a non-translation task (functional specificity)"},
    "heads": {"help": "heads: labels such as L3H7,L0H1, a file of labels, or top:K"},
    "prompt": {"type": text, "help": "the input text, e.g. apple"},
    "target": {"type": text, "help": "the expected answer; its first token is tracked"},
    "instruction": {"type": text, "help": "the instruction (default: the task's own)"},
    "texts": {"help": "the texts: a file, one document per line"},
    "language": {"help": "a language of the built-in corpus (en fr es de zh)"},
    "languages": {"help": "comma-separated subset of the languages"},
    "pairs": {"help": "translation pairs: comma-separated, e.g. en-fr,en-de, or a file"},
    "alignments": {"help": "Pharaoh or JSON alignments (one pair only)"},
    "importance": {"help": "folder written by `lens-heads importance` or `language-heads`"},
    "chat": {
        "choices": ["auto", "yes", "no"],
        "nargs": "?",
        "const": "yes",
        "default": "auto",
        "help": "use the chat template: auto (default: when the tokenizer has one), yes (also "
        "plain --chat) or no",
    },
    "match": {
        "choices": ["startswith", "contains"],
        "help": "the accuracy rule (default: the task's own: a built-in's, or what a task file "
        "states, contains when it states none)",
    },
    "out": {"required": True, "help": "output directory"},
    "overwrite": {
        "action": "store_true",
        "help": "replace the results in --out when they come from another model, other data or "
        "other settings (default: refuse, naming what differs)",
    },
    "no_progress": {"action": "store_true", "help": "no progress bars"},
    "n_eval": {
        "type": int_at_least(1),
        "default": 40,
        "help": "with --task: its last N examples [40]",
    },
}


def add_inputs(parser: Any, *names: str, **changes: Mapping[str, Any]) -> None:
    """Add the inputs ``names`` (keys of :data:`INPUTS`) to ``parser`` (or an argument group),
    each as declared there; ``changes`` (by name) adjusts one for this command, e.g.
    ``task={"required": True}``, and adds it when ``names`` does not list it."""
    for name in dict.fromkeys([*names, *changes]):
        if name not in INPUTS:
            close = difflib.get_close_matches(name, INPUTS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UnknownNameError(f"no input {name!r}{hint}")
        options = {**INPUTS[name], **changes.get(name, {})}
        flags = options.pop("flags", (f"--{name.replace('_', '-')}",))
        if options.get("default") is not None or options.get("action") == "store_true":
            options.pop("required", None)
        parser.add_argument(*flags, **options)
