"""Metrics: match rules, answer CE, perplexity, ROUGE-L, BLEU, chrF++ (hand-computed values)."""

from __future__ import annotations

import math

import pytest
import sacrebleu
import torch
from hypothesis import given
from hypothesis import strategies as st

from lens_heads.core._metrics import (
    accuracy,
    answer_ce,
    answer_token_logprobs,
    bleu,
    chrf_pp,
    is_correct,
    lcs_length,
    perplexity,
    rouge_l,
    rouge_l_text,
)

# ---------------------------------------------------------------- match rules


@pytest.mark.parametrize(
    ("prediction", "answer", "rule", "expected"),
    [
        ("Paris", "Paris", "startswith", True),
        ("  Paris is the capital\n", " Paris ", "startswith", True),
        ("The capital is Paris.", "Paris", "startswith", False),
        ("The capital is Paris.", "Paris", "contains", True),
        (" Paris.", "Paris", "contains", True),
        ("paris", "Paris", "contains", False),
        ("paris", "Paris", "startswith", False),
        ("PARIS", "paris", "contains", False),
        ("", "Paris", "contains", False),
        ("Par", "Paris", "startswith", False),
    ],
)
def test_is_correct(prediction, answer, rule, expected):
    assert is_correct(prediction, answer, rule) is expected


def test_is_correct_errors():
    with pytest.raises(ValueError, match="empty"):
        is_correct("anything", "  ", "contains")
    # the user's error, not the runtime type checker's TypeError (which pytest turns on)
    with pytest.raises(ValueError, match=r"unknown match rule 'exact'; valid rules: startswith, "):
        is_correct("Paris", "Paris", "exact")
    with pytest.raises(ValueError, match=r"unknown match rule 'exact'"):
        accuracy(["Paris"], ["Paris"], "exact")


def test_accuracy():
    predictions = ["Paris", "the Paris", "Rome", "Berlin!"]
    answers = ["Paris", "Paris", "Paris", "Berlin"]
    assert accuracy(predictions, answers, "startswith") == 0.5
    assert accuracy(predictions, answers, "contains") == 0.75
    with pytest.raises(ValueError, match="2 predictions but 1 answers"):
        accuracy(["a", "b"], ["a"], "contains")
    with pytest.raises(ValueError, match="no predictions"):
        accuracy([], [], "contains")


# ---------------------------------------------------------------- answer cross-entropy


def test_answer_ce_uniform_is_ln_vocab():
    logits = torch.zeros(2, 4, 3)
    tokens = torch.tensor([[0, 1, 2, 0], [2, 2, 1, 0]])
    mask = torch.tensor([[False, True, True, False], [False, False, False, True]])
    ce = answer_ce(logits, tokens, mask)
    assert ce.dtype == torch.float32 and ce.shape == (2,)
    assert ce.tolist() == pytest.approx([math.log(3)] * 2, abs=1e-6)


def test_answer_ce_hand_computed_and_shift():
    """Position p's token is scored by the logits at p - 1, not p."""
    logits = torch.tensor(
        [
            [
                [2.0, 0.0, 0.0],  # predicts position 1
                [0.0, 1.0, 3.0],  # predicts position 2
                [9.0, 9.0, 9.0],  # predicts nothing (last position)
            ]
        ]
    )
    tokens = torch.tensor([[1, 0, 2]])
    mask = torch.tensor([[False, True, True]])
    z0 = math.exp(2) + 2
    z1 = 1 + math.exp(1) + math.exp(3)
    lp0 = 2 - math.log(z0)  # token 0 under the first row
    lp1 = 3 - math.log(z1)  # token 2 under the second row
    assert answer_token_logprobs(logits, tokens, mask).tolist() == pytest.approx(
        [lp0, lp1], abs=1e-6
    )
    assert answer_ce(logits, tokens, mask).item() == pytest.approx(-(lp0 + lp1) / 2, abs=1e-6)
    # the (wrong) unshifted convention would score token 0 by row 1 and token 2 by row 2
    unshifted = -((0 - math.log(z1)) + math.log(1 / 3)) / 2
    assert answer_ce(logits, tokens, mask).item() != pytest.approx(unshifted, abs=1e-3)


