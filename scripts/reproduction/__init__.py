"""The claim-by-claim tables of ``docs/reproduction.md``, built from the stored results.

Each row puts one claim of a paper (in our words) beside the paper's numbers (with the table or
figure they come from and the model), our numbers (read from ``results/<analysis>/<run>/
numbers.json``, with the model and the command), whether the comparison is like for like and a
verdict under the one rule stated at the top of the page. The paper's numbers are typed here,
each with its source; ours never are. ``scripts/update_docs.py`` renders the tables.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Load = Callable[[str], dict[str, Any]]


class NotMeasured(LookupError):
    """A result that only a transcription holds (numbers once typed by hand, no run behind
    them): what ``load`` raises for it, so that no cell shows its numbers. A row of the page
    then says "not yet measured" with the command that would measure it."""

    def __init__(
        self, path: str, command: str = "", why: str = "is a transcription with no run behind it"
    ) -> None:
        self.path, self.command = path, command
        how = f"; run `{command}`" if command else ""
        super().__init__(f"results/{path} {why}{how}")

    def cell(self) -> str:
        """What a row shows in place of the numbers."""
        return f"not yet measured here (`{self.command}`)" if self.command else "not yet measured"


#: The level of the verdict rule's one-sided tests (stated at the top of docs/reproduction.md;
#: the same as ``analyses._common.LEVEL``).
LEVEL = 0.01


def holm(p_values: Mapping[str, float]) -> dict[str, float]:
    """Holm-adjusted p-values of one family of tests (the multiplicity rule of the page: the
    tests behind one verdict form a family); a test passes when its adjusted p is below
    :data:`LEVEL`. The package's :func:`lens_heads.core._multiplicity.holm`, by name, read from
    its file: the check needs no torch and imports no lens_heads.

    >>> holm({"a": 0.001, "b": 0.02, "c": 0.04})
    {'a': 0.003, 'b': 0.04, 'c': 0.04}
    """
    import importlib.util

    import numpy as np

    path = Path(__file__).resolve().parents[2] / "lens_heads" / "core" / "_multiplicity.py"
    spec = importlib.util.spec_from_file_location("lens_heads_multiplicity", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    adjust = module.holm

    names = list(p_values)
    if not names:
        return {}
    adjusted = adjust(np.array([float(p_values[n]) for n in names]))
    return dict(zip(names, adjusted.tolist(), strict=True))


@dataclass(frozen=True)
class Row:
    """One claim. ``ours`` and ``verdict`` read stored results through ``load``; a row whose
    experiment we do not have gives plain text instead. ``claim`` and ``paper`` are the paper's
    (its numbers, from where the row says); ``like`` reads results too where it names a setting
    of ours that a stored result holds."""

    claim: str
    paper: str
    ours: Callable[[Load], str] | str
    like: Callable[[Load], str] | str
    verdict: Callable[[Load], str] | str


def fmt(value: float, digits: int = 3) -> str:
    return f"{value:.{digits}f}"


def pval(value: float) -> str:
    return f"{value:.2g}"


def paper(where: str, text: str) -> str:
    """``text``, a number quoted from a paper, marked with where it stands there (the paper
    snippet of :mod:`prose_numbers`: the check of typed numbers leaves it alone)."""
    return f"<!-- paper {where} -->{text}<!-- /paper -->"


def cite(load: Load, path: str) -> str:
    """``[results/path, precision]`` for a cell."""
    numbers = load(path)
    precision = numbers.get("precision") or numbers.get("provenance", {}).get("precision", "?")
    return f"[`results/{path}`, {precision}]"


NOT_COVERED = "not covered"


# -- rendering --------------------------------------------------------------------------------
def _cell(value: Callable[[Load], str] | str, load: Load) -> str:
    try:
        text = value(load) if callable(value) else value
    except NotMeasured as missing:
        text = missing.cell()
    return text.replace("|", "\\|").replace("\n", " ")


def table(rows: list[tuple[str, Row]], load: Load) -> str:
    """A markdown table of ``rows``, every cell of ours read through ``load``."""
    lines = [
        "| where | claim (ours, paraphrased) | the paper's numbers | ours | like for like | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for where, row in rows:
        cells = [where, row.claim, row.paper, row.ours, row.like or "—", row.verdict]
        lines.append("| " + " | ".join(_cell(c, load) for c in cells) + " |")
    return "\n".join(lines)
