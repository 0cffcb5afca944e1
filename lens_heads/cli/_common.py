"""Arguments and helpers every ``lens-heads`` command shares: the model and mask arguments,
argument types checked while parsing (before any model loads), the checks of what needs the
model's shape (read from its config, before the weights), the ``--out`` check and lock
(:func:`writing`) and the one-line list of written files.

Every command runs the same way: its arguments, the files they name and ``--out`` are checked
first (``check_model`` gives the model's shape for head lists and masks), then ``with
writing(args.out) as out:`` claims the folder and only then ``load_model`` loads the model.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lens_heads.cli._inputs import MASK_HELP, add_inputs, int_at_least, text
from lens_heads.core import InputError, LensHeadsError

__all__ = [
    "MASK_HELP",
    "PRECISION_CHOICES",
    "Examples",
    "Parser",
    "add_chat_argument",
    "add_inputs",
    "add_match_argument",
    "add_model_argument",
    "add_out_argument",
    "add_overwrite_argument",
    "add_progress_argument",
    "chat_choice",
    "check_heads",
    "check_model",
    "check_out",
    "check_plan",
    "deprecated",
    "finite",
    "fraction",
    "int_at_least",
    "load_mask",
    "load_model",
    "mask_before_model",
    "non_negative",
    "numbers",
    "open_unit",
    "output_dir",
    "positive",
    "print_written",
    "probability",
    "read_text",
    "resolve_chat",
    "text",
    "top_k_of",
    "write_result",
    "writing",
]


@dataclass(frozen=True)
class Examples:
    """A command's examples, run by the tests on a tiny checkpoint folder: ``bad`` is refused
    in one line containing ``message`` before any model loads; ``good`` (for a command that
    writes ``--out``) is a valid call. ``{M}`` stands for a model folder, ``{out}`` for an
    output folder, other ``{names}`` for the files the tests make (their fixture ``f``)."""

    bad: str
    message: str
    good: str | None = None

    @staticmethod
    def argv(command: str, line: str, **values: str) -> list[str]:
        """``[command, ...]``: ``line`` split as a shell splits it, placeholders filled in.

        >>> Examples.argv("eval", "--model {M} --out {out}", M="m", out="o")
        ['eval', '--model', 'm', '--out', 'o']
        """
        import shlex

        return [command, *(item.format(**values) for item in shlex.split(line))]


def shown_default(action: argparse.Action) -> str | None:
    """The default an option's help shows (``[40]``), or None where it has none to show (no
    default, a switch, a default the help already states)."""
    default = action.default
    quiet = (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse.BooleanOptionalAction)
    if (
        not action.option_strings
        or default is None
        or default is argparse.SUPPRESS
        or isinstance(action, (argparse._HelpAction, *quiet))
        or action.help in (None, argparse.SUPPRESS)
    ):
        return None
    if isinstance(default, (list, tuple)):
        return ",".join(str(item) for item in default) if default else "none"
    if isinstance(default, str) and (not default.strip() or "\n" in default):
        return default.encode("unicode_escape").decode()  # a blank line, as \n\n
    return str(default)


class DefaultsFormatter(argparse.HelpFormatter):
    """Each option's help ends with its default (``[40]``) unless it states it already."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        shown = shown_default(action)
        if shown is None or f"[{shown}]" in text or "%(default)" in text or "default:" in text:
            return text
        return f"{text} [{shown.replace('%', '%%')}]"


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (``lens-heads CMD: error: ...``), that
    takes every flag as written (no abbreviations: ``--n`` is not ``--n-eval``) and whose help
    shows each option's default."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", DefaultsFormatter)
        super().__init__(*args, **kwargs)
        #: checks of the parsed values (the settings objects the flags build), run right after
        #: parsing: a bad value is a usage error, like a bad type
        self.checks: list[Callable[[argparse.Namespace], Any]] = []
        #: (old, new) spellings of one flag (:func:`deprecated`): giving both is an error
        self.spellings: list[tuple[str, str]] = []

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:  # type: ignore[override]
        given = [str(a).split("=", 1)[0] for a in (sys.argv[1:] if args is None else args)]
        for old, new in getattr(self, "spellings", []):
            if old in given and new in given:
                self.error(
                    f"{old} and {new} set one option ({old} is its old spelling); give only {new}"
                )
        namespace, extras = super().parse_known_args(args, namespace)
        for check in self.checks:
            try:
                check(namespace)
            except LensHeadsError as error:
                self.error(str(error))
        return namespace, extras

    def error(self, message: str) -> Any:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def add_overwrite_argument(parser: argparse.ArgumentParser) -> None:
    """``--overwrite``: compute again into an ``--out`` that holds results of another model,
    other data or other settings (without it, such a folder is refused)."""
    add_inputs(parser, "overwrite")


