"""Command-line options generated from settings dataclasses: the one way every ``lens-heads``
command and every ``python -m analyses.<name>`` builds its flags.

A field ``n_eval: int = 100`` with a docstring under it becomes ``--n-eval N`` with that help;
``bool`` fields are ``--x/--no-x``; ``bool | None`` (auto) fields take ``auto``, ``yes`` or ``no``;
tuples and sequences are comma-separated; an ``X | None`` field accepts ``none``. The values are
checked by the dataclass itself (``__post_init__``), before any model loads, and its error names
the flag. A field holding a settings dataclass (``LanguageHeadsConfig.importance``) adds that
class's fields as a section of their own (its flags unprefixed, its dests ``importance.method``);
``skip`` and ``only`` name its fields as ``importance.progress``.

>>> import argparse
>>> from lens_heads.engine import EvaluationConfig
>>> parser = argparse.ArgumentParser()
>>> add_settings(parser, EvaluationConfig, only=("n_eval", "random_seeds", "chat"))
>>> args = parser.parse_args(["--n-eval", "40", "--random-seeds", "3,4", "--chat", "no"])
>>> config = settings_from(args, EvaluationConfig)
>>> config.n_eval, config.random_seeds, config.chat
(40, (3, 4), False)
"""

from __future__ import annotations

import argparse
import collections.abc
import dataclasses
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from lens_heads.core import InputError, LensHeadsError, field_docs
from lens_heads.core.internal import InputTypeError

__all__ = ["CHAT_CHOICES", "add_settings", "flag_of", "settings_from", "values_from"]

#: the values of an auto/yes/no option (a ``bool | None`` field)
CHAT_CHOICES = {"auto": None, "yes": True, "no": False}


def flag_of(name: str, prefix: str = "", rename: Mapping[str, str] | None = None) -> str:
    """``--prefix-name`` for the field ``name``.

    >>> flag_of("n_eval"), flag_of("batch_size", "eval")
    ('--n-eval', '--eval-batch-size')
    """
    name = (rename or {}).get(name, name)
    return "--" + "-".join(part for part in (prefix, name) if part).replace("_", "-")


def _dest(name: str, prefix: str, rename: Mapping[str, str] | None = None) -> str:
    name = (rename or {}).get(name, name)
    return f"{prefix}_{name}" if prefix else name


def _inner(hint: Any) -> tuple[Any, bool]:
    """The type inside ``X | None`` and whether None is allowed; a union with ``str`` (a name
    or an object: ``str | Task``) is a string on the command line."""
    arguments = typing.get_args(hint)
    if typing.get_origin(hint) not in (typing.Union, types.UnionType):
        return hint, False
    rest = [a for a in arguments if a is not type(None)]
    optional = len(rest) < len(arguments)
    if len(rest) == 1:
        return rest[0], optional
    return (str if str in rest else Any), optional


def _scalar(kind: Any, flag: str, optional: bool) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        if optional and text.strip().lower() == "none":
            return None
        try:
            return kind(text)
        except ValueError as error:
            name = {int: "an integer", float: "a number"}.get(kind, kind.__name__)
            raise argparse.ArgumentTypeError(f"{flag} must be {name}, got {text!r}") from error

    return convert


def _sequence(kind: Any, flag: str) -> Callable[[str], tuple[Any, ...]]:
    item = _scalar(kind, flag, False)

    def convert(text: str) -> tuple[Any, ...]:
        return tuple(item(part.strip()) for part in text.split(",") if part.strip())

    return convert


def _is_sequence(hint: Any) -> bool:
    origin = typing.get_origin(hint)
    return origin in (tuple, list, collections.abc.Sequence)


