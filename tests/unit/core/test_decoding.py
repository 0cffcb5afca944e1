"""KV-cached greedy decoding with a shared prefix: the same tokens as the bridge's own
``generate`` on each prompt alone, the same answer CE as a teacher-forced pass, and the prefix
run once; a legacy model without an HF cache takes the fallback path to the same results."""

from __future__ import annotations

import pytest
import torch

import lens_heads as lh
from lens_heads.core._decoding import decode_greedy, shared_prefix_length, supports_kv_cache
from lens_heads.core._masks import HeadMask
from lens_heads.core._prompts import EncodedExample, encode_example
from lens_heads.core._tasks import Example, Task
from lens_heads.engine import evaluate
from lens_heads.engine._scoring import _answer_nll

INSTRUCTION = "Answer with the word in capitals, nothing else."
WORDS = "cat dog owl bee ant cow pig elk yak emu fox hen".split()


@pytest.fixture(scope="module")
def encoded(tiny) -> list[EncodedExample]:
    """Chat prompts sharing a long prefix (template + instruction), answers of 1-4 tokens."""
    return [
        encode_example(tiny.tokenizer, f"{INSTRUCTION}\n\nInput:\n\n{w}", w.upper()[:n], chat=True)
        for w, n in zip(WORDS, [1, 2, 3, 3, 2, 1, 3, 2, 3, 1, 2, 3], strict=True)
    ]


def reference_tokens(model, prompt: list[int], n: int, mask: HeadMask | None) -> list[int]:
    """Greedy tokens of one unpadded prompt by full forwards, no cache at all (independent of
    every cache path: the bridge's own ``generate`` hands transformers a cache too)."""
    tokens = list(prompt)
    with torch.no_grad(), lh.hooks.maybe_mask(model, mask):
        for _ in range(n):
            tokens.append(int(model(torch.tensor([tokens]))[0, -1].argmax()))
    return tokens[len(prompt) :]


def test_shared_prefix_length_leaves_a_token_per_prompt():
    assert shared_prefix_length([[1, 2, 3, 4], [1, 2, 3, 5]]) == 3
    assert shared_prefix_length([[1, 2, 3], [1, 2, 3, 4]]) == 2  # the shorter keeps one
    assert shared_prefix_length([[9, 2], [1, 2]]) == 0
    assert shared_prefix_length([[4, 5, 6]]) == 2


@pytest.mark.parametrize("batch_size", [1, 5])
@pytest.mark.parametrize("masked", [False, True])
def test_tokens_equal_bridge_generate_alone(tiny, encoded, batch_size, masked):
    mask = HeadMask.from_heads(["L0H1", "L1H2"], n_layers=2, n_heads=4) if masked else None
    prompts = [e.prompt_tokens for e in encoded]
    decoded = decode_greedy(
        tiny, prompts, max_new_tokens=5, stops=[], batch_size=batch_size, mask=mask
    )
    assert decoded.answer_ce is None
    assert decoded.new_tokens == [reference_tokens(tiny, p, 5, mask) for p in prompts]


