"""What a removed head outputs: the ablation types every analysis shares.

* **zero** -- the head's output ``z`` is set to zero (the papers' setting, the default);
* **mean** -- it is set to the head's mean ``z`` over every real position of a set of
  reference prompts (:func:`mean_head_outputs`), the same vector at every position;
* **resample** -- it is set to the head's ``z`` at the same position of another prompt of the
  same token length (:func:`lens_heads.core._hooks.head_outputs`). Only analyses that run each
  prompt at its own fixed length take it (the atlas's single-head effects, removal sweeps
  without continuations, the gradient estimates); generation and batches of prompts of
  different lengths have no such donor.

The one mask hook applies all three (``m * z + (1 - m) * baseline``); an analysis computes its
baseline once and runs inside :func:`lens_heads.core.ablated`, so every mask it applies --
through training, sweeps, decoding or scoring -- moves removed heads to the baseline.

>>> import lens_heads as lh
>>> model = lh.tiny_model(n_layers=2, n_heads=4, d_head=16)
>>> tuple(mean_head_outputs(model, ["hello", "a cat"]).shape)
(2, 4, 16)
>>> check_ablation("resample", allowed=FIXED, where="evaluate")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
lens_heads.core._errors.InputError: evaluate takes ablation 'zero' or 'mean', not 'resample'...
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from lens_heads.core._capture import PromptLike, encode_prompt
from lens_heads.core._checks import own_checks
from lens_heads.core._errors import InputError
from lens_heads.core._models import ModelLike, head_shape
from lens_heads.core._prompts import pad_token_id
from lens_heads.core._setting_parts import ABLATIONS, FIXED, BatchSetting, check_ablation
from lens_heads.core._settings import configure

__all__ = [
    "ABLATIONS",
    "FIXED",
    "REFERENCE_SIZE",
    "MeanOutputsConfig",
    "ablation_baseline",
    "check_ablation",
    "donor_prompts",
    "mean_head_outputs",
    "right_padded",
]

#: reference prompts of a mean baseline when an analysis takes them from a task's training split
REFERENCE_SIZE = 64


def right_padded(tokens: Sequence[Sequence[int]], pad: int) -> tuple[Tensor, Tensor]:
    """``(batch [n, width], last [n])``: the token lists right-padded with ``pad`` and each
    one's last real position.

    >>> batch, last = right_padded([[5, 6, 7], [8]], pad=0)
    >>> batch.tolist(), last.tolist()
    ([[5, 6, 7], [8, 0, 0]], [2, 0])
    """
    width = max(map(len, tokens))
    batch = torch.full((len(tokens), width), pad, dtype=torch.long)
    for row, ids in enumerate(tokens):
        batch[row, : len(ids)] = torch.tensor(list(ids))
    return batch, torch.tensor([len(ids) - 1 for ids in tokens])


@own_checks
@dataclass(frozen=True, kw_only=True)
class MeanOutputsConfig(BatchSetting.with_defaults(batch_size=8)):
    """How :func:`mean_head_outputs` runs its reference prompts: how many together (the
    baseline does not depend on it)."""


def mean_head_outputs(
    model: ModelLike,
    prompts: Sequence[PromptLike],
    config: MeanOutputsConfig | None = None,
    **overrides: Any,
) -> Float[Tensor, "n_layers n_heads d_head"]:
    """Each head's mean ``z`` over every real position of ``prompts`` (texts, rendered as
    :func:`lens_heads.evaluate` renders them, or token ids): the mean-ablation baseline. Padding
    positions are left out; every position weighs the same. ``config``: a
    :class:`MeanOutputsConfig` (``batch_size``; also as a keyword)."""
    batch_size = configure(MeanOutputsConfig, config, overrides, "mean_head_outputs").batch_size
    if not prompts:
        raise InputError("mean ablation needs at least one reference prompt")
    n_layers, _ = head_shape(model)
    tokens = [list(encode_prompt(model, prompt).tokens) for prompt in prompts]
    sums: dict[int, Tensor] = {}
    count = 0
    pad = pad_token_id(model.tokenizer)
    for start in range(0, len(tokens), batch_size):
        batch, last = right_padded(tokens[start : start + batch_size], pad)
        real = torch.arange(batch.shape[1])[None] <= last[:, None]  # [batch, pos]
        count += int(real.sum())

        def keep(z: Tensor, hook: object, real: Tensor = real) -> None:
            layer = int(hook.name.split(".")[1])  # type: ignore[attr-defined]
            total = (z.float() * real[:, :, None, None].to(z.device)).sum(dim=(0, 1)).cpu()
            sums[layer] = sums.get(layer, 0) + total

        hooks = [(f"blocks.{layer}.attn.hook_z", keep) for layer in range(n_layers)]
        with torch.no_grad(), model.hooks(fwd_hooks=hooks):
            model(batch.to(model.cfg.device))
    return torch.stack([sums[layer] for layer in range(n_layers)]) / count


def donor_prompts(
    tokens: Sequence[Sequence[int]], reference: Sequence[Sequence[int]]
) -> list[list[int]]:
    """The resample ablation's donor of each prompt (token ids): a reference prompt of the same
    length, the ``i``-th prompt of a length taking the ``i``-th such reference prompt (modulo
    their number); an :class:`InputError` names a length no reference prompt has.

    >>> donor_prompts([[1, 2], [3, 4], [5]], [[7, 8], [9, 9], [6]])
    [[7, 8], [9, 9], [6]]
    """
    by_length: dict[int, list[list[int]]] = {}
    for ids in reference:
        by_length.setdefault(len(ids), []).append(list(ids))
    seen: dict[int, int] = {}
    donors = []
    for index, ids in enumerate(tokens):
        pool = by_length.get(len(ids))
        if not pool:
            raise InputError(
                f"resample ablation: prompt {index} has {len(ids)} tokens and no reference prompt "
                f"has as many (reference lengths: {sorted(by_length)}); give more reference "
                "prompts, or use zero or mean ablation"
            )
        count = seen.get(len(ids), 0)
        seen[len(ids)] = count + 1
        donors.append(pool[count % len(pool)])
    return donors


def ablation_baseline(
    model: ModelLike,
    ablation: str,
    reference: Sequence[PromptLike] | None,
    *,
    where: str,
    batch_size: int = 8,
    tokens: Sequence[int] | None = None,
) -> Tensor | None:
    """The baseline ``ablation`` gives removed heads: ``None`` for zero (the hook's plain
    multiplier); for mean, the mean over ``reference``; for resample (only where ``tokens``, the
    one prompt run at its own length, is given), the head outputs ``[1, pos, L, H, d_head]`` of
    the first reference prompt with as many tokens. An :class:`InputError` says what is missing."""
    check_ablation(ablation, allowed=ABLATIONS if tokens is not None else FIXED, where=where)
    if ablation == "zero":
        return None
    if not reference:
        raise InputError(
            f"{where}: {ablation} ablation needs reference prompts whose head outputs replace "
            "the removed heads (e.g. the task's training inputs)"
        )
    if ablation == "mean":
        return mean_head_outputs(model, reference, batch_size=batch_size)
    from lens_heads.core._hooks import head_outputs

    assert tokens is not None
    encoded = [list(encode_prompt(model, prompt).tokens) for prompt in reference]
    (donor,) = donor_prompts([list(tokens)], encoded)
    return head_outputs(model, torch.tensor([donor]))
