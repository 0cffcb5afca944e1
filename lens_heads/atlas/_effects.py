"""Exact single-head effects: how much the answer's logit falls when one head alone is removed.

For each prompt of a task (rendered as :func:`lens_heads.evaluate` renders it) the effect of
head ``(l, h)`` is ``logit(answer) - logit(answer | head removed)`` at the last prompt position,
the answer being its first token; the atlas reports the mean over prompts. A head is removed by
the one mask hook (:func:`lens_heads.mask_hooks`): **zero** ablation sets its output to zero,
**mean** ablation to its mean output over a reference set of prompts (every position of every
reference prompt), **resample** ablation to its output at the same position of a reference
prompt with as many tokens (the donor: of the reference prompts of that length, the ``i``-th
prompt of a length takes the ``i``-th modulo their number; a length without one is an error).

Removing a head of layer ``l`` leaves the residual stream before layer ``l`` unchanged, so each
prompt's ``blocks.{l}.hook_resid_pre`` is computed once and the model is run from layer ``l`` on,
for every head of that layer at once (one row per prompt and head, each with its own mask), and
only up to the last layer's residual stream (the answer's logit is read from it alone).
TransformerLens 4.3's ``start_at_layer`` still runs the blocks before ``l`` and discards their
output (measured: a call from layer 29 of SmolLM2 ran all 30 blocks), so those blocks are made to
pass their input through for the call (:func:`skipping_blocks`).

A task's rendered prompts share their first tokens (the chat template, the system turn, the
instruction), and removing a head changes those positions the same way in every prompt. When
that costs less (``EffectsConfig.shared_prefix``; by default whichever path costs fewer
token-layers), the common prefix runs once per head of a layer, as a KV cache
(:func:`lens_heads.core._kv_cache.cached_step`, one row per head), and each prompt runs only
its own tokens after it. The plain way
(:func:`plain_single_head_effects`: one hook per head, one full forward per head) gives the same
numbers and is kept as the reference of the tests and the benchmark.

>>> import lens_heads as lh
>>> model = lh.tiny_model(n_layers=2, n_heads=4)
>>> prompts, answers = ["the cat", "a dog"], ["s", "s"]
>>> effects = single_head_effects(model, prompts, answers, reference=prompts)
>>> sorted(effects), tuple(effects["zero"].shape)
(['mean', 'zero'], (2, 4))
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor
from tqdm.auto import tqdm

from lens_heads.core import InputError, configure, head_shape, mask_hooks, pad_token_id
from lens_heads.core.internal import (
    ABLATIONS,
    AblationsSetting,
    BatchSetting,
    MeanOutputsConfig,
    ModelLike,
    PromptLike,
    donor_prompts,
    encode_prompt,
    head_outputs,
    lens_logits,
    mean_head_outputs,
    right_padded,
    target_token_ids,
)

__all__ = [
    "ABLATIONS",
    "EffectsConfig",
    "MeanOutputsConfig",
    "common_prefix",
    "donor_prompts",
    "mean_head_outputs",
    "plain_single_head_effects",
    "prefix_pays",
    "single_head_effects",
    "skipping_blocks",
]


@dataclass(frozen=True, kw_only=True)
class EffectsConfig(AblationsSetting, BatchSetting.with_defaults(batch_size=8)):
    """``ablations``: which of :data:`ABLATIONS`; ``batch_size``: prompts per forward (each
    carries one row per head of a layer)."""

    shared_prefix: bool | None = None
    """Compute the prompts' common first tokens once per head (a KV cache) and only the rest per
    prompt: True, False, or None to choose whichever costs fewer token-layers."""

    def __post_init__(self) -> None:
        super().__post_init__()  # the shared parts' checks
        if self.shared_prefix is not None and not isinstance(self.shared_prefix, bool):
            raise InputError(
                f"shared_prefix must be True, False or None, got {self.shared_prefix!r}"
            )


class _Stop(Exception):
    """Raised by the hook that read the last residual stream: nothing after it is needed."""


@contextmanager
def skipping_blocks(model: ModelLike, layer: int) -> Iterator[None]:
    """Blocks ``0 .. layer - 1`` return their input unchanged inside the ``with`` block: with
    ``start_at_layer=layer`` the bridge computes them and then discards what they produced, so
    their work is pure cost. (Their hooks do not fire meanwhile.)"""

    def pass_through(*args: Any, **kwargs: Any) -> Any:
        return args[0] if args else kwargs["hidden_states"]

    skipped = list(model.blocks)[:layer]
    for block in skipped:  # the instance's own attribute (bridges route setattr elsewhere)
        block.__dict__["forward"] = pass_through
    try:
        yield
    finally:
        for block in skipped:
            block.__dict__.pop("forward", None)


def _encode(model: ModelLike, prompts: Sequence[PromptLike]) -> list[list[int]]:
    return [list(encode_prompt(model, prompt).tokens) for prompt in prompts]


def _baselines(
    model: ModelLike,
    ablations: Sequence[str],
    reference: Sequence[PromptLike] | None,
    batch_size: int,
) -> dict[str, Tensor | None]:
    """The per-head baselines that do not depend on the prompt (zero, mean)."""
    needs = [a for a in ablations if a in ("mean", "resample")]
    if needs and not reference:
        raise InputError(f"{' and '.join(needs)} ablation needs reference prompts (reference=...)")
    found: dict[str, Tensor | None] = {"zero": None}
    if "mean" in ablations:
        found["mean"] = mean_head_outputs(model, reference or [], batch_size=batch_size)
    return found


def _donor_outputs(model: ModelLike, donors: Sequence[Sequence[int]], width: int) -> Tensor:
    """``z`` of the donors, right-padded to ``width`` like the prompts they stand in for."""
    batch, _ = right_padded([*donors, [0] * width], pad_token_id(model.tokenizer))
    return head_outputs(model, batch[:-1]).cpu()


def _answer_logits(model: ModelLike, resid: Tensor, answers: Tensor) -> Tensor:
    """The answer's logit of each row of ``resid``; with ``answers`` of two columns, the first
    one's logit minus the second's (an answer against a counterfactual answer)."""
    logits = lens_logits(model, resid).float()
    return _picked(logits, answers.to(resid.device))


def _picked(logits: Tensor, answers: Tensor) -> Tensor:
    if answers.ndim == 1:
        return logits.gather(-1, answers[:, None])[:, 0]
    picked = logits.gather(-1, answers)
    return picked[:, 0] - picked[:, 1]


def common_prefix(tokens: Sequence[Sequence[int]]) -> int:
    """How many first tokens every prompt shares, leaving each at least one of its own.

    >>> common_prefix([[1, 2, 3, 4], [1, 2, 5], [1, 2, 3]])
    2
    """
    first, limit = tokens[0], min(map(len, tokens)) - 1
    shared = 0
    while shared < limit and all(ids[shared] == first[shared] for ids in tokens):
        shared += 1
    return shared


def prefix_pays(tokens: Sequence[Sequence[int]], shared: int, batch_size: int) -> bool:
    """Whether the shared-prefix path costs fewer token-layers than running every prompt from
    each head's layer on: per layer, the prefix once per head plus every suffix from the first
    layer, against every whole prompt from the head's layer on (half the layers on average)."""
    batch = min(batch_size, len(tokens))
    suffix = max(map(len, tokens)) - shared
    whole = shared + suffix
    return shared + batch * suffix < batch * whole / 2