@pytest.mark.parametrize("masked", [False, True])
def test_prompts_of_different_lengths_equal_bridge_generate_alone(tiny, masked):
    """Left padding: prompts 1 to 9 letters long in one batch (and a batch smaller than them)
    give each prompt's own tokens and answer CE."""
    mask = HeadMask.from_heads(["L0H1", "L1H2"], n_layers=2, n_heads=4) if masked else None
    words = ["a", "hat", "seven", "elephant", "bo", "crocodile", "mice"]
    examples = [
        encode_example(tiny.tokenizer, w, w.upper()[: 1 + i % 3], chat=True)
        for i, w in enumerate(words)
    ]
    prompts = [e.prompt_tokens for e in examples]
    answers = [e.answer_tokens for e in examples]
    assert len({len(p) for p in prompts}) == len(words)
    expected = [reference_tokens(tiny, p, 5, mask) for p in prompts]
    teacher_forced = _answer_nll(tiny, examples, mask, batch_size=1)
    for batch_size in (3, 7):
        decoded = decode_greedy(
            tiny, prompts, max_new_tokens=5, stops=[], batch_size=batch_size, mask=mask,
            answers=answers,
        )  # fmt: skip
        assert decoded.new_tokens == expected
        assert decoded.answer_ce is not None
        torch.testing.assert_close(decoded.answer_ce, teacher_forced, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("batch_size", [1, 4, 12])
def test_answer_ce_equals_teacher_forced_pass(tiny, encoded, batch_size):
    mask = HeadMask.from_heads(["L0H0", "L1H3"], n_layers=2, n_heads=4)
    prompts = [e.prompt_tokens for e in encoded]
    answers = [e.answer_tokens for e in encoded]
    decoded = decode_greedy(
        tiny, prompts, max_new_tokens=2, stops=[], batch_size=batch_size, mask=mask, answers=answers
    )
    teacher_forced = _answer_nll(tiny, encoded, mask, batch_size=4)
    assert decoded.answer_ce is not None
    assert torch.allclose(decoded.answer_ce, teacher_forced, atol=1e-5)
    assert len({len(a) for a in answers}) == 3  # rows with different answer lengths share batches


def test_answer_logits_budget_shrinks_batches(tiny, encoded, monkeypatch):
    """Batches shrink so their answer logits fit the budget; the results do not change."""
    import lens_heads.core._decoding as decoding

    prompts = [e.prompt_tokens for e in encoded]
    answers = [e.answer_tokens for e in encoded]
    run = dict(max_new_tokens=2, stops=[], batch_size=12, answers=answers)
    whole = decode_greedy(tiny, prompts, **run)
    row_bytes = max(len(a) for a in answers) * tiny.cfg.d_vocab * 4
    monkeypatch.setattr(decoding, "LOGITS_BUDGET_BYTES", 3 * row_bytes)
    fed: list[int] = []
    step = decoding.cached_forward
    monkeypatch.setattr(
        decoding,
        "cached_forward",
        lambda model, tokens, *a, **k: fed.append(tokens.shape[0]) or step(model, tokens, *a, **k),
    )
    split = decode_greedy(tiny, prompts, **run)
    assert max(fed) == 3  # 12 rows in batches of 3 instead of one batch of 12
    assert split.new_tokens == whole.new_tokens
    assert split.answer_ce is not None and whole.answer_ce is not None
    assert torch.allclose(split.answer_ce, whole.answer_ce, atol=1e-5)


def test_prefix_is_computed_once(tiny, encoded, monkeypatch):
    """The shared prefix runs once; each batch then feeds only its prompts' own tokens."""
    import lens_heads.core._decoding as decoding

    fed: list[tuple[int, int]] = []
    step = decoding.cached_forward

    def counting(model, tokens, *args, **kwargs):
        fed.append(tuple(tokens.shape))
        return step(model, tokens, *args, **kwargs)

    monkeypatch.setattr(decoding, "cached_forward", counting)
    prompts = [e.prompt_tokens for e in encoded]
    prefix = shared_prefix_length(prompts)
    assert prefix > len(prompts[0]) // 2  # chat template + instruction dominate the prompt
    decode_greedy(tiny, prompts, max_new_tokens=1, stops=[], batch_size=6)
    longest = max(len(p) for p in prompts) - prefix
    assert fed[0] == (1, prefix)
    assert fed[1:] and all(rows == 6 and width <= longest for rows, width in fed[1:])


def test_per_example_masks_share_no_prefix(tiny, encoded, monkeypatch):
    import lens_heads.core._decoding as decoding

    fed: list[tuple[int, int]] = []
    step = decoding.cached_forward
    monkeypatch.setattr(
        decoding,
        "cached_forward",
        lambda model, tokens, *a, **k: (
            fed.append(tuple(tokens.shape)) or step(model, tokens, *a, **k)
        ),
    )
    prompts = [e.prompt_tokens for e in encoded[:3]]
    masks = torch.stack(
        [HeadMask.zeros(tiny).values, HeadMask.ones(tiny).values, HeadMask.ones(tiny).values]
    ).float()
    decoded = decode_greedy(tiny, prompts, max_new_tokens=3, stops=[], batch_size=3, mask=masks)
    assert fed[0] == (3, max(len(p) for p in prompts))  # whole prompts, no prefix pass
    alone = [reference_tokens(tiny, p, 3, HeadMask(m)) for p, m in zip(prompts, masks, strict=True)]
    assert decoded.new_tokens == alone


def test_stops_and_bad_answers(tiny, encoded):
    prompts = [e.prompt_tokens for e in encoded[:2]]
    free = decode_greedy(tiny, prompts, max_new_tokens=6, stops=[]).new_tokens
    stop = free[0][2]
    stopped = decode_greedy(tiny, prompts, max_new_tokens=6, stops=[stop]).new_tokens
    assert stopped[0] == free[0][: free[0].index(stop)]
    with pytest.raises(ValueError, match="2 prompts"):
        decode_greedy(tiny, prompts, max_new_tokens=1, stops=[], answers=[[1]])
    with pytest.raises(ValueError, match="no tokens"):
        decode_greedy(tiny, prompts, max_new_tokens=1, stops=[], answers=[[1], []])


class Legacy:
    """A model whose forward takes no HF ``past_key_values`` (as a legacy HookedTransformer):
    it generates through ``model.generate`` and scores with a separate teacher-forced pass."""

    def __init__(self, model):
        self._model = model

    def forward(self, tokens):
        return self._model(tokens)

    __call__ = forward

    def __getattr__(self, name):
        return getattr(self._model, name)


def test_legacy_model_falls_back_to_the_same_results(tiny, encoded):
    legacy = Legacy(tiny)
    assert supports_kv_cache(tiny) and not supports_kv_cache(legacy)
    prompts = [e.prompt_tokens for e in encoded[:4]]
    mask = HeadMask.from_heads(["L1H1"], n_layers=2, n_heads=4)
    assert lh.greedy_generate(legacy, prompts, max_new_tokens=4, mask=mask) == lh.greedy_generate(
        tiny, prompts, max_new_tokens=4, mask=mask
    )
    task = Task("upper", tuple(Example(w, w.upper()) for w in WORDS), instruction=INSTRUCTION)
    cached = evaluate(tiny, task, ["instruction"], n_eval=6, batch_size=4, progress=False)
    fallback = evaluate(legacy, task, ["instruction"], n_eval=6, batch_size=4, progress=False)
    assert cached.records["generated"].tolist() == fallback.records["generated"].tolist()
    assert torch.allclose(
        torch.tensor(cached.records["answer_ce"].tolist()),
        torch.tensor(fallback.records["answer_ce"].tolist()),
        atol=1e-5,
    )
