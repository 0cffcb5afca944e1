"""Issue 72: the same defaults in Python and on the command line. Each command's valid example
(``lens_heads.cli.EXAMPLES``) is run up to the settings objects it builds from its flags (before
any model loads); every field of each such object that no flag of the call names must equal the
field's default in Python -- the settings class's own default, where a notebook user starts."""

from __future__ import annotations

import dataclasses
import importlib

import pytest

from lens_heads.cli import EXAMPLES, MODULES, main
from lens_heads.cli._options import flag_of
from tests.unit.cli.test_bad_input import _argv, f  # noqa: F401 -- f is the files fixture

GOOD = {name: example.good for name, example in EXAMPLES.items() if example.good is not None}

#: fields a command sets on purpose, not from a flag: what it writes and shows (a command always
#: shows progress unless --no-progress; a command's inputs travel beside its settings)
SET_BY_THE_COMMAND = {"progress", "soft", "trainable", "task", "model"}


def _ablation_default():
    from lens_heads.alignment._ablation import ABLATION

    return ABLATION


def _soft_mask_default():
    from lens_heads.lahis import SoftMaskConfig
    from lens_heads.lahis._soft_mask_experiment import soft_mask_config

    return SoftMaskConfig(training=soft_mask_config())


#: where a Python entry point starts from another object than the settings class's defaults:
#: (command, settings class) -> that object (ablate_heads: the paper's two shots and three seeds)
PYTHON_DEFAULTS = {
    ("ablate-heads", "EvaluationConfig"): _ablation_default,
    ("soft-mask-experiment", "SoftMaskConfig"): _soft_mask_default,
}


class _Built(BaseException):
    """Stops a command once its settings are built (a BaseException: no handler catches it)."""


def _built_settings(command: str, argv: list[str], monkeypatch) -> list[tuple[object, dict]]:
    """The settings objects ``command`` builds from ``argv``, with the keyword arguments of each
    call (the values the command fixed)."""
    built: list[tuple[object, dict]] = []
    module_name = next(module for module, names in MODULES.items() if command in names)
    module = importlib.import_module(f"lens_heads.cli._{module_name}")
    real = module.settings_from

    def recording(args, kind, **options):
        built.append((real(args, kind, **options), options))
        return built[-1][0]

    monkeypatch.setattr(module, "settings_from", recording)

    def stop(*args, **kwargs):
        raise _Built

    monkeypatch.setattr("lens_heads.cli._common.load_model", stop)
    monkeypatch.setattr("lens_heads.cli._common.writing", stop)
    try:
        main(argv)
    except (_Built, SystemExit):
        pass
    return built


def _differences(config, python, given, prefix, rename, skip) -> list[str]:
    """The fields of ``config`` that differ from ``python`` and that no flag in ``given``
    names; a nested settings group is compared field by field (its flags unprefixed, or under
    ``prefix``)."""
    found = []
    for field in dataclasses.fields(config):
        name = field.name
        if name in SET_BY_THE_COMMAND or name in skip:
            continue
        cli, default = getattr(config, name), getattr(python, name)
        if dataclasses.is_dataclass(cli) and type(cli) is type(default):
            found += _differences(cli, default, given, prefix, rename, ())
            continue
        flags = {flag_of(name, prefix, rename), flag_of(name, "", rename)}
        flags |= {"--no-" + flag[2:] for flag in flags}  # a bool's negative form
        if cli != default and not flags & given:
            found.append(f"{type(config).__name__}.{name}: {cli!r} != {default!r}")
    return found


def differing_defaults(command: str, argv: list[str], monkeypatch) -> list[str]:
    """``Kind.field: cli value != python default`` for each field the call does not name."""
    given = {item.split("=")[0] for item in argv if item.startswith("--")}
    found = []
    for config, options in _built_settings(command, argv, monkeypatch):
        python = PYTHON_DEFAULTS.get((command, type(config).__name__), type(config))()
        prefix, rename = options.get("prefix", ""), options.get("rename")
        found += _differences(config, python, given, prefix, rename, options)
    return found


@pytest.mark.parametrize("command", sorted(GOOD))
def test_every_setting_defaults_as_in_python(command, f, monkeypatch):  # noqa: F811
    argv = _argv(command, f"{GOOD[command]} --out {{out}}", f)
    assert differing_defaults(command, argv, monkeypatch) == []