def add_model_argument(
    parser: argparse.ArgumentParser,
    default: str | None = None,
    *,
    dtype: bool = True,
    help: str | None = None,
) -> None:
    """The model, one argument with two spellings on every command: first
    (``lens-heads eval MODEL ...``) or ``--model MODEL``; required unless a ``default`` is given,
    refused when named twice with two values. With ``dtype``, also ``--dtype``, the weights'.

    >>> parser = Parser(prog="x")
    >>> add_model_argument(parser, dtype=False)
    >>> parser.parse_args(["tiny"]).model, parser.parse_args(["--model", "tiny"]).model
    ('tiny', 'tiny')
    """
    if dtype:
        add_inputs(parser, "dtype")
    add_inputs(parser, "model", "model_option", **({"model": {"help": help}} if help else {}))

    def one_model(namespace: argparse.Namespace) -> None:
        named = [
            getattr(namespace, key)
            for key in ("model", "model_option")
            if getattr(namespace, key, None) is not None
        ]
        if hasattr(namespace, "model_option"):
            del namespace.model_option
        if len(set(named)) > 1:
            raise InputError(
                f"the model is named twice ({named[0]!r} and {named[1]!r}); name it once, as the "
                "first argument or with --model"
            )
        if not named and default is None:
            raise InputError(
                f"a model is required: name it as the first argument ({parser.prog} MODEL ...) "
                "or with --model MODEL"
            )
        namespace.model = named[0] if named else default

    if isinstance(parser, Parser):
        parser.checks.insert(0, one_model)  # before the checks that read args.model


def load_model(args: argparse.Namespace) -> Any:
    """The model of ``--model`` in the ``--dtype`` of its weights (the one place every command
    loads a model: tests patch it here), after its plan said the run fits (:func:`check_plan`)."""
    import torch

    import lens_heads.core as core  # looked up at each call: tests patch lens_heads.core.load_model

    check_plan(args)
    return core.load_model(args.model, dtype=getattr(torch, getattr(args, "dtype", "float32")))


#: the plan job of each command (lens_heads.plan); other commands plan as an evaluation
_JOBS = {
    "train-mask": "train-mask", "roles": "roles", "sweep": "sweep", "sweep-estimates": "sweep",
    "atlas": "atlas", "eval": "eval", "generate": "generate",
}  # fmt: skip
#: the values of a training-precision flag (the short spellings stored as the long ones)
PRECISION_CHOICES = ("auto", "bf16", "fp32", "bfloat16", "float32")


def check_plan(args: argparse.Namespace) -> Any:
    """Before any weight loads: the plan of the command's job with its batch and precision on
    this machine's CPU (:func:`lens_heads.plan`); a run that would not fit stops with a
    :class:`~lens_heads.scale.PlanDoesNotFitError` naming the predicted and the
    available memory and the fix. None where the configuration is unreadable before loading (a
    .gguf file, a hub id)."""
    from lens_heads.core.internal import model_shape
    from lens_heads.scale import plan

    shape = model_shape(args.model)
    if shape is None or not shape.complete:
        return None
    job = _JOBS.get(str(getattr(args, "command", "")), "eval")
    fields: dict[str, Any] = {"dtype": getattr(args, "dtype", None) or "float32"}
    batch = getattr(args, "batch_size", None)
    if job == "generate":
        batch = len(getattr(args, "prompt", None) or [1])
    n_eval = getattr(args, "n_eval", None)
    if job == "eval" and isinstance(batch, int) and isinstance(n_eval, int) and n_eval > 0:
        batch = min(batch, n_eval)  # the run batches at most the examples it evaluates
    if isinstance(batch, int) and batch > 0:
        fields["batch_size"] = batch
    precision = getattr(args, "precision", None)
    if job in ("train-mask", "roles") and isinstance(precision, str):
        fields["precision"] = precision  # PlanConfig reads bf16/fp32 as training does
    if job == "roles" and isinstance(getattr(args, "n_masks", None), int):
        fields["n_masks"] = args.n_masks
    if job in ("train-mask", "roles") and getattr(args, "checkpoint_activations", None):
        fields["checkpoint_activations"] = True
    return plan(shape, job, **fields).check()