def test_answer_token_logprobs_row_major_order():
    logits = torch.randn(3, 5, 7, generator=torch.Generator().manual_seed(0))
    tokens = torch.randint(0, 7, (3, 5), generator=torch.Generator().manual_seed(1))
    mask = torch.zeros(3, 5, dtype=torch.bool)
    mask[0, 4] = mask[1, 1] = mask[1, 2] = mask[2, 3] = True
    full = logits.log_softmax(-1)
    expected = [full[b, p - 1, tokens[b, p]].item() for b, p in [(0, 4), (1, 1), (1, 2), (2, 3)]]
    assert answer_token_logprobs(logits, tokens, mask).tolist() == pytest.approx(expected, abs=1e-6)
    ce = answer_ce(logits, tokens, mask)
    assert ce.tolist() == pytest.approx(
        [-expected[0], -(expected[1] + expected[2]) / 2, -expected[3]], abs=1e-6
    )


def test_answer_ce_bf16_computed_in_float32():
    logits = torch.randn(2, 6, 50, generator=torch.Generator().manual_seed(0)) * 4
    tokens = torch.randint(0, 50, (2, 6), generator=torch.Generator().manual_seed(1))
    mask = torch.zeros(2, 6, dtype=torch.bool)
    mask[:, 3:] = True
    half = logits.bfloat16()
    ce = answer_ce(half, tokens, mask)
    assert ce.dtype == torch.float32
    assert ce.tolist() == pytest.approx(answer_ce(half.float(), tokens, mask).tolist(), abs=1e-5)
    assert ce.tolist() == pytest.approx(answer_ce(logits, tokens, mask).tolist(), abs=0.1)


def test_answer_ce_is_differentiable():
    logits = torch.zeros(1, 3, 4, requires_grad=True)
    ce = answer_ce(logits, torch.tensor([[0, 1, 2]]), torch.tensor([[False, True, True]]))
    ce.sum().backward()
    assert logits.grad is not None and logits.grad[0, 2].abs().sum() == 0


def test_answer_ce_errors():
    logits = torch.zeros(2, 3, 4)
    tokens = torch.zeros(2, 3, dtype=torch.long)
    at_zero = torch.tensor([[True, True, False], [False, True, False]])
    with pytest.raises(ValueError, match="position 0"):
        answer_ce(logits, tokens, at_zero)
    empty_row = torch.tensor([[False, True, False], [False, False, False]])
    with pytest.raises(ValueError, match=r"rows \[1\] have no answer tokens"):
        answer_ce(logits, tokens, empty_row)
    nan = logits.clone()
    nan[1, 0, 2] = float("nan")
    ok = torch.tensor([[False, True, False], [False, True, False]])
    with pytest.raises(FloatingPointError, match=r"rows \[1\].*float32.*right"):
        answer_ce(nan, tokens, ok)
    # a NaN at a position that predicts no answer token does not matter
    nan_elsewhere = logits.clone()
    nan_elsewhere[1, 2] = float("nan")
    assert torch.isfinite(answer_ce(nan_elsewhere, tokens, ok)).all()


def test_perplexity_is_exp():
    assert perplexity(math.log(3.0)) == pytest.approx(3.0)
    assert perplexity(0.0) == 1.0
    assert perplexity(1e4) == math.inf
    ce = torch.tensor([0.0, math.log(5.0)])
    assert torch.allclose(perplexity(ce), torch.tensor([1.0, 5.0]))


# ---------------------------------------------------------------- ROUGE-L


def test_lcs_length():
    assert lcs_length("a b c d".split(), "a c d e".split()) == 3
    assert lcs_length("ABCBDAB", "BDCABA") == 4
    assert lcs_length([], [1, 2]) == 0
    assert lcs_length([1, 2, 3], [4, 5]) == 0
    assert lcs_length([1, 2, 3, 4, 5], [5, 4, 3, 2, 1]) == 1


def test_rouge_l_hand_computed():
    assert rouge_l("a b c d".split(), "a c d e".split()) == pytest.approx(0.75)
    # lcs 2 ("a b"), P = 2/2, R = 2/4, F1 = 2 * 1 * 0.5 / 1.5
    assert rouge_l(["a", "b"], ["a", "x", "b", "y"]) == pytest.approx(2 / 3)
    # F_beta = (1 + b^2) P R / (R + b^2 P) with beta = 2
    assert rouge_l(["a", "b"], ["a", "x", "b", "y"], beta=2.0) == pytest.approx(
        5 * 1 * 0.5 / (0.5 + 4 * 1)
    )
    assert rouge_l([1, 2, 3], [1, 2, 3]) == 1.0
    assert rouge_l([], [1]) == 0.0
    assert rouge_l([1], []) == 0.0
    assert rouge_l([1, 2], [3, 4]) == 0.0
    with pytest.raises(ValueError, match=r"beta must be >= 0, got -1\.0"):
        rouge_l([1], [1], beta=-1.0)


