"""Settings objects: the options that travel together, as one frozen dataclass validated once.

Every public entry point that has more than a handful of options takes them as one settings
object (``config=``) and, for a notebook's convenience, as keyword overrides of its fields;
:func:`configure` turns the two into one validated object, so a typo is an error that names
the valid options, and everything below the entry point passes the object whole. Each field
carries its help as a docstring under it; :func:`field_docs` reads them (the command line
and the docs are generated from them).

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Example:
...     steps: int = 10
...     '''Training steps.'''
>>> configure(Example, None, {"steps": 3}, "train")
Example(steps=3)
>>> configure(Example, None, {"step": 3}, "train")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
lens_heads.core._errors.InputError: train: unknown option 'step' (did you mean 'steps'?); ...

Settings composed of settings take the fields of a nested group as flat overrides too:

>>> @dataclass(frozen=True)
... class Larger:
...     training: Example = dataclasses.field(default_factory=Example)
...     k: int = 2
>>> configure(Larger, None, {"steps": 5, "k": 3}, "fit")
Larger(training=Example(steps=5), k=3)
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import inspect
import itertools
import textwrap
import warnings
from collections.abc import Mapping
from functools import cache
from typing import Any, TypeVar

from lens_heads.core._errors import InputError, InputTypeError
from lens_heads.core._loading_parts import DEVICES, DTYPES, LoadingSetting, TaskSetting
from lens_heads.core._setting_parts import (
    ABLATIONS,
    FIXED,
    PRECISIONS,
    AblationSetting,
    AblationsSetting,
    BatchSetting,
    ChatSetting,
    CheckpointSetting,
    HeldOutSetting,
    InstructedSetting,
    IntegratedGradientsSetting,
    MasksSetting,
    NewTokensSetting,
    PositionSetting,
    PrecisionSetting,
    ProgressSetting,
    SeedSetting,
    SeparatorSetting,
    SharedPart,
    ShotSeedSetting,
    ShotsSetting,
    SplitSetting,
)
from lens_heads.core._statistics_parts import (
    MAX_RESAMPLES,
    BootstrapSetting,
    LevelSetting,
    PermutationsSetting,
    RandomControlsSetting,
    TopKSetting,
)

__all__ = [
    "ABLATIONS",
    "DEVICES",
    "DTYPES",
    "FIXED",
    "MAX_RESAMPLES",
    "PRECISIONS",
    "AblationSetting",
    "AblationsSetting",
    "BatchSetting",
    "BootstrapSetting",
    "ChatSetting",
    "CheckpointSetting",
    "HeldOutSetting",
    "InstructedSetting",
    "IntegratedGradientsSetting",
    "LevelSetting",
    "LoadingSetting",
    "MasksSetting",
    "NewTokensSetting",
    "PermutationsSetting",
    "PositionSetting",
    "PrecisionSetting",
    "ProgressSetting",
    "RandomControlsSetting",
    "SeedSetting",
    "SeparatorSetting",
    "SharedPart",
    "ShotSeedSetting",
    "ShotsSetting",
    "SplitSetting",
    "TaskSetting",
    "TopKSetting",
    "composed",
    "configure",
    "field_docs",
    "seeds_from_count",
    "setting_groups",
    "warn_renamed",
]

T = TypeVar("T")


def configure(kind: type[T], config: T | None, overrides: Mapping[str, Any], what: str) -> T:
    """``config`` (default: ``kind()``) with ``overrides`` applied and validated (the dataclass's
    ``__post_init__`` runs again). ``what`` names the caller in errors. A field renamed in this
    release (``kind.RENAMED``: old name -> new name) is accepted under its old name with a
    :class:`DeprecationWarning`."""
    overrides = _new_names(kind, overrides, what, stacklevel=4)
    if config is not None and not isinstance(config, kind):
        raise InputTypeError(
            f"{what}: config must be a {kind.__name__}, got {type(config).__name__}"
        )
    if not overrides:
        return kind() if config is None else config
    names = [field.name for field in dataclasses.fields(kind)]  # type: ignore[arg-type]
    groups = setting_groups(kind)
    routed: dict[str, dict[str, Any]] = {}
    top = {}
    for name, value in overrides.items():
        owners = [g for g, group in groups.items() if name in _field_names(group)]
        if name in names:
            top[name] = value
        elif len(owners) == 1:  # a field of one nested group: set it there
            routed.setdefault(owners[0], {})[name] = value
        else:
            every = names + [n for group in groups.values() for n in _field_names(group)]
            close = difflib.get_close_matches(name, every, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise InputError(
                f"{what}: unknown option {name!r}{hint}; the options of {kind.__name__} are "
                f"{', '.join(every)}"
            )
    base = kind() if config is None else config
    for group, values in routed.items():
        if group in top:
            raise InputError(
                f"{what}: {', '.join(values)} set fields of {group}= and {group}= is given too; "
                f"give them inside {group}="
            )
        top[group] = configure(groups[group], getattr(base, group), values, f"{what}: {group}")
    if config is None:
        return kind(**top)
    return dataclasses.replace(config, **top)  # type: ignore[type-var]


def _new_names(
    kind: type, values: Mapping[str, Any], what: str, stacklevel: int
) -> Mapping[str, Any]:
    """``values`` with each field renamed in this release (``kind.RENAMED``: old name -> new
    name) under its new name, with a :class:`DeprecationWarning`; both names together are an
    error."""
    renamed: dict[str, str] = getattr(kind, "RENAMED", {})
    if not any(name in renamed for name in values):
        return values
    values = dict(values)
    for old, new in renamed.items():
        if old in values and new in values:
            raise InputError(
                f"{what}: {old}= and {new}= set one option ({old}= is its old name); give "
                f"only {new}="
            )
        if old in values:
            warn_renamed(f"{what}: {old}=", f"{new}=", stacklevel=stacklevel)
            values[new] = values.pop(old)
    return values


def warn_renamed(old: str, new: str, *, stacklevel: int = 2) -> None:
    """Say, with a :class:`DeprecationWarning`, that ``old`` (a keyword, attribute or key
    renamed in this release) is now ``new`` and goes away in 0.3.0; ``stacklevel`` means what it
    would for :func:`warnings.warn` called in this function's place."""
    warnings.warn(
        f"{old} is now {new}; the old name goes away in lens_heads 0.3.0",
        DeprecationWarning,
        stacklevel=stacklevel + 1,
    )


