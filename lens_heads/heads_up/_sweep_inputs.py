"""What a removal sweep takes, checked and put in order before it runs: the heads in the order
they are removed (:func:`removal_order`, from mask weights or head labels), the target token
(:func:`resolve_target`), the steps evaluated and their masks, and the steps per chunk
(:func:`default_batch_size`).

>>> import lens_heads as lh
>>> prefix_masks([(0, 1), (1, 0)], [0, 1, 2], (2, 2)).tolist()
[[[1.0, 1.0], [1.0, 1.0]], [[1.0, 0.0], [1.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]]]
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from lens_heads.core import (
    HeadMask,
    InputError,
    MaskSource,
    encode_example,
    format_head,
    head_shape,
)
from lens_heads.core.internal import InputTypeError, MaskShapeError, ModelLike, parse_head

__all__ = [
    "Head",
    "OrderLike",
    "default_batch_size",
    "prefix_masks",
    "removal_order",
    "resolve_target",
    "sweep_steps",
]

_LOGITS_BUDGET_BYTES = 1 << 28  # a chunk's full-sequence fp32 logits stay under ~256 MiB
_MAX_BATCH = 64

Head = tuple[int, int]
OrderLike = MaskSource | Tensor | Sequence[str | tuple[int, int]]


def resolve_target(
    tokenizer: Any,
    prompt_text: str,
    target: str | int,
    *,
    chat: bool,
    d_vocab: int | None = None,
) -> int:
    """The token id tracked as the target: a token id as given, or a string's first token.

    A string is tokenized *in context*, after ``prompt_text`` (the rendered prompt: the chat
    template's text when ``chat``), so the id is the one the model would produce. With ``chat``
    the answer opens a new assistant turn after a line break, so the target is encoded without a
    leading space (``"Apple"`` → ``Apple``). Without ``chat``, when neither the prompt ends with
    nor the target starts with whitespace, the target gets a leading space (``"The capital of
    France is"`` + ``"Paris"`` → `` Paris``), as a continuation of running text would. A target
    of several tokens warns and uses the first one.

    >>> import lens_heads as lh
    >>> tokenizer = lh.tiny_model().tokenizer
    >>> tokenizer.decode([resolve_target(tokenizer, "x = ", "7", chat=False)])
    '7'
    """
    if isinstance(target, bool):
        raise InputTypeError("target must be a string or a token id, not a bool")
    if isinstance(target, int):
        size = d_vocab if d_vocab is not None else len(tokenizer)
        if not 0 <= target < size:
            raise InputError(
                f"target token id {target} is out of range for a vocabulary of {size} tokens"
            )
        return target
    if not target.strip():
        raise InputError(
            f"target {target!r} is empty: give the text of the expected answer (e.g. 'Apple') "
            "or a token id"
        )
    answer = target
    if not chat and not prompt_text[-1:].isspace() and not target[:1].isspace():
        answer = " " + target
    encoded = encode_example(tokenizer, prompt_text, answer, chat=chat)
    ids = encoded.answer_tokens
    unknown = getattr(tokenizer, "unk_token_id", None)
    if not ids or (unknown is not None and unknown in ids):
        raise InputError(
            f"the tokenizer cannot encode the target {target!r} (it becomes "
            f"{tokenizer.convert_ids_to_tokens(ids)}); choose a target made of text this "
            "tokenizer knows, or pass a token id"
        )
    if d_vocab is not None and ids[0] >= d_vocab:
        raise InputError(f"target token id {ids[0]} is outside the model's {d_vocab} logits")
    if len(ids) > 1:
        pieces = [tokenizer.decode([i]) for i in ids]
        warnings.warn(
            f"target {target!r} is {len(ids)} tokens {pieces}; tracking its first token "
            f"{pieces[0]!r} (id {ids[0]})",
            stacklevel=3,
        )
    return int(ids[0])


def _weights_order(weights: Tensor, shape: tuple[int, int], what: str) -> list[Head]:
    if weights.ndim != 2 or tuple(weights.shape) != shape:
        raise MaskShapeError(
            f"{what} has shape {tuple(weights.shape)} but the model has {shape[0]} layers x "
            f"{shape[1]} heads; use a mask made for this model"
        )
    if weights.is_complex() or weights.dtype == torch.bool:
        raise InputTypeError(f"{what} must hold real numbers, got {weights.dtype}")
    values = weights.detach().float().cpu().flatten()
    if not torch.isfinite(values).all():
        raise InputError(f"{what} contains NaN or inf; cannot order heads by weight")
    # Ascending weight; a stable sort keeps equal weights in head-index (layer-major) order.
    indices = torch.sort(values, stable=True).indices.tolist()
    return [divmod(int(index), shape[1]) for index in indices]


def _labels_order(heads: Sequence[str | tuple[int, int]], shape: tuple[int, int]) -> list[Head]:
    order: list[Head] = []
    seen: dict[Head, int] = {}
    n_layers, n_heads = shape
    for position, head in enumerate(heads):
        if isinstance(head, str):
            layer, index = parse_head(head, n_layers, n_heads)
        else:
            if len(head) != 2:
                raise InputError(f"head {head!r} must be a label 'L3H7' or a (layer, head) pair")
            layer, index = int(head[0]), int(head[1])
            if not (0 <= layer < n_layers and 0 <= index < n_heads):
                raise InputError(
                    f"head {format_head(layer, index)} is out of range for a model with "
                    f"{n_layers} layers x {n_heads} heads (valid: L0H0 .. "
                    f"L{n_layers - 1}H{n_heads - 1})"
                )
        if (layer, index) in seen:
            raise InputError(
                f"the order names head {format_head(layer, index)} twice (positions "
                f"{seen[(layer, index)]} and {position}); each head can be removed only once"
            )
        seen[(layer, index)] = position
        order.append((layer, index))
    return order


def _trained_weights(order: Any) -> Any:
    """The weights behind a training result, a ``train-mask`` folder or a mask file; anything
    else as given."""
    if hasattr(order, "W") and not isinstance(order, (Tensor, HeadMask)):  # MaskTrainingResult
        weights = order.W
        if weights.ndim == 3 and weights.shape[0] == 1:
            weights = weights[0]
        if weights.ndim != 2:
            raise InputError(
                f"the training result holds {weights.shape[0]} masks: pick one, "
                "result.single(i), as the order"
            )
        return weights
    if isinstance(order, os.PathLike) or (isinstance(order, str) and Path(order).exists()):
        path = Path(order)
        folder = path.parent if path.name == "training.safetensors" else path
        if (folder / "training.safetensors").is_file():
            from lens_heads.engine import MaskTrainingResult

            return _trained_weights(MaskTrainingResult.load(folder))
        return HeadMask.load(path)  # a mask file: binary ones are refused by the caller
    return order


def removal_order(
    model: ModelLike,
    order: OrderLike,
) -> list[tuple[int, int]]:
    """The heads of ``order`` as ``(layer, head)`` pairs in removal order.

    ``order`` is trained weights -- a :class:`~lens_heads.MaskTrainingResult` (its ``W``), a
    ``train-mask`` output folder (the ``W`` of its ``training.safetensors``), a weights tensor
    ``[n_layers, n_heads]`` or a soft :class:`HeadMask` (every head, ascending weight, equal
    weights in head-index order) -- or a sequence of labels ``"L3H7"`` / pairs (those heads, in
    that order). A binary mask (a file or a HeadMask of 0s and 1s) is refused: its kept heads
    all tie, so it gives no order. ``"influential"`` is handled by :func:`removal_sweep`.

    >>> import lens_heads as lh
    >>> model = lh.tiny_model(n_layers=2, n_heads=2)
    >>> removal_order(model, torch.tensor([[0.5, -1.0], [0.5, 2.0]]))
    [(0, 1), (0, 0), (1, 0), (1, 1)]
    >>> removal_order(model, ["L1H0", "L0H1"])
    [(1, 0), (0, 1)]
    """
    shape = head_shape(model)
    order = _trained_weights(order)
    if isinstance(order, HeadMask):
        order.check_model(model)
        if order.is_binary:
            raise InputError(
                "a binary mask gives no removal order (its kept heads all tie): pass the trained "
                "weights instead -- the MaskTrainingResult itself or its .W, or the train-mask "
                "output folder"
            )
        return _weights_order(order.values, shape, "the mask")
    if isinstance(order, Tensor):
        return _weights_order(order, shape, "the weights tensor")
    if isinstance(order, str):
        raise InputError(
            f"unknown order {order!r}: give trained weights (a MaskTrainingResult, its .W, a "
            "train-mask output folder), a list of heads like ['L3H7', 'L0H1'], or 'influential'"
        )
    if not isinstance(order, Sequence):
        raise InputTypeError(
            f"an order must be trained weights (a MaskTrainingResult, its .W, a train-mask "
            f"output folder) or a list of heads like ['L3H7', 'L0H1'], got {type(order).__name__}"
        )
    if len(order) == 0:
        raise InputError("the order is empty: name at least one head to remove")
    return _labels_order(order, shape)


def sweep_steps(n_heads: int, every: int) -> list[int]:
    """The numbers of heads removed at the evaluated steps: every ``every``-th, and all of them.

    >>> sweep_steps(5, 2)
    [0, 2, 4, 5]
    """
    steps = list(range(0, n_heads + 1, every))
    if steps[-1] != n_heads:
        steps.append(n_heads)
    return steps


def prefix_masks(
    order: Sequence[Head], steps: Sequence[int], shape: tuple[int, int]
) -> Float[Tensor, "n_steps n_layers n_heads"]:
    """``masks[i]`` removes (zeroes) the first ``steps[i]`` heads of ``order``."""
    removed_at = torch.full(shape, len(order) + 1, dtype=torch.long)
    for position, (layer, head) in enumerate(order):
        removed_at[layer, head] = position
    counts = torch.tensor(list(steps), dtype=torch.long)
    return (removed_at[None] >= counts[:, None, None]).float()


def default_batch_size(model: ModelLike, n_tokens: int) -> int:
    """Steps per chunk: as many as keep one chunk's fp32 logits over ``n_tokens`` positions
    under ~256 MiB, at most 64 (larger batches gain little on a CPU).

    >>> import lens_heads as lh
    >>> default_batch_size(lh.tiny_model(), 40)
    64
    """
    d_vocab = int(model.cfg.d_vocab)
    per_example = max(1, n_tokens) * d_vocab * 4
    return max(1, min(_MAX_BATCH, _LOGITS_BUDGET_BYTES // per_example))
