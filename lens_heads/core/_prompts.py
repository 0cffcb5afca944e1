"""Prompt formats (bare, instructed, k-shot, chat or not) and encoding with answer positions.

>>> import lens_heads as lh
>>> model = lh.tiny_model()
>>> fmt = lh.PromptFormat(chat=False, instruction="Capitalize the word.")
>>> fmt.render("apple")
'Capitalize the word.\\n\\nInput:\\n\\napple\\n\\nOutput:\\n\\n'
>>> example = encode_example(model.tokenizer, fmt.render("apple"), "Apple", chat=False)
>>> model.tokenizer.decode(example.answer_tokens)
'Apple'
"""

from __future__ import annotations

import random
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import torch

from lens_heads.core._checks import own_checks
from lens_heads.core._errors import InputError

if TYPE_CHECKING:
    from lens_heads.core._tasks import Task

__all__ = [
    "ANSWER_ENDS",
    "END_OF_TURN_TOKENS",
    "EncodedExample",
    "PromptFormat",
    "answer_end_tokens",
    "collate",
    "encode_example",
    "encode_text",
    "has_chat_template",
    "hybrid_few_shot",
    "newline_tokens",
    "pad_token_id",
    "sample_shots",
    "token_text",
]

INSTRUCTION_TEMPLATE = "{instruction}\n\nInput:\n\n{input}\n\nOutput:\n\n"

#: Tokens that end a turn in common chat templates (generation stops at them and at EOS).
END_OF_TURN_TOKENS = ("<|im_end|>", "<end_of_turn>", "<|eot_id|>", "<|endoftext|>", "<eos>")

#: How a training target ends after the answer (see :func:`answer_end_tokens`).
ANSWER_ENDS = ("auto", "turn", "eos", "separator", "none")


def has_chat_template(tokenizer: Any) -> bool:
    """Whether ``tokenizer`` has a chat template (an instruction-tuned model's: ``chat=None``
    settings wrap prompts in it exactly then).

    >>> import lens_heads as lh
    >>> has_chat_template(lh.tiny_model().tokenizer)
    True
    """
    return bool(getattr(tokenizer, "chat_template", None))


def _chat(tokenizer: Any, messages: list[dict[str, str]]) -> str:
    if not has_chat_template(tokenizer):
        raise InputError(
            f"tokenizer {getattr(tokenizer, 'name_or_path', '?')!r} has no chat template (a base "
            "model?); use chat=False"
        )
    return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def encode_text(tokenizer: Any, text: str, *, chat: bool = False) -> list[int]:
    """Token ids of a prompt: the chat template's special tokens when ``chat``, else the
    tokenizer's own (e.g. Gemma's BOS).

    >>> import lens_heads as lh
    >>> tokenizer = lh.tiny_model().tokenizer
    >>> tokenizer.decode(encode_text(tokenizer, "hi", chat=True))
    '<|im_start|>user\\nhi<|im_end|>\\n<|im_start|>assistant\\n'
    """
    if not text:
        raise InputError("the prompt is empty")
    if chat:
        text = _chat(tokenizer, [{"role": "user", "content": text}])
        return list(tokenizer(text, add_special_tokens=False).input_ids)
    return list(tokenizer(text).input_ids)


@dataclass(frozen=True)
class PromptFormat:
    """How an input becomes a prompt.

    * ``instruction=None``: the bare input (the paper's instruction-free setting).
    * ``instruction="..."``: ``{instruction}\\n\\nInput:\\n\\n{input}\\n\\nOutput:\\n\\n``
      (HeadsUp Table 10).
    * ``shots``: demonstrations ``(input, output)``; with ``chat`` they become earlier turns.
    * ``chat``: wrap in the model's chat template (instruct models); base models use the plain
      text followed by ``separator``.

    >>> PromptFormat(chat=False).render("apple")
    'apple\\n\\n'
    >>> PromptFormat(chat=False, shots=(("cat", "Cat"),)).render("dog")
    'cat\\n\\nCat\\n\\ndog\\n\\n'
    """

    chat: bool = True
    instruction: str | None = None
    shots: tuple[tuple[str, str], ...] = ()
    separator: str = "\n\n"

    def _content(self, text: str) -> str:
        if self.instruction is None:
            return text
        return INSTRUCTION_TEMPLATE.format(instruction=self.instruction, input=text)

    def render(self, text: str, tokenizer: Any = None) -> str:
        """The prompt text for one input (the tokenizer's chat template applied when ``chat``)."""
        if self.chat:
            if tokenizer is None:
                raise InputError("a chat PromptFormat needs the tokenizer: fmt.render(text, tok)")
            messages: list[dict[str, str]] = []
            for shot_input, shot_output in self.shots:
                messages.append({"role": "user", "content": self._content(shot_input)})
                messages.append({"role": "assistant", "content": shot_output})
            messages.append({"role": "user", "content": self._content(text)})
            return _chat(tokenizer, messages)
        if self.instruction is None:
            shots = "".join(f"{x}{self.separator}{y}{self.separator}" for x, y in self.shots)
            return f"{shots}{text}{self.separator}"
        shots = "".join(f"Input:\n\n{x}\n\nOutput:\n\n{y}{self.separator}" for x, y in self.shots)
        return f"{self.instruction}\n\n{shots}Input:\n\n{text}\n\nOutput:\n\n"


