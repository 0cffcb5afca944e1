"""KV-cached greedy decoding that computes the prompts' shared prefix once.

On a model that decodes with a Hugging Face KV cache (a ``TransformerBridge``),
:func:`decode_greedy` runs the longest token prefix common to all prompts (the chat template's
system prompt, an instruction, few-shot demonstrations) once, under the shared mask, and gives
each batch a copy of its cache. A batch then runs only its prompts' remaining tokens (left padded
after the prefix: an interior gap the attention mask and position ids skip), scores optional
answer tokens teacher forced on a copy of that cache, and decodes greedily one token per step.
:func:`lens_heads.greedy_generate` and :func:`lens_heads.evaluate` use it; a legacy
``HookedTransformer`` falls back to its own ``generate``.

>>> import lens_heads as lh
>>> model = lh.tiny_model()
>>> prompts = [[1, 2, 3, 4], [1, 2, 3, 5, 6]]
>>> decoded = decode_greedy(model, prompts, max_new_tokens=3, stops=[], answers=[[7], [8, 9]])
>>> [len(tokens) for tokens in decoded.new_tokens], tuple(decoded.answer_ce.shape)
([3, 3], (2,))
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor
from tqdm.auto import tqdm

from lens_heads.core._errors import InputError
from lens_heads.core._guards import check_cached_decoding
from lens_heads.core._hooks import maybe_mask
from lens_heads.core._kv_cache import cached_step, is_bridge, sliding_window
from lens_heads.core._metrics import answer_ce
from lens_heads.core._models import ModelLike
from lens_heads.core._prompts import pad_token_id

__all__ = [
    "Decoded",
    "answer_rows_budget",
    "cached_forward",
    "decode_greedy",
    "repeat_cache",
    "shared_prefix_length",
    "sliding_window",
    "supports_kv_cache",
]

LOGITS_BUDGET_BYTES = 1 << 30  # teacher-forced answer logits of a batch stay under ~1 GiB
#: With ``drop_finished``, batches of at least this many rows drop finished rows from the
#: cache while decoding (a quarter of them at a time): stacked masks make batches of hundreds of
#: rows whose steps are compute-bound; below it a step's cost is reading the weights.
PRUNE_ROWS = 64


@dataclass(frozen=True)
class Decoded:
    """Greedy new tokens per prompt (stop token excluded), the stop token that ended each
    (None when ``max_new_tokens`` ran out) and, when answers were given, each prompt's mean
    answer-token cross-entropy (teacher forced after the prompt)."""

    new_tokens: list[list[int]]
    answer_ce: Float[Tensor, " n"] | None
    stopped_by: list[int | None] | None = None


def supports_kv_cache(model: ModelLike) -> bool:
    """Whether ``model`` decodes with a Hugging Face KV cache (a ``TransformerBridge`` does; a
    legacy ``HookedTransformer`` does not)."""
    return is_bridge(model)


def shared_prefix_length(prompts: Sequence[Sequence[int]]) -> int:
    """Length of the longest prefix common to all prompts, leaving each at least one token.

    >>> shared_prefix_length([[1, 2, 3], [1, 2, 4, 5]]), shared_prefix_length([[1, 2], [1, 2]])
    (2, 1)
    """
    limit = min(len(prompt) for prompt in prompts) - 1
    length = 0
    first = prompts[0]
    while length < limit and all(prompt[length] == first[length] for prompt in prompts):
        length += 1
    return length


def cached_forward(
    model: ModelLike,
    tokens: Tensor,
    attention: Tensor,
    cache: Any,
    keep: int | None,
    masks: Tensor | None = None,
) -> tuple[Tensor, Any]:
    """One cached forward (under per-row ``masks`` if given): logits of the last ``keep``
    positions (all when None) and the cache (a new one when ``cache`` is None; see
    :func:`~lens_heads.core._kv_cache.new_cache`). The first call on a model runs the guard
    :func:`~lens_heads.core._kv_cache.check_cached_decoding`, which raises a
    :class:`~lens_heads.core.LibraryMismatchError` rather than let wrong logits out.
    """
    check_cached_decoding(model)
    with maybe_mask(model, masks):
        return cached_step(model, tokens, attention, cache, keep)


def answer_rows_budget(model: ModelLike, answers: Sequence[Sequence[int]]) -> int:
    """How many rows of teacher-forced ``answers`` fit :data:`LOGITS_BUDGET_BYTES` at once."""
    row_bytes = max(len(answer) for answer in answers) * int(model.cfg.d_vocab) * 4
    return max(1, LOGITS_BUDGET_BYTES // row_bytes)


def repeat_cache(prefix_cache: Any, rows: int, groups: Tensor | None = None) -> Any:
    """A copy of the prefix cache for a batch of ``rows``: the one prefix repeated, or, with
    ``groups`` (one index per row into the prefix cache's batch), each row's own prefix."""
    if prefix_cache is None:
        return None
    cache = copy.deepcopy(prefix_cache)
    if groups is not None:
        cache.reorder_cache(groups)
    elif rows > 1:
        cache.batch_repeat_interleave(rows)
    return cache


def _answer_ce(
    model: ModelLike,
    last: Tensor,
    answers: Sequence[Sequence[int]],
    attention: Tensor,
    cache: Any,
    pad_id: int,
    masks: Tensor | None,
) -> Tensor:
    """Mean CE of each row's answer: the prompt's last logits predict its first token; a
    teacher-forced pass over the right-padded answers, on a copy of the cache, the rest."""
    rows, width = len(answers), max(len(answer) for answer in answers)
    tokens = torch.full((rows, width + 1), pad_id, dtype=torch.long)
    answer_mask = torch.zeros((rows, width + 1), dtype=torch.bool)
    for row, answer in enumerate(answers):
        tokens[row, 1 : len(answer) + 1] = torch.tensor(list(answer), dtype=torch.long)
        answer_mask[row, 1 : len(answer) + 1] = True
    # the whole answer is fed (its last logits are not scored) so the window has its shape
    mask = torch.cat([attention, answer_mask[:, 1:].to(attention)], dim=1)
    inputs = tokens[:, 1:].to(attention.device)
    rest, _ = cached_forward(model, inputs, mask, copy.deepcopy(cache), None, masks)
    logits = torch.cat([last[:, None], rest.to(last.dtype)], dim=1)
    return answer_ce(logits, tokens.to(logits.device), answer_mask.to(logits.device))


@torch.inference_mode()
def decode_greedy(
    model: ModelLike,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    stops: Sequence[int],
    batch_size: int = 16,
    mask: Any = None,
    prefix_per_mask: bool = False,
    drop_finished: bool = False,
    answers: Sequence[Sequence[int]] | None = None,
    progress: bool | Callable[[int], None] = False,
) -> Decoded:
    """Greedy new tokens of each prompt, KV cached, with the prompts' shared prefix run once.

    ``mask`` is shared by all prompts (a :class:`~lens_heads.HeadMask` or ``[n_layers,
    n_heads]`` tensor) or one per prompt (``[n_prompts, n_layers, n_heads]``), in which case
    no prefix is shared (a mask changes every later layer's
    keys and values) -- unless ``prefix_per_mask``: then the shared prefix runs once per
    distinct mask (one batched pass) and each row continues from its own mask's prefix, as
    if each mask's prompts were decoded on their own (:func:`lens_heads.evaluate` with
    ``stack_masks=True`` and :func:`lens_heads.alpha_curve`, where few masks repeat over many
    prompts). ``drop_finished``: batches of :data:`PRUNE_ROWS` rows or more drop the rows that
    have stopped from the cache as they decode (the same tokens, less compute). ``answers``
    (token ids per prompt) are scored teacher forced after their prompt:
    :attr:`Decoded.answer_ce`. Prompts are batched by length to keep padding small;
    with answers, a batch has fewer rows when their answer logits would pass
    :data:`LOGITS_BUDGET_BYTES` (a 262k-token vocabulary and 50-token answers).
    ``progress``: a bar over the batches (True), or a function called after each batch with
    its number of prompts (a caller's own progress bar).
    """
    per_example_masks = mask if isinstance(mask, Tensor) and mask.ndim == 3 else None
    mask = None if per_example_masks is not None else mask
    on_rows = progress if callable(progress) else None
    if answers is not None and len(answers) != len(prompts):
        raise InputError(f"got {len(answers)} answers for {len(prompts)} prompts")
    if answers is not None and any(len(answer) == 0 for answer in answers):
        raise InputError("an answer has no tokens; every scored answer needs at least one")
    device = model.cfg.device
    stop_set = set(stops)
    pad = pad_token_id(model.tokenizer)
    if answers is not None:
        batch_size = min(batch_size, answer_rows_budget(model, answers))
    shared = per_example_masks is None
    groups: Tensor | None = None  # per row: its mask's row in the prefix cache
    prefix_masks: Tensor | None = None
    if not shared and prefix_per_mask:
        assert per_example_masks is not None
        prefix_masks, groups = torch.unique(per_example_masks, dim=0, return_inverse=True)
    prefix = (
        shared_prefix_length(prompts) if (shared or groups is not None) and len(prompts) > 1 else 0
    )
    window = sliding_window(model)
    longest = max(len(p) for p in prompts) + max_new_tokens + max(map(len, answers or [[]]))
    if window is not None and longest > window:
        # the padding between the shared prefix and a short prompt would push prefix tokens
        # out of the window that the prompt alone sees; plain left padding keeps distances
        prefix = 0
    order = sorted(range(len(prompts)), key=lambda index: len(prompts[index]))
    new_tokens: list[list[int]] = [[] for _ in prompts]
    stopped_by: list[int | None] = [None] * len(prompts)
    losses = torch.empty(len(prompts)) if answers is not None else None
    with maybe_mask(model, mask if shared else None):
        prefix_cache = None
        if prefix:
            head = torch.tensor([list(prompts[0][:prefix])], dtype=torch.long, device=device)
            if prefix_masks is not None:  # one prefix row per distinct mask
                head = head.expand(prefix_masks.shape[0], -1).contiguous()
            _, prefix_cache = cached_forward(
                model, head, torch.ones_like(head), None, 1, prefix_masks
            )
        starts = range(0, len(order), batch_size)
        bar = tqdm(starts, desc="generating", disable=progress is not True, leave=False)
        for start in bar:
            indices = order[start : start + batch_size]
            rows = _decode_batch(
                model,
                [prompts[index][prefix:] for index in indices],
                prefix,
                repeat_cache(
                    prefix_cache,
                    len(indices),
                    None if groups is None else groups[indices].to(device),
                ),
                max_new_tokens=max_new_tokens,
                stops=stop_set,
                pad_id=pad,
                answers=None if answers is None else [answers[i] for i in indices],
                masks=None if shared else per_example_masks[indices],
                drop_finished=drop_finished,
            )
            assert rows.stopped_by is not None
            for index, tokens, stop in zip(indices, rows.new_tokens, rows.stopped_by, strict=True):
                new_tokens[index], stopped_by[index] = tokens, stop
            if losses is not None and rows.answer_ce is not None:
                losses[indices] = rows.answer_ce.float().cpu()
            if on_rows is not None:
                on_rows(len(indices))
    return Decoded(new_tokens, losses, stopped_by)


def _decode_batch(
    model: ModelLike,
    suffixes: Sequence[Sequence[int]],
    prefix: int,
    cache: Any,
    *,
    max_new_tokens: int,
    stops: set[int],
    pad_id: int,
    answers: Sequence[Sequence[int]] | None,
    masks: Tensor | None,
    drop_finished: bool = False,
) -> Decoded:
    """One batch after the shared prefix: its prompts' own tokens, the answer CE, then greedy
    steps until every row has emitted a stop token or ``max_new_tokens``. With
    ``drop_finished`` a batch of :data:`PRUNE_ROWS` rows or more drops its finished rows from
    the cache as it goes (below that, measured: no faster, since a step's cost is reading the
    weights)."""
    device = model.cfg.device
    rows, width = len(suffixes), max(len(suffix) for suffix in suffixes)
    tokens = torch.full((rows, width), pad_id, dtype=torch.long)
    attention = torch.zeros((rows, prefix + width), dtype=torch.long)
    attention[:, :prefix] = 1
    for row, suffix in enumerate(suffixes):
        tokens[row, width - len(suffix) :] = torch.tensor(list(suffix), dtype=torch.long)
        attention[row, prefix + width - len(suffix) :] = 1
    tokens, attention = tokens.to(device), attention.to(device)
    logits, cache = cached_forward(model, tokens, attention, cache, 1, masks)
    last = logits[:, -1]
    losses = None
    if answers is not None:
        losses = _answer_ce(model, last, answers, attention, cache, pad_id, masks)
    outputs: list[list[int]] = [[] for _ in suffixes]
    stopped_by: list[int | None] = [None] * rows
    finished = [False] * rows
    active = list(range(rows))  # the batch rows still in the cache, in cache order
    for step in range(max_new_tokens):
        chosen = last.argmax(dim=-1)
        for row, token in zip(active, chosen.tolist(), strict=True):
            if finished[row]:
                continue
            if token in stops:
                finished[row], stopped_by[row] = True, token
            else:
                outputs[row].append(token)
        if all(finished) or step == max_new_tokens - 1:
            break
        done = sum(finished[row] for row in active)
        if drop_finished and len(active) >= PRUNE_ROWS and done >= max(1, len(active) // 4):
            keep = [i for i, row in enumerate(active) if not finished[row]]
            index = torch.tensor(keep, device=chosen.device)
            cache.batch_select_indices(index)
            attention, chosen = attention[index], chosen[index]
            masks = None if masks is None else masks[keep]
            active = [active[i] for i in keep]
        attention = torch.cat([attention, attention.new_ones((len(active), 1))], dim=1)
        logits, cache = cached_forward(model, chosen[:, None], attention, cache, 1, masks)
        last = logits[:, -1]
    return Decoded(outputs, losses, stopped_by)
