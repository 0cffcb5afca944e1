"""Prompts with counterfactuals: each prompt beside one of exactly its token length whose answer
differs, the input of every faithfulness measurement (:mod:`lens_heads.finders.faithfulness`).

* **IOI** (indirect-object identification): the prompts of ``lens_heads/data/ioi.jsonl``
  (generated with a seed by ``scripts/make_builtin_data.py``), whose counterfactual swaps the
  second mention of the subject for the indirect object (MIB's s2-io flip): the answer moves
  from the indirect object to the subject. Prompts whose two names are not one token each, as the
  model's tokenizer splits them, are left out.
* **The toolkit's tasks** (``capitalize``, ``country-capital``, ``antonym``, ``english-french``,
  ...): each example's counterfactual is another example of the task whose prompt has as many
  tokens and whose answer starts with another token, drawn with a seed.

Two splits of each task: ``"development"``, the held-out part every stored variant of the
benchmark was compared on (the last ``n_eval`` examples; IOI's ``ioi.jsonl``), and ``"test"``,
the part of the head-finder protocol that no design choice has read (:func:`protocol_split`): IOI
prompts from ``ioi_test.jsonl`` (templates, names, places and objects of their own), and the
examples of a toolkit task that share no unordered ``{input, output}`` pair with any example a
development run read (``data/finder_development.json``), an antonym and its reverse on one side.

Both are scored by the logit difference of the answer's first token and the counterfactual
answer's, at the prompt's last position.

>>> import lens_heads as lh
>>> model = lh.tiny_model()
>>> pairs = counterfactual_pairs(model, "capitalize", n=4, n_eval=60)
>>> len(pairs), all(len(p.tokens) == len(p.counterfactual_tokens) for p in pairs.pairs)
(4, True)
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from importlib import resources
from typing import Any

from lens_heads.core import (
    Example,
    InputError,
    PromptFormat,
    Task,
    encode_example,
    get_task,
    has_chat_template,
)
from lens_heads.core.internal import ModelLike, check_int, content_hash, encode_prompt, model_name

__all__ = [
    "PARTS",
    "SPLITS",
    "CounterfactualPair",
    "CounterfactualSet",
    "counterfactual_pairs",
    "ioi_records",
    "ioi_task",
]


@dataclass(frozen=True)
class CounterfactualPair:
    """A prompt and its counterfactual (token ids, one length) and the first token of each's
    answer; ``text`` and ``counterfactual_text`` are the inputs that were encoded."""

    tokens: list[int]
    counterfactual_tokens: list[int]
    answer: int
    counterfactual_answer: int
    text: str
    counterfactual_text: str
    output: str = ""
    """The clean prompt's whole answer (what a mask trained on the pairs is trained to say)."""
    counterfactual_output: str = ""
    """The counterfactual prompt's whole answer (the contrast of the logit-difference objective:
    ``TrainingConfig(objective="difference")``)."""


@dataclass(frozen=True)
class CounterfactualSet:
    """The pairs of one task as one model's tokenizer encodes them, and how they were drawn."""

    task: str
    model: str
    pairs: list[CounterfactualPair]
    settings: dict[str, Any]

    def __len__(self) -> int:
        return len(self.pairs)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> CounterfactualSet:
        values = json.loads(text)
        pairs = [CounterfactualPair(**pair) for pair in values.pop("pairs")]
        return cls(pairs=pairs, **values)

    def fingerprint(self) -> str:
        """A hash of every pair's tokens and answers."""
        return content_hash(self.to_json().encode())

    def as_task(self, instruction: str | None = None) -> Task:
        """The pairs as a task whose examples carry their counterfactual input (what a mask is
        trained on under counterfactual ablation)."""
        examples = tuple(
            Example(
                p.text,
                p.output,
                counterfactual=p.counterfactual_text,
                counterfactual_output=p.counterfactual_output or None,
            )
            for p in self.pairs
        )
        return Task(self.task, examples, instruction=instruction)


def ioi_records() -> list[dict[str, Any]]:
    """The stored IOI prompts (``lens_heads/data/ioi.jsonl``)."""
    return _records("ioi.jsonl")


def _single(tokenizer: Any, text: str) -> int | None:
    ids = tokenizer(text, add_special_tokens=False).input_ids
    return int(ids[0]) if len(ids) == 1 else None


PARTS = ("eval", "train")
#: ``"development"``: the held-out part the benchmark's variants were compared on;
#: ``"test"``: the protocol's part that none of them read (:func:`protocol_split`)
SPLITS = ("development", "test")


def _records(name: str) -> list[dict[str, Any]]:
    text = resources.files("lens_heads").joinpath(f"data/{name}").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def ioi_test_records() -> list[dict[str, Any]]:
    """The IOI prompts of the protocol's test part (``lens_heads/data/ioi_test.jsonl``)."""
    return _records("ioi_test.jsonl")