def test_rouge_l_chinese_characters():
    # 我 喜 欢 猫 vs 我 很 喜 欢 狗: lcs 我喜欢 = 3, P = 3/4, R = 3/5
    p, r = 3 / 4, 3 / 5
    assert rouge_l(list("我喜欢猫"), list("我很喜欢狗")) == pytest.approx(2 * p * r / (p + r))
    assert rouge_l(list("今天天气很好"), list("今天天气很好")) == 1.0


def test_rouge_l_text_uses_encode_without_special_tokens():
    class Tokenizer:
        def __init__(self):
            self.calls = []

        def encode(self, text, add_special_tokens=True):
            self.calls.append(add_special_tokens)
            return ([0] if add_special_tokens else []) + [ord(c) for c in text]

    tokenizer = Tokenizer()
    assert rouge_l_text("abcd", "acde", tokenizer) == pytest.approx(0.75)
    assert rouge_l_text("x", "y", tokenizer) == 0.0
    assert tokenizer.calls == [False] * 4


tokens = st.lists(st.integers(0, 5), max_size=12)


@given(tokens.filter(bool))
def test_rouge_l_of_itself_is_one(x):
    assert rouge_l(x, x) == pytest.approx(1.0)


@given(tokens, tokens, st.floats(0.0, 10.0))
def test_rouge_l_is_bounded_and_lcs_symmetric(x, y, beta):
    assert 0.0 <= rouge_l(x, y, beta) <= 1.0 + 1e-12
    assert lcs_length(x, y) == lcs_length(y, x) <= min(len(x), len(y))


# ---------------------------------------------------------------- BLEU, chrF++

HYPOTHESES = ["the cat sat on a mat", "a dog is barking loudly", "it is raining today"]
REFERENCES = ["the cat sat on the mat", "the dog barks loudly", "it is raining today"]


def test_bleu_equals_sacrebleu():
    expected = sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES]).score
    assert bleu(HYPOTHESES, REFERENCES) == pytest.approx(expected)
    assert 0 < bleu(HYPOTHESES, REFERENCES) < 100
    assert bleu(REFERENCES, REFERENCES) == pytest.approx(100.0)
    intl = sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES], tokenize="intl").score
    assert bleu(HYPOTHESES, REFERENCES, tokenize="intl") == pytest.approx(intl)


def test_bleu_chinese_auto_tokenize():
    hypotheses, references = ["我喜欢吃苹果和香蕉"], ["我喜欢吃香蕉和苹果"]
    zh = sacrebleu.corpus_bleu(hypotheses, [references], tokenize="zh").score
    assert bleu(hypotheses, references) == pytest.approx(zh)
    # with 13a the unsegmented sentence is a single word: BLEU 0
    assert bleu(hypotheses, references, tokenize="13a") == pytest.approx(0.0)
    assert zh > 0
    # the target language also selects "zh"
    latin = ["ni hao shi jie"]
    assert bleu(latin, latin, target_lang="zh") == pytest.approx(
        sacrebleu.corpus_bleu(latin, [latin], tokenize="zh").score
    )
    assert bleu(["你好世界"], ["你好世界"]) == pytest.approx(100.0)


def test_chrf_pp_equals_sacrebleu():
    expected = sacrebleu.CHRF(word_order=2).corpus_score(HYPOTHESES, [REFERENCES]).score
    assert chrf_pp(HYPOTHESES, REFERENCES) == pytest.approx(expected)
    # chrF++ (word bigrams) differs from plain chrF
    plain = sacrebleu.CHRF().corpus_score(HYPOTHESES, [REFERENCES]).score
    assert chrf_pp(HYPOTHESES, REFERENCES) != pytest.approx(plain)
    assert chrf_pp(REFERENCES, REFERENCES) == pytest.approx(100.0)


@pytest.mark.parametrize("score", [bleu, chrf_pp])
def test_corpus_scores_reject_bad_lengths(score):
    with pytest.raises(ValueError, match="2 predictions but 1 references"):
        score(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="no predictions"):
        score([], [])
