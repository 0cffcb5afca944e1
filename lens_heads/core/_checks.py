"""Checks shared by every entry point: numbers, prompts, text files, the context window, the
vocabulary, mask sources.

Each raises a :class:`ValueError` subclass (a :class:`TypeError` for a prompt of the wrong type)
that names the problem and the fix, before any compute; input that is legal but surely a
mistake gets an :class:`InputWarning`. One helper per concept, so the library and the command
line say the same thing.

>>> import lens_heads as lh
>>> model = lh.tiny_model(n_ctx=64)
>>> check_context(model, 60, new_tokens=10, what="prompt 'apple'")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
lens_heads.core._checks.ContextLengthError: prompt 'apple' has 60 tokens; with 10 new tokens ...
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import math
import os
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from lens_heads.core._errors import InputError, InputTypeError, LensHeadsError, MissingFileError

__all__ = [
    "ContextLengthError",
    "InputFileError",
    "InputWarning",
    "MaskSourceError",
    "check_context",
    "check_int",
    "check_number",
    "check_numeric_fields",
    "check_prompt",
    "check_prompts",
    "check_seeds",
    "check_top_k",
    "context_length",
    "each_warning_once",
    "own_checks",
    "read_text_file",
    "resolve_mask",
    "warn_input",
]

_T = TypeVar("_T")


def own_checks(obj: _T) -> _T:
    """Mark a function, or a dataclass's ``__init__``, whose body checks its own arguments with
    a clear error: runtime type checkers (beartype through jaxtyping's import hook, which the
    tests turn on) leave it alone, so the tests see the error users get rather than the checker's
    ``TypeError``. It sets the ``__no_type_check__`` flag of :func:`typing.no_type_check`, which
    beartype and jaxtyping honour; annotations stay for readers and static checkers.

    >>> import dataclasses
    >>> @own_checks
    ... @dataclasses.dataclass
    ... class Rule:
    ...     name: str
    >>> Rule.__init__.__no_type_check__
    True
    """
    target = obj.__init__ if isinstance(obj, type) else obj
    target.__no_type_check__ = True  # type: ignore[attr-defined]
    return obj


class InputWarning(UserWarning):
    """Input that is legal but most likely a mistake (e.g. fewer examples than asked for)."""


_said: contextvars.ContextVar[set[str] | None] = contextvars.ContextVar("said", default=None)


def warn_input(message: str) -> None:
    """Say that an input is legal but most likely not what was meant (inside
    :func:`each_warning_once`, each message once)."""
    said = _said.get()
    if said is not None:
        if message in said:
            return
        said.add(message)
    warnings.warn(message, InputWarning, stacklevel=2)


@contextlib.contextmanager
def each_warning_once() -> Iterator[None]:
    """Inside, :func:`warn_input` says each message once (a command checks its arguments
    before the model loads and the library checks them again)."""
    token = _said.set(set())
    try:
        yield
    finally:
        _said.reset(token)


class InputFileError(LensHeadsError, ValueError):
    """A file named by an argument is a directory or not UTF-8 text."""


def read_text_file(
    path: str | os.PathLike[str], what: str = "file", error: type[Exception] = InputFileError
) -> str:
    """The UTF-8 text of ``path``; a message naming the file (and ``what`` it is) when it is
    missing, a directory or not UTF-8.

    >>> import tempfile
    >>> read_text_file(tempfile.gettempdir(), "--texts")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lens_heads.core._checks.InputFileError: --texts ... is a directory; give a file
    """
    path = Path(path)
    if path.is_dir():
        raise error(f"{what} {path} is a directory; give a file")
    if not path.is_file():
        raise MissingFileError(f"{what} {path} does not exist")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as decode:
        raise error(
            f"{what} {path} is not UTF-8 text (byte {decode.start}: {decode.reason}); save it as "
            "UTF-8 (e.g. `iconv -f latin1 -t utf-8`)"
        ) from decode


def check_prompt(
    prompt: Any, name: str = "prompt", *, tokens: bool = False, index: Any = None
) -> Any:
    """A prompt as given, or a clear error: a :class:`TypeError` for anything but a string
    (and, with ``tokens``, a sequence or tensor of token ids), a :class:`ValueError` for a
    blank string or no tokens. ``index`` names the item of a list.

    >>> check_prompt(None)
    Traceback (most recent call last):
    ...
    lens_heads.core._errors.InputTypeError: prompt must be a string, got NoneType
    >>> check_prompt("   ")
    Traceback (most recent call last):
    ...
    lens_heads.core._errors.InputError: prompt is empty or blank; give the text to run
    """
    at = "" if index is None else f" (item {index})"
    if isinstance(prompt, str):
        if not prompt.strip():
            raise InputError(f"{name} is empty or blank{at}; give the text to run")
        return prompt
    if tokens and not isinstance(prompt, bytes):
        ids = prompt.tolist() if hasattr(prompt, "tolist") else prompt
        if isinstance(ids, Sequence) and all(
            isinstance(i, int) and not isinstance(i, bool) for i in ids
        ):
            if not ids:
                raise InputError(f"{name} has no tokens{at}")
            return prompt
    kind = "a string or token ids" if tokens else "a string"
    raise InputTypeError(f"{name} must be {kind}{at}, got {type(prompt).__name__}")


def check_prompts(prompts: Any, name: str = "prompt") -> list[str]:
    """One prompt (a string) or a list of them as a list, each checked by :func:`check_prompt`.

    >>> check_prompts("apple"), check_prompts(("a", "b"))
    (['apple'], ['a', 'b'])
    >>> check_prompts(5)
    Traceback (most recent call last):
    ...
    lens_heads.core._errors.InputTypeError: prompts must be a string or a list of strings, got int
    """
    if isinstance(prompts, str):
        return [check_prompt(prompts, name)]
    if not isinstance(prompts, Sequence) or isinstance(prompts, bytes):
        raise InputTypeError(
            f"{name}s must be a string or a list of strings, got {type(prompts).__name__}"
        )
    if not prompts:
        raise InputError(f"no {name}s given: pass at least one")
    return [check_prompt(prompt, name, index=i) for i, prompt in enumerate(prompts)]


def check_top_k(model: Any, top_k: Any, name: str = "top_k") -> int:
    """``top_k`` between 1 and the model's vocabulary (``cfg.d_vocab``, when it says)."""
    check_int(name, top_k)
    if top_k < 1:
        raise InputError(f"{name} must be positive, got {top_k}")
    d_vocab = getattr(getattr(model, "cfg", None), "d_vocab", None)
    if isinstance(d_vocab, int) and d_vocab > 0 and top_k > d_vocab:
        raise InputError(
            f"{name}={top_k} exceeds the model's vocabulary of {d_vocab} tokens; ask for at "
            f"most {d_vocab}"
        )
    return top_k