def check_model(args: argparse.Namespace) -> Any:
    """Check ``--model`` without loading it and return its shape (a
    :class:`~lens_heads.core._model_shape.ModelShape`, None where only loading tells)."""
    from lens_heads.core.internal import model_shape

    try:
        return model_shape(args.model)
    except (ValueError, RuntimeError, OSError, TypeError) as error:
        raise InputError(f"--model {args.model!r}: {error}") from error


def load_mask(mask: Any, model: Any) -> Any:
    """The mask argument checked against the loaded model: a head-mask file, the
    ``mask.safetensors`` of a train-mask output folder, or the HeadMask that
    :func:`mask_before_model` already read. None stays None."""
    from lens_heads.core import resolve_mask

    return resolve_mask(mask, model)


def mask_before_model(path: str | None, shape: Any, flag: str = "--mask") -> Any:
    """Read and check a mask argument before the model loads: the file (missing, truncated,
    NaN, out of range) and, when the shape is known, its layers x heads."""
    if path is None:
        return None
    from lens_heads.core import resolve_mask

    try:
        return resolve_mask(path, shape)
    except ValueError as error:
        raise type(error)(f"{flag} {path}: {error}") from error


def read_text(path: str, flag: str) -> str:
    """The UTF-8 text of a file argument (a clear error for a folder, other encodings)."""
    from lens_heads.core.internal import read_text_file

    return read_text_file(path, flag)


def check_heads(value: str, shape: Any, flag: str = "--heads") -> list[str]:
    """Head labels given inline (``L3H7,L0H1``) or as a file of labels, checked before the
    model loads: the form (``L<layer>H<head>``), repeats, and the range when the shape is
    known."""
    from lens_heads.core.internal import parse_head

    source = value
    if Path(value).exists():
        source = read_text(value, flag)
    labels = [label for label in source.replace(",", " ").split() if label]
    if not labels:
        raise InputError(f"{flag} {value!r} names no heads; write labels like L3H7,L0H1")
    n_layers, n_heads = (shape.n_layers, shape.n_heads) if shape is not None else (None, None)
    for label in labels:
        try:
            parse_head(label, n_layers, n_heads)
        except ValueError as error:
            raise InputError(f"{flag}: {error}") from None
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise InputError(f"{flag} names {', '.join(repeated)} twice or more; name each head once")
    return labels


def top_k_of(value: str, total: int | None = None, flag: str = "--heads") -> int | None:
    """``top:K`` (the K heads ranked first) as K, checked against ``total`` heads when known;
    None for any other head argument (labels, a file).

    >>> top_k_of("top:6"), top_k_of("L3H7,L0H1")
    (6, None)
    """
    if not value.startswith("top:"):
        return None
    try:
        k = int(value[4:])
    except ValueError as error:
        raise InputError(f"{flag} {value!r}: K must be an integer, e.g. top:6") from error
    if k < 1 or (total is not None and k > total):
        raise InputError(f"{flag} {value}: K must lie in [1, {total or 'all heads'}]")
    return k


@contextmanager
def writing(out: str | Path) -> Iterator[Path]:
    """The ``--out`` folder, checked and claimed for the whole ``with`` block: a second
    command writing it meanwhile is refused with the holder's process id; the claim goes
    at the end, also on an error (:func:`lens_heads.core._locks.folder_lock`)."""
    from lens_heads.core.internal import folder_lock

    with folder_lock(check_out(out), "--out") as folder:
        yield folder


def chat_choice(value: str) -> bool | None:
    return {"auto": None, "yes": True, "no": False}[value]


def add_chat_argument(parser: argparse.ArgumentParser) -> None:
    add_inputs(parser, "chat")


def resolve_chat(args: argparse.Namespace, model: Any) -> bool:
    """``--chat auto`` resolved: the chat template when the model's tokenizer has one."""
    from lens_heads.core import has_chat_template

    chat = chat_choice(args.chat)
    return has_chat_template(model.tokenizer) if chat is None else chat