@dataclass(frozen=True)
class EncodedExample:
    """A prompt followed by its answer, as token ids; ``tokens[answer_start:]`` is the answer.

    ``boundary_merged`` records that the tokenizer merged the prompt's last characters with
    the answer's first ones; the prompt's own tokenization was kept (see :func:`encode_example`).
    """

    tokens: list[int]
    answer_start: int
    boundary_merged: bool = False

    @property
    def prompt_tokens(self) -> list[int]:
        return self.tokens[: self.answer_start]

    @property
    def answer_tokens(self) -> list[int]:
        return self.tokens[self.answer_start :]


def answer_end_tokens(
    tokenizer: Any, *, chat: bool, answer_end: str = "auto", separator: str = "\n\n"
) -> list[int]:
    """The tokens that close an answer in a training target, so that a trained mask learns to
    *stop* after the answer as well as to give it.

    * ``"turn"``: what the chat template writes after an assistant message, up to its last
      non-whitespace character -- ``<|im_end|>`` for SmolLM2 (the paper's code trains on the
      assistant turn as the template renders it); the EOS token when the template adds nothing.
    * ``"eos"``: the tokenizer's EOS token.
    * ``"separator"``: the base-model prompt separator (``"\n\n"``), as in the k-shot format.
    * ``"none"``: nothing (the answer alone; masked outputs then tend to run on).
    * ``"auto"`` (default): ``"turn"`` for chat prompts, ``"eos"`` for base-model prompts.

    >>> import lens_heads as lh
    >>> tokenizer = lh.tiny_model().tokenizer
    >>> tokenizer.decode(answer_end_tokens(tokenizer, chat=True))
    '<|im_end|>'
    >>> answer_end_tokens(tokenizer, chat=True, answer_end="none")
    []
    """
    if answer_end not in ANSWER_ENDS:
        raise InputError(f"answer_end must be one of {', '.join(ANSWER_ENDS)}, got {answer_end!r}")
    if answer_end == "auto":
        answer_end = "turn" if chat else "eos"
    if answer_end == "none":
        return []
    if answer_end == "separator":
        if not separator:
            raise InputError("answer_end='separator' needs a non-empty separator")
        return list(tokenizer(separator, add_special_tokens=False).input_ids)
    if answer_end == "turn":
        placeholder = "\ue000lens-heads-answer\ue000"
        messages = [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": placeholder},
        ]
        if not has_chat_template(tokenizer):
            raise InputError(
                "answer_end='turn' needs a chat template; use 'eos' or 'separator' for a base model"
            )
        rendered = tokenizer.apply_chat_template(messages, tokenize=False)
        if rendered.count(placeholder) == 1:
            suffix = rendered.split(placeholder)[1].rstrip()
            if suffix:
                return list(tokenizer(suffix, add_special_tokens=False).input_ids)
    eos = tokenizer.eos_token_id
    if eos is None:
        raise InputError(
            f"tokenizer {getattr(tokenizer, 'name_or_path', '?')!r} has no EOS token; use "
            "answer_end='separator' or 'none'"
        )
    return [int(eos)]


