"""The task types: an example ``{"input", "output"}`` and a task (a named list of examples with
its instruction and accuracy rule), with their checks and splits; built-in tasks and task files
are read by :mod:`lens_heads.core._tasks`.

>>> task = Task("t", (Example("a", "A"), Example("b", "B")))
>>> [len(part) for part in task.split(n_eval=1)]
[1, 1]
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from lens_heads.core._checks import own_checks, warn_input
from lens_heads.core._errors import InputError, LensHeadsError

__all__ = ["LANGUAGE_NAMES", "Example", "MatchRule", "Task", "TaskDataError", "TaskKind"]

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

    def __repr__(self) -> str:
        instruction = "none" if self.instruction is None else repr(self.instruction)
        return (
            f"Task({self.name!r}: {len(self)} examples, instruction {instruction}, "
            f"match {self.match!r}, kind {self.kind!r})"
        )

    def describe(self) -> str:
        """What the task holds and where each value came from (``file``, ``default``,
        ``argument``, ``built-in``): what ``lens-heads tasks --show`` prints.

        >>> print(Task("t", (Example("a", "A"),)).describe())
        task t: 1 example
          instruction  none
          match        'contains'
          kind         'word'
          first        'a' -> 'A'
        """
        sources = self.metadata.get("sources", {})
        where = f" (from {self.metadata['path']})" if "path" in self.metadata else ""
        count = f"{len(self)} example{'s' if len(self) != 1 else ''}"
        lines = [f"task {self.name}: {count}{where}"]
        values = {"instruction": self.instruction, "match": self.match, "kind": self.kind}
        if self.source_lang is not None:
            values |= {"source_lang": self.source_lang, "target_lang": self.target_lang}
        for key, value in values.items():
            shown = "none" if value is None else repr(value)
            origin = f"  [{sources[key]}]" if key in sources else ""
            lines.append(f"  {key:12s} {shown}{origin}")
        first = self.examples[0]
        lines.append(f"  {'first':12s} {first.input!r} -> {first.output!r}")
        return "\n".join(lines)

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