def add_settings(
    parser: argparse.ArgumentParser | Any,
    kind: type,
    *,
    only: Iterable[str] | None = None,
    skip: Iterable[str] = (),
    defaults: Mapping[str, Any] | None = None,
    prefix: str = "",
    rename: Mapping[str, str] | None = None,
    choices: Mapping[str, Iterable[str]] | None = None,
    check: bool = True,
    sections: Mapping[str, str] | None = None,
) -> None:
    """Add one option per field of the dataclass ``kind`` (those in ``only``, or all but
    ``skip``) to ``parser``; ``defaults`` replaces the dataclass's defaults (a field without
    one is a required option), ``prefix`` goes before every flag (``--eval-batch-size``) and
    ``rename`` gives a field the flag of the concept it is on the command line
    (``TrainingConfig.n_eval`` is ``--holdout``); ``choices`` lists a string field's values.
    With ``check`` (and a parser that runs checks, :class:`common.Parser`), the settings object
    is built right after parsing, so a bad value is a usage error naming the flag.

    A field holding a settings class is a section of its own: its fields' flags take the prefix
    ``sections`` gives it (default: ``prefix``), their defaults those of the instance
    ``defaults`` gives for it (default: the class's own), their dests ``section.name``."""
    _add_fields(parser, kind, only, skip, defaults, prefix, rename, choices, check, sections, "")


def _add_fields(
    parser: Any,
    kind: type,
    only: Iterable[str] | None,
    skip: Iterable[str],
    defaults: Mapping[str, Any] | None,
    prefix: str,
    rename: Mapping[str, str] | None,
    choices: Mapping[str, Iterable[str]] | None,
    check: bool,
    sections: Mapping[str, str] | None,
    section: str,
) -> None:
    """:func:`add_settings`, the fields of the section ``section`` when it is not empty."""
    hints = typing.get_type_hints(kind)
    docs = field_docs(kind)
    fields = {field.name: field for field in dataclasses.fields(kind)}
    skip = set(skip)
    if only is None:
        own = vars(kind).get("__annotations__", {})  # a shared part's fields come last
        names = sorted((n for n in fields if n not in skip), key=lambda n: n not in own)
    else:  # a dotted name (importance.method) keeps its section
        only = list(only)
        names = list(dict.fromkeys(n.split(".")[0] for n in only))
    for name in names:
        field = fields[name]
        flag = flag_of(name, prefix, rename)
        hint, optional = _inner(hints[name])
        if dataclasses.is_dataclass(hint):
            inner_prefix = (sections or {}).get(name, prefix)
            base = (defaults or {}).get(name)
            if base is None:  # the group's own default instance (RolesConfig's sigmoid gates)
                base = _default(field)
            shown = getattr(kind, "SHOWN", {}).get(name)  # the group's fields this class reads
            narrowed = only if only is not None else (
                None if shown is None else [f"{name}.{inner}" for inner in shown]
            )  # fmt: skip
            _add_section(
                parser, hint, name, docs.get(name, ""), narrowed, skip, inner_prefix, choices,
                base, rename,
            )  # fmt: skip
            continue
        default = (defaults or {}).get(name, _default(field))
        # argparse %-formats each help: a docstring's "95 %" would break --help
        text = (docs.get(name) or field.metadata.get("help", "")).replace("%", "%%")
        dest = f"{section}.{_dest(name, '', rename)}" if section else _dest(name, prefix, rename)
        options: dict[str, Any] = {"dest": dest, "default": default}
        if section and prefix:  # a section under a prefix of its own: --training-lr
            options["prefixed"] = prefix
        metavar = {"metavar": name.upper()} if section else {}
        no_default = (
            field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        )
        if no_default and name not in (defaults or {}):
            options = {"dest": dest, "required": True, "prefixed": options.get("prefixed", "")}
        if hint is bool and optional:
            options.update(choices=list(CHAT_CHOICES), nargs="?", const="yes")
            if "default" in options:
                options["default"] = {v: k for k, v in CHAT_CHOICES.items()}.get(default, default)
            choices_text = "auto, yes (or the bare flag) or no"
            _add(parser, flag, help=f"{text.rstrip('.')}: {choices_text}", **options)
        elif hint is bool:
            _add(parser, flag, action=argparse.BooleanOptionalAction, help=text, **options)
        elif _is_sequence(hint):
            arguments = [a for a in typing.get_args(hint) if a is not Ellipsis]
            element = arguments[0] if arguments else str
            shown = ",".join(str(v) for v in default) if default else "none"
            _add(
                parser,
                flag,
                type=_sequence(element if element in (int, float) else str, flag),
                help=f"{text} (comma-separated) [{shown}]",
                **options,
                **metavar,
            )
        elif hint is str and name in (choices or {}):
            offered = list((choices or {})[name])
            lead, meanings = getattr(kind, "CHOICE_HELP", {}).get(name, (None, {}))
            if lead and all(choice in meanings for choice in offered):  # the offered ones only
                said = [f"{c} ({meanings[c]})" if meanings[c] else c for c in offered]
                text = f"{lead}: {'; '.join(said)}".replace("%", "%%")
            _add(parser, flag, choices=offered, help=text, **options)
        elif hint in (int, float, str):
            shown = f" [{default}]" if "default" in options and default is not None else ""
            _add(
                parser,
                flag,
                type=_scalar(hint, flag, optional),
                help=f"{text}{shown}",
                **options,
                **metavar,
            )
        else:
            raise InputTypeError(
                f"{kind.__name__}.{name}: a {hints[name]} field has no command-line form; "
                "skip it and set it from the command's own options"
            )
    if section:
        _old_flags(parser, kind, names, prefix, rename, section)
    if check and not section and hasattr(parser, "checks"):
        parser.checks.append(lambda args: settings_from(args, kind, prefix=prefix, rename=rename))


