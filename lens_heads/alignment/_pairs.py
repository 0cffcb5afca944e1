"""The inputs of translation scores: sentence pairs (the built-in corpus, a task or a list), their
word alignments (a file, or an aligner), and each pair encoded as a prompt with the positions
whose attention is scored and the source positions each may hit."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lens_heads.alignment._aligners import AlignmentError, split_words, word_spans
from lens_heads.core import InputError, Task, get_task, list_tasks, parallel_corpus
from lens_heads.core.internal import InputTypeError, read_text_file

__all__ = [
    "PairsLike",
    "QueryItem",
    "SentencePairs",
    "demonstrations",
    "read_alignments",
    "resolve_pairs",
]


PairsLike = str | os.PathLike[str] | Task | Sequence[tuple[str, str]]


# -- inputs -----------------------------------------------------------------------------------
@dataclass
class SentencePairs:
    name: str
    sources: list[str]
    targets: list[str]
    source_words: list[list[str]]
    target_words: list[list[str]]
    gold: list[list[tuple[int, int]]] | None
    source_lang: str | None = None
    target_lang: str | None = None
    pool: list[tuple[str, str]] = field(default_factory=list)


def _corpus_pairs(source: str, target: str) -> SentencePairs:
    corpus = parallel_corpus()
    missing = [lang for lang in (source, target) if lang not in corpus.languages]
    if missing or source == target:
        raise AlignmentError(
            f"the built-in corpus has no pair {source}-{target}; it has the languages "
            f"{', '.join(corpus.languages)} (pairs like en-fr), or pass your own sentence pairs"
        )
    n = len(corpus)
    return SentencePairs(
        name=f"{source}-{target}",
        sources=list(corpus.sentences[source]),
        targets=list(corpus.sentences[target]),
        source_words=[list(words) for words in corpus.tokens[source]],
        target_words=[list(words) for words in corpus.tokens[target]],
        gold=[corpus.alignment(source, target, i) for i in range(n)],
        source_lang=source,
        target_lang=target,
    )


def resolve_pairs(
    pairs: PairsLike, source_lang: str | None, target_lang: str | None
) -> SentencePairs:
    if isinstance(pairs, str) and not pairs.endswith((".json", ".jsonl", ".tsv")):
        parts = pairs.split("-")
        if len(parts) == 2 and all(1 < len(p) <= 3 and p.isalpha() for p in parts):
            return _corpus_pairs(*parts)
    if isinstance(pairs, (str, os.PathLike)):
        if os.fspath(pairs) in list_tasks("word"):
            raise AlignmentError(
                f"{os.fspath(pairs)!r} is a built-in word task (single words), not sentence pairs; "
                "name a pair of the built-in corpus by its language codes (en-fr, de-zh, ...) "
                "or give a file of sentence pairs"
            )
        pairs = get_task(pairs)
    elif not isinstance(pairs, (Task, Sequence)):
        raise InputTypeError(
            "pairs must be a pair name like 'en-fr', a Task, a task file or (source, reference) "
            f"pairs, got {type(pairs).__name__}"
        )
    if isinstance(pairs, Task):
        corpus = pairs.metadata.get("corpus")
        src, tgt = pairs.source_lang or source_lang, pairs.target_lang or target_lang
        if corpus is not None and src and tgt:
            full = _corpus_pairs(src, tgt)
            where = {s: i for i, s in enumerate(full.sources)}
            keep = [where[e.input] for e in pairs.examples if e.input in where]
            if len(keep) == len(pairs):
                assert full.gold is not None
                return SentencePairs(
                    pairs.name,
                    [full.sources[i] for i in keep],
                    [full.targets[i] for i in keep],
                    [full.source_words[i] for i in keep],
                    [full.target_words[i] for i in keep],
                    [full.gold[i] for i in keep],
                    src,
                    tgt,
                )
        items = [(e.input, e.output) for e in pairs.examples]
        name = pairs.name
    else:
        items = [tuple(item) for item in pairs]  # type: ignore[misc]
        name = f"{source_lang or 'src'}-{target_lang or 'tgt'}"
        src, tgt = source_lang, target_lang
    if not items:
        raise AlignmentError("no sentence pairs given; pass a pair name like 'en-fr' or pairs")
    for index, item in enumerate(items):
        if len(item) != 2 or not all(isinstance(text, str) for text in item):
            raise AlignmentError(f"pair {index} is not a (source, reference) pair of strings")
        if not item[0].strip() or not item[1].strip():
            raise AlignmentError(
                f"pair {index} has an empty sentence ({item!r}); remove it or fill it in"
            )
    return SentencePairs(
        name,
        [s for s, _ in items],
        [t for _, t in items],
        [split_words(s) for s, _ in items],
        [split_words(t) for _, t in items],
        None,
        src,
        tgt,
    )


def read_alignments(alignments: Any) -> list[Any]:
    if isinstance(alignments, (str, os.PathLike)):
        path = Path(alignments)
        text = read_text_file(path, "alignment file", error=AlignmentError)
        if path.suffix == ".json":
            try:
                entries = json.loads(text)
            except json.JSONDecodeError as error:
                raise AlignmentError(
                    f"alignment file {path}:{error.lineno}: not valid JSON ({error.msg})"
                ) from error
            if not isinstance(entries, list):
                raise AlignmentError(
                    f"alignment file {path}: expected a JSON list (one alignment per pair), got "
                    f"{type(entries).__name__}"
                )
            return entries
        return text.rstrip("\n").split("\n")  # Pharaoh: one line per sentence pair
    return list(alignments)


# -- encoding ---------------------------------------------------------------------------------
@dataclass
class QueryItem:
    """One sentence ready to score: tokens, query rows, their argmax domains and hit sets."""

    tokens: list[int]
    queries: list[int]
    domains: list[list[int]]
    hits: list[list[int]]


def _overlapping(
    offsets: Sequence[tuple[int, int]], start: int, end: int, shift: int = 0
) -> list[int]:
    return [shift + i for i, (a, b) in enumerate(offsets) if b > a and a < end and b > start]


def _answer_offsets(tokenizer: Any, ids: list[int], text: str) -> list[tuple[int, int]]:
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    if list(encoded.input_ids) == ids:
        return [tuple(o) for o in encoded.offset_mapping]
    offsets, previous = [], 0
    for i in range(len(ids)):  # incremental decoding (ids that re-tokenize differently)
        end = max(previous, len(tokenizer.decode(ids[: i + 1]).rstrip("\ufffd")))
        offsets.append((previous, end))
        previous = end
    return offsets


def _encode_item(
    tokenizer: Any,
    prompt: str,
    chat: bool,
    source: str,
    source_words: Sequence[str],
    answer: str,
    answer_ids: list[int] | None,
    target_words: Sequence[str],
    alignment: Sequence[tuple[int, int]],
    query: str,
    argmax_over: str,
    where: str,
) -> QueryItem:
    encoded = tokenizer(prompt, add_special_tokens=not chat, return_offsets_mapping=True)
    prompt_ids, prompt_offsets = list(encoded.input_ids), list(encoded.offset_mapping)
    eos = tokenizer.eos_token_id
    if not chat and eos is not None and prompt_ids and prompt_ids[-1] == eos:
        prompt_ids, prompt_offsets = prompt_ids[:-1], prompt_offsets[:-1]
    if answer_ids is None:
        answer_ids = list(tokenizer(answer, add_special_tokens=False).input_ids)
    answer_offsets = _answer_offsets(tokenizer, answer_ids, answer)
    start = prompt.rfind(source)
    source_span = _overlapping(prompt_offsets, start, start + len(source))
    source_tokens = [
        _overlapping(prompt_offsets, start + a, start + b)
        for a, b in word_spans(source, source_words, where=where + "source: ")
    ]
    base = len(prompt_ids)
    target_tokens = [
        _overlapping(answer_offsets, a, b, shift=base)
        for a, b in word_spans(answer, target_words, where=where + "target: ")
    ]
    hit_sets: dict[int, set[int]] = {}
    for s, t in alignment:
        for position in target_tokens[t]:
            hit_sets.setdefault(position, set()).update(source_tokens[s])
    queries, domains, hits = [], [], []
    for position in sorted(hit_sets):
        row = position if query == "token" else position - 1
        domain = list(range(row + 1)) if argmax_over == "sequence" else source_span
        targets = sorted(hit_sets[position] & set(domain))
        if targets:
            queries.append(row)
            domains.append(domain)
            hits.append(targets)
    return QueryItem(prompt_ids + answer_ids, queries, domains, hits)


def demonstrations(
    pool: Sequence[tuple[str, str]], shots: int, seed: int
) -> Callable[[int], tuple]:
    if shots < 0:
        raise InputError(f"shots must be >= 0, got {shots}")
    if shots and len(pool) <= shots:
        raise AlignmentError(
            f"{shots} demonstrations need more than {shots} sentence pairs, got {len(pool)}; "
            "use fewer shots or more pairs"
        )
    candidates = random.Random(seed).sample(range(len(pool)), min(len(pool), 2 * shots))

    def pick(index: int) -> tuple:
        return tuple(pool[c] for c in candidates if c != index)[:shots]

    return pick
