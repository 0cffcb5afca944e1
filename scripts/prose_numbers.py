"""Numbers in prose: every measured-looking number in the README, the docs and the notebooks'
markdown comes from a stored result through an inline snippet, or is marked as a paper's.

A stored number sits in a sentence as an inline snippet that ``scripts/update_docs.py`` rewrites
from ``results/<PATH>/numbers.json`` (keys, then an optional ``:format``; a list's element by
``FIELD=PREFIX``, e.g. ``"name=TRater"``, or by index)::

    <!-- value figure4/smollm2-135m-instruct "masked vs instructed" :.3f -->0.878<!-- /value -->

A number quoted from a paper is marked with where it stands there (it is not a measurement of
ours, so nothing recomputes it)::

    the paper keeps <!-- paper Heads up! Table 3 -->4 of 6<!-- /paper -->

Everything else that looks measured -- a decimal, a percentage (``40 %``, ``95 percent``), a
ratio (``3x``, ``4 times``), a duration or size (``4 s``, ``8 minutes``), scientific notation, a
count ``N of M`` or ``N out of M`` (digits or words: ``eleven of twelve``), a count of what runs
count (``40 held-out words``, ``100-400 steps``, ``Eleven families``: digits, or a number word from
three up), a range of model sizes (``7-14B``) -- outside code, generated blocks and these snippets
is reported by :func:`typed_numbers`, so a number typed (or changed) by hand fails
``update_docs.py --check``. Settings and versions are written as code (`` `--lr 0.1` ``,
`` `transformers 5.24` ``); a number alone in back-ticks is read as a setting only while it is
round (one significant digit: `` `0.1` ``, `` `1 %` ``), so `` `0.88` `` or `` `31 %` `` is read as
typed. References are not counts: ``Table 3``, ``Figure 4``, ``§3.2``, ``layer 14``, a model's
shape ``30 layers × 9 heads``.

The check reads the README, ``docs/``, ``results/README.md`` (tables too, for references to rows
of ``docs/reproduction.md``), the notebooks' markdown and code comments, and the strings of
``scripts/reproduction/`` that become the cells of the generated pages (:func:`script_prose`): a
paper's numbers there stand in a row's ``claim`` or ``paper`` cell (the row says where they come
from) or in a paper snippet.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

#: the documents and notebooks the check reads, from the repository root
DOCUMENTS = ("README.md", "docs/*.md", "results/README.md")
NOTEBOOKS = "notebooks/*.ipynb"
#: the modules whose strings become the generated rows of docs/reproduction.md and other blocks
SCRIPTS = "scripts/reproduction/*.py"
VALUE = re.compile(r"(<!-- value (?P<spec>[^>]*?) -->)(?P<body>.*?)(<!-- /value -->)", re.S)
PAPER = re.compile(r"<!-- paper (?P<where>[^>]*?) -->(?P<body>.*?)<!-- /paper -->", re.S)
#: what a measured number looks like: a percentage, a decimal, a ratio, a duration or size, a
#: count "N of M" or "N out of M", a count of something runs count, a range of model sizes
_INT = r"(?:\d{1,3}(?:,\d{3})+|\d+)"  # 1,024 or 1024
#: number words: any in "N of M" and "N out of M", from three up in a count ("one trainer", "two
#: passes" describe the design; "Eleven families" counts)
_SMALL_WORDS = "one|two"
_COUNT_WORDS = (
    "three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|"
    "seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|"
    "thousand|dozen"
)
_ANY = rf"(?:{_INT}|(?i:{_SMALL_WORDS}|{_COUNT_WORDS})(?![\w-]))"
_COUNT = rf"(?:{_INT}|(?i:{_COUNT_WORDS})(?![\w-]))"
#: what the runs count: a number before one of these (one word may stand between) is a count
COUNTED = (
    "heads?|steps?|layers?|pairs?|masks?|examples?|sentences?|runs?|models?|words?|tokens?|"
    "seeds?|documents?|demonstrations?|prompts?|languages?|tasks?|famil(?:y|ies)|cells?|cases?|"
    "tests?|texts?|predictions?|alphas?|updates?|epochs?|cores?|threads?|workers?|draws?|"
    "permutations?|resamples?|estimates?|inputs?|bytes?|parameters?|relations?|samples?|"
    "batch(?:es)?|outputs?|failures?|sets?|jobs?|configurations?|points?|repeats?|questions?"
)
#: words after which a number names a thing (``Table 3``, ``layer 14``, ``Gemma 2 models``) or is
#: arithmetic of a shape (``x 4 heads``, ``= 72 heads``), not a count
REFERENCES = (
    "Table", "Tables", "Figure", "Figures", "Fig.", "Appendix", "eq.", "Eq.", "Section", "issue",
    "Issue", "Gemma", "Qwen", "Llama", "Phi", "step", "layer", "init", "row", "rows", "version",
    "x", "×", "=",
)  # fmt: skip
_NOT_REFERENCE = "".join(
    f"(?<!{chr(92) + 'b' if word[0].isalnum() else ''}{re.escape(word)} )" for word in REFERENCES
)
#: the space between a count and its noun: one or two (a number revealed from back-ticks keeps a
#: space each side), or a line break; not the long run of a blanked snippet
_GAP = r"(?: {1,2}|[ \t]*\n[ \t]*)"
_COUNT_OF = (
    rf"{_NOT_REFERENCE}{_COUNT}(?:\s?[-–]\s?{_COUNT})?{_GAP}(?:[\w'-]+{_GAP})?(?:{COUNTED})"
    r"(?![\w-])(?!\s?[x×]\s)"  # "30 layers × 9 heads" is a shape
)
_SIZE = r"\d+(?:\.\d+)?[MB]?\s?[-–]\s?\d+(?:\.\d+)?[MB](?![\w])"  # 0.5B-14B, 7–14B
MEASURED = re.compile(
    r"(?<![\w§./#,])(?<![A-Za-z]-)(?:"
    rf"{_INT}(?:\.\d+)?(?:\s?%|[\s-]percent(?![\w]))"
    rf"|{_INT}(?:\.\d+)?\s?[x×](?![\w])"
    rf"|{_INT}(?:\.\d+)?\s(?:times)(?![\w])"
    rf"|(?i:{_COUNT_WORDS}) times (?:as|larger|smaller|faster|slower|more|fewer|longer|shorter)\b"
    rf"|{_INT}(?:\.\d+)?\s?(?:ms|s|min|h|GFLOP/s|GFLOP|GiB|MiB|GB|MB)(?![\w])"
    rf"|{_INT}(?:\.\d+)?\s(?:milliseconds?|seconds?|minutes?|hours?|days?)(?![\w])"
    r"|\d+(?:\.\d+)?[eE][-+]?\d+(?![\w])"  # scientific notation
    rf"|{_ANY} (?:out )?of {_ANY}"
    rf"|{_SIZE}"
    rf"|{_COUNT_OF}"
    r"|\d+\.\d+(?!\.\d)(?![\w])"
    r")"
)
#: inline code that is only a number: a setting while it is round (`0.1`, `1 %`, `3x`), read as
#: typed when it has the digits of a measurement (`0.878`, `0.88`, `31 %`, `72.4 %`, `1.99x`)
_CODE_NUMBER = re.compile(r"`\s*(\d+(?:\.\d+)?)(\s?(?:%|[x×]))?\s*`")


def _significant(number: str) -> int:
    """How many significant digits ``number`` has (``0.050``: 2, ``10``: 1, ``31``: 2)."""
    digits = number.replace(".", "").lstrip("0")
    return len(digits if "." in number else digits.rstrip("0"))


def _reveal(match: re.Match[str]) -> str:
    """A number alone in back-ticks, as prose when it looks measured, else left as code."""
    number, unit = match[1], match[2] or ""
    decimals = number.partition(".")[2]
    if _significant(number) < 2 and len(decimals) < 3 and not (decimals and unit):
        return match[0]
    return f" {number}{unit} ".ljust(len(match[0]))


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
    text = _CODE_NUMBER.sub(_reveal, text)
    for pattern in _HIDDEN:
        text = pattern.sub(blank, text)
    return text


def typed_numbers(text: str) -> Iterator[tuple[int, str, str]]:
    """(line number, number, the line) of every measured-looking number typed in ``text``, also
    where a line break falls inside it ("the 200\ntexts", reported as "200 texts" on its first
    line)."""
    prose = hidden(text)
    lines = prose.split("\n")
    for match in MEASURED.finditer(prose):
        number = prose.count("\n", 0, match.start())
        yield number + 1, re.sub(r"\s+", " ", match[0]), lines[number].strip()


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


#: calls whose string arguments are keys or paths (``n.get("fraction 0.02")``), or a paper's
#: numbers with where they stand there (``paper("Heads up! Table 6", "6 of 6")``), not our prose
_KEY_CALLS = frozenset(
    {"get", "load", "cite", "setdefault", "pop", "startswith", "endswith", "paper"}
)


def script_prose(path: Path) -> str:
    """The strings of a module of ``scripts/reproduction/``, each on its line of the file (several
    on one line joined by `` · ``), as the prose they put into the generated pages: an f-string
    with ``{}`` for each computed value, so only what is typed in it shows. Left out: docstrings,
    keys and paths (subscripts, comparisons, the arguments of ``get``, ``load``, ``cite`` ...),
    and the ``claim`` and ``paper`` cells of a ``Row`` (the paper's claim and numbers, from where
    the row says)."""
    import ast

    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    skip: set[int] = set()

    def leave_out(node: ast.AST) -> None:
        skip.update(id(inner) for inner in ast.walk(node))

    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            if isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                leave_out(body[0])  # a docstring
        if isinstance(node, ast.Subscript):
            leave_out(node.slice)
        elif isinstance(node, ast.Compare):
            leave_out(node)
        elif isinstance(node, ast.Call):
            name = getattr(node.func, "attr", getattr(node.func, "id", ""))
            if name in _KEY_CALLS:
                for argument in node.args:
                    leave_out(argument)
            elif name == "Row":  # the claim and the paper's numbers: the paper's, from `where`
                quoted = [k.value for k in node.keywords if k.arg in ("claim", "paper")]
                for argument in node.args[:2] + quoted:
                    leave_out(argument)
    lines: list[list[str]] = [[] for _ in source.split("\n")]
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.JoinedStr):
            leave_out(node)
            text = "".join(
                part.value if isinstance(part, ast.Constant) else "{}" for part in node.values
            )
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        lines[node.lineno - 1].append(text.replace("\n", " "))
    return "\n".join(" · ".join(strings) for strings in lines)


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


#: what each notebook does with the paper's claim it illustrates (issue 70, item 11): a code
#: cell with an ``assert`` and a comment line starting with :data:`CLAIM_MARK` asserts the claim
#: from the notebook's own numbers; a markdown cell and a printed line that say
#: :data:`WITHOUT_JUDGING` show it without judging (one word, one mask, one run cannot settle it)
CLAIM_MARK = "# the claim"
#: notebooks that illustrate no claim of a paper, with what they do instead
WITHOUT_CLAIM = {"quick_start": "tours the API on a random tiny model and makes no claim"}
WITHOUT_JUDGING = "shows without judging"


def _code_cells(path: Path) -> list[str]:
    """The code cells of a notebook, IPython magics and shell lines left out."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [
        "\n".join(
            line
            for line in "".join(c["source"]).split("\n")
            if not line.lstrip().startswith(("%", "!"))
        )
        for c in cells
        if c["cell_type"] == "code"
    ]


