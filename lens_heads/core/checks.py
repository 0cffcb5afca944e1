"""Checks shared by every entry point: numbers, the context window, mask sources.

Each raises a :class:`ValueError` subclass that names the problem and the fix, before any
compute. One helper per concept, so the library and the command line say the same thing.

>>> import lens_heads as lh
>>> model = lh.tiny_model(n_ctx=64)
>>> check_context(model, 60, new_tokens=10, what="prompt 'apple'")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
lens_heads.core.checks.ContextLengthError: prompt 'apple' has 60 tokens; with 10 new tokens ...
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path
from typing import Any

__all__ = [
    "ContextLengthError",
    "MaskSourceError",
    "check_context",
    "check_int",
    "check_number",
    "check_numeric_fields",
    "context_length",
    "resolve_mask",
]


class ContextLengthError(ValueError):
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


def check_int(name: str, value: Any, *, minimum: int | None = None) -> int:
    """``value`` as an int; an error for floats, bools, strings and values below ``minimum``.

    >>> check_int("batch_size", 2.5, minimum=1)
    Traceback (most recent call last):
    ...
    ValueError: batch_size must be an integer, got 2.5
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return value


def check_number(name: str, value: Any) -> float:
    """``value`` as a finite float; an error for NaN, inf, bools and non-numbers."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value}")
    return float(value)


def check_numeric_fields(config: Any) -> None:
    """Type-check a dataclass's ``int``/``float`` fields (optional ones may be None): ints
    must be ints (not 2.5 or True), floats finite numbers. Ranges are the dataclass's own."""
    for field in dataclasses.fields(config):
        kind = str(field.type).replace(" ", "")
        value = getattr(config, field.name)
        if value is None and kind.endswith("|None"):
            continue
        if kind in ("int", "int|None"):
            check_int(field.name, value)
        elif kind in ("float", "float|None"):
            check_number(field.name, value)


class MaskSourceError(ValueError):
    """A mask argument names neither a mask file nor a train-mask output folder."""


def resolve_mask(value: Any, model: Any = None) -> Any:
    """The :class:`~lens_heads.core.masks.HeadMask` behind a mask argument, checked against
    ``model``: a HeadMask, a mask file (``.safetensors``), or a ``train-mask`` output folder
    (its ``mask.safetensors``; its ``training.safetensors`` names the same folder). None stays
    None. Every command and function that takes a mask resolves it here."""
    from lens_heads.core.masks import HeadMask

    if value is None:
        return None
    if isinstance(value, HeadMask):
        if model is not None:
            value.check_model(model)
        return value
    if not isinstance(value, (str, os.PathLike)):
        raise MaskSourceError(
            f"a mask must be a HeadMask, a mask file or a train-mask output folder, got "
            f"{type(value).__name__}"
        )
    path = Path(value)
    if path.name == "training.safetensors":
        path = path.parent
    if path.is_dir():
        inside = path / "mask.safetensors"
        if not inside.is_file():
            raise MaskSourceError(
                f"folder {path} holds no mask.safetensors: pass a mask file or the output "
                "folder of `lens-heads train-mask` (lh.train_mask(...).save(folder))"
            )
        path = inside
    return HeadMask.load(path, model=model)