class ContextLengthError(LensHeadsError, ValueError):
    """A prompt (plus the tokens to generate) does not fit the model's context window."""


def context_length(model: Any) -> int | None:
    """The model's number of positions (``cfg.n_ctx``), or None when it does not say."""
    n_ctx = getattr(getattr(model, "cfg", None), "n_ctx", None)
    return int(n_ctx) if isinstance(n_ctx, int) and n_ctx > 0 else None


def check_context(
    model: Any, n_tokens: int, *, new_tokens: int = 0, what: str = "the prompt"
) -> None:
    """Raise :class:`ContextLengthError` unless ``n_tokens + new_tokens`` fits ``cfg.n_ctx``.

    ``what`` names the prompt in the message (e.g. ``"example 3 ('apple')"``).
    """
    n_ctx = context_length(model)
    if n_ctx is None or n_tokens + new_tokens <= n_ctx:
        return
    extra = f"; with {new_tokens} new tokens that is {n_tokens + new_tokens}" if new_tokens else ""
    raise ContextLengthError(
        f"{what} has {n_tokens} tokens{extra}, more than the model's context of {n_ctx} "
        "positions (cfg.n_ctx); shorten the prompt"
        + (" or ask for fewer new tokens" if new_tokens else "")
    )


def check_int(
    name: str,
    value: Any,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    why: str = "",
) -> int:
    """``value`` as an int; an error for floats, bools, strings and values below ``minimum`` or
    above ``maximum`` (a count that allocates memory or time in proportion; ``why`` says so).

    >>> check_int("batch_size", 2.5, minimum=1)
    Traceback (most recent call last):
    ...
    lens_heads.core._errors.InputError: batch_size must be an integer, got 2.5
    >>> check_int("bootstrap", 10**12, maximum=100_000, why="time")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lens_heads.core._errors.InputError: bootstrap must be at most 100000, got 1000000000000 (time)
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{name} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise InputError(f"{name} must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise InputError(
            f"{name} must be at most {maximum}, got {value}" + (f" ({why})" if why else "")
        )
    return value


def check_seeds(name: str, value: Any) -> tuple[int, ...]:
    """``value`` (a list of integer seeds) as a tuple; an error for a string, a single number or
    a non-integer seed.

    >>> check_seeds("random_seeds", [0, 1])
    (0, 1)
    >>> check_seeds("random_seeds", "01")
    Traceback (most recent call last):
    ...
    lens_heads.core._errors.InputError: random_seeds must be a list of integers, got '01'
    """
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise InputError(f"{name} must be a list of integers, got {value!r}")
    return tuple(check_int(f"each of {name}", seed) for seed in value)


def check_number(name: str, value: Any) -> float:
    """``value`` as a finite float; an error for NaN, inf, bools and non-numbers."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise InputError(f"{name} must be a finite number, got {value}")
    return float(value)


