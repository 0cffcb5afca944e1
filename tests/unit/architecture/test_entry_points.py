"""The shape of every public function (issue 45): an entry point is
``f(model, inputs..., config=None, *, out=None, **overrides)``; its settings object comes by
position after the inputs or as ``config=``, and its fields as keyword overrides. The functions
that do not have that shape yet are listed below; each list may only shrink, and a new public
function with another shape fails the walk (a planted one does)."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

import pytest

from tests.unit.architecture.test_api import API

#: settings passed as loose keywords instead of a settings object
LOOSE = ("batch_size", "progress", "chat", "precision", "n_eval", "shots")
#: entry points whose config is keyword-only: none is left (config follows every positional
#: input, so no positional call changed meaning when it moved), and a new one fails
CONFIG_KEYWORD_ONLY: set[str] = set()
#: entry points that take a config but no keyword overrides of its fields: none is left
NO_OVERRIDES: set[str] = set()
#: public functions that take settings as loose keywords and have no settings object: none is
#: left, and a new one fails
LOOSE_SETTINGS: set[str] = set()
#: public functions that build an input, not a result (a task, an encoded prompt, a choice of
#: examples or documents, the counterfactual prompt pairs a head finder is measured on): their
#: ``chat``/``shots``/``n_eval``/``seed`` describe what they build, so they are no entry point;
#: each returns one of INPUT_TYPES (checked below)
INPUT_BUILDERS = {
    "lens_heads.core.encode_example", "lens_heads.core.hybrid_few_shot",
    "lens_heads.heads_up.sweep_example", "lens_heads.lahis.ranking_documents",
    "lens_heads.finders.counterfactual_pairs",
}  # fmt: skip
INPUT_TYPES = ("Task", "Example", "EncodedExample", "list[str]", "CounterfactualSet")


def public_functions() -> dict[str, Callable[..., Any]]:
    """Every function of ``lh.__all__`` and of each subpackage's ``__all__``, under the first
    namespace that exports it."""
    found: dict[str, Callable[..., Any]] = {}
    for namespace, names in API.items():
        module = importlib.import_module(namespace)
        for name in names:
            value = getattr(module, name)
            if inspect.isfunction(value) and value not in found.values():
                found[f"{namespace}.{name}"] = value
    return found


def shapes(functions: dict[str, Callable[..., Any]]) -> dict[str, set[str]]:
    """Which functions depart from the entry-point shape, and how. An entry point is a function
    whose ``config`` defaults to None (a required config marks a helper of the engine)."""
    found: dict[str, set[str]] = {
        "keyword-only config": set(),
        "no overrides": set(),
        "loose settings": set(),
    }
    for name, function in functions.items():
        parameters = inspect.signature(function).parameters
        config = parameters.get("config")
        if config is None:
            if any(p in parameters for p in LOOSE):
                found["loose settings"].add(name)
            continue
        if config.default is not None:
            continue  # a helper that needs its config
        if config.kind is inspect.Parameter.KEYWORD_ONLY:
            found["keyword-only config"].add(name)
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
            found["no overrides"].add(name)
    return found


LISTS = {
    "keyword-only config": CONFIG_KEYWORD_ONLY,
    "no overrides": NO_OVERRIDES,
    "loose settings": LOOSE_SETTINGS,
}


@pytest.mark.parametrize("kind", LISTS)
def test_every_public_function_has_the_entry_point_shape_or_is_listed(kind):
    found = shapes(public_functions())[kind]
    if kind == "loose settings":
        assert INPUT_BUILDERS <= found, sorted(INPUT_BUILDERS - found)
        found -= INPUT_BUILDERS
    assert found <= LISTS[kind], f"{kind}, not listed: {sorted(found - LISTS[kind])}"
    fixed = LISTS[kind] - found
    assert not fixed, f"{kind}: {sorted(fixed)} now have the shape; remove them from the list"


def test_an_entry_point_of_another_shape_fails_the_walk():
    def planted(model: Any, task: str, *, config: Any = None, batch_size: int = 8) -> None:
        """An entry point with a keyword-only config and no overrides."""

    def loose(model: Any, prompts: list[str], *, batch_size: int = 8) -> None:
        """Settings as a loose keyword."""

    def shaped(model: Any, task: str, config: Any = None, *, out: Any = None, **overrides: Any):
        """The shape."""

    found = shapes({"planted": planted, "loose": loose, "shaped": shaped})
    assert found == {
        "keyword-only config": {"planted"},
        "no overrides": {"planted"},
        "loose settings": {"loose"},
    }


def test_an_input_builder_returns_an_input():
    """A function listed as an input builder returns an input (a task, an encoding, examples,
    documents), never a result: a result-returning function with loose settings is an entry
    point that needs its settings object."""
    functions = public_functions()
    for name in sorted(INPUT_BUILDERS):
        returned = inspect.signature(functions[name]).return_annotation
        assert str(returned) in INPUT_TYPES, (name, returned)
    from lens_heads.heads_up import removal_sweep

    assert str(inspect.signature(removal_sweep).return_annotation) not in INPUT_TYPES
