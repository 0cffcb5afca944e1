"""Prompt formats, answer positions, boundary merges, demonstrations and the hybrid set."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

from lens_heads.core._prompts import (
    PromptFormat,
    collate,
    encode_example,
    encode_text,
    hybrid_few_shot,
    sample_shots,
)
from lens_heads.core._tasks import Example, Task

CHATML_USER = "<|im_start|>user\n{}<|im_end|>\n"
CHATML_ASSISTANT = "<|im_start|>assistant\n"


def bpe_tokenizer(
    *, metaspace: bool = False, template: str | None = None
) -> PreTrainedTokenizerFast:
    """A tiny BPE tokenizer whose only merges are ``a b -> ab`` and ``▁ y -> ▁y``.

    Without a pre-tokenizer, ``"xa" + "b"`` tokenizes as ``x ab``: the merge crosses the
    prompt/answer boundary. ``template`` adds special tokens (e.g. ``"<s> $A </s>"``).
    """
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2}
    for character in "abcxyz:▁ \n":
        vocab[character] = len(vocab)
    vocab["ab"] = len(vocab)
    vocab["▁y"] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[("a", "b"), ("▁", "y")]))
    if metaspace:
        backend.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
        backend.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first")
    if template:
        backend.post_processor = processors.TemplateProcessing(
            single=template, special_tokens=[("<s>", 1), ("</s>", 2)]
        )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<s>", eos_token="</s>", pad_token="<pad>"
    )


# -- formats --------------------------------------------------------------------------------------
def test_bare_and_instruction_formats_without_chat():
    assert PromptFormat(chat=False).render("apple") == "apple\n\n"
    assert PromptFormat(chat=False, separator="\n").render("apple") == "apple\n"
    assert (
        PromptFormat(chat=False, instruction="Capitalize.").render("apple")
        == "Capitalize.\n\nInput:\n\napple\n\nOutput:\n\n"
    )


def test_k_shot_formats_without_chat():
    shots = (("cat", "Cat"), ("dog", "Dog"))
    assert (
        PromptFormat(chat=False, shots=shots).render("owl") == "cat\n\nCat\n\ndog\n\nDog\n\nowl\n\n"
    )
    assert PromptFormat(chat=False, instruction="Capitalize.", shots=shots).render("owl") == (
        "Capitalize.\n\nInput:\n\ncat\n\nOutput:\n\nCat\n\n"
        "Input:\n\ndog\n\nOutput:\n\nDog\n\nInput:\n\nowl\n\nOutput:\n\n"
    )


def test_chat_formats(tiny):
    tokenizer = tiny.tokenizer
    assert (
        PromptFormat().render("apple", tokenizer) == CHATML_USER.format("apple") + CHATML_ASSISTANT
    )
    instructed = PromptFormat(instruction="Capitalize.").render("apple", tokenizer)
    assert instructed == (
        CHATML_USER.format("Capitalize.\n\nInput:\n\napple\n\nOutput:\n\n") + CHATML_ASSISTANT
    )
    few_shot = PromptFormat(shots=(("cat", "Cat"),)).render("owl", tokenizer)
    assert few_shot == (
        CHATML_USER.format("cat")
        + CHATML_ASSISTANT
        + "Cat<|im_end|>\n"
        + CHATML_USER.format("owl")
        + CHATML_ASSISTANT
    )
    with pytest.raises(ValueError, match="needs the tokenizer"):
        PromptFormat().render("apple")
    with pytest.raises(ValueError, match="has no chat template"):
        PromptFormat().render("apple", bpe_tokenizer())


def test_encode_text_chat_and_plain(tiny):
    tokenizer = tiny.tokenizer
    chat = encode_text(tokenizer, "hi", chat=True)
    assert tokenizer.decode(chat) == CHATML_USER.format("hi") + CHATML_ASSISTANT
    assert chat.count(tokenizer.convert_tokens_to_ids("<|im_start|>")) == 2  # no extra BOS
    with_bos = bpe_tokenizer(template="<s> $A")
    assert encode_text(with_bos, "xa") == [1, with_bos.convert_tokens_to_ids("x"), 3]
    with pytest.raises(ValueError, match="empty"):
        encode_text(tokenizer, "")


@pytest.mark.parametrize("chat", [True, False])
def test_encoded_example_locates_the_answer(tiny, chat):
    tokenizer = tiny.tokenizer
    prompt = PromptFormat(chat=chat, instruction="Capitalize.").render("apple", tokenizer)
    example = encode_example(tokenizer, prompt, "Apple", chat=chat)
    assert tokenizer.decode(example.answer_tokens) == "Apple"
    assert example.prompt_tokens == encode_text(tokenizer, prompt, chat=False)
    assert not example.boundary_merged
    with pytest.raises(ValueError, match="empty answer"):
        encode_example(tokenizer, prompt, "", chat=chat)


# -- boundary merges ------------------------------------------------------------------------------
def test_merge_across_the_boundary_keeps_the_prompt_tokens():
    tokenizer = bpe_tokenizer()
    ids = tokenizer.convert_tokens_to_ids
    # in context the answer's "b" merges with the prompt's last "a": "x" "ab"
    assert tokenizer("xab").input_ids == [ids("x"), ids("ab")]
    example = encode_example(tokenizer, "xa", "b", chat=False)
    assert example.boundary_merged
    assert example.prompt_tokens == tokenizer("xa").input_ids == [ids("x"), ids("a")]
    assert example.answer_tokens == [ids("b")]
    assert example.answer_start == 2


def test_no_merge_keeps_natural_in_context_tokenization():
    tokenizer = bpe_tokenizer(metaspace=True)
    ids = tokenizer.convert_tokens_to_ids
    # alone, "y" gets the word-start marker ("▁y"); after "x" it is a plain "y"
    assert tokenizer("y").input_ids == [ids("▁y")]
    example = encode_example(tokenizer, "x", "y", chat=False)
    assert not example.boundary_merged
    assert example.answer_tokens == [ids("y")]
    # and a merge inside the answer is natural too: "xc" + "ab" -> "x" "c" "ab"
    plain = encode_example(bpe_tokenizer(), "xc", "ab", chat=False)
    assert (plain.boundary_merged, plain.answer_tokens) == (False, [ids("ab")])


def test_special_tokens_of_plain_text_are_kept_and_a_trailing_eos_dropped():
    ids = bpe_tokenizer().convert_tokens_to_ids
    with_bos = encode_example(bpe_tokenizer(template="<s> $A"), "xc", "b", chat=False)
    assert with_bos.tokens == [1, ids("x"), ids("c"), ids("b")]
    assert with_bos.answer_start == 3
    with_eos = encode_example(bpe_tokenizer(template="<s> $A </s>"), "xc", "b", chat=False)
    assert with_eos.tokens == with_bos.tokens
    merged = encode_example(bpe_tokenizer(template="<s> $A </s>"), "xa", "b", chat=False)
    assert merged.boundary_merged
    assert merged.tokens == [1, ids("x"), ids("a"), ids("b")]


def test_collate_right_pads():
    tokenizer = bpe_tokenizer()
    ids = tokenizer.convert_tokens_to_ids
    examples = [
        encode_example(tokenizer, "xa", "b", chat=False),  # x a | b (merged boundary)
        encode_example(tokenizer, "x", "cabc", chat=False),  # x | c ab c
    ]
    tokens, answer_mask, lengths = collate(examples, pad_id=0)
    assert tokens.tolist() == [
        [ids("x"), ids("a"), ids("b"), 0],
        [ids("x"), ids("c"), ids("ab"), ids("c")],
    ]
    assert answer_mask.tolist() == [[False, False, True, False], [False, True, True, True]]
    assert lengths.tolist() == [3, 4]
    with pytest.raises(ValueError, match="empty batch"):
        collate([], pad_id=0)


# -- demonstrations and the hybrid set ------------------------------------------------------------
def words(name: str, n: int, match: str = "contains", upper: bool = True) -> Task:
    examples = tuple(
        Example(f"{name}{i}", f"{name.upper() if upper else name[::-1]}{i}") for i in range(n)
    )
    return Task(name, examples, match=match)


def test_sample_shots_is_seeded_and_excludes_the_query():
    pool = words("w", 30)
    first = sample_shots(pool, 5, seed=7)
    assert first == sample_shots(pool, 5, seed=7)
    assert first != sample_shots(pool, 5, seed=8)
    assert len(set(first)) == 5
    assert all(x != "w3" for x, _ in sample_shots(pool.head(4), 3, seed=0, exclude="w3"))
    assert sample_shots(pool, 0) == ()
    with pytest.raises(ValueError, match="only 4"):
        sample_shots(pool.head(4), 5)
    with pytest.raises(ValueError, match=">= 0"):
        sample_shots(pool, -1)


def test_hybrid_few_shot_mixes_tasks_with_their_own_demonstrations():
    up, rev = words("up", 40, "startswith"), words("rev", 40, upper=False)
    hybrid = hybrid_few_shot([up, rev], shots=3, n_per_task=8, n_eval=10, seed=1)
    assert len(hybrid) == 16
    assert hybrid.match == "contains"  # the tasks disagree; each example keeps its own rule
    assert sorted(example.source for example in hybrid) == ["rev"] * 8 + ["up"] * 8
    rules = {example.source: example.match for example in hybrid}
    assert rules == {"up": "startswith", "rev": "contains"}
    eval_inputs = {
        name: set(t.split(n_eval=10)[1].inputs) for name, t in [("up", up), ("rev", rev)]
    }
    for example in hybrid:
        source = example.source
        parts = example.input.split("\n\n")
        demos, query = list(zip(parts[0:-1:2], parts[1:-1:2], strict=True)), parts[-1]
        assert len(demos) == 3
        assert query in eval_inputs[source]
        assert all(x.startswith(source) and x not in eval_inputs[source] for x, _ in demos)
        assert PromptFormat(chat=False).render(example.input) == PromptFormat(
            chat=False, shots=tuple(demos)
        ).render(query)
    again = hybrid_few_shot([up, rev], shots=3, n_per_task=8, n_eval=10, seed=1)
    assert again.examples == hybrid.examples
    other = hybrid_few_shot([up, rev], shots=3, n_per_task=8, n_eval=10, seed=2)
    assert other.examples != hybrid.examples
    assert hybrid_few_shot([up], shots=1, n_per_task=3, n_eval=10).match == "startswith"
    with pytest.raises(ValueError, match="at least one task"):
        hybrid_few_shot([])
    with pytest.raises(ValueError, match="split must be 'train' or 'eval', got 'test'"):
        hybrid_few_shot([up, rev], split="test")  # not silently the evaluation queries