def encode_example(
    tokenizer: Any, prompt: str, answer: str, *, chat: bool, end_tokens: Sequence[int] = ()
) -> EncodedExample:
    """Encode ``prompt + answer`` (+ ``end_tokens``) and locate the answer tokens.

    The answer is tokenized in context (so SentencePiece/BPE spacing is natural). If the
    tokenizer merges across the boundary, the prompt tokens would change; then the prompt is
    kept exactly as generation sees it and the answer is tokenized on its own after it.
    ``end_tokens`` (e.g. :func:`answer_end_tokens`) are appended and belong to the answer span.
    """
    if not answer:
        raise InputError(f"empty answer for prompt {prompt[:40]!r}")
    special = not chat
    prompt_ids = list(tokenizer(prompt, add_special_tokens=special).input_ids)
    full_ids = list(tokenizer(prompt + answer, add_special_tokens=special).input_ids)
    # Some tokenizers append an EOS with special tokens; the answer never includes it.
    eos = tokenizer.eos_token_id
    if special and eos is not None and prompt_ids and prompt_ids[-1] == eos:
        prompt_ids, full_ids = prompt_ids[:-1], full_ids[:-1]
    end = [int(token) for token in end_tokens]
    if full_ids[: len(prompt_ids)] == prompt_ids and len(full_ids) > len(prompt_ids):
        return EncodedExample(full_ids + end, len(prompt_ids))
    answer_ids = list(tokenizer(answer, add_special_tokens=False).input_ids)
    return EncodedExample(prompt_ids + answer_ids + end, len(prompt_ids), boundary_merged=True)


def pad_token_id(tokenizer: Any) -> int:
    """The id that pads a batch: the tokenizer's pad token, else its EOS, else 0. Any id
    serves, since padded positions are masked out or never scored.

    >>> from types import SimpleNamespace
    >>> pad_token_id(SimpleNamespace(pad_token_id=None, eos_token_id=2))
    2
    """
    for candidate in (tokenizer.pad_token_id, tokenizer.eos_token_id):
        if candidate is not None:
            return int(candidate)
    return 0


