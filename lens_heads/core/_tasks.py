"""Tasks: examples ``{"input", "output"}``, an instruction, a match rule; built-ins and loaders.

>>> import lens_heads as lh
>>> task = lh.get_task("capitalize")
>>> task.examples[0].output[0].isupper(), task.match
(True, 'startswith')
>>> train, test = task.split(n_eval=20)
>>> len(test)
20
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

from lens_heads.core._checks import read_text_file, warn_input
from lens_heads.core._errors import (
    InputError,
    InputTypeError,
    MissingFileError,
    UnknownNameError,
)
from lens_heads.core._task_types import (
    LANGUAGE_NAMES,
    Example,
    MatchRule,
    Task,
    TaskDataError,
    TaskKind,
)

__all__ = [
    "Example",
    "ParallelCorpus",
    "Task",
    "TaskDataError",
    "get_task",
    "list_tasks",
    "load_alignments",
    "load_examples",
    "load_flores_dir",
    "load_parallel_tsv",
    "match_rule_for",
    "parallel_corpus",
]


# -- built-in tasks ---------------------------------------------------------------------------
def _data_path(*parts: str) -> Path:
    return Path(str(files("lens_heads").joinpath("data", *parts)))


@cache
def _registry() -> dict[str, dict[str, Any]]:
    return json.loads(_data_path("tasks.json").read_text(encoding="utf-8"))


def _builtin_info(name: str) -> dict[str, Any]:
    """Registry entry of a built-in task, or ``{}`` (also when the data is not installed)."""
    try:
        return dict(_registry().get(name, {}))
    except FileNotFoundError:
        return {}


# The paper's evaluation notebook: ``startswith`` for these task names, ``contains`` otherwise.
_STARTSWITH_NAMES = re.compile(
    r"^(capitalize.*|lowercase.*|next_.*|prev_.*|.+_v_.+_\d+|choose_.*|conll2003_.*)$"
)


def match_rule_for(name: str) -> MatchRule:
    """The paper's match rule for a task name: a built-in task's own rule, else by pattern --
    ``startswith`` for ``capitalize*``, ``lowercase*``, ``next_*``, ``prev_*``, ``*_v_*_N``,
    ``choose_*`` and ``conll2003_*``, ``contains`` for everything else.

    >>> match_rule_for("capitalize_last_letter"), match_rule_for("fruit_v_tool_4")
    ('startswith', 'startswith')
    >>> match_rule_for("first_word_of_list")
    'contains'
    """
    builtin = _builtin_info(name).get("match")
    if builtin is not None:
        return builtin
    return "startswith" if _STARTSWITH_NAMES.match(name) else "contains"


def _check_match(match: str | None) -> None:
    if match is not None and match not in ("startswith", "contains"):
        raise InputError(f"match must be 'startswith' or 'contains', got {match!r}")


def _is_language_pair(text: str) -> bool:
    parts = text.split("-")
    return len(parts) == 2 and parts[0] != parts[1] and all(p in LANGUAGE_NAMES for p in parts)


def list_tasks(kind: TaskKind | None = None) -> list[str]:
    """Names of the built-in tasks: word tasks and every ordered language pair (``"en-fr"``)."""
    words = sorted(_registry())
    pairs = [f"{a}-{b}" for a in LANGUAGE_NAMES for b in LANGUAGE_NAMES if a != b]
    if kind == "word":
        return words
    if kind == "translation":
        return pairs
    return words + pairs


def get_task(
    name: Any,  # a name or a path; anything else is a clear TypeError from here
    *,
    instruction: str | None = None,
    match: str | None = None,
) -> Task:
    """A built-in task by name, or a task loaded from a task file (``.json``/``.jsonl``).

    A string that ends in ``.json``/``.jsonl`` or holds a path separator is a file; anything
    else is a built-in name (a ``Path`` is always a file). A file is read for what it says and
    nothing else: its name never lends it a built-in task's instruction, match rule or kind. It
    is one of

    * JSONL (``.jsonl``): one ``{"input": ..., "output": ...}`` object per line;
    * a JSON list (``.json``) of such objects;
    * a JSON object (``.json``) with an ``"examples"`` list and, optionally, the task's fields
      ``"name"`` (default: the file's stem), ``"instruction"`` (default: none), ``"match"``
      (``"startswith"`` or ``"contains"``; default ``"contains"``), ``"kind"`` (``"word"``, or
      ``"translation"``: the default when the languages are given), ``"description"``,
      ``"source_lang"`` and ``"target_lang"`` (codes such as ``"en"``; with both and no
      instruction, the instruction asks to translate from the one into the other).

    An example may carry its own ``"match"``; an unknown field is an error naming the known
    ones. The ``instruction`` and ``match`` arguments override the file and the built-ins.
    A file named like a built-in that states no instruction gets none, with a warning.
    :meth:`Task.describe` (``lens-heads tasks --show FILE``) says where each value came from.

    >>> get_task("capitalize", match="contains").match
    'contains'
    """
    _check_match(match)
    task = _get_task(name, instruction)
    if match is None or match == task.match:
        return task
    sources = {**task.metadata.get("sources", {}), "match": "argument"}
    return replace(task, match=match, metadata={**task.metadata, "sources": sources})  # type: ignore[arg-type]


_FILE_FIELDS = (
    "name", "instruction", "match", "kind", "description", "source_lang", "target_lang",
    "examples",
)  # fmt: skip


def _builtin_like(stem: str) -> str | None:
    """The built-in a file's stem is named like (a built-in word task or a language pair)."""
    if _builtin_info(stem) or _is_language_pair(stem):
        return stem
    return None


def _file_task(path: Path, instruction: str | None) -> Task:
    """A task file read for its own fields only (the format: :func:`get_task`)."""
    examples, fields = _read_task_file(path)
    sources: dict[str, str] = {}

    def field_of(key: str, default: Any) -> Any:
        if key in fields:
            sources[key] = "file"
            return fields[key]
        sources[key] = "default"
        return default

    for key in ("name", "instruction", "description", "source_lang", "target_lang"):
        if key in fields and fields[key] is not None and not isinstance(fields[key], str):
            raise TaskDataError(f"{path}: {key!r} must be a string, got {fields[key]!r}")
    source, target = field_of("source_lang", None), field_of("target_lang", None)
    if (source is None) != (target is None):
        raise TaskDataError(
            f"{path}: give both 'source_lang' and 'target_lang' (a translation task) or neither"
        )
    kind = field_of("kind", "translation" if source else "word")
    text = field_of("instruction", None)
    if instruction is not None:
        text, sources["instruction"] = instruction, "argument"
    elif text is None and source is not None:
        names = (LANGUAGE_NAMES.get(source, source), LANGUAGE_NAMES.get(target, target))
        text = f"Translate the following {names[0]} text into {names[1]}."
        sources["instruction"] = "the file's languages"
    like = _builtin_like(path.stem)
    if like is not None and sources["instruction"] == "default":
        warn_input(
            f"{path} is named like the built-in task {like!r} but states no instruction: it "
            "has none (a file never takes a built-in's instruction, match rule or kind). Add "
            '"instruction" to the file (a JSON object with "examples") or pass instruction=...'
        )
    try:
        return Task(
            name=field_of("name", path.stem),
            examples=examples,
            instruction=text,
            match=field_of("match", "contains"),
            kind=kind,
            description=field_of("description", f"loaded from {path}"),
            source_lang=source,
            target_lang=target,
            metadata={"path": str(path), "sources": sources},
        )
    except TaskDataError as error:
        raise TaskDataError(f"{path}: {error}") from error


def _get_task(name: Any, instruction: str | None) -> Task:
    if not isinstance(name, (str, os.PathLike)):
        raise InputTypeError(
            f"a task is a Task, a built-in task name or a .json/.jsonl file, got "
            f"{type(name).__name__}"
        )
    text = os.fspath(name)
    if not text.strip():
        raise InputError("the task name is empty; see `lens-heads tasks` for the built-in ones")
    if text.endswith((".json", ".jsonl")) or os.sep in text or isinstance(name, os.PathLike):
        return _file_task(Path(text), instruction)
    if text in _registry():
        info = _registry()[text]
        examples = load_examples(_data_path("tasks", f"{text}.json"))
        return Task(
            name=text,
            examples=tuple(examples),
            instruction=instruction or info["instruction"],
            match=info["match"],
            kind=info.get("kind", "word"),
            description=info.get("description", ""),
            metadata={"sources": _builtin_sources(instruction)},
        )
    if _is_language_pair(text):
        source, target = text.split("-", 1)
        task = parallel_corpus().translation_task(source, target)
        task = task if instruction is None else replace(task, instruction=instruction)
        return replace(task, metadata={**task.metadata, "sources": _builtin_sources(instruction)})
    close = difflib.get_close_matches(text, list_tasks(), n=5, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else "; see lens-heads tasks"
    raise UnknownNameError(f"unknown task {text!r}{hint}")


def _builtin_sources(instruction: str | None) -> dict[str, str]:
    sources = dict.fromkeys(("name", "match", "kind", "description"), "built-in")
    sources["instruction"] = "argument" if instruction is not None else "built-in"
    return sources


# -- loaders ----------------------------------------------------------------------------------
def _example(record: Any, where: str) -> Example:
    if not isinstance(record, dict):
        raise TaskDataError(
            f"{where}: expected an object with 'input' and 'output', got {record!r}"
        )
    missing = [key for key in ("input", "output") if key not in record]
    if missing:
        raise TaskDataError(f"{where}: missing field(s) {', '.join(missing)}")
    source, answer = record["input"], record["output"]
    if isinstance(answer, list):  # some function-vector files list several answers
        answer = answer[0] if answer else ""
    if not isinstance(source, str) or not isinstance(answer, str):
        raise TaskDataError(f"{where}: 'input' and 'output' must be strings")
    if not source.strip():
        raise TaskDataError(f"{where}: empty input")
    if not answer.strip():
        raise TaskDataError(f"{where}: empty output (answer)")
    return Example(source, answer, match=record.get("match"))


def _read_text(path: Path, what: str = "data file") -> str:
    """A data file's text; a directory or a file that is not UTF-8 is a TaskDataError naming
    it."""
    return read_text_file(path, what, error=TaskDataError)


def _check_duplicates(examples: Sequence[Example], path: Path) -> None:
    """Refuse an example that a data file repeats: it could be trained on and evaluated."""
    first: dict[tuple[str, str], int] = {}
    for index, example in enumerate(examples):
        key = (example.input, example.output)
        if key in first:
            raise TaskDataError(
                f"{path}: examples {first[key]} and {index} repeat ({example.input!r} -> "
                f"{example.output!r}); a repeated example can be both trained on and "
                "evaluated: remove the copies"
            )
        first[key] = index


def load_examples(path: str | os.PathLike[str]) -> list[Example]:
    """Read ``{"input", "output"}`` examples from a task file (the format: :func:`get_task`): a
    JSON list, a JSON object with an ``"examples"`` list, or JSONL (one object per line).

    Errors name the file and, for JSONL, the line.
    """
    return list(_read_task_file(Path(path))[0])


def _read_task_file(path: Path) -> tuple[tuple[Example, ...], dict[str, Any]]:
    """A task file's examples and its other fields (empty for a list or JSONL)."""
    text = _read_text(path, "task file")
    if not text.strip():
        raise TaskDataError(
            f"{path}: the file is empty; it should hold {{'input', 'output'}} items"
        )
    fields: dict[str, Any] = {}
    if path.suffix == ".jsonl":
        examples = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise TaskDataError(f"{path}:{number}: not valid JSON ({error.msg})") from error
            examples.append(_example(record, f"{path}:{number}"))
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise TaskDataError(f"{path}:{error.lineno}: not valid JSON ({error.msg})") from error
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(_FILE_FIELDS))
            if unknown or "examples" not in data:
                problem = f"unknown field(s) {unknown}" if unknown else ""
                problem = problem if "examples" in data else "no 'examples' list"
                raise TaskDataError(
                    f"{path}: {problem}; a task file object holds 'examples' and optionally "
                    f"{', '.join(repr(k) for k in _FILE_FIELDS[:-1])}"
                )
            fields = {key: value for key, value in data.items() if key != "examples"}
            data = data["examples"]
        if not isinstance(data, list):
            raise TaskDataError(f"{path}: expected a list of {{'input', 'output'}} objects")
        examples = [_example(record, f"{path}: item {i}") for i, record in enumerate(data)]
    if not examples:
        raise TaskDataError(f"{path}: the file holds no examples")
    _check_duplicates(examples, path)
    return tuple(examples), fields


Alignment = list[tuple[int, int]]


@dataclass(frozen=True)
class ParallelCorpus:
    """Sentence tuples in several languages, with word tokens and word alignments from a pivot.

    ``alignments[lang][i]`` lists ``(pivot_word, lang_word)`` index pairs for sentence ``i``.
    """

    sentences: dict[str, list[str]]
    tokens: dict[str, list[list[str]]] = field(default_factory=dict)
    alignments: dict[str, list[Alignment]] = field(default_factory=dict)
    pivot: str = "en"
    name: str = "parallel"

    def __post_init__(self) -> None:
        lengths = {lang: len(values) for lang, values in self.sentences.items()}
        if len(set(lengths.values())) > 1:
            raise TaskDataError(f"{self.name}: languages have different sentence counts {lengths}")

    @property
    def languages(self) -> list[str]:
        return list(self.sentences)

    def __len__(self) -> int:
        return len(next(iter(self.sentences.values())))

    def alignment(self, source: str, target: str, index: int) -> Alignment:
        """Word alignment ``(source_word, target_word)`` pairs for sentence ``index``, composed
        through the pivot language when neither side is the pivot."""

        def from_pivot(lang: str) -> Alignment:
            if lang == self.pivot:
                return [(i, i) for i in range(len(self.tokens[lang][index]))]
            if lang not in self.alignments:
                raise UnknownNameError(f"{self.name} has no alignments for {lang!r}")
            return list(self.alignments[lang][index])

        to_source, to_target = from_pivot(source), from_pivot(target)
        return sorted({(s, t) for p, s in to_source for q, t in to_target if p == q})

    def translation_task(self, source: str, target: str) -> Task:
        for lang in (source, target):
            if lang not in self.sentences:
                raise UnknownNameError(
                    f"{self.name} has no language {lang!r}; it has {self.languages}"
                )
        source_name = LANGUAGE_NAMES.get(source, source)
        target_name = LANGUAGE_NAMES.get(target, target)
        examples = tuple(
            Example(a, b)
            for a, b in zip(self.sentences[source], self.sentences[target], strict=True)
        )
        return Task(
            name=f"{source}-{target}",
            examples=examples,
            instruction=f"Translate the following {source_name} text into {target_name}.",
            match="contains",
            kind="translation",
            description=f"{source_name} to {target_name} sentences from {self.name}",
            source_lang=source,
            target_lang=target,
            metadata={"corpus": self},
        )


@cache
def parallel_corpus() -> ParallelCorpus:
    """The built-in en/fr/es/de/zh corpus with gold word alignments from English."""
    path = _data_path("parallel.jsonl")
    sentences: dict[str, list[str]] = {}
    tokens: dict[str, list[list[str]]] = {}
    alignments: dict[str, list[Alignment]] = {}
    for number, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            for lang in LANGUAGE_NAMES:
                sentences.setdefault(lang, []).append(record[lang])
                tokens.setdefault(lang, []).append(list(record["tokens"][lang]))
            for lang, pairs in record["align"].items():
                alignments.setdefault(lang, []).append([(int(a), int(b)) for a, b in pairs])
        except (KeyError, TypeError, ValueError) as error:
            raise TaskDataError(f"{path}:{number}: malformed corpus line ({error})") from error
    return ParallelCorpus(sentences, tokens, alignments, pivot="en", name="lens_heads parallel")


def load_parallel_tsv(
    path: str | os.PathLike[str], languages: Sequence[str] | None = None
) -> ParallelCorpus:
    """A many-way parallel TSV (one column per language, as XNLI 15-way). The header names the
    languages unless ``languages`` is given."""
    path = Path(path)
    lines = [line for line in _read_text(path).splitlines() if line.strip()]
    if not lines:
        raise TaskDataError(f"{path}: empty file")
    start = 0
    if languages is None:
        languages = [column.strip() for column in lines[0].split("\t")]
        start = 1
    duplicates = sorted({lang for lang in languages if list(languages).count(lang) > 1})
    if duplicates or not all(languages):
        raise TaskDataError(
            f"{path}:1: the header must name each language once (got {list(languages)}); "
            "pass languages=[...] for a file without a header"
        )
    sentences: dict[str, list[str]] = {lang: [] for lang in languages}
    for number, line in enumerate(lines[start:], start=start + 1):
        columns = line.split("\t")
        if len(columns) != len(languages):
            raise TaskDataError(
                f"{path}:{number}: {len(columns)} columns, expected {len(languages)} "
                f"({', '.join(languages)})"
            )
        for lang, text in zip(languages, columns, strict=True):
            if not text.strip():
                raise TaskDataError(f"{path}:{number}: empty {lang!r} column")
            sentences[lang].append(text.strip())
    return ParallelCorpus(sentences, pivot=languages[0], name=path.name)


def load_flores_dir(path: str | os.PathLike[str], pattern: str = "*") -> ParallelCorpus:
    """A FLORES-style folder: one file per language (``eng_Latn.devtest``, ``fr.txt``...), one
    sentence per line; the language is the file name up to the first dot."""
    folder = Path(path)
    sentences = {}
    if not folder.is_dir():
        raise MissingFileError(f"FLORES-style folder {folder} does not exist")
    for file in sorted(folder.glob(pattern)):
        if file.is_file():
            lines = _read_text(file).rstrip("\n").split("\n")
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    raise TaskDataError(f"{file}:{number}: empty line (one sentence per line)")
            sentences[file.name.split(".")[0]] = [line.strip() for line in lines]
    if not sentences:
        raise TaskDataError(f"{folder}: no language files found")
    return ParallelCorpus(sentences, pivot=next(iter(sentences)), name=folder.name)


def load_alignments(path: str | os.PathLike[str]) -> list[Alignment]:
    """Word alignments in Pharaoh format (``0-0 1-2 2-1`` per sentence, as fast_align writes)."""
    path = Path(path)
    result = []
    for number, line in enumerate(_read_text(path, "alignment file").splitlines(), start=1):
        pairs = []
        for item in line.split():
            try:
                source, target = item.split("-")
                pairs.append((int(source), int(target)))
            except ValueError as error:
                raise TaskDataError(
                    f"{path}:{number}: {item!r} is not an alignment pair like '3-4'"
                ) from error
        result.append(pairs)
    return result
