"""Counting argmax hits: each layer's attention pattern, inside its ``hook_pattern`` hook, reduced
to the fraction of each query's argmax that lands on an aligned source token (ties share the
hit), over batches that share their demonstrations through the KV cache."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor
from tqdm.auto import tqdm

from lens_heads.alignment._aligners import AlignmentError
from lens_heads.alignment._pairs import QueryItem
from lens_heads.core import head_shape, pad_token_id
from lens_heads.core.internal import (
    cached_forward,
    check_pattern_capture,
    repeat_cache,
    shared_prefix_length,
    supports_kv_cache,
)

__all__ = ["check_pattern_hook", "score_items"]


_TIE = 1e-5  # relative tolerance under which attention values tie with the maximum


# -- scoring ----------------------------------------------------------------------------------
def check_pattern_hook(model: Any) -> None:
    names = getattr(model, "hook_dict", None)
    if names is None or "blocks.0.attn.hook_pattern" not in names:
        raise AlignmentError(
            f"model {getattr(getattr(model, 'cfg', None), 'model_name', type(model).__name__)} "
            "exposes no 'blocks.0.attn.hook_pattern' hook, which translation scores read; load "
            "it as a TransformerLens model (lh.load_model) so attention patterns are hooked"
        )


def _forward(model: Any, tokens: Tensor) -> None:
    try:
        model(tokens, logits_to_keep=1)  # a bridge unembeds only the last position
    except TypeError:  # a legacy HookedTransformer
        model(tokens)


@torch.inference_mode()
def score_items(
    model: Any, items: Sequence[QueryItem], batch_size: int, progress: bool
) -> tuple[Tensor, Tensor, Tensor]:
    """``(hits [n, L, H], queries [n], chance [n])`` from right-padded batches; on a model with
    a KV cache, the token prefix a batch's prompts share (their demonstrations) runs once and
    every prompt continues from it (the same hits as full forwards, less arithmetic)."""
    check_pattern_capture(model)  # once per model: hook_pattern = eager attention weights
    n_layers, n_heads = head_shape(model)
    hits = torch.zeros(len(items), n_layers, n_heads)
    queries = torch.tensor([float(len(item.queries)) for item in items])
    chance = torch.tensor(
        [sum(len(h) / len(d) for h, d in zip(i.hits, i.domains, strict=True)) for i in items],
        dtype=torch.float32,
    )
    pad = pad_token_id(model.tokenizer)
    device = model.cfg.device
    order = sorted(
        (i for i in range(len(items)) if items[i].queries), key=lambda i: len(items[i].tokens)
    )
    batches = [order[s : s + batch_size] for s in range(0, len(order), batch_size)]
    cached = supports_kv_cache(model)
    for batch in tqdm(batches, desc="translation scores", disable=not progress, leave=False):
        width = max(len(items[i].tokens) for i in batch)
        tokens = torch.full((len(batch), width), pad, dtype=torch.long)
        rows, positions, owners = [], [], []
        domain_rows, hit_rows = [], []
        for row, index in enumerate(batch):
            item = items[index]
            tokens[row, : len(item.tokens)] = torch.tensor(item.tokens)
            for q, domain, hit in zip(item.queries, item.domains, item.hits, strict=True):
                rows.append(row)
                positions.append(q)
                owners.append(index)
                d = torch.zeros(width, dtype=torch.bool)
                d[domain] = True
                h = torch.zeros(width, dtype=torch.bool)
                h[hit] = True
                domain_rows.append(d)
                hit_rows.append(h)
        # the batch's common prefix (the demonstrations) runs once, before any query
        prefix = 0
        if cached and len(batch) > 1:
            prefix = min(shared_prefix_length([items[i].tokens for i in batch]), min(positions))
        row_index = torch.tensor(rows, device=device)
        pos_index = torch.tensor(positions, device=device) - prefix
        domain = torch.stack(domain_rows).to(device)[:, None, :]
        hit = torch.stack(hit_rows).to(device)[:, None, :]
        reducer = _ArgmaxHits(row_index, pos_index, domain, hit)
        hooks = [
            (f"blocks.{layer}.attn.hook_pattern", reducer.hook(layer)) for layer in range(n_layers)
        ]
        if prefix:
            head = tokens[:1, :prefix].to(device)
            _, prefix_cache = cached_forward(model, head, torch.ones_like(head), None, 1)
            rest = tokens[:, prefix:].to(device)
            attention = torch.ones(tokens.shape, dtype=torch.long, device=device)
            with model.hooks(fwd_hooks=hooks):  # patterns: [batch, heads, rest, prefix + rest]
                cached_forward(model, rest, attention, repeat_cache(prefix_cache, len(batch)), 1)
        else:
            with model.hooks(fwd_hooks=hooks):
                _forward(model, tokens.to(device))
        found = reducer.found
        per_query = torch.stack([found[layer] for layer in range(n_layers)], dim=1)  # [q, L, H]
        hits.index_add_(0, torch.tensor(owners), per_query)
    return hits, queries, chance


class _ArgmaxHits:
    """Reduces each layer's pattern, inside its ``hook_pattern`` hook, to the hit fraction of
    the argmax at each query row (ties share the hit); the pattern is left unchanged."""

    def __init__(self, rows: Tensor, positions: Tensor, domain: Tensor, hit: Tensor) -> None:
        self.rows, self.positions, self.domain, self.hit = rows, positions, domain, hit
        self.found: dict[int, Tensor] = {}

    def hook(self, layer: int) -> Callable[[Tensor, Any], None]:
        def reduce(pattern: Tensor, hook: Any) -> None:
            chosen = pattern[self.rows, :, self.positions, :].float()  # [queries, heads, keys]
            chosen = chosen.masked_fill(~self.domain, -math.inf)
            top = chosen.amax(-1, keepdim=True)
            ties = (chosen >= top - _TIE * top.abs()) & self.domain
            hits = (ties & self.hit).sum(-1) / ties.sum(-1).clamp(min=1)
            self.found[layer] = hits.cpu()

        return reduce