def collate(
    examples: Sequence[EncodedExample], pad_id: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-pad encoded examples into ``(tokens, answer_mask, lengths)``.

    Right padding needs no attention mask for teacher-forced scoring and training: causal
    attention never lets a real token see the pads after it (and bf16 stays finite, unlike a
    left-padded batch with fully masked rows, which gave NaN on both offline models).
    ``answer_mask[b, p]`` is True
    where ``tokens[b, p]`` is an answer token (predicted by the logits at ``p - 1``).

    >>> tokens, answer_mask, lengths = collate([EncodedExample([5, 6, 7], 2)], pad_id=0)
    >>> answer_mask.tolist(), lengths.tolist()
    ([[False, False, True]], [3])
    """
    if not examples:
        raise InputError("cannot collate an empty batch")
    width = max(len(example.tokens) for example in examples)
    tokens = torch.full((len(examples), width), pad_id, dtype=torch.long)
    answer_mask = torch.zeros((len(examples), width), dtype=torch.bool)
    for row, example in enumerate(examples):
        tokens[row, : len(example.tokens)] = torch.tensor(example.tokens, dtype=torch.long)
        answer_mask[row, example.answer_start : len(example.tokens)] = True
    lengths = torch.tensor([len(example.tokens) for example in examples])
    return tokens, answer_mask, lengths


# -- demonstrations and the hybrid multi-task few-shot set (issue 3) ----------------------------
Shot = tuple[str, str]


def sample_shots(
    pool: Task | Sequence[Shot], k: int, *, seed: int = 0, exclude: str | None = None
) -> tuple[Shot, ...]:
    """``k`` demonstrations ``(input, output)`` drawn without replacement from ``pool`` (a
    task, usually its training split, or pairs), reproducibly for a given ``seed``.

    ``exclude`` drops demonstrations whose input equals it (the query itself).

    >>> sample_shots([("a", "A"), ("b", "B"), ("c", "C")], 2, seed=1, exclude="c")
    (('a', 'A'), ('b', 'B'))
    """
    if k < 0:
        raise InputError(f"the number of shots must be >= 0, got {k}")
    pairs = [(e.input, e.output) for e in pool] if not isinstance(pool, Sequence) else list(pool)
    pairs = [(x, y) for x, y in pairs if x != exclude]
    if k > len(pairs):
        raise InputError(
            f"asked for {k} demonstrations but the pool has only {len(pairs)}; use fewer shots "
            "or a larger training split"
        )
    return tuple(random.Random(seed).sample(pairs, k))


@own_checks  # a bad split is the ValueError below, with or without a runtime type checker
def hybrid_few_shot(
    tasks: Sequence[Task | str],
    *,
    shots: int = 3,
    n_per_task: int = 20,
    n_eval: int = 100,
    split: Literal["train", "eval"] = "eval",
    seed: int = 0,
    separator: str = "\n\n",
    name: str | None = None,
) -> Task:
    """The hybrid multi-task few-shot set: examples of several tasks, shuffled together, each
    preceded by ``shots`` demonstrations of its own task (so the model has to infer the task
    from the demonstrations), as one :class:`~lens_heads.core.Task`.

    Queries come from each task's ``split`` part (``task.split(n_eval)``); demonstrations always
    come from the training part, so evaluation queries never appear as demonstrations. An
    input reads ``x1{sep}y1{sep}...xk{sep}yk{sep}query`` -- exactly the base-model k-shot
    format once :class:`PromptFormat` (``chat=False``) appends the separator. Each example
    keeps its task's match rule and name (``Example.match``, ``Example.source``), which
    :func:`lens_heads.evaluate` uses. Everything is drawn from ``random.Random(seed)``.

    >>> from lens_heads.core._tasks import Example, Task
    >>> up = Task("up", tuple(Example(w, w.upper()) for w in "abcdefgh"), match="startswith")
    >>> rev = Task("rev", tuple(Example(w + "z", "z" + w) for w in "abcdefgh"))
    >>> mixed = hybrid_few_shot([up, rev], shots=2, n_per_task=2, n_eval=2)
    >>> len(mixed), sorted({e.source for e in mixed}), mixed.match
    (4, ['rev', 'up'], 'contains')
    """
    from lens_heads.core._tasks import Example, Task, get_task

    if not tasks:
        raise InputError("hybrid_few_shot needs at least one task")
    if split not in ("train", "eval"):
        raise InputError(f"split must be 'train' or 'eval', got {split!r}")
    if n_per_task < 1:
        raise InputError(f"n_per_task must be positive, got {n_per_task}")
    resolved = [get_task(t) if isinstance(t, str) else t for t in tasks]
    rng = random.Random(seed)
    rows: list[Example] = []
    for task in resolved:
        train, evaluation = task.split(n_eval=n_eval)
        queries = list(train if split == "train" else evaluation)
        if len(queries) > n_per_task:
            queries = rng.sample(queries, n_per_task)
        for query in queries:
            demos = sample_shots(train, shots, seed=rng.randrange(2**31), exclude=query.input)
            prefix = "".join(f"{x}{separator}{y}{separator}" for x, y in demos)
            rule = query.match or task.match
            rows.append(Example(prefix + query.input, query.output, match=rule, source=task.name))
    rng.shuffle(rows)
    rules = {example.match for example in rows}
    kinds = {task.kind for task in resolved}
    names = [task.name for task in resolved]
    return Task(
        name=name or "hybrid:" + "+".join(names),
        examples=tuple(rows),
        instruction=None,
        match=rules.pop() if len(rules) == 1 else "contains",
        kind="translation" if kinds == {"translation"} else "word",
        description=f"{shots}-shot mixture of {', '.join(names)} ({split} queries, seed {seed})",
        metadata={"tasks": names, "shots": shots, "seed": seed, "split": split},
    )


def token_text(tokenizer: Any, token: int) -> str:
    """A token as readable text: line breaks, tabs and other control characters escaped
    (``\\n``, ``\\x08``), a leading space shown as ␣."""
    text = tokenizer.decode([int(token)])
    text = "".join(
        char.encode("unicode_escape").decode("ascii")
        if unicodedata.category(char) == "Cc"
        else char
        for char in text
    )
    if text.startswith(" "):
        text = "␣" + text[1:]
    return text


def newline_tokens(tokenizer: Any) -> list[int]:
    """Ids of the tokens that are only whitespace with a line break (``"\\n"``, ``"\\n\\n"``...)."""
    found = []
    for piece, index in tokenizer.get_vocab().items():
        if "\n" in piece or "Ċ" in piece or "<0x0A>" in piece:  # raw, byte-level, SentencePiece
            text = tokenizer.decode([index])
            if text and not text.strip() and "\n" in text:
                found.append(int(index))
    return sorted(found)