def _old_flags(
    parser: Any,
    kind: type,
    names: Iterable[str],
    prefix: str,
    rename: Mapping[str, str] | None,
    section: str,
) -> None:
    """Keep the flag of each field of the section ``section`` renamed since commands were
    stored (``kind.RENAMED``) as a deprecated spelling of the new one, where the old flag does
    not mean something else in this command (``--dtype``: a model's weights)."""
    from lens_heads.cli._common import deprecated

    for old, new in getattr(kind, "RENAMED", {}).items():
        flag = flag_of(old, prefix, rename)
        if new in names and flag not in parser._option_string_actions:
            deprecated(parser, flag, flag_of(new, prefix, rename), f"{section}.{new}")


def _add(parser: Any, *flags: str, **options: Any) -> argparse.Action:
    """``parser.add_argument``, the action marked as made from a settings field (``setting``)."""
    prefix = options.pop("prefixed", "")
    action = parser.add_argument(*flags, **options)
    action.setting = True  # type: ignore[attr-defined]
    action.prefixed = prefix  # type: ignore[attr-defined]
    return action


def _add_section(
    parser: Any,
    kind: type,
    name: str,
    text: str,
    only: Iterable[str] | None,
    skip: Iterable[str],
    prefix: str,
    choices: Mapping[str, Iterable[str]] | None,
    base: Any = None,
    rename: Mapping[str, str] | None = None,
) -> None:
    """The fields of the settings class ``kind`` held by the field ``name``, as a section of
    their own (dotted ``only``/``skip`` entries narrow it; ``base``, an instance, gives the
    defaults)."""
    inner = [item.split(".", 1)[1] for item in (only or ()) if item.startswith(f"{name}.")]
    group = parser.add_argument_group(f"{name} ({kind.__name__})", text or None)
    defaults = None if base is None else {f.name: getattr(base, f.name) for f in
                                          dataclasses.fields(base)}  # fmt: skip
    skipped = [item.split(".", 1)[1] for item in skip if item.startswith(f"{name}.")]
    _add_fields(
        group, kind, inner or None, skipped, defaults, prefix, rename, choices, False, None, name
    )


def _default(field: dataclasses.Field) -> Any:
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return None if field.default is dataclasses.MISSING else field.default