def pair_key(example: Example) -> frozenset[str]:
    """An example's unordered pair: ``sell -> buy`` and ``buy -> sell`` share one, so a split by
    it keeps a pair and its reverse on one side.

    >>> pair_key(Example("sell", "buy")) == pair_key(Example("Buy ", "sell"))
    True
    """
    return frozenset({example.input.strip().lower(), example.output.strip().lower()})


def development_examples() -> dict[str, list[Example]]:
    """Per task, the examples a stored development run read in a pair
    (``lens_heads/data/finder_development.json``, written by ``scripts/finder_development.py``)."""
    text = resources.files("lens_heads").joinpath("data/finder_development.json").read_text()
    tasks = json.loads(text)["tasks"]
    return {name: [Example(i, o) for i, o in rows] for name, rows in tasks.items()}


def protocol_extra_examples(name: str) -> list[Example]:
    """Examples written for the protocol's test part alone (``data/finder_test/<name>.json``;
    none for most tasks): a task whose unread examples are too few for a test (antonym: nine)
    gets new pairs there, none of whose words any built-in example of the task uses."""
    path = resources.files("lens_heads").joinpath(f"data/finder_test/{name}.json")
    if not path.is_file():
        return []
    return [Example(row["input"], row["output"]) for row in json.loads(path.read_text())]


def protocol_split(task: Task, development: Sequence[Example] | None = None) -> tuple[Task, Task]:
    """``(train, test)`` of the protocol: ``test`` holds the examples that share no unordered
    pair (:func:`pair_key`) with any ``development`` example (default: those recorded for the
    task's name), then the task's test-only examples (:func:`protocol_extra_examples`);
    ``train`` the others, development examples among them. A task with no record and no
    ``development`` is refused: its development examples are not known.

    >>> task = Task("t", (Example("sell", "buy"), Example("buy", "sell"), Example("a", "b"),
    ...                   Example("c", "d")))
    >>> train, test = protocol_split(task, [Example("sell", "buy")])
    >>> [e.input for e in train], [e.input for e in test]
    (['sell', 'buy'], ['a', 'c'])
    """
    extra: list[Example] = []
    if development is None:
        recorded = development_examples()
        if task.name not in recorded:
            raise InputError(
                f"task {task.name!r} has no record of the examples development runs read, so "
                f"no test part can be told apart; the recorded tasks: {', '.join(recorded)}"
            )
        development, extra = recorded[task.name], protocol_extra_examples(task.name)
    seen = {pair_key(example) for example in development}
    if any(pair_key(example) in seen for example in extra):  # written not to: a guard
        raise InputError(f"a test-only example of {task.name!r} is a development pair")
    unread = [e for e in task.examples if pair_key(e) not in seen]
    train = [e for e in task.examples if pair_key(e) in seen]
    test = unread + [e for e in extra if e not in set(unread)]
    if len(test) < 2 or not train:
        raise InputError(
            f"task {task.name!r}: {len(test)} test and {len(train)} training examples after "
            "leaving out the development pairs; a test part needs at least 2 and training 1"
        )
    return (
        replace(task, name=task.name + ":train", examples=tuple(train)),
        replace(task, name=task.name + ":test", examples=tuple(test)),
    )


def ioi_task(part: str = "all", n_eval: int = 200) -> Task:
    """The IOI prompts as a task (prompt -> the indirect object, with its leading space): the
    last ``n_eval`` records (``part="eval"``), the others (``"train"``) or all of them."""
    records = ioi_records()
    chosen = {"eval": records[-n_eval:], "train": records[:-n_eval], "all": records}[part]
    examples = tuple(Example(r["prompt"], r["answer"]) for r in chosen)
    return Task("ioi", examples, match="startswith", description="indirect-object identification")


def _ioi(
    model: ModelLike, records: list[dict[str, Any]], n: int, seed: int
) -> list[CounterfactualPair]:
    tokenizer = model.tokenizer
    records = list(records)
    random.Random(seed).shuffle(records)
    pairs = []
    for record in records:
        answer = _single(tokenizer, record["answer"])
        other = _single(tokenizer, record["counterfactual_answer"])
        if answer is None or other is None or answer == other:
            continue
        tokens = encode_prompt(model, record["prompt"], chat=False).tokens
        counterfactual = encode_prompt(model, record["counterfactual"], chat=False).tokens
        if len(tokens) != len(counterfactual):
            continue
        pairs.append(
            CounterfactualPair(
                list(tokens),
                list(counterfactual),
                answer,
                other,
                record["prompt"],
                record["counterfactual"],
                record["answer"],
                record["counterfactual_answer"],
            )
        )
        if len(pairs) == n:
            break
    return pairs