def _prefix_effects(
    model: ModelLike,
    tokens: Sequence[Sequence[int]],
    shared: int,
    answer_ids: Tensor,
    full: Tensor,
    baselines: dict[str, Tensor | None],
    config: EffectsConfig,
    progress: bool,
) -> dict[str, Tensor]:
    """The effects with the common prefix computed once per (layer, head, ablation): a cached
    forward of the prefix, one row per head of the layer, each removing its head; then every
    prompt's own tokens after it from that cache (rows head-major: row ``h * B + b``), read at
    the last residual stream (the answer's logit from it alone)."""
    import copy

    from lens_heads.core.internal import cached_step

    n_layers, n_heads = head_shape(model)
    device = model.cfg.device
    pad = pad_token_id(model.tokenizer)
    prefix = torch.tensor([list(tokens[0][:shared])], device=device).repeat(n_heads, 1)
    last_hook = f"blocks.{n_layers - 1}.hook_resid_post"
    effects = {a: torch.zeros(n_layers, n_heads) for a in config.ablations}
    steps = [(layer, a) for layer in range(n_layers) for a in config.ablations]
    for layer, ablation in tqdm(steps, desc="single-head effects", disable=not progress):
        masks = torch.ones(n_heads, n_layers, n_heads)
        masks[torch.arange(n_heads), layer, torch.arange(n_heads)] = 0.0
        hooks = mask_hooks(masks, model, baseline=baselines[ablation])
        with torch.no_grad(), model.hooks(fwd_hooks=hooks):
            _, prefix_cache = cached_step(
                model, prefix, torch.ones(n_heads, shared, device=device), None, 1
            )
        for start in range(0, len(tokens), config.batch_size):
            chunk = [ids[shared:] for ids in tokens[start : start + config.batch_size]]
            batch, last = right_padded(chunk, pad)
            rows = len(chunk)
            suffix = batch.to(device).repeat(n_heads, 1)
            real = torch.arange(batch.shape[1])[None] <= last[:, None]
            attention = torch.cat(
                [torch.ones(rows, shared, dtype=torch.long), real.long()], dim=1
            ).repeat(n_heads, 1)
            cache = copy.deepcopy(prefix_cache)
            cache.batch_repeat_interleave(rows)
            seen: dict[str, Tensor] = {}
            positions = last.repeat(n_heads).to(device)

            def read(act: Tensor, hook: object, seen: dict = seen, at: Tensor = positions) -> None:
                seen["resid"] = act[torch.arange(len(act)), at]
                raise _Stop

            row_masks = masks.repeat_interleave(rows, dim=0)
            hooks = mask_hooks(row_masks, model, baseline=baselines[ablation])
            try:
                with torch.no_grad(), model.hooks(fwd_hooks=[*hooks, (last_hook, read)]):
                    cached_step(model, suffix, attention.to(device), cache, None)
            except _Stop:
                pass
            answers = _repeat(answer_ids[start : start + rows], n_heads)
            removed = _answer_logits(model, seen["resid"], answers).view(n_heads, rows)
            effects[ablation][layer] += (full[start : start + rows][None] - removed).sum(1).cpu()
    return {ablation: value / len(tokens) for ablation, value in effects.items()}


