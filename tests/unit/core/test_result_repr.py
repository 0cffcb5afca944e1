"""Issue 72: every result type shows itself in a notebook in a line -- ``repr`` under 1 kB
whatever it holds (a tensor as its dtype and shape, a table as its size) -- and as HTML with its
table and figure (``_repr_html_``). The walk finds every public result class (a dataclass with
``to_frame``) and fills each field with something large."""

from __future__ import annotations

import dataclasses
import importlib
import inspect

import pandas as pd
import pytest
import torch

import lens_heads as lh
from lens_heads.core import ResultRepr
from lens_heads.core._result_repr import MAX_REPR
from tests.unit.architecture.test_public_types import PUBLIC


def result_classes() -> list[type]:
    found: dict[type, None] = {}
    for name in PUBLIC:
        package = importlib.import_module(name)
        for export in package.__all__:
            value = getattr(package, export)
            if (
                inspect.isclass(value)
                and dataclasses.is_dataclass(value)
                and hasattr(value, "to_frame")
            ):
                found[value] = None
    return list(found)


def _large(field: dataclasses.Field) -> object:
    """A value of the field's kind, large enough to flood a naive repr."""
    hint = str(field.type)
    if "Tensor" in hint:
        return torch.zeros(300, 300)
    if "DataFrame" in hint:
        return pd.DataFrame({"x": range(10_000)})
    if "dict" in hint.lower() or "Mapping" in hint:
        return {f"key{i}": "v" * 200 for i in range(500)}
    if "list" in hint.lower() or "Sequence" in hint or "tuple" in hint:
        return ["item" * 50] * 1000
    if hint == "str":
        return "x" * 5000
    return "y" * 5000


def _filled(kind: type) -> object:
    result = kind.__new__(kind)
    for field in dataclasses.fields(kind):
        object.__setattr__(result, field.name, _large(field))
    return result


#: results with a repr of their own (a verdict in words), held under 1 kB by their own tests
OWN_REPR = {"ProtocolResult": "tests/unit/finders/test_protocol.py"}


def test_there_are_result_classes_to_check():
    assert len(result_classes()) >= 25


@pytest.mark.parametrize("kind", result_classes(), ids=lambda kind: kind.__name__)
def test_every_result_has_a_short_repr_and_an_html_view(kind):
    assert hasattr(kind, "_repr_html_"), f"{kind.__name__} has no HTML view"
    if kind.__name__ in OWN_REPR:
        assert "__repr__" in vars(kind)
        return
    text = repr(_filled(kind))
    assert len(text) <= MAX_REPR, f"{kind.__name__}: {len(text)} characters"
    assert text.startswith(kind.__name__ + "(")


def test_the_check_sees_a_dataclass_repr():
    @dataclasses.dataclass  # repr=False forgotten: the dataclass's own repr wins
    class Flooding(ResultRepr):
        scores: dict

    assert len(repr(_filled(Flooding))) > MAX_REPR


def test_a_real_result_shows_its_shapes_and_its_table(tiny):
    result = lh.train_mask(tiny, "capitalize", steps=2, batch_size=2, n_eval=2, progress=False)
    assert "W=f32[2,4]" in repr(result)
    assert "<table" in result._repr_html_()