def values_from(
    args: argparse.Namespace,
    kind: type,
    *,
    prefix: str = "",
    rename: Mapping[str, str] | None = None,
    sections: Mapping[str, str] | None = None,
    bases: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The values the parsed ``args`` hold for the fields of ``kind`` that
    :func:`add_settings` added (auto/yes/no as None/True/False); a section's settings object is
    built from its flags (``sections``: their prefixes, as given to :func:`add_settings`) over
    the instance ``bases`` gives for it (default: the class's defaults)."""
    values = {}
    hints = typing.get_type_hints(kind)
    for field in dataclasses.fields(kind):
        dest = _dest(field.name, prefix, rename)
        nested, _ = _inner(hints[field.name])
        if dataclasses.is_dataclass(nested):
            inner = _section_values(args, nested, field.name, rename)
            if inner:
                inner_prefix = (sections or {}).get(field.name, prefix)
                base = (bases or {}).get(field.name)
                if base is None and field.default_factory is not dataclasses.MISSING:
                    base = field.default_factory()  # the group's own defaults
                values[field.name] = _build(nested, inner, inner_prefix, base)
            continue
        if hasattr(args, dest):
            values[field.name] = _value(args, dest, kind, field.name)
    return values


def _section_values(
    args: argparse.Namespace, kind: type, section: str, rename: Mapping[str, str] | None = None
) -> dict[str, Any]:
    dests = {f.name: f"{section}.{_dest(f.name, '', rename)}" for f in dataclasses.fields(kind)}
    return {
        name: _value(args, dest, kind, name) for name, dest in dests.items() if hasattr(args, dest)
    }


def _value(args: argparse.Namespace, dest: str, kind: type, name: str) -> Any:
    """The parsed value at ``dest`` for the field ``name`` of ``kind`` (auto/yes/no as
    None/True/False)."""
    value = getattr(args, dest)
    if isinstance(value, str) and value in CHAT_CHOICES and _is_auto(kind, name):
        return CHAT_CHOICES[value]
    return value


def _build(kind: type, values: Mapping[str, Any], prefix: str, base: Any = None) -> Any:
    """``kind(**values)`` (or ``base`` with ``values``), its error naming the flags."""
    try:
        return kind(**values) if base is None else dataclasses.replace(base, **values)
    except LensHeadsError as error:
        raise InputError(_with_flags(str(error), kind, prefix)) from error


def settings_from(
    args: argparse.Namespace,
    kind: type,
    *,
    prefix: str = "",
    rename: Mapping[str, str] | None = None,
    base: Any = None,
    sections: Mapping[str, str] | None = None,
    bases: Mapping[str, Any] | None = None,
    **fixed: Any,
) -> Any:
    """The ``kind`` instance the parsed ``args`` describe (the fields :func:`add_settings`
    added, with ``prefix``), ``fixed`` fields set by the command; with ``base``, the given
    values (not None) replace its fields; ``sections`` and ``bases`` as in :func:`values_from`.
    The dataclass checks the values and its error names the flag."""
    found = values_from(args, kind, prefix=prefix, rename=rename, sections=sections, bases=bases)
    values = {**found, **fixed}
    try:
        if base is not None:
            given = {name: value for name, value in values.items() if value is not None}
            return dataclasses.replace(base, **given)
        return kind(**values)
    except LensHeadsError as error:
        raise InputError(_with_flags(str(error), kind, prefix, rename)) from error


def _is_auto(kind: type, name: str) -> bool:
    hint, optional = _inner(typing.get_type_hints(kind)[name])
    return hint is bool and optional


def _with_flags(
    message: str, kind: type, prefix: str, rename: Mapping[str, str] | None = None
) -> str:
    """``n_eval must ...`` as ``--n-eval: must ...`` (as argparse names a flag): the field a
    "must" message starts with, and any field with an underscore wherever it is named (not
    ``chat`` in "chat template", not ``source`` in "source and target")."""
    fields = sorted(dataclasses.fields(kind), key=lambda f: -len(f.name))
    for field in fields:
        if message.startswith(f"{field.name} must "):
            message = f"{flag_of(field.name, prefix, rename)}:{message[len(field.name) :]}"
            break
    for field in fields:
        if "_" in field.name:
            flag = flag_of(field.name, prefix, rename)
            message = re.sub(rf"(?<![\w-]){field.name}\b", flag, message)
    return message
