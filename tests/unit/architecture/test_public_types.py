"""Issue 71: every type a public signature names is importable from a public module, so a
notebook user can annotate their own code with it and the API pages can link it. The test walks
every public function and class (each method's and ``__init__``'s parameters and return) of each
public package and resolves each capitalised name of an annotation in the defining module."""

from __future__ import annotations

import importlib
import inspect
import re
import sys
import types
import typing

PUBLIC = (
    "lens_heads", "lens_heads.core", "lens_heads.engine", "lens_heads.heads_up",
    "lens_heads.alignment", "lens_heads.lahis", "lens_heads.atlas", "lens_heads.finders",
    "lens_heads.scale", "lens_heads.demo",
)  # fmt: skip


def _exported() -> set[int]:
    found = set()
    for name in PUBLIC:
        package = importlib.import_module(name)
        found |= {id(getattr(package, export)) for export in package.__all__}
    return found


def _signatures(obj: object) -> list[tuple[inspect.Signature, types.ModuleType]]:
    functions: list[object] = [obj]
    if inspect.isclass(obj):
        functions = [obj.__init__] + [
            getattr(value, "__func__", value)
            for key, value in vars(obj).items()
            if not key.startswith("_")
            and (inspect.isfunction(value) or isinstance(value, (classmethod, staticmethod)))
        ]
    found = []
    for function in functions:
        module = sys.modules.get(getattr(function, "__module__", None) or "")
        try:
            found.append((inspect.signature(function), module))
        except (TypeError, ValueError):
            continue
    return found


def _is_alias(value: object) -> bool:
    return isinstance(value, (types.UnionType, typing._GenericAlias)) or (  # type: ignore[attr-defined]
        typing.get_origin(value) is typing.Union
    )


def unexported_types(packages: tuple[str, ...] = PUBLIC) -> dict[str, set[str]]:
    """``module.Type`` -> the public names whose signatures use it, for each class or type
    alias of lens_heads that a public signature names and no public package exports."""
    exported = _exported()
    missing: dict[str, set[str]] = {}
    for package_name in packages:
        package = importlib.import_module(package_name)
        for export in package.__all__:
            obj = getattr(package, export)
            if not (inspect.isfunction(obj) or inspect.isclass(obj)):
                continue
            for signature, module in _signatures(obj):
                if module is None or not module.__name__.startswith("lens_heads"):
                    continue
                hints = [p.annotation for p in signature.parameters.values()]
                for hint in [*hints, signature.return_annotation]:
                    if hint is inspect.Parameter.empty:
                        continue
                    text = hint if isinstance(hint, str) else getattr(hint, "__name__", str(hint))
                    for name in re.findall(r"\b[A-Z][A-Za-z0-9_]*\b", text):
                        value = getattr(module, name, None)
                        if value is None or isinstance(value, typing.TypeVar):
                            continue
                        home = getattr(value, "__module__", "") or ""
                        ours = home.startswith("lens_heads") or (
                            _is_alias(value) and module.__name__.startswith("lens_heads")
                        )
                        if ours and id(value) not in exported:
                            where = home if home.startswith("lens_heads") else module.__name__
                            missing.setdefault(f"{where}.{name}", set()).add(
                                f"{package_name}.{export}"
                            )
    return missing


def test_every_type_in_a_public_signature_is_exported():
    assert not unexported_types(), "export these from their subpackage"


def test_the_walk_sees_an_unexported_type(monkeypatch):
    import lens_heads.scale as scale

    monkeypatch.setattr(scale, "__all__", [n for n in scale.__all__ if n != "Cell"])
    assert "lens_heads.scale._grid_config.Cell" in unexported_types()


def settings_types_missing_from_lh() -> dict[str, list[str]]:
    """Each settings class (``*Config``) a function of ``lh`` takes that ``lh`` does not export,
    with the functions that take it."""
    import lens_heads as lh

    missing: dict[str, list[str]] = {}
    for export in lh.__all__:
        function = getattr(lh, export)
        if not inspect.isfunction(function):
            continue
        for parameter in inspect.signature(function).parameters.values():
            hint = parameter.annotation
            text = hint if isinstance(hint, str) else str(hint)
            for name in re.findall(r"\b[A-Z]\w*Config\b", text):
                if name not in lh.__all__:
                    missing.setdefault(name, []).append(export)
    return missing


def test_every_settings_class_an_lh_function_takes_is_in_lh():
    """Issue 72: a notebook user builds the settings of any ``lh`` function from ``lh``."""
    assert settings_types_missing_from_lh() == {}


def test_the_settings_walk_sees_a_missing_class(monkeypatch):
    import lens_heads as lh

    monkeypatch.setattr(lh, "__all__", [n for n in lh.__all__ if n != "TopTokensConfig"])
    assert settings_types_missing_from_lh() == {"TopTokensConfig": ["top_tokens"]}