def _answer_ids(
    model: ModelLike, answers: Sequence[str | int], against: Sequence[str | int] | None
) -> Tensor:
    """The answers' first token ids ``[n]``, or ``[n, 2]`` beside the ``against`` ones."""
    ids = torch.tensor(target_token_ids(model, list(answers)))
    if against is None:
        return ids
    if len(against) != len(answers):
        raise InputError(f"give one counter-answer per answer ({len(answers)}, {len(against)})")
    return torch.stack([ids, torch.tensor(target_token_ids(model, list(against)))], dim=1)


def _repeat(values: Tensor, times: int) -> Tensor:
    """``values`` (rows of answer ids) repeated ``times`` times, one block after another."""
    return values.repeat(times) if values.ndim == 1 else values.repeat(times, 1)


def _full_answer_logits(
    model: ModelLike, tokens: Sequence[Sequence[int]], answer_ids: Tensor, batch_size: int
) -> Tensor:
    """The answer's logit at each prompt's last position (under whatever hooks are on)."""
    found = []
    pad = pad_token_id(model.tokenizer)
    for start in range(0, len(tokens), batch_size):
        batch, last = right_padded(tokens[start : start + batch_size], pad)
        with torch.no_grad():
            logits = model(batch.to(model.cfg.device))
        rows = torch.arange(len(last))
        answers = answer_ids[start : start + len(last)].to(logits.device)
        found.append(_picked(logits[rows, last].float(), answers).cpu())
    return torch.cat(found)