def notebook_stance(path: Path) -> str | None:
    """``"asserts"`` when a code cell holds an ``assert`` statement and a comment line starting
    with :data:`CLAIM_MARK`; ``"shows"`` when a markdown cell says :data:`WITHOUT_JUDGING` and a
    code cell prints it (either case); ``None`` when the notebook does neither (it checks only
    its own consistency)."""
    import ast

    for code in _code_cells(path):
        marked = any(line.strip().startswith(CLAIM_MARK) for line in code.split("\n"))
        if marked and any(isinstance(node, ast.Assert) for node in ast.walk(ast.parse(code))):
            return "asserts"
    said = WITHOUT_JUDGING in notebook_markdown(path).lower()
    printed = any(
        isinstance(node, ast.Call)
        and getattr(node.func, "id", "") == "print"
        and WITHOUT_JUDGING in ast.unparse(node).lower()
        for code in _code_cells(path)
        for node in ast.walk(ast.parse(code))
    )
    return "shows" if said and printed else None


def notebooks_without_a_stance(root: Path) -> list[str]:
    """The notebooks that neither assert their claim nor say they show without judging."""
    return [
        f"{path.relative_to(root)}: neither asserts its claim (an `assert` in a cell with a "
        f"`{CLAIM_MARK}: ...` comment) nor says it {WITHOUT_JUDGING} (a markdown cell and a "
        "printed line)"
        for path in sorted(root.glob(NOTEBOOKS))
        if notebook_stance(path) is None and path.stem not in WITHOUT_CLAIM
    ]


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
    """Measured-looking numbers typed in the prose of the documents, in the notebooks' markdown
    and code comments and in the strings of ``scripts/reproduction/`` (tables are
    :func:`hand_typed_tables`' part), references to reproduction rows that do not exist (in
    tables too), and notebooks that hold outputs."""
    page = (root / "docs" / "reproduction.md").read_text(encoding="utf-8")
    rows = [line.split("|")[1] for line in page.split("\n") if line.startswith("| ")]
    texts = []  # (where, what a number is, the text, the text with its tables blanked)
    for path in documents(root):
        text = path.read_text(encoding="utf-8")
        prose = _TABLE.sub(lambda m: re.sub(r"[^\n]", " ", m[0]), text)
        texts.append((f"{path.relative_to(root)}:{{line}}", "typed in prose", text, prose))
    for path in sorted(root.glob(NOTEBOOKS)):
        where = path.relative_to(root)
        markdown, comments = notebook_markdown(path), notebook_comments(path)
        texts.append((f"{where} (markdown)", "typed", markdown, markdown))
        texts.append((f"{where} (comments)", "typed", comments, comments))
    for path in sorted(root.glob(SCRIPTS)):
        strings = script_prose(path)
        texts.append((f"{path.relative_to(root)}:{{line}}", "typed in a string", strings, strings))
    found = []
    for where, typed, text, prose in texts:
        found += [
            f"{where.format(line=line)}: {number!r} {typed}: {context[:70]}"
            for line, number, context in typed_numbers(prose)
        ]
        found += [  # tables included: a cell can point at a row too
            f"{where.format(line=line)}: {reference!r} names no row of docs/reproduction.md: "
            f"{context[:70]}"
            for line, reference, context in dead_row_references(text, rows)
        ]
    for path in sorted(root.glob(NOTEBOOKS)):
        if outputs := notebook_outputs(path):
            where = path.relative_to(root)
            found.append(f"{where}: {outputs} stored outputs (CI executes it; clear them)")
    return found
