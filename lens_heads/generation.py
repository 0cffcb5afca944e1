"""Batched greedy generation: left padding, an attention mask, optional (per-example) head masks.

>>> import lens_heads as lh
>>> model = lh.tiny_model()
>>> outputs = lh.generate(model, ["hello", "a longer prompt"], max_new_tokens=3)
>>> len(outputs), len(outputs[0].new_tokens) <= 3
(2, True)
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from tqdm.auto import tqdm

from lens_heads.hooks import maybe_mask
from lens_heads.masks import HeadMask, MaskShapeError
from lens_heads.models import ModelLike
from lens_heads.prompts import encode_text

__all__ = ["Generation", "generate", "greedy_generate", "stop_token_ids"]

_END_OF_TURN = ("<|im_end|>", "<end_of_turn>", "<|eot_id|>", "<|endoftext|>", "<eos>")


@dataclass(frozen=True)
class Generation:
    """One greedy continuation: the prompt's tokens, the new tokens (stop token excluded), text."""

    prompt_tokens: list[int]
    new_tokens: list[int]
    text: str


def stop_token_ids(tokenizer: Any) -> list[int]:
    """The tokenizer's EOS id plus any end-of-turn tokens its vocabulary has."""
    ids = [] if tokenizer.eos_token_id is None else [int(tokenizer.eos_token_id)]
    vocab = tokenizer.get_vocab()
    ids += [int(vocab[token]) for token in _END_OF_TURN if token in vocab]
    return sorted(set(ids))


def _accepts_attention_mask(model: ModelLike) -> bool:
    return "attention_mask" in inspect.signature(model.generate).parameters


def _pad_left(batch: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(tokens) for tokens in batch)
    tokens = torch.full((len(batch), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(batch), width), dtype=torch.long)
    for row, ids in enumerate(batch):
        tokens[row, width - len(ids) :] = torch.tensor(list(ids), dtype=torch.long)
        attention[row, width - len(ids) :] = 1
    return tokens, attention


def _batch_masks(
    mask: HeadMask | torch.Tensor | Sequence[HeadMask] | None, n_prompts: int
) -> tuple[Any, torch.Tensor | None]:
    """Split a mask argument into (shared mask or None, per-example multipliers or None)."""
    if mask is None or isinstance(mask, HeadMask):
        return mask, None
    if isinstance(mask, torch.Tensor) and mask.ndim == 2:
        return mask, None
    per_example = (
        mask if isinstance(mask, torch.Tensor) else torch.stack([m.multiplier() for m in mask])
    )
    if per_example.shape[0] != n_prompts:
        raise MaskShapeError(
            f"got {per_example.shape[0]} per-example masks for {n_prompts} prompts; give one each"
        )
    return None, per_example


@torch.inference_mode()
def greedy_generate(
    model: ModelLike,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int = 10,
    mask: HeadMask | torch.Tensor | Sequence[HeadMask] | None = None,
    batch_size: int = 16,
    stop_tokens: Sequence[int] | None = None,
    progress: bool = False,
) -> list[list[int]]:
    """Greedy new tokens for each tokenized prompt, batched with left padding.

    ``mask`` is one mask for all prompts, or one per prompt (a list of :class:`HeadMask` or a
    ``[n_prompts, n_layers, n_heads]`` tensor). Generation stops at a stop token (excluded from
    the result) or after ``max_new_tokens``. The tokens equal those of generating each prompt
    alone; prompts are grouped by length to keep padding small.
    """
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
    if any(len(prompt) == 0 for prompt in prompts):
        raise ValueError("cannot generate from an empty prompt")
    stops = list(stop_token_ids(model.tokenizer) if stop_tokens is None else stop_tokens)
    shared, per_example = _batch_masks(mask, len(prompts))
    if not _accepts_attention_mask(model):
        batch_size = 1  # legacy HookedTransformer: no attention_mask, so no padding at all
    pad_id = model.tokenizer.pad_token_id
    pad_id = stops[0] if pad_id is None else int(pad_id)
    order = sorted(range(len(prompts)), key=lambda index: len(prompts[index]))
    results: list[list[int]] = [[] for _ in prompts]
    starts = range(0, len(order), batch_size)
    for start in tqdm(starts, desc="generating", disable=not progress, leave=False):
        indices = order[start : start + batch_size]
        tokens, attention = _pad_left([prompts[index] for index in indices], pad_id)
        tokens = tokens.to(model.cfg.device)
        batch_mask = shared if per_example is None else per_example[indices]
        kwargs: dict[str, Any] = dict(
            max_new_tokens=max_new_tokens,
            do_sample=False,
            stop_at_eos=bool(stops),
            verbose=False,
            return_type="tokens",
        )
        if stops:
            kwargs["eos_token_id"] = stops if len(stops) > 1 else stops[0]
        if batch_size > 1:
            kwargs["attention_mask"] = attention.to(model.cfg.device)
        with maybe_mask(model, batch_mask):
            output = model.generate(tokens, **kwargs)
        new = output[:, tokens.shape[1] :].tolist()
        for index, row in zip(indices, new, strict=True):
            cut = next((i for i, token in enumerate(row) if token in stops), len(row))
            results[index] = row[:cut]
    return results


def generate(
    model: ModelLike,
    prompts: str | Sequence[str],
    *,
    chat: bool = False,
    max_new_tokens: int = 10,
    mask: HeadMask | torch.Tensor | Sequence[HeadMask] | None = None,
    batch_size: int = 16,
    progress: bool = False,
) -> list[Generation]:
    """Greedy continuations of text prompts (wrapped in the chat template when ``chat``).

    >>> import lens_heads as lh
    >>> model = lh.tiny_model()
    >>> [len(g.new_tokens) <= 2 for g in generate(model, ["hi", "hello"], max_new_tokens=2)]
    [True, True]
    """
    texts = [prompts] if isinstance(prompts, str) else list(prompts)
    encoded = [encode_text(model.tokenizer, text, chat=chat) for text in texts]
    new_tokens = greedy_generate(
        model,
        encoded,
        max_new_tokens=max_new_tokens,
        mask=mask,
        batch_size=batch_size,
        progress=progress,
    )
    return [
        Generation(prompt, new, model.tokenizer.decode(new, skip_special_tokens=True))
        for prompt, new in zip(encoded, new_tokens, strict=True)
    ]