def check_numeric_fields(config: Any) -> None:
    """Type-check a dataclass's ``int``/``float``/``bool``/``str`` fields (optional ones may be
    None): ints must be ints (not 2.5 or True), floats finite numbers, bools True or False (not
    ``"no"``, which is true), strings strings. Ranges and choices are the dataclass's own.

    >>> import dataclasses
    >>> @dataclasses.dataclass
    ... class Options:
    ...     chat: bool | None = None
    >>> check_numeric_fields(Options(chat="no"))
    Traceback (most recent call last):
    ...
    lens_heads.core._errors.InputError: chat must be True or False, got 'no'
    """
    for field in dataclasses.fields(config):
        kind = str(field.type).replace(" ", "")
        value = getattr(config, field.name)
        if value is None and kind.endswith("|None"):
            continue
        if kind in ("int", "int|None"):
            check_int(field.name, value)
        elif kind in ("float", "float|None"):
            check_number(field.name, value)
        elif kind in ("bool", "bool|None") and not isinstance(value, bool):
            raise InputError(f"{field.name} must be True or False, got {value!r}")
        elif kind in ("str", "str|None") and not isinstance(value, str):
            raise InputError(f"{field.name} must be a string, got {value!r}")


class MaskSourceError(LensHeadsError, ValueError):
    """A mask argument names neither a mask file nor a train-mask output folder."""


#: the forms a mask argument takes, as errors name them
MASK_FORMS = "a HeadMask, a mask file, a train-mask output folder or a MaskTrainingResult"


def resolve_mask(value: Any, model: Any = None, *, tensors: bool = False) -> Any:
    """The :class:`~lens_heads.core.HeadMask` behind a mask argument, checked against
    ``model``: a HeadMask, a mask file (``.safetensors``), a ``train-mask`` output folder (its
    ``mask.safetensors``; its ``training.safetensors`` names the same folder) or a
    :class:`~lens_heads.MaskTrainingResult` (its binary ``mask``). With ``tensors``, a tensor
    of multipliers (``[n_layers, n_heads]`` or one per example) passes through for the function
    to check. None stays None. Every command and function that takes a mask resolves it here.

    >>> resolve_mask(3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lens_heads.core._checks.MaskSourceError: a mask must be a HeadMask, a mask file, ... got int
    """
    import torch

    from lens_heads.core._masks import HeadMask

    if value is None:
        return None
    if isinstance(value, torch.Tensor) and tensors:
        return value
    if not isinstance(value, (HeadMask, str, os.PathLike)) and hasattr(value, "W"):
        value = getattr(value, "mask", None)  # a MaskTrainingResult: its binary mask
    if isinstance(value, HeadMask):
        if model is not None:
            value.check_model(model)
        return value
    if not isinstance(value, (str, os.PathLike)):
        also = " (or a tensor of multipliers)" if tensors else ""
        raise MaskSourceError(f"a mask must be {MASK_FORMS}{also}, got {type(value).__name__}")
    return HeadMask.load(value, model=model)
