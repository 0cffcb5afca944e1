"""Batched greedy generation: left padding, an attention mask, optional (per-example) head masks.

>>> import lens_heads as lh
>>> model = lh.tiny_model()
>>> outputs = lh.generate(model, ["hello", "a longer prompt"], max_new_tokens=3)
>>> len(outputs), len(outputs[0].new_tokens) <= 3
(2, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from lens_heads.core._checks import check_context, check_prompts, resolve_mask
from lens_heads.core._decoding import decode_greedy, supports_kv_cache
from lens_heads.core._errors import InputError
from lens_heads.core._generation_config import DecodingConfig, GenerationConfig
from lens_heads.core._hooks import MaskLike, maybe_mask
from lens_heads.core._masks import HeadMask, MaskShapeError
from lens_heads.core._models import ModelLike
from lens_heads.core._prompts import END_OF_TURN_TOKENS, encode_text, has_chat_template
from lens_heads.core._settings import configure

__all__ = ["Generation", "generate", "greedy_generate", "stop_token_ids"]


@dataclass(frozen=True)
class Generation:
    """One greedy continuation: the prompt's tokens, the new tokens (stop token excluded), text."""

    prompt_tokens: list[int]
    new_tokens: list[int]
    text: str


def stop_token_ids(tokenizer: Any, model: ModelLike | None = None) -> list[int]:
    """The tokenizer's EOS id plus any end-of-turn tokens its vocabulary has and, given the
    model, every token its Hugging Face generation config stops at (``eos_token_id``: Phi-3's
    ``<|end|>``, Llama 3's ``<|eot_id|>``), so generation stops where ``transformers`` stops."""
    ids = [] if tokenizer.eos_token_id is None else [int(tokenizer.eos_token_id)]
    vocab = tokenizer.get_vocab()
    ids += [int(vocab[token]) for token in END_OF_TURN_TOKENS if token in vocab]
    config = getattr(getattr(model, "original_model", None), "generation_config", None)
    eos = getattr(config, "eos_token_id", None)
    ids += [int(t) for t in (eos if isinstance(eos, list | tuple) else [eos]) if t is not None]
    return sorted(set(ids))


def _batch_masks(
    mask: MaskLike | Sequence[HeadMask] | None, n_prompts: int
) -> tuple[Any, torch.Tensor | None]:
    """Split a mask argument into (shared mask or None, per-example multipliers or None); a
    mask file, folder or training result is read as its mask."""
    if not isinstance(mask, Sequence) or isinstance(mask, str):
        mask = resolve_mask(mask, tensors=True)
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
    config: DecodingConfig | None = None,
    *,
    mask: MaskLike | Sequence[HeadMask] | None = None,
    stop_tokens: Sequence[int] | None = None,
    **overrides: Any,
) -> list[list[int]]:
    """Greedy new tokens for each tokenized prompt: KV cached, batched with left padding, and
    the prefix all prompts share (chat template, instruction) computed once.

    ``mask`` is one mask for all prompts, or one per prompt (a list of :class:`HeadMask` or a
    ``[n_prompts, n_layers, n_heads]`` tensor). Generation stops at a stop token (excluded from
    the result) or after ``max_new_tokens``. The tokens equal those of generating each prompt
    alone; prompts are grouped by length to keep padding small. ``config`` (a
    :class:`DecodingConfig`; its fields also as keywords, ``max_new_tokens=5``) says how.
    """
    config = configure(DecodingConfig, config, overrides, "greedy_generate")
    max_new_tokens = config.max_new_tokens
    if len(prompts) == 0:
        raise InputError("no prompts to generate from: pass at least one prompt")
    if any(len(prompt) == 0 for prompt in prompts):
        raise InputError("cannot generate from an empty prompt")
    for index, prompt in enumerate(prompts):  # before any compute
        check_context(model, len(prompt), new_tokens=max_new_tokens, what=f"prompt {index}")
    stops = list(stop_token_ids(model.tokenizer, model) if stop_tokens is None else stop_tokens)
    shared, per_example = _batch_masks(mask, len(prompts))
    if supports_kv_cache(model):
        return decode_greedy(
            model,
            prompts,
            max_new_tokens=max_new_tokens,
            stops=stops,
            batch_size=config.batch_size,
            mask=shared if per_example is None else per_example,
            progress=config.progress,
        ).new_tokens
    return _generate_legacy(model, prompts, max_new_tokens, shared, per_example, stops)


def _generate_legacy(
    model: ModelLike,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    shared: Any,
    per_example: torch.Tensor | None,
    stops: list[int],
) -> list[list[int]]:
    """Greedy tokens through ``model.generate``, one prompt at a time: a legacy
    ``HookedTransformer`` has no ``attention_mask`` (so no padding) and no HF KV cache."""
    results: list[list[int]] = []
    for index, prompt in enumerate(prompts):
        tokens = torch.tensor([list(prompt)], dtype=torch.long, device=model.cfg.device)
        kwargs: dict[str, Any] = dict(
            max_new_tokens=max_new_tokens,
            do_sample=False,
            stop_at_eos=bool(stops),
            verbose=False,
            return_type="tokens",
        )
        if stops:
            kwargs["eos_token_id"] = stops if len(stops) > 1 else stops[0]
        with maybe_mask(model, shared if per_example is None else per_example[index : index + 1]):
            output = model.generate(tokens, **kwargs)
        row = output[0, tokens.shape[1] :].tolist()
        results.append(row[: next((i for i, t in enumerate(row) if t in stops), len(row))])
    return results


def generate(
    model: ModelLike,
    prompts: str | Sequence[str],
    config: GenerationConfig | None = None,
    *,
    mask: MaskLike | Sequence[HeadMask] | None = None,
    **overrides: Any,
) -> list[Generation]:
    """Greedy continuations of text prompts (wrapped in the chat template with ``chat=True``;
    ``config`` a :class:`GenerationConfig`, its fields also as keywords).

    >>> import lens_heads as lh
    >>> model = lh.tiny_model()
    >>> [len(g.new_tokens) <= 2 for g in generate(model, ["hi", "hello"], max_new_tokens=2)]
    [True, True]
    """
    config = configure(GenerationConfig, config, overrides, "generate")
    texts = check_prompts(prompts)
    chat = has_chat_template(model.tokenizer) if config.chat is None else config.chat
    encoded = [encode_text(model.tokenizer, text, chat=chat) for text in texts]
    new_tokens = greedy_generate(model, encoded, config, mask=mask)
    return [
        Generation(prompt, new, model.tokenizer.decode(new, skip_special_tokens=True))
        for prompt, new in zip(encoded, new_tokens, strict=True)
    ]
