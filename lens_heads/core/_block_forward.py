"""How the transformer blocks run their forward inside a training step: as they are, recomputed in
the backward pass instead of keeping their activations (activation checkpointing), or compiled
by ``torch.compile`` into fewer, larger kernels.

Activation checkpointing keeps each block's input and runs the block again when the backward pass
reaches it; the hooks inside the block (the head mask on ``hook_z``) fire again in that run, so
the gradients are those of the plain run. A KV cache the bridge passes the block (it does after
any cached decoding) is left out: the recomputation would write its keys into it a second time.
The last block is left alone: the trainer reads its output through a hook that stops the forward
there, which a recomputation would repeat.

>>> import torch, lens_heads as lh
>>> model = lh.tiny_model(n_layers=3)
>>> tokens = model.to_tokens("hello")
>>> with block_forward(model, checkpoint=True):
...     logits = model(tokens)
>>> bool(torch.equal(logits, model(tokens)))
True
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import torch

__all__ = ["block_forward"]


@contextmanager
def block_forward(model: Any, *, checkpoint: bool = False, compile: bool = False) -> Iterator[Any]:
    """Inside the block, every block of ``model`` but the last runs checkpointed (``checkpoint``:
    where gradients are recorded) and, with ``compile``, through ``torch.compile`` (the compiled
    forwards are kept on the model and reused by later steps)."""
    if not (checkpoint or compile):
        yield model
        return
    blocks = list(model.blocks)
    wrapped = blocks[:-1] if checkpoint else blocks
    for block in wrapped:
        run = _compiled(block) if compile else block.forward
        block.__dict__["forward"] = _checkpointed(block, run) if checkpoint else run
    try:
        yield model
    finally:
        for block in wrapped:  # the instance's own attribute (bridges route setattr elsewhere)
            block.__dict__.pop("forward", None)


#: the names a block's KV cache goes by (transformers 5 calls it ``cache``): a training forward
#: needs none, and a checkpointed block must not write into one twice
_CACHES = {"cache", "past_key_values", "past_key_value", "layer_past"}


def _checkpointed(block: Any, run: Callable[..., Any]) -> Callable[..., Any]:
    """``run`` under non-reentrant checkpointing. The hooks on the block's hook points when the
    forward ran (the caller's ``model.hooks(...)`` block has ended by the backward pass) are put
    back for the recomputation, so it computes what the forward computed."""
    points = [module for module in block.modules() if hasattr(module, "add_hook")]

    def forward(*args: Any, **kwargs: Any) -> Any:
        if not torch.is_grad_enabled():
            return run(*args, **kwargs)
        hooks = [(point, dict(point._forward_hooks)) for point in points]
        for name in _CACHES & set(kwargs):  # a recomputation would append its keys again
            kwargs[name] = None
        if "use_cache" in kwargs:
            kwargs["use_cache"] = False

        def contexts() -> tuple[Any, Any]:
            return nullcontext(), _hooks_as(hooks)

        return torch.utils.checkpoint.checkpoint(
            run, *args, use_reentrant=False, context_fn=contexts, **kwargs
        )

    return forward


@contextmanager
def _hooks_as(hooks: list[tuple[Any, dict[int, Any]]]) -> Iterator[None]:
    """Each hook point's forward hooks as they were, for the block's recomputation."""
    current = [(point, dict(point._forward_hooks)) for point, _ in hooks]
    for point, found in hooks:
        point._forward_hooks.clear()
        point._forward_hooks.update(found)
    try:
        yield
    finally:
        for point, found in current:
            point._forward_hooks.clear()
            point._forward_hooks.update(found)


def _compiled(block: Any) -> Callable[..., Any]:
    found = block.__dict__.get("_lens_heads_compiled")
    if found is None:
        found = torch.compile(type(block).forward.__get__(block), dynamic=True)
        block.__dict__["_lens_heads_compiled"] = found
    return found
