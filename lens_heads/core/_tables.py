"""The one markdown-table writer: every result's ``to_markdown`` and every report goes through it.

>>> import pandas as pd
>>> frame = pd.DataFrame({"token": ["<|im_end|>", "a"], "p": [0.51234, float("nan")]})
>>> print(markdown_table(frame))
| token | p |
|---|---|
| <\\|im_end\\|> | 0.512 |
| a |  |
>>> print(markdown_table(frame.set_index("token"), floatfmt=".1f"))
| token | p |
|---|---|
| <\\|im_end\\|> | 0.5 |
| a |  |
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import pandas as pd

__all__ = ["markdown_table", "mean_std_table"]


def _cell(value: Any, floatfmt: str) -> str:
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, numbers.Integral)):
        return "" if math.isnan(value) else format(float(value), floatfmt)
    return str(value).replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def markdown_table(
    frame: pd.DataFrame,
    *,
    floatfmt: str = ".3f",
    index: bool | None = None,
    empty: str = "(none)",
) -> str:
    """``frame`` as a markdown table.

    Floats are written with ``floatfmt`` (NaN as an empty cell), integers and text as they are;
    ``|`` and line breaks inside cells and labels are escaped, so tokens such as ``<|im_end|>``
    never split a cell. The index becomes the first column(s) when ``index`` is True, and by
    default whenever it is not a plain ``0..n-1`` range. An empty frame gives ``empty``.
    """
    if not len(frame):
        return empty
    if index is None:
        index = not isinstance(frame.index, pd.RangeIndex) or frame.index.name is not None
    names = [str(name) for name in frame.columns]
    if index:
        levels = list(frame.index.names)
        names = ["" if name is None else str(name) for name in levels] + names
    lines = ["| " + " | ".join(_cell(name, floatfmt) for name in names) + " |"]
    lines.append("|" + "---|" * len(names))
    labels = frame.index.tolist()
    for label, values in zip(labels, frame.itertuples(index=False), strict=True):
        cells = list(values)  # itertuples keeps each column's type (iterrows would upcast)
        if index:
            cells = [*(label if isinstance(label, tuple) else (label,)), *cells]
        lines.append("| " + " | ".join(_cell(value, floatfmt) for value in cells) + " |")
    return "\n".join(lines)


def mean_std_table(
    frame: pd.DataFrame, means: Sequence[str], *, keep: Sequence[str] = (), digits: int = 3
) -> str:
    """A markdown table of ``mean ± std`` cells: each column of ``means`` with its
    ``"<column> std"`` folded in (the mean alone where the std is NaN, e.g. a single run), after
    the ``keep`` columns (integers written as integers) and the index.

    >>> frame = pd.DataFrame({"heads": [3, 3], "acc": [0.5, 0.25], "acc std": [0.1, float("nan")]},
    ...                      index=pd.Index(["random", "mask"], name="setting"))
    >>> print(mean_std_table(frame, ["acc"], keep=["heads"]))
    | setting | heads | acc |
    |---|---|---|
    | random | 3 | 0.500 ± 0.100 |
    | mask | 3 | 0.250 |
    """
    cells = pd.DataFrame(index=frame.index)
    for column in keep:
        cells[column] = [str(int(v)) for v in frame[column]]
    for column in means:
        cells[column] = [
            f"{mean:.{digits}f}" if math.isnan(std) else f"{mean:.{digits}f} ± {std:.{digits}f}"
            for mean, std in zip(frame[column], frame[f"{column} std"], strict=True)
        ]
    return markdown_table(cells, index=True)