def setting_groups(kind: type) -> dict[str, type]:
    """The fields of the settings dataclass ``kind`` that are settings themselves (nested
    groups, e.g. a :class:`~lens_heads.engine.TrainingConfig` inside a larger object), by name,
    with their class. :func:`configure` and :func:`composed` set their fields from flat
    keywords; the command line shows them as sections."""
    groups = {}
    for field in dataclasses.fields(kind):  # type: ignore[arg-type]
        factory = field.default_factory
        if factory is dataclasses.MISSING:
            continue
        if isinstance(factory, type):
            if dataclasses.is_dataclass(factory):
                groups[field.name] = factory
            continue
        value = factory()  # type: ignore[misc]  # a group with defaults of its own (a lambda)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            groups[field.name] = type(value)
    return groups


def composed(kind: type[T]) -> type[T]:
    """Let the settings class ``kind``, which holds nested settings groups, take their fields as
    flat keywords too: ``RolesConfig(n_masks=2)`` sets ``training.n_masks``, over the group's
    default or over the group given beside it. A name no group (or several) holds is refused
    by :func:`configure`'s error, naming the closest field.

    >>> @dataclasses.dataclass(frozen=True)
    ... class Inner:
    ...     steps: int = 10
    >>> @composed
    ... @dataclasses.dataclass(frozen=True)
    ... class Outer:
    ...     inner: Inner = dataclasses.field(default_factory=lambda: Inner(steps=5))
    ...     k: int = 2
    >>> Outer(steps=3, k=1)
    Outer(inner=Inner(steps=3), k=1)
    """
    init = kind.__init__
    own = {field.name for field in dataclasses.fields(kind)}  # type: ignore[arg-type]

    def __init__(self: Any, *args: Any, **values: Any) -> None:
        values = dict(_new_names(kind, values, kind.__name__, stacklevel=3))
        flat = {name: value for name, value in values.items() if name not in own}
        if flat:
            groups = setting_groups(kind)
            owners = {n: [g for g in groups if n in _field_names(groups[g])] for n in flat}
            stray = {n: flat[n] for n, found in owners.items() if len(found) != 1}
            if stray:  # configure's error: the closest field, every option
                configure(kind, None, stray, kind.__name__)
            fields = {f.name: f for f in dataclasses.fields(kind)}  # type: ignore[arg-type]
            values = {name: value for name, value in values.items() if name in own}
            for group, group_kind in groups.items():
                changed = {n: v for n, v in flat.items() if owners[n] == [group]}
                if changed:
                    base = values.get(group) or fields[group].default_factory()  # type: ignore[misc]
                    values[group] = configure(group_kind, base, changed, kind.__name__)
        init(self, *args, **values)

    __init__.__doc__ = init.__doc__
    # the signature the fields give (keyword-only): help(), Shift-Tab and IDEs show them; the
    # nested groups' fields are taken flat too, as the class docstring says
    __init__.__signature__ = _keyword_only(inspect.signature(init))  # type: ignore[attr-defined]
    __init__.__no_type_check__ = getattr(init, "__no_type_check__", False)  # type: ignore[attr-defined]
    kind.__init__ = __init__  # type: ignore[method-assign]
    return kind


