"""Numbers in prose: every measured-looking number in the README, the docs and the notebooks'
markdown comes from a stored result through an inline snippet, or is marked as a paper's.

A stored number sits in a sentence as an inline snippet that ``scripts/update_docs.py`` rewrites
from ``results/<PATH>/numbers.json`` (keys, then an optional ``:format``; a list's element by
``FIELD=PREFIX``, e.g. ``"name=TRater"``, or by index)::

    <!-- value figure4/smollm2-135m-instruct "masked vs instructed" :.3f -->0.878<!-- /value -->

A number quoted from a paper is marked with where it stands there (it is not a measurement of
ours, so nothing recomputes it)::

    the paper keeps <!-- paper Heads up! Table 3 -->4 of 6<!-- /paper -->

Everything else that looks measured -- a decimal, a percentage, a ratio (``3x``), a duration or
size (``4 s``, ``8 minutes``), scientific notation, a count ``N of M`` -- outside code, generated
blocks and these snippets is reported by
:func:`typed_numbers`, so a number typed (or changed) by hand fails ``update_docs.py --check``.
Settings and versions are written as code (`` `--lr 0.1` ``, `` `transformers 5.24` ``).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

#: the documents and notebooks the check reads, from the repository root
DOCUMENTS = ("README.md", "docs/*.md")
NOTEBOOKS = "notebooks/*.ipynb"
VALUE = re.compile(r"(<!-- value (?P<spec>[^>]*?) -->)(?P<body>.*?)(<!-- /value -->)", re.S)
PAPER = re.compile(r"<!-- paper (?P<where>[^>]*?) -->(?P<body>.*?)<!-- /paper -->", re.S)
#: what a measured number looks like: a percentage, a decimal, a ratio, a duration or size, a
#: count "N of M"
_INT = r"(?:\d{1,3}(?:,\d{3})+|\d+)"  # 1,024 or 1024
MEASURED = re.compile(
    r"(?<![\w§./#,])(?<![A-Za-z]-)(?:"
    rf"{_INT}(?:\.\d+)?\s?%"
    rf"|{_INT}(?:\.\d+)?\s?[x×](?![\w])"
    rf"|{_INT}(?:\.\d+)?\s?(?:ms|s|min|h|GFLOP/s|GFLOP|GiB|MiB|GB|MB)(?![\w])"
    rf"|{_INT}(?:\.\d+)?\s(?:milliseconds?|seconds?|minutes?|hours?|days?)(?![\w])"
    r"|\d+(?:\.\d+)?[eE][-+]?\d+(?![\w])"  # scientific notation
    rf"|{_INT} of {_INT}"
    r"|\d+\.\d+(?!\.\d)(?![\w])"
    r")"
)
#: inline code that is only a number that looks measured, not set (three decimals or more, a
#: decimal percentage or ratio): back-ticks do not make `0.878` a setting
_CODE_NUMBER = re.compile(r"`\s*(\d+\.\d{3,}|\d+\.\d+\s?(?:%|[x×]))\s*`")
_HIDDEN = (
    re.compile(r"<!-- generated: .*?<!-- end generated -->", re.S),
    re.compile(r"^(```|~~~).*?^\1", re.S | re.M),  # fenced code
    re.compile(r"`[^`\n]*`"),  # inline code (a number-only one was revealed before)
    re.compile(r"<!--.*?-->", re.S),  # comments (after the snippets are removed)
    re.compile(r"\]\([^)]*\)"),  # link targets
)


class SnippetError(ValueError):
    """An inline snippet is malformed or names a number its result does not hold."""


def value_of(spec: str, load: Callable[[str], dict[str, Any]]) -> str:
    """The text of the snippet ``<!-- value SPEC -->``: ``PATH KEY... [:FORMAT]``."""
    parts = shlex.split(spec)
    if len(parts) < 2:
        raise SnippetError(f"value snippet {spec!r}: give a result path and at least one key")
    path, *keys = parts
    fmt = keys.pop()[1:] if keys[-1].startswith(":") else ""
    found: Any = load(path)
    for key in keys:
        try:
            found = _select(found, key) if isinstance(found, list) else found[key]
        except (KeyError, IndexError, ValueError, TypeError) as error:
            raise SnippetError(f"value snippet {spec!r}: results/{path} has no {key!r}") from error
    return format(found, fmt) if fmt else str(found)


def _select(items: list[Any], key: str) -> Any:
    """A list's element by ``FIELD=PREFIX`` (the one element whose ``FIELD`` starts with
    ``PREFIX``: stable when the list is reordered) or by index."""
    if "=" not in key:
        return items[int(key)]
    field, prefix = key.split("=", 1)
    matches = [item for item in items if str(item.get(field, "")).startswith(prefix)]
    if len(matches) != 1:
        raise KeyError(f"{len(matches)} elements with {field} starting {prefix!r}")
    return matches[0]


def render_values(text: str, load: Callable[[str], dict[str, Any]]) -> tuple[str, list[str]]:
    """``text`` with every value snippet rewritten from its result; the specs that changed."""
    changed: list[str] = []

    def replace(match: re.Match[str]) -> str:
        body = value_of(match["spec"], load)
        if body != match["body"]:
            changed.append(match["spec"])
        return match[1] + body + match[4]

    return VALUE.sub(replace, text), changed


def hidden(text: str) -> str:
    """``text`` without what the check does not read: generated blocks, snippets, code,
    comments and link targets (lines kept, so line numbers still point into the file)."""

    def blank(match: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", match[0])

    text = VALUE.sub(blank, text)
    for where in PAPER.finditer(text):
        if not where["where"].strip():
            raise SnippetError(f"paper snippet {where[0][:60]!r}: say where in the paper")
    text = PAPER.sub(blank, text)
    text = _CODE_NUMBER.sub(lambda match: f" {match[1]} ".ljust(len(match[0])), text)
    for pattern in _HIDDEN:
        text = pattern.sub(blank, text)
    return text


def typed_numbers(text: str) -> Iterator[tuple[int, str, str]]:
    """(line number, number, the line) of every measured-looking number typed in ``text``."""
    for number, line in enumerate(hidden(text).split("\n"), start=1):
        for match in MEASURED.finditer(line):
            yield number, match[0], line.strip()


def notebook_markdown(path: Path) -> str:
    """The markdown cells of a notebook, one after another."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def notebook_comments(path: Path) -> str:
    """The ``#`` comments of a notebook's code cells, one per line (a comment is prose: a number
    in it is read like one in a markdown cell; settings go in back-ticks there too)."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    return "\n".join(line.split("#", 1)[1] for line in code.split("\n") if "#" in line)


#: a reference to a row of the reproduction page: "the Figure 4 row", "the A.4 row", "row 10"
ROW_REFERENCE = re.compile(
    r"\bthe ((?:Table|Figure|Fig\.|§|Appendix|[A-Z]\.)\s?[\w.§]+(?:\([a-z]\))?) rows?\b"
    r"|\brows? (\d+)\b"
)


def dead_row_references(text: str, rows: list[str]) -> Iterator[tuple[int, str, str]]:
    """(line number, reference, the line) of every reference in ``text`` (its prose, as
    :func:`hidden` leaves it) to a reproduction row that ``rows`` (the first cells of the
    page's rows) does not hold; a row by number is always one (numbers move when rows do)."""
    for number, line in enumerate(hidden(text).split("\n"), start=1):
        for match in ROW_REFERENCE.finditer(line):
            name = match[1]
            if name is None or not any(
                re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", row) for row in rows
            ):
                yield number, match[0], line.strip()


def notebook_outputs(path: Path) -> int:
    """How many outputs the notebook's code cells hold (CI executes the notebooks, so the
    committed ones carry none: an output would go stale with the code)."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return sum(len(c.get("outputs", [])) for c in cells if c["cell_type"] == "code")


_TABLE = re.compile(r"((?:^\|.*\|\n)+)", re.M)
#: put on the line before a table of settings (not measurements) that holds numbers
NOT_A_RESULT = "<!-- not a result:"


def hand_typed_tables(root: Path) -> list[str]:
    """Tables with measured-looking numbers (decimals, percentages, ratios) outside a generated
    block, unless the line before says ``<!-- not a result: why -->``."""
    found = []
    for path in documents(root):
        text = _HIDDEN[0].sub("", path.read_text(encoding="utf-8"))
        for match in _TABLE.finditer(text):
            before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            if MEASURED.search(match[1]) and not before.startswith(NOT_A_RESULT):
                header = match[1].split("\n", 1)[0]
                found.append(f"{path.relative_to(root)}: hand-typed table {header[:60]}")
    return found


def documents(root: Path) -> list[Path]:
    return sorted({path for pattern in DOCUMENTS for path in root.glob(pattern)})


def typed_in_prose(root: Path) -> list[str]:
    """Measured-looking numbers typed in the prose of the documents and in the notebooks'
    markdown and code comments (tables are :func:`hand_typed_tables`' part), references to
    reproduction rows that do not exist, and notebooks that hold outputs."""
    page = (root / "docs" / "reproduction.md").read_text(encoding="utf-8")
    rows = [line.split("|")[1] for line in page.split("\n") if line.startswith("| ")]
    texts = []
    for path in documents(root):
        text = _TABLE.sub(lambda m: re.sub(r"[^\n]", " ", m[0]), path.read_text(encoding="utf-8"))
        texts.append((f"{path.relative_to(root)}:{{line}}", "typed in prose", text))
    for path in sorted(root.glob(NOTEBOOKS)):
        where = path.relative_to(root)
        texts.append((f"{where} (markdown)", "typed", notebook_markdown(path)))
        texts.append((f"{where} (comments)", "typed", notebook_comments(path)))
    found = []
    for where, typed, text in texts:
        found += [
            f"{where.format(line=line)}: {number!r} {typed}: {context[:70]}"
            for line, number, context in typed_numbers(text)
        ]
        found += [
            f"{where.format(line=line)}: {reference!r} names no row of docs/reproduction.md: "
            f"{context[:70]}"
            for line, reference, context in dead_row_references(text, rows)
        ]
    for path in sorted(root.glob(NOTEBOOKS)):
        if outputs := notebook_outputs(path):
            where = path.relative_to(root)
            found.append(f"{where}: {outputs} stored outputs (CI executes it; clear them)")
    return found
