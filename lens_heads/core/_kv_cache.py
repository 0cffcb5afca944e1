"""The Hugging Face KV cache, handed through a ``TransformerBridge`` the way the installed
releases expect it, and the guard that checks it on each model's first use.

transformers 5.24 renamed the cache argument of every model, decoder layer and attention module
from ``past_key_values`` to ``cache`` (the old name is a deprecated alias on the model's
forward). TransformerLens 4.3's attention bridges, which recompute attention to expose
``hook_pattern``, still look the cache up under ``past_key_values``: handed ``cache``, they never
stored or read a key, so every cached step attended to its own tokens only -- silent garbage.
Two questions settle what to do, and both are asked of the installed code, never of a version
number:

* :func:`cache_keyword`: which name the Hugging Face model's forward takes (its signature);
* :func:`adapt_bridge`: whether an attention bridge finds a cache handed to it as ``cache``
  (a probe of its cache lookup); where it does not, the lookup is wrapped so that it does. It
  also hands the unembedding a contiguous input (the kept last positions are a strided view).

:func:`cached_step` is the one cached forward every decoding path takes; the guard in
:mod:`lens_heads.core._guards` checks it on each model's first use.

>>> import lens_heads as lh
>>> model = lh.tiny_model()
>>> cache_keyword(model) in ("cache", "past_key_values")
True
>>> logits, cache = cached_step(model, model.to_tokens("hi"), torch.ones(1, 3), None, 1)
>>> tuple(logits.shape[:2]), cache.get_seq_length()
((1, 1), 3)
"""

from __future__ import annotations

import inspect
import weakref
from typing import Any

import torch
from torch import Tensor

__all__ = [
    "adapt_bridge",
    "cache_keyword",
    "cached_step",
    "is_bridge",
    "new_cache",
    "sliding_window",
]

_ADAPTED: weakref.WeakSet[Any] = weakref.WeakSet()


def is_bridge(model: Any) -> bool:
    """Whether ``model`` wraps a Hugging Face model (a ``TransformerBridge``) and so decodes
    with a Hugging Face cache; a legacy ``HookedTransformer`` does not."""
    forward = getattr(model, "forward", None)
    return (
        getattr(model, "original_model", None) is not None
        and forward is not None
        and "past_key_values" in inspect.signature(forward).parameters
    )


def cache_keyword(model: Any) -> str:
    """The name under which the installed ``transformers`` model takes its KV cache: ``cache``
    (5.24 and later) or ``past_key_values`` (earlier), read from its forward's signature."""
    parameters = inspect.signature(model.original_model.forward).parameters
    return "cache" if "cache" in parameters else "past_key_values"


def sliding_window(model: Any) -> int | None:
    """The attention window of a model with sliding-window layers (Mistral, Gemma 2 and 3),
    from its Hugging Face config; None when every layer attends to the whole context.

    >>> import lens_heads as lh
    >>> sliding_window(lh.tiny_model()) is None
    True
    """
    config = getattr(getattr(model, "original_model", None), "config", None)
    window = getattr(config, "sliding_window", None)
    if not isinstance(window, int) or window <= 0 or not getattr(config, "use_sliding_window", 1):
        return None
    types = getattr(config, "layer_types", None)
    if types is not None and "sliding_attention" not in types:
        return None
    return window


def new_cache() -> Any:
    """An empty cache that keeps every position of every layer (sliding-window layers too:
    their window is applied by the attention mask, so ``hook_pattern`` spans the sequence)."""
    from transformers import DynamicCache

    return DynamicCache()


class _Probe:
    """A cache that records whether an attention bridge's lookup asked it for anything."""

    def __init__(self) -> None:
        self.asked = False

    def update(self, key: Tensor, value: Tensor, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        self.asked = True
        return key, value


def _finds(attention: Any, name: str) -> bool:
    probe = _Probe()
    empty = torch.zeros(1, 1, 1, 1)
    attention._update_kv_cache(empty, empty, **{name: probe})
    return probe.asked


def _reads_both(lookup: Any) -> Any:
    def update_kv_cache(key: Tensor, value: Tensor, **kwargs: Any) -> tuple[Tensor, Tensor]:
        if kwargs.get("past_key_values") is None and kwargs.get("cache") is not None:
            kwargs = {**kwargs, "past_key_values": kwargs["cache"]}
        return lookup(key, value, **kwargs)

    update_kv_cache.lens_heads_adapted = True  # type: ignore[attr-defined]
    return update_kv_cache


def adapt_bridge(model: Any) -> int:
    """Make every attention bridge of ``model`` find a cache handed to it as ``cache`` (what
    transformers 5.24+ decoder layers pass), where its own lookup does not; returns how many
    bridges needed it. Idempotent; a no-op on a TransformerLens that reads ``cache`` itself."""
    if model in _ADAPTED:
        return 0
    adapted = 0
    for module in model.modules():
        lookup = getattr(module, "_update_kv_cache", None)
        if lookup is None or getattr(lookup, "lens_heads_adapted", False):
            continue
        if getattr(module, "_layer_idx", None) is None:
            continue  # not a decoder attention with a cache slot
        if not _finds(module, "cache") and _finds(module, "past_key_values"):
            module._update_kv_cache = _reads_both(lookup)
            adapted += 1
    unembed = getattr(getattr(model, "unembed", None), "original_component", None)
    if isinstance(unembed, torch.nn.Module):  # the last positions arrive as a strided view
        unembed.register_forward_pre_hook(_contiguous_input, prepend=True)
    _ADAPTED.add(model)
    return adapted


def _contiguous_input(module: Any, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """The unembedding's input made contiguous: with ``logits_to_keep`` the model slices its last
    positions, and torch's CPU product of a bf16 weight with that strided view took about 16
    bytes per weight of extra memory (2 GiB for Qwen2.5-0.5B's unembedding); a copy of the few
    kept positions costs nothing."""
    if args and isinstance(args[0], Tensor) and not args[0].is_contiguous():
        return (args[0].contiguous(), *args[1:])
    return None


def cached_step(
    model: Any, tokens: Tensor, attention: Tensor, cache: Any, keep: int | None
) -> tuple[Tensor, Any]:
    """One forward of ``tokens`` after what ``cache`` holds (a new cache when None), under the
    2-d ``attention`` mask over cache + tokens: the logits of the last ``keep`` positions (all
    when None) and the cache, extended in place. No guard: see
    :func:`lens_heads.core._guards.check_cached_decoding`."""
    adapt_bridge(model)
    cache = new_cache() if cache is None else cache
    extra = {} if keep is None else {"logits_to_keep": keep}
    logits = model(
        tokens,
        attention_mask=attention,
        use_cache=True,
        return_type="logits",
        **{cache_keyword(model): cache},
        **extra,
    )
    return logits, cache