def _keyword_only(signature: inspect.Signature) -> inspect.Signature:
    """``signature`` with every parameter after the first (``self``) keyword-only."""
    first, *rest = signature.parameters.values()
    return signature.replace(
        parameters=[first, *(p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in rest)]
    )


def _field_names(kind: type) -> list[str]:
    """The fields of ``kind`` and their old names (``RENAMED``): what an override may say."""
    names = [field.name for field in dataclasses.fields(kind)]  # type: ignore[arg-type]
    return names + list(getattr(kind, "RENAMED", {}))


@cache
def field_docs(kind: type) -> dict[str, str]:
    """The docstring under each field of the dataclass ``kind`` (and of its bases), by name;
    a field without one gets ``""``.

    >>> from lens_heads.engine import EvaluationConfig
    >>> field_docs(EvaluationConfig)["first_line"].startswith("Score the output's first line")
    True
    """
    docs: dict[str, str] = {}
    for klass in reversed(kind.__mro__):
        if not dataclasses.is_dataclass(klass) or klass is object:
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        body = ast.parse(source).body[0]
        statements = getattr(body, "body", [])
        for statement, following in itertools.pairwise(statements):
            if (
                isinstance(statement, ast.AnnAssign)
                and isinstance(statement.target, ast.Name)
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                docs[statement.target.id] = " ".join(following.value.value.split())
    return {field.name: docs.get(field.name, "") for field in dataclasses.fields(kind)}


def seeds_from_count(
    options: Mapping[str, Any], what: str, count: str, default: int, first: str | None = "seed"
) -> dict[str, Any]:
    """``count=k`` (and ``first=s``), how random controls were given before 0.2.0, as
    ``random_seeds=(s, ..., s + k - 1)``, with a :class:`DeprecationWarning`; other options
    pass through.

    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     seeds_from_count({"random_controls": 2, "seed": 5}, "f", "random_controls", 3)
    {'random_seeds': (5, 6)}
    """
    if count not in options and (first is None or first not in options):
        return dict(options)
    old = f"{count}=" + (f" and {first}=" if first else "")
    warnings.warn(
        f"{what}: {old} are now random_seeds=(seed, seed + 1, ...); the old names go away in "
        "lens_heads 0.3.0",
        DeprecationWarning,
        stacklevel=3,
    )
    if "random_seeds" in options:
        raise InputError(
            f"{what}: {old} and random_seeds= set one option ({old} is its old form); give only "
            "random_seeds="
        )
    options = dict(options)
    number = options.pop(count, default)
    start = options.pop(first, 0) if first else 0
    if isinstance(number, bool) or not isinstance(number, int) or number < 0:
        raise InputError(f"{count} must be an integer >= 0, got {number!r}")
    options["random_seeds"] = tuple(range(start, start + number))
    return options
