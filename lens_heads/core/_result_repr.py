"""How a result shows itself in a notebook: a one-line ``repr`` under 1 kB (a field's tensor as
its dtype and shape, a table as its size, never the values) and an HTML view with the result's
table head and its figure.

>>> import dataclasses, torch
>>> @dataclasses.dataclass(repr=False)
... class Example(ResultRepr):
...     scores: torch.Tensor
...     model: str
>>> Example(torch.zeros(30, 9), "smollm2-135m-instruct")
Example(scores=f32[30,9], model='smollm2-135m-instruct')
"""

from __future__ import annotations

import dataclasses
import html
from typing import Any

__all__ = ["MAX_REPR", "ResultRepr", "short_value"]

#: the longest ``repr`` a result gives, in characters
MAX_REPR = 1000
_TEXT = 60  # a string field's characters shown


def short_value(value: Any) -> str:
    """A field's value in a few characters: a tensor's dtype and shape, a table's size, a
    collection's length, a nested result's class, a scalar as itself."""
    import torch

    if isinstance(value, torch.Tensor):
        kind = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}.get(
            value.dtype, str(value.dtype).removeprefix("torch.")
        )
        return f"{kind}[{','.join(str(n) for n in value.shape)}]"
    if hasattr(value, "shape") and hasattr(value, "columns"):  # a pandas DataFrame
        rows, columns = value.shape
        return f"DataFrame[{rows} rows x {columns} columns]"
    if isinstance(value, str):
        return repr(value if len(value) <= _TEXT else value[: _TEXT - 3] + "...")
    if isinstance(value, (bool, int, float)) or value is None:
        return repr(value)
    if isinstance(value, (list, tuple, set, frozenset, dict)):
        if len(value) <= 4 and all(isinstance(v, (bool, int, float, str)) for v in value):
            text = repr(value)
            if len(text) <= _TEXT:
                return text
        return f"{type(value).__name__}[{len(value)}]"
    return type(value).__name__


class ResultRepr:
    """The ``repr`` and ``_repr_html_`` of a result dataclass (declared with ``repr=False``)."""

    def __repr__(self) -> str:
        parts = [
            f"{field.name}={short_value(getattr(self, field.name, None))}"
            for field in dataclasses.fields(self)  # type: ignore[arg-type]
            if field.repr
        ]
        text = f"{type(self).__name__}({', '.join(parts)})"
        return text if len(text) <= MAX_REPR else text[: MAX_REPR - 4] + "...)"

    def _repr_html_(self) -> str:
        """The ``repr``, the head of :meth:`to_frame` and :meth:`plot`'s figure (plotly.js from
        its CDN), each left out when the result cannot make it."""
        blocks = [f"<p><code>{html.escape(repr(self))}</code></p>"]
        try:
            frame = self.to_frame()  # type: ignore[attr-defined]
            blocks.append(frame.head(10).to_html(max_cols=12, float_format="{:.4g}".format))
        except Exception:  # a result without rows to show: the repr says what it holds
            pass
        try:
            figure = self.plot()  # type: ignore[attr-defined]
            blocks.append(figure.to_html(full_html=False, include_plotlyjs="cdn"))
        except Exception:  # a result without a figure
            pass
        return "\n".join(blocks)