def _task(
    model: ModelLike, task: Task, n: int, seed: int, instructed: bool
) -> list[CounterfactualPair]:
    tokenizer = model.tokenizer
    chat = has_chat_template(tokenizer)
    instruction = task.instruction if instructed else None
    encoded = []
    for example in task.examples:
        prompt = encode_prompt(model, example.input, instruction=instruction)
        rendered = PromptFormat(chat=chat, instruction=instruction).render(example.input, tokenizer)
        answer = encode_example(tokenizer, rendered, example.output, chat=chat).answer_tokens[0]
        encoded.append((list(prompt.tokens), int(answer), example))
    by_length: dict[int, list[int]] = {}
    for index, (tokens, _, _) in enumerate(encoded):
        by_length.setdefault(len(tokens), []).append(index)
    rng = random.Random(seed)
    order = list(range(len(encoded)))
    rng.shuffle(order)
    pairs = []
    for index in order:
        tokens, answer, example = encoded[index]
        others = [j for j in by_length[len(tokens)] if encoded[j][1] != answer]
        if not others:
            continue
        other_tokens, other_answer, other = encoded[rng.choice(others)]
        pairs.append(
            CounterfactualPair(
                tokens,
                other_tokens,
                answer,
                other_answer,
                example.input,
                other.input,
                example.output,
                other.output,
            )
        )
        if len(pairs) == n:
            break
    return pairs


def counterfactual_pairs(
    model: ModelLike,
    task: str | Task,
    *,
    part: str = "eval",
    n: int = 40,
    n_eval: int = 200,
    seed: int = 0,
    instructed: bool = True,
    skip: int = 0,
    split: str = "development",
) -> CounterfactualSet:
    """Up to ``n`` prompt pairs of ``task`` (``"ioi"``, a toolkit task's name or file, or a
    :class:`~lens_heads.core.Task`) for ``model``'s tokenizer, drawn with ``seed`` from one
    ``part`` of its examples: the last ``n_eval`` (``"eval"``, the held-out examples a
    faithfulness is measured on) or the others (``"train"``, what a head finder may look at);
    a prompt's counterfactual comes from the same part. A toolkit task's prompts carry its
    instruction when ``instructed`` (IOI prompts are plain text). ``skip`` leaves out the first
    ``skip`` pairs of the draw: the set is disjoint from the ``n=skip`` draw of the same seed
    (what a calibration set beside the training pairs is). Fewer than two pairs is an error
    naming why.

    ``split="test"``: the parts of the protocol's split instead (:func:`protocol_split`; ``n_eval``
    plays no part): ``"eval"`` draws from the test part, ``"train"`` from the rest; IOI's test
    prompts are ``ioi_test.jsonl``, its training prompts the whole of ``ioi.jsonl``."""
    check_int("n", n, minimum=2)
    if split not in SPLITS:
        raise InputError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    check_int("n_eval", n_eval, minimum=2)
    check_int("seed", seed)
    check_int("skip", skip)
    if part not in PARTS:
        raise InputError(f"part must be one of {', '.join(PARTS)}, got {part!r}")
    if isinstance(task, str) and task == "ioi":
        records = ioi_records()
        if len(records) <= n_eval:
            raise InputError(f"n_eval={n_eval} leaves no IOI prompt to train on; lower it")
        chosen = records[-n_eval:] if part == "eval" else records[:-n_eval]
        if split == "test":
            chosen = ioi_test_records() if part == "eval" else records
        name, pairs = "ioi", _ioi(model, chosen, n + skip, seed)[skip:]
        why = "its names are not single tokens in this tokenizer"
    else:
        task = task if isinstance(task, Task) else get_task(task)
        train, held_out = protocol_split(task) if split == "test" else task.split(n_eval=n_eval)
        chosen_task = held_out if part == "eval" else train
        if chosen_task is None or len(chosen_task) < 2:
            raise InputError(
                f"task {task.name!r} has {len(task)} examples: too few for n_eval={n_eval} "
                "held out and a training part; lower n_eval"
            )
        name, pairs = task.name, _task(model, chosen_task, n + skip, seed, instructed)[skip:]
        why = "no two examples have prompts of one token length and different first answer tokens"
    if len(pairs) < 2:
        if skip:
            why = f"the part has too few pairs after the first {skip}; draw fewer of them"
        raise InputError(f"task {name!r} gives {len(pairs)} counterfactual pairs ({part}): {why}")
    settings = {"n": n, "n_eval": n_eval, "part": part, "seed": seed}
    if split != "development":
        settings["split"] = split
    if skip:
        settings["skip"] = skip
    settings["instructed"] = instructed and name != "ioi"
    return CounterfactualSet(name, model_name(model), pairs, settings)
