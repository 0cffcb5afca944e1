"""Evaluation metrics: match rules, answer-token cross-entropy, ROUGE-L, BLEU and chrF++.

>>> from lens_heads.core._metrics import accuracy, rouge_l
>>> accuracy([" Paris.", "Lyon"], ["Paris", "Paris"], "contains")
0.5
>>> rouge_l("a b c d".split(), "a c d e".split())
0.75
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Hashable, Sequence
from typing import Protocol, runtime_checkable

import sacrebleu
import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from lens_heads.core._checks import own_checks
from lens_heads.core._errors import InputError, NonFiniteError
from lens_heads.core._prompts import END_OF_TURN_TOKENS
from lens_heads.core._task_types import MatchRule

__all__ = [
    "MatchRule",
    "accuracy",
    "answer_ce",
    "answer_token_logprobs",
    "bleu",
    "chrf_pp",
    "echo_rate",
    "exact_match",
    "first_segment",
    "is_correct",
    "is_echo",
    "is_exact_match",
    "lcs_length",
    "perplexity",
    "rouge_l",
    "rouge_l_text",
    "token_ranks",
]

_RULES: tuple[str, ...] = ("startswith", "contains")
# CJK unified ideographs, extension A and compatibility ideographs.
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z\u00c0-\u024f]")


@runtime_checkable
class TextEncoder(Protocol):
    """Anything with a Hugging Face style ``encode(text, add_special_tokens=...)``."""

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...


# ---------------------------------------------------------------- match rules


@own_checks  # an unknown rule is the ValueError below, with or without a runtime type checker
def is_correct(prediction: str, answer: str, rule: MatchRule) -> bool:
    """Heads-up match rule on stripped, case-sensitive strings.

    >>> is_correct(" Paris.", "Paris", "contains"), is_correct("The Paris", "Paris", "startswith")
    (True, False)
    """
    if rule not in _RULES:
        raise InputError(f"unknown match rule {rule!r}; valid rules: {', '.join(_RULES)}")
    target = answer.strip()
    if not target:
        raise InputError("the answer is empty: every prediction would match it")
    text = prediction.strip()
    return text.startswith(target) if rule == "startswith" else target in text


@own_checks
def accuracy(predictions: Sequence[str], answers: Sequence[str], rule: MatchRule) -> float:
    """Fraction of predictions that match their answer under ``rule``.

    >>> accuracy(["Paris", "Rome"], ["Paris", "Paris"], "startswith")
    0.5
    """
    _check_pairs(predictions, answers, "predictions", "answers")
    hits = sum(is_correct(p, a, rule) for p, a in zip(predictions, answers, strict=True))
    return hits / len(answers)


# ---------------------------------------------------------------- answering vs copying
# The paper's rules count an echo of the input as correct ("first word of the list" -> the whole
# list starts with its first word) and ``contains`` accepts a one-letter answer anywhere in the
# output. Exact match and the echo rate sit beside them in every settings table.


def first_segment(text: str) -> str:
    """The first answer segment of a generated text: up to an end-of-turn marker or the first
    line break after the leading whitespace, stripped.

    >>> first_segment("  Apple<|im_end|>junk"), first_segment("\\n\\nApple.\\nBanana")
    ('Apple', 'Apple.')
    """
    for marker in END_OF_TURN_TOKENS:
        text = text.split(marker, 1)[0]
    text = text.strip()
    return text.split("\n", 1)[0].strip()


def _normalize(text: str) -> str:
    """Strip surrounding whitespace and punctuation (Unicode categories P* and S*)."""
    start, end = 0, len(text)
    while start < end and _is_edge(text[start]):
        start += 1
    while end > start and _is_edge(text[end - 1]):
        end -= 1
    return text[start:end]


def _is_edge(char: str) -> bool:
    return char.isspace() or unicodedata.category(char)[0] in "PS"


def is_exact_match(prediction: str, answer: str) -> bool:
    """Does the first answer segment of ``prediction`` equal ``answer``, both stripped of
    surrounding whitespace and punctuation (case-sensitive)? An answer that is only
    punctuation or symbols ("?") must equal the stripped segment.

    >>> is_exact_match(" Apple.<|im_end|>", "Apple"), is_exact_match("Apple pie", "Apple")
    (True, False)
    >>> is_exact_match("a, b", "a"), is_exact_match("«Paris»\\nLyon", "Paris")
    (False, True)
    """
    if not answer.strip():
        raise InputError("the answer is empty: every prediction would match it")
    target, segment = _normalize(answer), first_segment(prediction)
    if not target:  # an answer made of punctuation or symbols is compared as it is
        return segment == answer.strip()
    return _normalize(segment) == target


def _starts_as(text: str, prefix: str) -> bool:
    """``text`` is ``prefix`` or begins with it followed by a non-alphanumeric character."""
    return text == prefix or (text.startswith(prefix) and not text[len(prefix)].isalnum())


def is_echo(prediction: str, source: str, answer: str) -> bool:
    """Does the output repeat the input instead of answering? True when the first answer
    segment (normalized as in :func:`is_exact_match`, case-sensitive) is the input's first line
    or begins with it as a whole word ("apple apple apple" echoes "apple"; "apples" does not).
    Never true when the answer itself would count as an echo (inputs equal to their answers).

    >>> is_echo("apple", "apple", "Apple"), is_echo("Apple", "apple", "Apple")
    (True, False)
    >>> is_echo("cat, dog, bird", "cat, dog, bird", "cat"), is_echo("cats", "cat", "cats")
    (True, False)
    """
    src = _normalize(first_segment(source))
    if not src or _starts_as(_normalize(answer), src):
        return False
    return _starts_as(_normalize(first_segment(prediction)), src)


def exact_match(predictions: Sequence[str], answers: Sequence[str]) -> float:
    """Fraction of predictions whose first segment is exactly the answer (:func:`is_exact_match`).

    >>> exact_match(["Apple<|im_end|>", "Apple. Apple. Apple."], ["Apple", "Apple"])
    0.5
    """
    _check_pairs(predictions, answers, "predictions", "answers")
    return sum(map(is_exact_match, predictions, answers)) / len(answers)


def echo_rate(predictions: Sequence[str], sources: Sequence[str], answers: Sequence[str]) -> float:
    """Fraction of predictions that repeat their input (:func:`is_echo`).

    >>> echo_rate(["carrot", "carrots"], ["carrot", "carrot"], ["carrots", "carrots"])
    0.5
    """
    _check_pairs(predictions, answers, "predictions", "answers")
    _check_pairs(sources, answers, "sources", "answers")
    return sum(map(is_echo, predictions, sources, answers)) / len(answers)


# ---------------------------------------------------------------- answer cross-entropy


def answer_token_logprobs(
    logits: Float[Tensor, "batch pos d_vocab"],
    tokens: Int[Tensor, "batch pos"],
    answer_mask: Bool[Tensor, "batch pos"],
) -> Float[Tensor, " n_answer_tokens"]:
    """Float32 log-probs of all answer tokens (row-major order); ``tokens[b, p]`` with
    ``answer_mask[b, p]`` is predicted by ``logits[b, p - 1]``. Values are not checked for NaN.

    >>> answer_token_logprobs(torch.zeros(1, 2, 2), torch.tensor([[0, 1]]),
    ...                       torch.tensor([[False, True]]))
    tensor([-0.6931])
    """
    if logits.shape[:2] != tokens.shape or tokens.shape != answer_mask.shape:
        raise InputError(
            f"shapes disagree: logits {tuple(logits.shape)}, tokens {tuple(tokens.shape)}, "
            f"answer_mask {tuple(answer_mask.shape)} (need [batch, pos(, d_vocab)])"
        )
    if bool(answer_mask[:, 0].any()):
        raise InputError(
            "answer_mask is True at position 0, which no logit predicts; "
            "the prompt must precede the answer"
        )
    rows, cols = answer_mask.nonzero(as_tuple=True)
    # gather the predicting positions first: log_softmax over [n, vocab], not [batch, pos, vocab]
    predicting = logits[rows, cols - 1].float()
    targets = tokens[rows, cols].unsqueeze(-1)
    return predicting.log_softmax(dim=-1).gather(-1, targets).squeeze(-1)


def answer_ce(
    logits: Float[Tensor, "batch pos d_vocab"],
    tokens: Int[Tensor, "batch pos"],
    answer_mask: Bool[Tensor, "batch pos"],
) -> Float[Tensor, " batch"]:
    """Per-example mean answer-token cross-entropy in nats (the Heads-up tables' "PPL").

    >>> answer_ce(torch.zeros(1, 3, 3), torch.tensor([[0, 1, 2]]),
    ...           torch.tensor([[False, True, True]]))  # uniform over 3 tokens: ln 3
    tensor([1.0986])
    """
    counts = answer_mask.sum(dim=1)
    if bool((counts == 0).any()):
        empty = (counts == 0).nonzero().flatten().tolist()
        raise InputError(f"rows {empty} have no answer tokens (answer_mask is all False)")
    logprobs = answer_token_logprobs(logits, tokens, answer_mask)
    rows = answer_mask.nonzero(as_tuple=True)[0]
    totals = torch.zeros(len(counts), device=logprobs.device).index_add(0, rows, logprobs)
    ce = -totals / counts.to(totals)
    if not bool(torch.isfinite(ce).all()):
        bad = (~torch.isfinite(ce)).nonzero().flatten().tolist()
        raise NonFiniteError(
            f"answer CE is not finite for rows {bad} (logits dtype {logits.dtype}); "
            "run the model in float32 and pad batches on the right"
        )
    return ce


def token_ranks(
    logits: Float[Tensor, "*batch d_vocab"], ids: Int[Tensor, " n_ids"]
) -> Int[Tensor, "*batch n_ids"]:
    """1-based rank of each token of ``ids`` in each row of ``logits``: one plus the number of
    tokens with a strictly larger logit (ties share the better rank).

    >>> token_ranks(torch.tensor([[0.1, 3.0, 2.0, 3.0]]), torch.tensor([2, 1, 0])).tolist()
    [[3, 1, 4]]
    """
    values = logits[..., ids]
    return 1 + (logits[..., None, :] > values[..., :, None]).sum(dim=-1)


def perplexity(mean_ce: float | Tensor) -> float | Tensor:
    """True perplexity ``exp(mean CE)`` (``inf`` on float overflow), unlike the paper's "PPL".

    >>> round(perplexity(math.log(3.0)), 6)
    3.0
    """
    if isinstance(mean_ce, Tensor):
        return torch.exp(mean_ce)
    try:
        return math.exp(mean_ce)
    except OverflowError:
        return math.inf


# ---------------------------------------------------------------- ROUGE-L


def lcs_length(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    """Length of the longest common subsequence.

    >>> lcs_length("abcd", "acde")
    3
    """
    if len(b) > len(a):
        a, b = b, a
    row = [0] * (len(b) + 1)
    for x in a:
        diagonal = 0
        for j, y in enumerate(b, start=1):
            above = row[j]
            row[j] = diagonal + 1 if x == y else max(above, row[j - 1])
            diagonal = above
    return row[-1]


def rouge_l(
    prediction: Sequence[Hashable], reference: Sequence[Hashable], beta: float = 1.0
) -> float:
    """ROUGE-L F-measure over token sequences (ids, words or characters).

    >>> rouge_l(list("我喜欢猫"), list("我喜欢狗"))
    0.75
    """
    if beta < 0:
        raise InputError(f"beta must be >= 0, got {beta}")
    if not prediction or not reference:
        return 0.0
    lcs = lcs_length(prediction, reference)
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(prediction), lcs / len(reference)
    b2 = beta * beta
    return (1 + b2) * precision * recall / (recall + b2 * precision)


def rouge_l_text(prediction: str, reference: str, tokenizer: TextEncoder) -> float:
    """ROUGE-L of two strings over ``tokenizer.encode(text, add_special_tokens=False)`` ids.

    >>> class Chars:
    ...     def encode(self, text, add_special_tokens=True):
    ...         return [ord(c) for c in text]
    >>> rouge_l_text("abcd", "acde", Chars())
    0.75
    """
    return rouge_l(
        tokenizer.encode(prediction, add_special_tokens=False),
        tokenizer.encode(reference, add_special_tokens=False),
    )


# ---------------------------------------------------------------- BLEU, chrF++


def bleu(
    predictions: Sequence[str],
    references: Sequence[str],
    *,
    tokenize: str | None = None,
    target_lang: str | None = None,
) -> float:
    """Corpus BLEU (sacrebleu, one reference each). Default tokenizer "13a"; "zh" when
    ``target_lang`` starts with "zh" or any reference contains CJK characters.

    >>> round(bleu(["the cat sat on the mat"], ["the cat sat on the mat"]), 6)
    100.0
    """
    _check_pairs(predictions, references, "predictions", "references")
    if tokenize is None:
        chinese = (target_lang or "").lower().startswith("zh") or any(
            _CJK.search(r) for r in references
        )
        tokenize = "zh" if chinese else "13a"
    result = sacrebleu.corpus_bleu(list(predictions), [list(references)], tokenize=tokenize)
    return float(result.score)


def chrf_pp(predictions: Sequence[str], references: Sequence[str]) -> float:
    """Corpus chrF++ (sacrebleu ``CHRF(word_order=2)``, one reference each).

    >>> chrf_pp(["le chat"], ["le chat"])
    100.0
    """
    _check_pairs(predictions, references, "predictions", "references")
    metric = sacrebleu.CHRF(word_order=2)
    return float(metric.corpus_score(list(predictions), [list(references)]).score)


def _check_pairs(left: Sequence[str], right: Sequence[str], lname: str, rname: str) -> None:
    if len(left) != len(right):
        raise InputError(f"{len(left)} {lname} but {len(right)} {rname}")
    if not right:
        raise InputError(f"no {lname} to score")
