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
import hashlib
import json
import os
import random
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any, Literal

from lens_heads.core._checks import own_checks, read_text_file, warn_input
from lens_heads.core._errors import (
    InputError,
    InputTypeError,
    LensHeadsError,
    MissingFileError,
    UnknownNameError,
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

MatchRule = Literal["startswith", "contains"]
TaskKind = Literal["word", "translation"]
_MATCH_RULES = ("startswith", "contains")
_TASK_KINDS = ("word", "translation")

LANGUAGE_NAMES = {
    "en": "English",
    "fr": "French",
    "es": "Spanish",
    "de": "German",
    "zh": "Chinese",
}


class TaskDataError(LensHeadsError, ValueError):
    """A data file or task definition is malformed; the message names the file and line."""


@own_checks  # __post_init__ checks the rule, with or without a runtime type checker
@dataclass(frozen=True)
class Example:
    """One ``input -> output`` pair. ``match`` overrides the task's rule for this example and
    ``source`` names the task it came from (both set in mixed sets such as the hybrid few-shot
    set of :func:`lens_heads.core.hybrid_few_shot`); ``counterfactual`` is an input of
    the same token length with another answer, whose head outputs replace removed heads under
    counterfactual ablation (:mod:`lens_heads.finders`), and ``counterfactual_output`` that
    input's answer (the contrast of a mask trained on the logit difference)."""

    input: str
    output: str
    match: MatchRule | None = None
    source: str | None = None
    counterfactual: str | None = None
    counterfactual_output: str | None = None

    def __post_init__(self) -> None:
        if self.match is not None and self.match not in _MATCH_RULES:
            raise TaskDataError(
                f"example {self.input!r}: match must be 'startswith' or 'contains' (or None for "
                f"the task's rule), got {self.match!r}"
            )


@own_checks  # __post_init__ checks the rule and the kind
@dataclass(frozen=True)
class Task:
    """A named list of examples with its instruction and accuracy rule.

    ``kind="translation"`` tasks are scored with CE, ROUGE-L, BLEU and chrF++ and generate up
    to 50 tokens; word tasks generate 10.
    """

    name: str
    examples: tuple[Example, ...]
    instruction: str | None = None
    match: MatchRule = "contains"
    kind: TaskKind = "word"
    description: str = ""
    source_lang: str | None = None
    target_lang: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.examples:
            raise TaskDataError(f"task {self.name!r} has no examples")
        if self.match not in _MATCH_RULES:
            raise TaskDataError(
                f"task {self.name!r}: match must be 'startswith' or 'contains', got {self.match!r}"
            )
        if self.kind not in _TASK_KINDS:
            raise TaskDataError(
                f"task {self.name!r}: kind must be 'word' or 'translation', got {self.kind!r}"
            )
        for index, example in enumerate(self.examples):
            if not example.input.strip() or not example.output.strip():
                raise TaskDataError(
                    f"task {self.name!r}: example {index} has an empty input or output"
                )

    def __len__(self) -> int:
        return len(self.examples)

    def __iter__(self) -> Iterator[Example]:
        return iter(self.examples)

    @property
    def inputs(self) -> list[str]:
        return [example.input for example in self.examples]

    @property
    def outputs(self) -> list[str]:
        return [example.output for example in self.examples]

    @property
    def max_new_tokens(self) -> int:
        return 50 if self.kind == "translation" else 10

    def fingerprint(self) -> str:
        """A short hash of the examples (inputs and outputs, in order): checkpoints and cached
        runs record it, so a changed data file is never mistaken for the one they came from.

        >>> Task("t", (Example("a", "A"),)).fingerprint()
        '05d2318fba6a179d'
        """
        digest = hashlib.sha256()
        for example in self.examples:
            digest.update(example.input.encode() + b"\x00" + example.output.encode() + b"\x01")
        return digest.hexdigest()[:16]

    def subset(self, indices: Iterable[int], suffix: str = "") -> Task:
        return replace(
            self, name=self.name + suffix, examples=tuple(self.examples[i] for i in indices)
        )

    def head(self, n: int) -> Task:
        return self.subset(range(min(n, len(self))))

    def split(
        self, n_eval: int = 100, seed: int | None = None, *, unseen: bool = False
    ) -> tuple[Task | None, Task]:
        """``(train, eval)``: the last ``n_eval`` examples evaluate, as in the paper.

        With ``seed``, the examples are shuffled first (reproducibly). If the task has fewer
        than ``2 * n_eval`` examples, half of them evaluate, with an :class:`InputWarning`; an
        ``n_eval`` of the whole task or more is an error (nothing would be left to train on).
        ``unseen``: no mask was trained on this task, so nothing is protected -- the last
        ``n_eval`` examples evaluate (every example when ``n_eval`` reaches the task's size)
        and the rest are left for demonstrations (``train`` is None when none is left).
        """
        if n_eval < 1:
            raise InputError(f"n_eval must be positive, got {n_eval}")
        if unseen:
            order = list(range(len(self)))
            if seed is not None:
                random.Random(seed).shuffle(order)
            cut = max(0, len(self) - n_eval)
            train = self.subset(order[:cut], ":train") if cut else None
            return train, self.subset(order[cut:], ":eval")
        if len(self) < 2:
            raise TaskDataError(
                f"task {self.name!r} has {len(self)} example; at least 2 are needed to hold some "
                "out (evaluation) and keep some (training, demonstrations)"
            )
        if n_eval >= len(self):
            raise InputError(
                f"n_eval={n_eval} asks for at least every example of task {self.name!r}, which "
                f"has {len(self)}; at most {len(self) // 2} are held out (half the task)"
            )
        order = list(range(len(self)))
        if seed is not None:
            random.Random(seed).shuffle(order)
        if len(self) < 2 * n_eval:
            warn_input(
                f"task {self.name!r} has {len(self)} examples, fewer than 2 x n_eval={n_eval}: "
                f"its last {len(self) // 2} (half the task) are held out, not {n_eval}"
            )
            n_eval = len(self) // 2
        return self.subset(order[:-n_eval], ":train"), self.subset(order[-n_eval:], ":eval")


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
    """A built-in task by name, or a task loaded from a data file (``.json``/``.jsonl``).

    For a file, the instruction comes from ``instruction`` or from the built-in task named
    like the file's stem, and the match rule from ``match`` or :func:`match_rule_for` the stem
    (the paper's rule by name pattern). ``match`` overrides a built-in task's rule too.

    >>> get_task("capitalize", match="contains").match
    'contains'
    """
    _check_match(match)
    task = _get_task(name, instruction)
    if match is None or match == task.match:
        return task
    return replace(task, match=match)  # type: ignore[arg-type]


def _get_task(name: Any, instruction: str | None) -> Task:
    if not isinstance(name, (str, os.PathLike)):
        raise InputTypeError(
            f"a task is a Task, a built-in task name or a .json/.jsonl file, got "
            f"{type(name).__name__}"
        )
    text = os.fspath(name)
    if not text.strip():
        raise InputError("the task name is empty; see `lens-heads tasks` for the built-in ones")
    if text.endswith((".json", ".jsonl")) or os.sep in text:
        path = Path(text)
        stem = path.stem
        examples = tuple(load_examples(path))
        if _is_language_pair(stem):  # e.g. my-data/en-fr.jsonl: a translation task
            source, target = stem.split("-", 1)
            pair = f"Translate the following {LANGUAGE_NAMES[source]} text into "
            return Task(
                name=stem,
                examples=examples,
                instruction=instruction or pair + f"{LANGUAGE_NAMES[target]}.",
                match="contains",
                kind="translation",
                description=f"loaded from {path}",
                source_lang=source,
                target_lang=target,
            )
        builtin = _builtin_info(stem)
        return Task(
            name=stem,
            examples=examples,
            instruction=instruction or builtin.get("instruction"),
            match=match_rule_for(stem),
            kind=builtin.get("kind", "word"),
            description=f"loaded from {path}",
        )
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
        )
    if _is_language_pair(text):
        source, target = text.split("-", 1)
        task = parallel_corpus().translation_task(source, target)
        return task if instruction is None else replace(task, instruction=instruction)
    close = difflib.get_close_matches(text, list_tasks(), n=5, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else "; see lens-heads tasks"
    raise UnknownNameError(f"unknown task {text!r}{hint}")


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
    return Example(source, answer)


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
    """Read ``{"input", "output"}`` examples from a JSON list (function-vector style, or an
    object with an ``"examples"`` list) or from JSONL (one object per line).

    Errors name the file and, for JSONL, the line.
    """
    path = Path(path)
    text = _read_text(path, "task file")
    if not text.strip():
        raise TaskDataError(
            f"{path}: the file is empty; it should hold {{'input', 'output'}} items"
        )
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
        if isinstance(data, dict) and "examples" in data:
            data = data["examples"]
        if not isinstance(data, list):
            raise TaskDataError(f"{path}: expected a list of {{'input', 'output'}} objects")
        examples = [_example(record, f"{path}: item {i}") for i, record in enumerate(data)]
    if not examples:
        raise TaskDataError(f"{path}: the file holds no examples")
    _check_duplicates(examples, path)
    return examples


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