def single_head_effects(
    model: ModelLike,
    prompts: Sequence[PromptLike],
    answers: Sequence[str | int],
    config: EffectsConfig | None = None,
    *,
    reference: Sequence[PromptLike] | None = None,
    against: Sequence[str | int] | None = None,
    progress: bool = False,
    **options: Any,
) -> dict[str, Float[Tensor, "n_layers n_heads"]]:
    """The mean answer-logit drop of removing each head alone, per ablation of ``config`` (its
    fields also as keywords, ``ablations=("zero",)``; ``reference``: the prompts of the mean
    ablation's baseline, required for it; of the resample ablation's donors, matched by length).
    With ``against`` (one answer per prompt), the drop of the logit difference between each
    answer and its ``against``."""
    config = configure(EffectsConfig, config, options, "single_head_effects")
    if len(prompts) != len(answers) or not prompts:
        raise InputError(f"give one answer per prompt ({len(prompts)} prompts, {len(answers)})")
    n_layers, n_heads = head_shape(model)
    tokens = _encode(model, prompts)
    baselines = _baselines(model, config.ablations, reference, config.batch_size)
    if "resample" in config.ablations:
        donors = donor_prompts(tokens, _encode(model, reference or []))  # checked up front
    answer_ids = _answer_ids(model, answers, against)
    shared = common_prefix(tokens)
    use_prefix = config.shared_prefix
    if use_prefix is None:
        use_prefix = (
            "resample" not in config.ablations
            and shared > 0
            and prefix_pays(tokens, shared, config.batch_size)
        )
    if use_prefix and "resample" in config.ablations:
        raise InputError(
            "resample ablation replaces the shared prefix's outputs too: use shared_prefix=False"
        )
    if use_prefix and shared > 0:
        full = _full_answer_logits(model, tokens, answer_ids, config.batch_size)
        return _prefix_effects(model, tokens, shared, answer_ids, full, baselines, config, progress)
    effects = {a: torch.zeros(n_layers, n_heads) for a in config.ablations}
    last_hook = f"blocks.{n_layers - 1}.hook_resid_post"
    starts = range(0, len(tokens), config.batch_size)
    for start in tqdm(starts, desc="single-head effects", disable=not progress):
        chunk = tokens[start : start + config.batch_size]
        batch, last = right_padded(chunk, pad_token_id(model.tokenizer))
        rows = torch.arange(len(chunk))
        answers_chunk = answer_ids[start : start + len(chunk)]
        with torch.no_grad():
            _, cache = model.run_with_cache(
                batch.to(model.cfg.device),
                names_filter=lambda name: name.endswith("hook_resid_pre") or name == last_hook,
            )
        full = _answer_logits(model, cache[last_hook][rows, last], answers_chunk)
        if "resample" in config.ablations:  # rows: prompt-major, then head, as below
            chunk_donors = donors[start : start + len(chunk)]
            outputs = _donor_outputs(model, chunk_donors, batch.shape[1])
            baselines["resample"] = outputs.repeat_interleave(n_heads, dim=0)
        for layer in range(n_layers):
            resid = cache[f"blocks.{layer}.hook_resid_pre"]  # [batch, pos, d_model]
            stacked = resid.repeat_interleave(n_heads, dim=0)  # rows: prompt-major, then head
            masks = torch.ones(len(chunk) * n_heads, n_layers, n_heads)
            masks[torch.arange(len(masks)), layer, torch.arange(len(masks)) % n_heads] = 0.0
            positions = last.repeat_interleave(n_heads)
            for ablation in config.ablations:
                seen: dict[str, Tensor] = {}

                def read(
                    act: Tensor, hook: object, seen: dict = seen, positions: Tensor = positions
                ) -> None:
                    seen["resid"] = act[torch.arange(len(act)), positions.to(act.device)]
                    raise _Stop

                hooks = mask_hooks(masks, model, baseline=baselines[ablation])
                try:
                    with (
                        torch.no_grad(),
                        skipping_blocks(model, layer),
                        model.hooks(fwd_hooks=[*hooks, (last_hook, read)]),
                    ):
                        model(stacked, start_at_layer=layer)
                except _Stop:
                    pass
                removed = _answer_logits(
                    model, seen["resid"], answers_chunk.repeat_interleave(n_heads, dim=0)
                ).view(len(chunk), n_heads)
                effects[ablation][layer] += (full[:, None] - removed).sum(dim=0).cpu()
    return {ablation: value / len(tokens) for ablation, value in effects.items()}


def plain_single_head_effects(
    model: ModelLike,
    prompts: Sequence[PromptLike],
    answers: Sequence[str | int],
    config: EffectsConfig | None = None,
    *,
    reference: Sequence[PromptLike] | None = None,
    against: Sequence[str | int] | None = None,
    **options: Any,
) -> dict[str, Float[Tensor, "n_layers n_heads"]]:
    """The same effects the plain way: for each head and ablation, one hook and a full forward
    of every prompt (the reference of :func:`single_head_effects`)."""
    config = configure(EffectsConfig, config, options, "plain_single_head_effects")
    n_layers, n_heads = head_shape(model)
    tokens = _encode(model, prompts)
    answer_ids = _answer_ids(model, answers, against)
    width = max(map(len, tokens))

    def answer_logit(hooks: list) -> Tensor:  # every prompt in one batch
        with model.hooks(fwd_hooks=hooks):
            return _full_answer_logits(model, tokens, answer_ids, len(tokens))

    full = answer_logit([])
    baselines = _baselines(model, config.ablations, reference, config.batch_size)
    if "resample" in config.ablations:
        donors = donor_prompts(tokens, _encode(model, reference or []))
        baselines["resample"] = _donor_outputs(model, donors, width)
    effects = {}
    for ablation in config.ablations:
        baseline = baselines[ablation]
        found = torch.zeros(n_layers, n_heads)
        for layer in range(n_layers):
            for head in range(n_heads):
                mask = torch.ones(n_layers, n_heads)
                mask[layer, head] = 0.0
                removed = answer_logit(mask_hooks(mask, model, baseline=baseline))
                found[layer, head] = (full - removed).mean()
        effects[ablation] = found
    return effects
