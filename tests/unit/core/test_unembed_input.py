"""The unembedding of a cached step gets a contiguous input (issue 44): with ``logits_to_keep``
the Hugging Face model hands its last positions to the unembedding as a strided view, and torch's
CPU kernel for a bf16 matrix product with such an input took about 16 bytes per unembedding
weight of extra memory (2 GiB for Qwen2.5-0.5B's, measured by benchmarks/bench_scale.py: its
removal sweeps and atlas effects ran far above their plans on bf16 weights)."""

from __future__ import annotations

import torch

import lens_heads as lh
from lens_heads.core._kv_cache import cached_step


def test_a_cached_step_hands_the_unembedding_a_contiguous_input():
    model = lh.tiny_model(n_layers=2, n_heads=4)
    seen = []
    unembed = model.unembed.original_component
    handle = unembed.register_forward_pre_hook(
        lambda module, args: seen.append(args[0].is_contiguous())
    )
    try:
        tokens = torch.tensor([[5, 6, 7, 8], [9, 10, 11, 12]])
        logits, _ = cached_step(model, tokens, torch.ones(2, 4), None, 1)
    finally:
        handle.remove()
    assert seen == [True] and tuple(logits.shape[:2]) == (2, 1)
    full = model(tokens)
    assert torch.allclose(logits[:, -1], full[:, -1], atol=1e-5)