# -- argument checks: before any model loads (issue 17) ------------------------------------------
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


def _in_range(low: float, high: float, closed_low: bool, closed_high: bool) -> Callable:
    left, right = "[" if closed_low else "(", "]" if closed_high else ")"

    def parse(value: str) -> float:
        number = finite(value)
        above = number >= low if closed_low else number > low
        below = number <= high if closed_high else number < high
        if not (above and below):
            raise argparse.ArgumentTypeError(
                f"must lie in {left}{low:g}, {high:g}{right}, got {value!r}"
            )
        return number

    parse.__name__ = f"number in {left}{low:g}, {high:g}{right}"
    return parse


#: a probability or threshold in [0, 1]; a share in (0, 1]; a quantile in (0, 1)
probability = _in_range(0.0, 1.0, True, True)
fraction = _in_range(0.0, 1.0, False, True)
open_unit = _in_range(0.0, 1.0, False, False)


def numbers(kind: Callable[[str], Any]) -> Callable[[str], list[Any]]:
    """A comma-separated list of at least one value of ``kind`` (an argument type)."""

    def parse(value: str) -> list[Any]:
        items = [item.strip() for item in value.split(",")]
        if not any(items):
            raise argparse.ArgumentTypeError("give at least one value, comma-separated")
        if not all(items):
            raise argparse.ArgumentTypeError(f"an empty item in {value!r}")
        return [kind(item) for item in items]

    parse.__name__ = f"comma-separated {getattr(kind, '__name__', 'value')}"
    return parse


def deprecated(parser: Any, old: str, new: str, dest: str, const: Any = None, **kw: Any) -> None:
    """Keep ``old`` as a deprecated spelling of ``new``: it sets ``dest`` and says so once; it is
    left out of ``--help`` (the action's ``replaced_by`` names ``new``)."""

    class Alias(argparse.Action):
        def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
            print(f"lens-heads: {old} is deprecated; use {new}", file=sys.stderr)
            setattr(namespace, self.dest, const if const is not None else values)

    nargs = {"nargs": 0} if const is not None else {}
    action = parser.add_argument(
        old, dest=dest, action=Alias, help=argparse.SUPPRESS, **nargs, **kw
    )
    action.replaced_by = new  # type: ignore[attr-defined]
    if hasattr(parser, "spellings"):  # both spellings at once are refused (Parser)
        parser.spellings.append((old, new.split()[0]))


def check_out(path: str | Path) -> Path:
    """Refuse an ``--out`` that cannot become a writable folder, before any compute."""
    import os

    if not str(path).strip():
        raise InputError("--out is empty; give a folder (existing or new)")
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file; give a folder (existing or new)")
    existing = out
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise InputError(f"--out {out}: {existing} is a file, so the folder cannot be created")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(f"--out {out}: {existing} is not writable; choose another folder")
    return out


def add_out_argument(
    parser: argparse.ArgumentParser, help: str = "output directory", default: str | None = None
) -> None:
    """``--out DIR``: required unless a ``default`` is given."""
    add_inputs(parser, out={"help": help, "default": default})


def add_progress_argument(parser: argparse.ArgumentParser) -> None:
    """``--no-progress``: no progress bars."""
    add_inputs(parser, "no_progress")


def add_match_argument(parser: argparse.ArgumentParser) -> None:
    add_inputs(parser, "match")


def print_written(paths: Sequence[Path]) -> None:
    print("wrote " + ", ".join(str(path) for path in paths))


def write_result(
    args: argparse.Namespace,
    compute: Callable[[Any, Path], Any],
    *,
    show: Callable[[Any], None] | None = None,
) -> int:
    """The tail every command that writes a result shares, once its arguments were checked:
    claim ``--out``, load the model, ``compute(model, out)``, save the result with its figures
    (PNG too when a browser can export them), show it (its markdown table by default) and list
    the files written."""
    with writing(args.out) as out:
        model = load_model(args)
        result = compute(model, out)
        written = result.save(out, png=True)
    if show is None:
        print(result.to_markdown())
    else:
        show(result)
    print_written(written)
    return 0


def output_dir(path: str | Path) -> Path:
    """Create and return an output directory."""
    directory = Path(path)
    directory.mkdir(parents=True, exist_ok=True)
    return directory
