"""One-by-one head removal (Heads up! Figures 2, 5, 8, 9): remove the heads of an order one at a
time and track, at every step, the target token's rank, the ranks of the originally most likely
tokens, the top-1 token, a greedy continuation and the hidden-state similarity to a reference run.

>>> import lens_heads as lh
>>> model = lh.tiny_model(n_layers=2, n_heads=4)
>>> weights = torch.linspace(-1.0, 1.0, 8).view(2, 4)  # e.g. trained mask logits W
>>> result = lh.removal_sweep(model, "apple", weights, target="A", max_new_tokens=2,
...                          reference_prompt="Capitalize: apple", progress=False)
>>> result.n_removed
[0, 1, 2, 3, 4, 5, 6, 7, 8]
>>> result.order[:3]
['L0H0', 'L0H1', 'L0H2']
>>> sorted(set(result.to_frame()["role"]))
['original', 'target']
>>> tuple(result.resid_similarity.shape)
(9, 2)

Step ``s`` evaluates the model with the first ``s`` heads of the order removed (their
``hook_z`` output multiplied by 0 through :func:`lens_heads.core.mask_hooks`); step 0 is the
full model. The batched engine evaluates many consecutive prefixes at once as per-example masks
``[batch, n_layers, n_heads]``: one forward pass per chunk for the ranks, logits, top-1 token and
the captured ``hook_resid_post``/``hook_attn_out`` at the last position, and one batched greedy
generation (:func:`lens_heads.core.greedy_generate`, KV cache) per chunk for the
continuations. It gives the same ranks, top-1 tokens and continuations as evaluating the steps one
by one (``engine="naive"``, used by the tests and the benchmark), and logits equal to float
rounding.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor
from tqdm.auto import tqdm

from lens_heads.core import (
    INSTRUCTION_TEMPLATE,
    HeadMask,
    InputError,
    PromptFormat,
    ablated,
    configure,
    format_head,
    greedy_generate,
    has_chat_template,
    head_shape,
    mask_hooks,
)
from lens_heads.core.internal import (
    ModelLike,
    ablation_baseline,
    check_context,
    check_prompt,
    check_top_k,
    encode_text,
    model_name,
    token_ranks,
)
from lens_heads.heads_up._sweep_config import SweepConfig
from lens_heads.heads_up._sweep_inputs import (
    Head,
    OrderLike,
    default_batch_size,
    prefix_masks,
    removal_order,
    resolve_target,
    sweep_steps,
)
from lens_heads.heads_up._sweep_result import SweepResult, plot_sweeps

__all__ = ["SweepResult", "plot_sweeps", "removal_sweep"]


# -- the two engines -----------------------------------------------------------------------------
@dataclass
class _Chunk:
    last_logits: Tensor  # [b, d_vocab] fp32
    resid: Tensor | None  # [b, n_layers, d_model]
    attn: Tensor | None
    outputs: list[list[int]]


def _capture_hooks(n_layers: int, store: dict[tuple[str, int], Tensor]) -> list[Any]:
    def make(kind: str, layer: int) -> Callable[..., None]:
        def hook(activation: Tensor, hook: Any) -> None:
            store[(kind, layer)] = activation[:, -1].detach().float().clone()

        return hook

    hooks = []
    for layer in range(n_layers):
        hooks.append((f"blocks.{layer}.hook_resid_post", make("resid", layer)))
        hooks.append((f"blocks.{layer}.hook_attn_out", make("attn", layer)))
    return hooks


@torch.inference_mode()
def _forward(
    model: ModelLike,
    tokens: Tensor,
    mask: HeadMask | Tensor | None,
    capture: bool,
) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """Last-position logits (and captured hidden states) of ``tokens`` [b, pos] under ``mask``."""
    n_layers = head_shape(model)[0]
    store: dict[tuple[str, int], Tensor] = {}
    hooks = [] if mask is None else mask_hooks(mask, model)
    if capture:
        hooks += _capture_hooks(n_layers, store)
    logits = model.run_with_hooks(tokens, fwd_hooks=hooks)
    last = logits[:, -1].float().clone()
    if not capture:
        return last, None, None
    resid = torch.stack([store[("resid", layer)] for layer in range(n_layers)], dim=1)
    attn = torch.stack([store[("attn", layer)] for layer in range(n_layers)], dim=1)
    return last, resid, attn


def _batched_chunks(
    model: ModelLike,
    prompt_ids: list[int],
    masks: Tensor,
    *,
    capture: bool,
    generate_tokens: int,
    batch_size: int,
) -> Iterator[tuple[int, _Chunk]]:
    """Many steps at once: a chunk of per-example masks per forward pass and per generation."""
    n = masks.shape[0]
    n_chunks = math.ceil(n / batch_size)
    size = math.ceil(n / n_chunks)  # balanced chunks (no small remainder)
    device = model.cfg.device
    for start in range(0, n, size):
        chunk = masks[start : start + size]
        tokens = torch.tensor([prompt_ids], dtype=torch.long, device=device)
        tokens = tokens.expand(chunk.shape[0], -1).contiguous()
        last, resid, attn = _forward(model, tokens, chunk, capture)
        outputs: list[list[int]] = [[] for _ in range(chunk.shape[0])]
        if generate_tokens > 0:
            outputs = greedy_generate(
                model,
                [prompt_ids] * chunk.shape[0],
                max_new_tokens=generate_tokens,
                mask=chunk,
                batch_size=chunk.shape[0],
            )
        yield chunk.shape[0], _Chunk(last, resid, attn, outputs)


def _naive_chunks(
    model: ModelLike,
    prompt_ids: list[int],
    masks: Tensor,
    *,
    capture: bool,
    generate_tokens: int,
    batch_size: int,
) -> Iterator[tuple[int, _Chunk]]:
    """The reference loop: every step on its own, with a shared :class:`HeadMask`."""
    del batch_size
    tokens = torch.tensor([prompt_ids], dtype=torch.long, device=model.cfg.device)
    for values in masks:
        mask = HeadMask(values)
        last, resid, attn = _forward(model, tokens, mask, capture)
        outputs: list[list[int]] = [[]]
        if generate_tokens > 0:
            outputs = greedy_generate(
                model, [prompt_ids], max_new_tokens=generate_tokens, mask=mask, batch_size=1
            )
        yield 1, _Chunk(last, resid, attn, outputs)


def _influence_order(
    model: ModelLike,
    prompt_ids: list[int],
    base: list[Head],
    k: int,
    target_id: int,
    batch_size: int,
    engine: Callable[..., Iterator[tuple[int, _Chunk]]],
) -> tuple[list[Head], dict[str, int]]:
    """Appendix C.3.1: re-order the first ``k`` heads of ``base`` by the rank gain of the
    target when each is removed alone (descending; ties keep the base order)."""
    shape = head_shape(model)
    candidates = base[:k]
    singles = torch.ones((len(candidates) + 1, *shape))
    for row, (layer, head) in enumerate(candidates, start=1):
        singles[row, layer, head] = 0.0
    target = torch.tensor([target_id])
    ranks: list[int] = []
    chunks = engine(
        model, prompt_ids, singles, capture=False, generate_tokens=0, batch_size=batch_size
    )
    for _, chunk in chunks:
        ranks += token_ranks(chunk.last_logits, target)[:, 0].tolist()
    full = ranks[0]
    gains = {
        format_head(*head): full - rank for head, rank in zip(candidates, ranks[1:], strict=True)
    }
    ordered = sorted(
        range(len(candidates)), key=lambda i: -gains[format_head(*candidates[i])]
    )  # sorted() is stable: equal gains keep the base order
    return [candidates[i] for i in ordered] + base[k:], gains


def removal_sweep(
    model: ModelLike,
    prompt: str,
    order: OrderLike,
    config: SweepConfig | None = None,
    *,
    target: str | int | None = None,
    reference_prompt: str | None = None,
    instruction: str | None = None,
    ablation_prompts: Sequence[str] | None = None,
    **overrides: Any,
) -> SweepResult:
    """Remove the heads of ``order`` one by one and record what the model predicts at each step.

    ``config`` (a :class:`SweepConfig`; its fields also as keywords, ``every=2``) says how.

    * ``order``: trained weights -- a :class:`~lens_heads.MaskTrainingResult`, its ``W``
      ``[n_layers, n_heads]``, a ``train-mask`` output folder or a soft :class:`HeadMask` (every
      head, removed in ascending weight: the paper's default; equal weights in head-index order;
      a binary mask gives no order and is refused, naming the fix),
      a list of heads (``["L3H7", "L0H1"]`` or ``(layer, head)`` pairs, removed in that order),
      or ``"influential"`` (Appendix C.3.1; needs ``target``): the heads ordered by the gain in
      the target's rank each one causes when removed alone from the full model, largest first.
      ``influential_k=k`` applies that re-ordering to the first ``k`` heads of any order (with
      ``"influential"`` the candidates are all heads, or the first ``k`` in index order).
    * At step ``s`` the first ``s`` heads are removed (step 0: the full model); with ``every=k``
      only every ``k``-th step is evaluated, plus the last.
    * ``target``: a string (its first token, in context: see :func:`resolve_target`) or a token
      id; ``track_top_k``: how many of the full model's most likely tokens to track besides it.
    * ``reference_prompt``: the full model runs it once; every step then records the cosine
      similarity of each layer's decoder and attention output at the last position (Figure 5).
      ``instruction`` builds it instead: ``prompt`` under that instruction in the toolkit's
      instruction template (Table 10), as every other function takes an instruction.
    * ``max_new_tokens``: greedy continuation length per step (0: none).
    * ``chat``: wrap the prompt(s) in the model's chat template (default: when it has one).
    * ``batch_size``: steps evaluated together (default :func:`default_batch_size`); results do
      not depend on it.
    * ``ablation``: a removed head outputs zero (default), or with ``"mean"`` its mean output
      over ``ablation_prompts`` (e.g. the task's training inputs, rendered like ``prompt``), or
      with ``"resample"`` (and ``max_new_tokens=0``) its output on the first of them with as
      many tokens as ``prompt``.
    * ``engine``: ``"batched"`` (default) or ``"naive"``, the reference loop that evaluates and
      generates each step on its own (same results, several times slower; for checking).

    >>> import lens_heads as lh
    >>> model = lh.tiny_model(n_layers=2, n_heads=4)
    >>> result = removal_sweep(model, "hi", ["L1H0", "L0H3"], target=72, max_new_tokens=0,
    ...                        progress=False)
    >>> result.n_removed, result.removed_heads
    ([0, 1, 2], ['', 'L1H0', 'L0H3'])
    """
    config = configure(SweepConfig, config, overrides, "removal_sweep")
    check_prompt(prompt, "the prompt")
    if instruction is not None:
        if reference_prompt is not None:
            raise InputError("give reference_prompt or instruction (which builds it), not both")
        check_prompt(instruction, "the instruction")
        reference_prompt = INSTRUCTION_TEMPLATE.format(instruction=instruction, input=prompt)
    if ablation_prompts is not None and config.ablation == "zero":
        raise InputError(
            "ablation_prompts are the reference of a mean or resample ablation: pass "
            "ablation='mean' or 'resample'"
        )
    chat = has_chat_template(model.tokenizer) if config.chat is None else config.chat
    encoded = [encode_text(model.tokenizer, p, chat=chat) for p in ablation_prompts or ()]
    tokens = encode_text(model.tokenizer, prompt, chat=chat)
    baseline = ablation_baseline(
        model, config.ablation, encoded, where="removal_sweep", tokens=tokens
    )
    with ablated(model, baseline):
        result = _removal_sweep(model, prompt, order, target, reference_prompt, config)
    result.metadata.update(
        ablation=config.ablation,
        ablation_prompts=0 if ablation_prompts is None else len(ablation_prompts),
    )
    return result


def _removal_sweep(
    model: ModelLike,
    prompt: str,
    order: OrderLike,
    target: str | int | None,
    reference_prompt: str | None,
    config: SweepConfig,
) -> SweepResult:
    if reference_prompt is not None:
        check_prompt(reference_prompt, "reference_prompt (None skips the similarity)")
    track_top_k, generate_tokens = config.track_top_k, config.max_new_tokens
    every, batch_size, influential_k = config.every, config.batch_size, config.influential_k
    engine = config.engine
    chat = has_chat_template(model.tokenizer) if config.chat is None else config.chat
    if target is None and track_top_k == 0:
        raise InputError("nothing to track: pass target= or track_top_k > 0")
    if track_top_k:
        check_top_k(model, track_top_k, "track_top_k")
    run_chunks = _ENGINES[engine]
    started = time.perf_counter()
    tokenizer = model.tokenizer
    shape = head_shape(model)
    prompt_ids = encode_text(tokenizer, prompt, chat=chat)
    check_context(model, len(prompt_ids), new_tokens=generate_tokens, what=f"the prompt {prompt!r}")
    if reference_prompt is not None:  # before any compute
        check_context(
            model,
            len(encode_text(tokenizer, reference_prompt, chat=chat)),
            what="the reference prompt",
        )
    prompt_text = PromptFormat(chat=True).render(prompt, tokenizer) if chat else prompt
    target_id = None
    if target is not None:
        d_vocab = int(model.cfg.d_vocab)
        target_id = resolve_target(tokenizer, prompt_text, target, chat=chat, d_vocab=d_vocab)
    influential = isinstance(order, str) and order == "influential"
    if influential:
        heads = [(layer, head) for layer in range(shape[0]) for head in range(shape[1])]
    else:
        heads = removal_order(model, order)
    if batch_size is None:
        batch_size = default_batch_size(model, len(prompt_ids) + generate_tokens)
    gains: dict[str, int] = {}
    if influential or influential_k is not None:
        if target_id is None:
            raise InputError("the influential order ranks heads by the target's rank: pass target=")
        k = len(heads) if influential_k is None else min(influential_k, len(heads))
        heads, gains = _influence_order(
            model, prompt_ids, heads, k, target_id, batch_size, run_chunks
        )

    steps = sweep_steps(len(heads), every)
    rows = _Rows(reference=_reference_states(model, reference_prompt, chat))
    bar = tqdm(total=len(steps), desc="removal sweep", disable=not config.progress, leave=False)
    try:
        chunks = run_chunks(
            model,
            prompt_ids,
            prefix_masks(heads, steps, shape),
            capture=reference_prompt is not None,
            generate_tokens=generate_tokens,
            batch_size=batch_size,
        )
        for count, chunk in chunks:
            rows.add(chunk, target_id, track_top_k)
            bar.update(count)
    finally:
        bar.close()
    assert rows.tracked is not None
    token_ids = [int(i) for i in rows.tracked.tolist()]
    roles = [
        "target" if i == 0 and target_id is not None else "original" for i in range(len(token_ids))
    ]
    order_kind = "list" if isinstance(order, Sequence) and not isinstance(order, str) else "weights"
    metadata = {
        "chat": chat,
        "every": every,
        "max_new_tokens": generate_tokens,
        "track_top_k": track_top_k,
        "batch_size": batch_size,
        "engine": engine,
        "order_kind": "influential" if influential else order_kind,
        "influential_k": influential_k,
        "influence_gain": gains,
        "prompt_tokens": len(prompt_ids),
        "seconds": round(time.perf_counter() - started, 3),
    }
    return SweepResult(
        model=model_name(model),
        prompt=prompt,
        order=[format_head(*head) for head in heads],
        n_removed=steps,
        token_ids=token_ids,
        tokens=[tokenizer.decode([i]) for i in token_ids],
        roles=roles,
        ranks=torch.cat(rows.ranks).long(),
        logits=torch.cat(rows.logits).float(),
        top1_ids=[int(i) for i in rows.top1],
        top1_tokens=[tokenizer.decode([i]) for i in rows.top1],
        output_ids=[[int(t) for t in row] for row in rows.outputs],
        outputs=[tokenizer.decode(row, skip_special_tokens=True) for row in rows.outputs],
        target=None if target is None else str(target),
        target_id=target_id,
        reference_prompt=reference_prompt,
        resid_similarity=torch.cat(rows.resid) if rows.resid else None,
        attn_similarity=torch.cat(rows.attn) if rows.attn else None,
        metadata=metadata,
    )


def _reference_states(
    model: ModelLike, reference_prompt: str | None, chat: bool
) -> tuple[Tensor, Tensor] | None:
    """The full model's decoder and attention outputs ``[n_layers, d]`` at the reference
    prompt's last position (what every step is compared with, Figure 5)."""
    if reference_prompt is None:
        return None
    reference_ids = encode_text(model.tokenizer, reference_prompt, chat=chat)
    tokens = torch.tensor([reference_ids], dtype=torch.long, device=model.cfg.device)
    _, resid, attn = _forward(model, tokens, None, capture=True)
    assert resid is not None and attn is not None
    return resid[0], attn[0]


@dataclass
class _Rows:
    """What the sweep records, chunk after chunk of steps."""

    reference: tuple[Tensor, Tensor] | None
    tracked: Tensor | None = None
    ranks: list[Tensor] = field(default_factory=list)
    logits: list[Tensor] = field(default_factory=list)
    top1: list[int] = field(default_factory=list)
    outputs: list[list[int]] = field(default_factory=list)
    resid: list[Tensor] = field(default_factory=list)
    attn: list[Tensor] = field(default_factory=list)

    def add(self, chunk: _Chunk, target_id: int | None, track_top_k: int) -> None:
        if self.tracked is None:  # the first chunk starts with step 0: the full model
            self.tracked = _tracked_ids(chunk.last_logits[0], target_id, track_top_k)
        self.ranks.append(token_ranks(chunk.last_logits, self.tracked))
        self.logits.append(chunk.last_logits[:, self.tracked])
        self.top1 += chunk.last_logits.argmax(dim=-1).tolist()
        self.outputs += chunk.outputs
        if self.reference is not None and chunk.resid is not None and chunk.attn is not None:
            self.resid.append(_cosine(chunk.resid, self.reference[0]))
            self.attn.append(_cosine(chunk.attn, self.reference[1]))


def _tracked_ids(full_logits: Tensor, target_id: int | None, k: int) -> Tensor:
    """The target (first) and the ``k`` most likely other tokens of the full model."""
    ranked = torch.argsort(full_logits, descending=True, stable=True)[: k + 1].tolist()
    originals = [i for i in ranked if i != target_id][:k]
    ids = ([] if target_id is None else [target_id]) + originals
    return torch.tensor(ids, dtype=torch.long)


def _cosine(states: Tensor, reference: Tensor) -> Tensor:
    """Cosine similarity ``[b, n_layers]`` of ``states`` [b, L, d] with ``reference`` [L, d]."""
    return torch.nn.functional.cosine_similarity(states, reference[None], dim=-1)


_ENGINES = {"batched": _batched_chunks, "naive": _naive_chunks}
