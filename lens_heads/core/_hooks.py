"""The one mechanism that applies head masks: a multiplier on ``blocks.{l}.attn.hook_z``.

Training, sweeps, evaluation and generation all use :func:`mask_hooks`. A removed head's output
is zero by default (zero ablation); with a ``baseline`` (e.g. each head's mean ``z`` over a
reference set: mean ablation; or its ``z`` on another prompt: resample ablation) a factor ``m``
gives ``m * z + (1 - m) * baseline``.

>>> import torch, lens_heads as lh
>>> model = lh.tiny_model(n_layers=2, n_heads=4)
>>> tokens = model.to_tokens("hello")
>>> with lh.apply_mask(model, lh.HeadMask.zeros(model)):
...     masked = model(tokens)
>>> bool((masked != model(tokens)).any())
True
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from lens_heads.core._checks import resolve_mask
from lens_heads.core._errors import InputError, InputTypeError
from lens_heads.core._masks import HeadMask, MaskShapeError, MaskSource
from lens_heads.core._models import ModelLike, head_shape

__all__ = [
    "MaskLike",
    "ablated",
    "apply_mask",
    "current_baseline",
    "head_outputs",
    "mask_hooks",
    "maybe_mask",
]

#: A mask in any form of :data:`MaskSource` (a HeadMask, a mask file, a training folder or
#: result), a tensor ``[n_layers, n_heads]`` shared by the batch, or ``[batch, n_layers,
#: n_heads]`` per example. Raw tensors may require grad (training); they are used as given.
MaskLike = MaskSource | Float[Tensor, "n_layers n_heads"] | Float[Tensor, "batch n_layers n_heads"]

Hook = tuple[str, Callable[..., Any]]

#: the baseline each model's masks move removed heads to inside :func:`ablated`
_BASELINES: weakref.WeakKeyDictionary[Any, Tensor] = weakref.WeakKeyDictionary()


def hook_z_name(layer: int) -> str:
    return f"blocks.{layer}.attn.hook_z"


def _multiplier(mask: MaskLike) -> torch.Tensor:
    mask = resolve_mask(mask, tensors=True)  # a mask file, folder or training result too
    if isinstance(mask, HeadMask):
        return mask.multiplier()
    if not isinstance(mask, torch.Tensor):
        raise InputTypeError(f"expected a HeadMask or a tensor, got {type(mask).__name__}")
    if mask.ndim not in (2, 3):
        raise MaskShapeError(
            f"a mask tensor must be [n_layers, n_heads] or [batch, n_layers, n_heads], got "
            f"{tuple(mask.shape)}"
        )
    return mask


def _check_finite(mask: MaskLike) -> None:
    """A tensor mask given by a caller holds finite numbers (a HeadMask checks its own)."""
    if isinstance(mask, torch.Tensor) and not torch.isfinite(mask.detach()).all():
        bad = (~torch.isfinite(mask.detach())).nonzero()[:3].tolist()
        raise InputError(
            f"mask tensor holds NaN or inf (at {bad}); a head mask multiplies each head's output "
            "by a finite number"
        )


def _layer_hook(
    factor: torch.Tensor, layer: int, baseline: torch.Tensor | None = None
) -> Callable[..., torch.Tensor]:
    """Multiply ``z[batch, pos, head, d_head]`` by this layer's per-head factor (and move what
    a factor removes to ``baseline[layer]`` when given)."""
    per_example = factor.ndim == 3

    def hook(z: Float[Tensor, "batch pos head_index d_head"], hook: Any) -> torch.Tensor:
        scale = factor[:, layer] if per_example else factor[layer]
        if per_example and scale.shape[0] != z.shape[0]:
            raise MaskShapeError(
                f"per-example mask has batch {scale.shape[0]} but the input has batch {z.shape[0]}"
            )
        if scale.shape[-1] != z.shape[2]:
            raise MaskShapeError(
                f"mask has {scale.shape[-1]} heads per layer but {hook.name} has {z.shape[2]}"
            )
        scale = scale.to(dtype=z.dtype, device=z.device)
        scale = scale[:, None, :, None] if per_example else scale[None, None, :, None]
        if baseline is None:
            return z * scale
        if baseline.ndim == 5:  # per example and position: [batch, pos, layer, head, d_head]
            batch_ok = baseline.shape[0] in (1, z.shape[0])  # one donor serves every row
            if not batch_ok or baseline.shape[1] != z.shape[1]:
                raise MaskShapeError(
                    f"a per-example baseline has {tuple(baseline.shape[:2])} (batch, positions) "
                    f"but {hook.name} has {tuple(z.shape[:2])}; a resampled head needs a donor "
                    "with as many positions (no generated tokens)"
                )
            base = baseline[:, :, layer].to(dtype=z.dtype, device=z.device)
        else:
            base = baseline[layer].to(dtype=z.dtype, device=z.device)[None, None]
        return z * scale + base * (1 - scale)

    return hook


def mask_hooks(
    mask: MaskLike,
    model: ModelLike | None = None,
    *,
    baseline: Tensor | None = None,
) -> list[Hook]:
    """Forward hooks ``[(name, fn), ...]`` that apply ``mask`` on every layer's ``hook_z``.

    With ``model`` the mask's shape is checked against it. Gradients flow into tensor masks.
    ``baseline``: what a removed head outputs instead of zero: per layer and head ``[L, H,
    d_head]``, the same at every position (its mean ``z`` over reference prompts: mean
    ablation), or per example and position ``[batch, pos, L, H, d_head]`` (its ``z`` on
    another prompt, :func:`head_outputs`: resample ablation). Without one, the baseline of an
    enclosing :func:`ablated` block for ``model`` applies (none: zero ablation).

    >>> hooks = mask_hooks(HeadMask.ones(2, 4))
    >>> [name for name, _ in hooks]
    ['blocks.0.attn.hook_z', 'blocks.1.attn.hook_z']
    """
    factor = _multiplier(mask)
    if baseline is None and model is not None:
        baseline = _BASELINES.get(model)
    n_layers, n_heads = factor.shape[-2], factor.shape[-1]
    if model is not None and (n_layers, n_heads) != head_shape(model):
        expected = head_shape(model)
        name = getattr(model, "lens_heads_name", None) or model.cfg.model_name
        raise MaskShapeError(
            f"mask has shape ({n_layers}, {n_heads}) (layers, heads) but model {name} has "
            f"{expected[0]} layers x {expected[1]} heads; use a mask made for this model"
        )
    heads_at = slice(2, 4) if baseline is not None and baseline.ndim == 5 else slice(0, 2)
    if baseline is not None and (
        baseline.ndim not in (3, 5) or tuple(baseline.shape[heads_at]) != (n_layers, n_heads)
    ):
        raise MaskShapeError(
            f"baseline has shape {tuple(baseline.shape)}; it needs [n_layers, n_heads, d_head] "
            f"= [{n_layers}, {n_heads}, d_head], one vector per head, or [batch, pos, "
            f"{n_layers}, {n_heads}, d_head] per example and position"
        )
    return [(hook_z_name(layer), _layer_hook(factor, layer, baseline)) for layer in range(n_layers)]


@contextmanager
def apply_mask(model: ModelLike, mask: MaskLike) -> Iterator[ModelLike]:
    """Context manager: inside it, every forward pass and ``generate`` call is masked.

    >>> import lens_heads as lh
    >>> model = lh.tiny_model()
    >>> with apply_mask(model, HeadMask.ones(model)) as masked_model:
    ...     logits = masked_model(model.to_tokens("hi"))
    """
    _check_finite(mask)
    with model.hooks(fwd_hooks=mask_hooks(mask, model)):
        yield model


@contextmanager
def ablated(model: ModelLike, baseline: Tensor | None) -> Iterator[ModelLike]:
    """Inside it, every mask applied to ``model`` (:func:`mask_hooks` with the model,
    :func:`apply_mask`, generation, training, sweeps, evaluation) moves a removed head's output
    to ``baseline`` instead of zero: ``[n_layers, n_heads, d_head]`` at every position, or a
    donor's outputs ``[1 or batch, pos, n_layers, n_heads, d_head]`` (:func:`head_outputs`) for
    inputs of exactly ``pos`` positions; ``None`` changes nothing.
    See :mod:`lens_heads.core._ablation` for the baselines.

    >>> import lens_heads as lh
    >>> model = lh.tiny_model(n_layers=2, n_heads=4, d_head=16)
    >>> tokens = model.to_tokens("hi")
    >>> with ablated(model, torch.zeros(2, 4, 16)), apply_mask(model, HeadMask.zeros(model)):
    ...     same = model(tokens)
    >>> with apply_mask(model, HeadMask.zeros(model)):
    ...     torch.equal(same, model(tokens))
    True
    """
    if baseline is None:
        yield model
        return
    heads = tuple(baseline.shape[:2]) if baseline.ndim == 3 else tuple(baseline.shape[2:4])
    if baseline.ndim not in (3, 5) or heads != head_shape(model):
        raise MaskShapeError(
            f"an ablation baseline is [n_layers, n_heads, d_head] = {head_shape(model)} + "
            f"(d_head,), or [batch, pos, n_layers, n_heads, d_head] from donor prompts, got "
            f"{tuple(baseline.shape)}"
        )
    previous = _BASELINES.get(model)
    _BASELINES[model] = baseline
    try:
        yield model
    finally:
        if previous is None:
            _BASELINES.pop(model, None)
        else:
            _BASELINES[model] = previous


def current_baseline(model: ModelLike) -> Tensor | None:
    """The baseline of the :func:`ablated` block ``model`` runs in (None: zero ablation)."""
    return _BASELINES.get(model)


def maybe_mask(model: ModelLike, mask: MaskLike | None) -> Any:
    """:func:`apply_mask` when a mask is given, else a no-op context."""
    return nullcontext(model) if mask is None else apply_mask(model, mask)


def head_outputs(
    model: ModelLike, tokens: Tensor
) -> Float[Tensor, "batch pos n_layers n_heads d_head"]:
    """Every head's output ``z`` at every position of ``tokens`` (one forward, no gradient):
    the baseline of a resample ablation when ``tokens`` are other prompts of the same length.

    >>> import lens_heads as lh
    >>> model = lh.tiny_model(n_layers=2, n_heads=4, d_head=16)
    >>> tuple(head_outputs(model, model.to_tokens("hi")).shape)
    (1, 3, 2, 4, 16)
    """
    n_layers, _ = head_shape(model)
    found: dict[int, Tensor] = {}

    def keep(z: Tensor, hook: Any) -> None:
        found[int(hook.name.split(".")[1])] = z.detach()

    hooks = [(hook_z_name(layer), keep) for layer in range(n_layers)]
    with torch.no_grad(), model.hooks(fwd_hooks=hooks):
        model(tokens.to(model.cfg.device))
    return torch.stack([found[layer] for layer in range(n_layers)], dim=2)
