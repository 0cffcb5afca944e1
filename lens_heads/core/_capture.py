"""Activation capture: what the logit lens, the hidden-state similarity and the removal sweep
share.

* :func:`layer_activations` -- ``{hook: [batch, n_layers, d_model]}``: ``blocks.{l}.<hook>``
  of every layer at one position of each prompt (default: the last), in batched forward passes
  under an optional shared or per-example head mask.
* :func:`cosine_by_layer` -- cosine similarity of two such stacks, per layer.
* :func:`lens_logits` -- residual-stream vectors through the final norm and the unembedding
  (the HeadsUp reference skipped the final norm; here it is on by default).
* :func:`encode_prompt` -- a text prompt rendered like :func:`lens_heads.evaluate` renders it
  (bare or instructed, chat template or not), with the character offset of the raw input.
* :func:`run_stack` -- one :class:`Run` (prompt, mask, instruction) captured at one position.

>>> import lens_heads as lh
>>> model = lh.tiny_model(n_layers=2, n_heads=4)
>>> acts = layer_activations(model, ["apple", "a pear"])
>>> tuple(acts["hook_resid_post"].shape), tuple(acts["hook_attn_out"].shape)
((2, 2, 64), (2, 2, 64))
>>> cosine_by_layer(acts["hook_resid_post"], acts["hook_resid_post"]).round(decimals=4).tolist()
[[1.0, 1.0], [1.0, 1.0]]

A prompt is the raw input text (``"apple"``): with ``chat`` (default: when the tokenizer has a
chat template) it is wrapped in the chat template, with ``instruction`` it is first put into
the instruction template of HeadsUp Table 10; token ids (a list or a 1-D tensor) are used as
they are. A *run* is ``(prompt, mask)`` or ``(prompt, mask, instruction)`` or a :class:`Run`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor
from tqdm.auto import tqdm

from lens_heads.core._checks import check_context, own_checks, resolve_mask
from lens_heads.core._errors import ComputationError, InputError, InputTypeError
from lens_heads.core._guards import check_pattern_capture, reads_patterns
from lens_heads.core._hooks import MaskLike, mask_hooks
from lens_heads.core._masks import HeadMask, MaskShapeError, stack_masks
from lens_heads.core._models import ModelLike
from lens_heads.core._prompts import PromptFormat, has_chat_template, pad_token_id

__all__ = [
    "DEFAULT_HOOKS",
    "HOOK_LABELS",
    "EncodedPrompt",
    "PromptLike",
    "Run",
    "capture",
    "check_mask",
    "cosine_by_layer",
    "encode_prompt",
    "layer_activations",
    "lens_logits",
    "resolve_position",
    "run_stack",
    "target_token_ids",
]

#: Decoder-layer outputs and attention outputs: the two lines of Figure 4.
DEFAULT_HOOKS: tuple[str, ...] = ("hook_resid_post", "hook_attn_out")
HOOK_LABELS = {"hook_resid_post": "decoder", "hook_attn_out": "attention"}

PromptLike = str | Sequence[int] | Tensor
MaskArg = MaskLike | Sequence[HeadMask] | None


# -- prompts -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EncodedPrompt:
    """A prompt as the model sees it.

    ``text`` is the rendered prompt (chat template, instruction), ``input_start`` the character
    offset of the raw input inside it (None for token-id prompts or when a chat template
    rewrote the input), ``offsets`` the ``(start, end)`` characters of each token in ``text``
    (when requested).
    """

    tokens: list[int]
    text: str
    raw: str
    input_start: int | None = None
    offsets: list[tuple[int, int]] | None = None


def _chat_default(tokenizer: Any, chat: bool | None) -> bool:
    return has_chat_template(tokenizer) if chat is None else bool(chat)


def _input_start(fmt: PromptFormat, tokenizer: Any, raw: str, rendered: str) -> int | None:
    """Where the raw input sits in the rendered prompt: render a placeholder instead and check
    that the template copies the input verbatim; else the last occurrence (or None)."""
    placeholder = "\ue000lens-heads-input\ue000"
    probe = fmt.render(placeholder, tokenizer)
    if probe.count(placeholder) == 1:
        prefix, suffix = probe.split(placeholder)
        if prefix + raw + suffix == rendered:
            return len(prefix)
    found = rendered.rfind(raw)
    return None if found < 0 else found


def encode_prompt(
    model: ModelLike,
    prompt: PromptLike,
    *,
    chat: bool | None = None,
    instruction: str | None = None,
    offsets: bool = False,
) -> EncodedPrompt:
    """Render and tokenize one prompt like :func:`lens_heads.evaluate` does.

    Text goes through ``PromptFormat(chat=chat, instruction=instruction).render`` (``chat``
    default: when the tokenizer has a chat template) and is tokenized without special tokens
    when chat-templated, with the tokenizer's defaults (e.g. Gemma's BOS) otherwise.

    >>> import lens_heads as lh
    >>> model = lh.tiny_model()
    >>> encoded = encode_prompt(model, "apple", instruction="Capitalize.")
    >>> encoded.text[encoded.input_start:encoded.input_start + 5]
    'apple'
    """
    tokenizer = model.tokenizer
    if isinstance(prompt, Tensor):
        if prompt.ndim != 1:
            raise InputError(f"a token prompt must be 1-D, got shape {tuple(prompt.shape)}")
        prompt = [int(t) for t in prompt.tolist()]
    if not isinstance(prompt, str):
        tokens = [int(t) for t in prompt]
        if not tokens:
            raise InputError("the prompt is empty (no token ids); pass at least one token")
        if instruction is not None:
            raise InputError("an instruction needs a text prompt, not token ids")
        vocab = int(model.cfg.d_vocab)
        bad = [t for t in tokens if not 0 <= t < vocab]
        if bad:
            raise InputError(f"token ids {bad[:5]} are outside the vocabulary [0, {vocab})")
        check_context(model, len(tokens), what="the token prompt")
        return EncodedPrompt(tokens, tokenizer.decode(tokens), "")
    if not prompt:
        raise InputError("the prompt is empty; pass the input text, e.g. 'apple'")
    chat = _chat_default(tokenizer, chat)
    fmt = PromptFormat(chat=chat, instruction=instruction)
    text = fmt.render(prompt, tokenizer)
    encoding = tokenizer(text, add_special_tokens=not chat, return_offsets_mapping=offsets)
    tokens = list(encoding.input_ids)
    spans = [tuple(pair) for pair in encoding.offset_mapping] if offsets else None
    eos = tokenizer.eos_token_id
    if not chat and eos is not None and len(tokens) > 1 and tokens[-1] == eos:
        tokens = tokens[:-1]  # tokenizers that append EOS: the prompt continues, it does not end
        spans = spans[:-1] if spans is not None else None
    check_context(model, len(tokens), what=f"the prompt {_shorten(prompt)}")
    start = _input_start(fmt, tokenizer, prompt, text)
    return EncodedPrompt(tokens, text, prompt, start, spans)  # type: ignore[arg-type]


def _shorten(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")


def resolve_position(position: int, length: int, what: str = "the prompt") -> int:
    if not -length <= position < length:
        raise InputError(
            f"position {position} is out of range for {what} of {length} tokens (valid: "
            f"{-length} .. {length - 1}; -1 is the last token)"
        )
    return position % length


# -- runs ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Run:
    """One forward pass to compare: a prompt, an optional head mask and instruction.

    ``name`` defaults to ``original``, ``instructed``, ``masked`` or ``masked+instructed``.

    >>> Run("apple", instruction="Capitalize the word.").label
    'instructed'
    """

    prompt: PromptLike
    mask: MaskLike | None = None
    """The mask: any form :func:`~lens_heads.core.resolve_mask` takes, read as a HeadMask."""
    instruction: str | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "mask", resolve_mask(self.mask, tensors=True))

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        base = "original" if self.mask is None else "masked"
        if self.instruction is None:
            return base
        return "instructed" if self.mask is None else "masked+instructed"

    @classmethod
    def of(cls, spec: Any) -> Run:
        """A :class:`Run` from ``Run``, a prompt, ``(prompt, mask)`` or
        ``(prompt, mask, instruction)``."""
        if isinstance(spec, Run):
            return spec
        if isinstance(spec, (str, Tensor)):
            return cls(spec)
        if isinstance(spec, tuple) and 1 <= len(spec) <= 3:
            return cls(*spec)
        raise InputTypeError(
            f"a run is (prompt, mask), (prompt, mask, instruction) or a Run, got {spec!r:.80}"
        )


def check_mask(model: ModelLike, mask: Any) -> None:
    """Fail early (naming the model) when a mask does not fit ``model``."""
    mask = resolve_mask(mask, tensors=True)
    if mask is None:
        return
    if isinstance(mask, HeadMask):
        mask.check_model(model)
        return
    if isinstance(mask, Tensor):
        mask_hooks(mask, model)
        return
    raise InputTypeError(f"expected a HeadMask or a [n_layers, n_heads] tensor, got {type(mask)}")


# -- capture -------------------------------------------------------------------------------------
Reducer = Callable[[Tensor, Tensor, Tensor, Sequence[int]], Tensor]


def _per_example_factor(mask: MaskArg, batch: int) -> Tensor | HeadMask | None:
    if not isinstance(mask, Sequence) or isinstance(mask, str):  # one mask, in any form
        mask = resolve_mask(mask, tensors=True)
    if mask is None or isinstance(mask, (HeadMask, Tensor)):
        if isinstance(mask, Tensor) and mask.ndim == 3 and mask.shape[0] != batch:
            raise MaskShapeError(
                f"per-example mask has batch {mask.shape[0]} but there are {batch} prompts"
            )
        return mask
    masks = list(mask)
    if len(masks) != batch:
        raise MaskShapeError(f"{len(masks)} masks given for {batch} prompts; give one per prompt")
    return stack_masks(masks)


def capture(
    model: ModelLike,
    tokens: Sequence[Sequence[int]],
    positions: Sequence[int],
    reducers: Mapping[str, Reducer],
    *,
    mask: MaskArg = None,
    batch_size: int = 16,
    progress: bool = False,
) -> dict[str, Tensor]:
    """Run right-padded batches (no attention mask is needed: causal attention never lets a
    real token see the pads after it) and reduce each hooked activation with
    ``reducer(act, rows, cols, indices)``: ``rows``/``cols`` index the batch rows and their
    positions, ``indices`` are the prompts' global indices. Results are concatenated."""
    if batch_size < 1:
        raise InputError(f"batch_size must be positive, got {batch_size}")
    if reads_patterns(reducers):
        check_pattern_capture(model)  # once per model: hook_pattern = eager attention weights
    factor = _per_example_factor(mask, len(tokens))
    if factor is not None:
        mask_hooks(factor, model)  # shape check against the model, with a clear error
    pad_id = pad_token_id(model.tokenizer)
    device = model.cfg.device
    outputs: dict[str, list[Tensor]] = {name: [] for name in reducers}
    starts = range(0, len(tokens), batch_size)
    for start in tqdm(starts, desc="forward", disable=not progress or len(starts) < 2):
        indices = list(range(start, min(start + batch_size, len(tokens))))
        width = max(len(tokens[i]) for i in indices)
        batch = torch.full((len(indices), width), pad_id, dtype=torch.long)
        for row, i in enumerate(indices):
            batch[row, : len(tokens[i])] = torch.tensor(list(tokens[i]), dtype=torch.long)
        rows = torch.arange(len(indices))
        cols = torch.tensor([positions[i] for i in indices])
        hooks: list[tuple[str, Callable[..., Any]]] = []
        if factor is not None:
            chunk = factor
            if isinstance(factor, Tensor) and factor.ndim == 3:
                chunk = factor[indices[0] : indices[-1] + 1]
            hooks += mask_hooks(chunk, model)

        def make(
            name: str,
            reducer: Reducer,
            rows: Tensor = rows,
            cols: Tensor = cols,
            indices: list[int] = indices,
        ) -> Callable[..., None]:
            def hook(activation: Tensor, hook: Any) -> None:
                outputs[name].append(
                    reducer(
                        activation.detach(),
                        rows.to(activation.device),
                        cols.to(activation.device),
                        indices,
                    ).cpu()
                )

            return hook

        hooks += [(name, make(name, reducer)) for name, reducer in reducers.items()]
        with torch.no_grad(), model.hooks(fwd_hooks=hooks):
            model(batch.to(device))
    missing = [name for name, values in outputs.items() if len(values) != len(starts)]
    if missing:
        raise ComputationError(
            f"hook(s) {missing[:3]} never fired; this model does not expose them (check the names "
            "with model.hook_dict)"
        )
    return {name: torch.cat(values) for name, values in outputs.items()}


def _at_position(activation: Tensor, rows: Tensor, cols: Tensor, indices: Sequence[int]) -> Tensor:
    return activation[rows, cols]


def _encode_all(
    model: ModelLike,
    prompts: PromptLike | Sequence[PromptLike],
    chat: bool | None,
    instruction: str | None,
) -> list[EncodedPrompt]:
    if isinstance(prompts, Tensor) and prompts.ndim == 2:
        return [encode_prompt(model, row) for row in prompts]
    if isinstance(prompts, (str, Tensor)) or (
        isinstance(prompts, Sequence) and prompts and isinstance(prompts[0], int)
    ):
        prompts = [prompts]  # type: ignore[list-item]
    if not prompts:
        raise InputError("no prompts given; pass at least one prompt")
    return [encode_prompt(model, p, chat=chat, instruction=instruction) for p in prompts]


def layer_activations(
    model: ModelLike,
    prompts: PromptLike | Sequence[PromptLike],
    *,
    mask: MaskArg = None,
    position: int = -1,
    hooks: Sequence[str] = DEFAULT_HOOKS,
    chat: bool | None = None,
    instruction: str | None = None,
    batch_size: int = 16,
    progress: bool = False,
) -> dict[str, Float[Tensor, "batch n_layers d_model"]]:
    """``blocks.{l}.<hook>`` of every layer at ``position`` of each prompt, as
    ``{hook: [batch, n_layers, d_model]}`` (detached, on the CPU, in the model's dtype).

    ``prompts``: one prompt or a list (text or token ids, see :func:`encode_prompt`) or a 2-D
    token tensor. ``position`` counts from each prompt's own start (or from its end when
    negative). ``mask``: a :class:`~lens_heads.HeadMask` or ``[n_layers, n_heads]`` tensor
    shared by every prompt, or one per prompt (a list of masks or a ``[batch, n_layers,
    n_heads]`` tensor) -- e.g. the same prompt repeated under each mask of a removal sweep.
    ``hooks`` are per-block hook names (``hook_resid_pre``, ``hook_resid_mid``,
    ``hook_resid_post``, ``hook_attn_out``, ``hook_mlp_out``).

    >>> import lens_heads as lh
    >>> model = lh.tiny_model(n_layers=2, n_heads=4)
    >>> masks = [lh.HeadMask.ones(model), lh.HeadMask.zeros(model)]
    >>> acts = layer_activations(model, ["apple"] * 2, mask=masks, hooks=["hook_resid_post"])
    >>> cosine_by_layer(acts["hook_resid_post"][0], acts["hook_resid_post"][1]).shape
    torch.Size([2])
    """
    if not hooks:
        raise InputError("no hooks given; e.g. hooks=('hook_resid_post', 'hook_attn_out')")
    encoded = _encode_all(model, prompts, chat, instruction)
    positions = [
        resolve_position(position, len(e.tokens), f"prompt {i} ({e.text[:30]!r})")
        for i, e in enumerate(encoded)
    ]
    n_layers = int(model.cfg.n_layers)
    names = {f"blocks.{layer}.{hook}": hook for hook in hooks for layer in range(n_layers)}
    captured = capture(
        model,
        [e.tokens for e in encoded],
        positions,
        dict.fromkeys(names, _at_position),
        mask=mask,
        batch_size=batch_size,
        progress=progress,
    )
    return {
        hook: torch.stack([captured[f"blocks.{layer}.{hook}"] for layer in range(n_layers)], dim=1)
        for hook in hooks
    }


@own_checks  # mismatched shapes are the ValueError below, with or without a runtime checker
def cosine_by_layer(
    a: Float[Tensor, "*a n_layers d_model"], b: Float[Tensor, "*b n_layers d_model"]
) -> Float[Tensor, "..."]:
    """Cosine similarity over ``d_model`` (in float32), broadcasting the leading dimensions:
    ``[n_layers]`` for two single runs, ``[batch, n_layers]`` for a batch against one run.

    >>> a = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    >>> cosine_by_layer(a, torch.tensor([[2.0, 0.0], [1.0, -1.0]])).tolist()
    [1.0, 0.0]
    """
    if a.shape[-1] != b.shape[-1] or a.shape[-2] != b.shape[-2]:
        raise InputError(
            f"activations of shapes {tuple(a.shape)} and {tuple(b.shape)} do not match in "
            "(n_layers, d_model)"
        )
    return F.cosine_similarity(a.float(), b.float(), dim=-1, eps=1e-12)


def lens_logits(
    model: ModelLike,
    resid: Float[Tensor, "*batch d_model"],
    *,
    apply_final_norm: bool = True,
) -> Float[Tensor, "*batch d_vocab"]:
    """Logits of residual-stream vectors: ``unembed(ln_final(resid))`` (and the model's final
    logit soft-cap, if any). Of the last layer's ``hook_resid_post`` these are the model's own
    logits; ``apply_final_norm=False`` reproduces the HeadsUp reference, which skipped the norm.

    >>> import lens_heads as lh
    >>> model = lh.tiny_model()
    >>> logits, cache = model.run_with_cache(model.to_tokens("hi"))
    >>> lens = lens_logits(model, cache["blocks.1.hook_resid_post"])
    >>> bool(torch.allclose(lens, logits, atol=1e-5))
    True
    """
    parameter = next(iter(model.parameters()), None)
    x = resid.to(parameter.dtype if parameter is not None else resid.dtype)
    if parameter is not None:
        x = x.to(parameter.device)
    if apply_final_norm:
        x = model.ln_final(x)
    logits = model.unembed(x)
    cap = float(getattr(model.cfg, "output_logits_soft_cap", -1.0) or -1.0)
    if cap > 0:
        logits = cap * torch.tanh(logits / cap)
    return logits


def target_token_ids(model: ModelLike, targets: Sequence[str | int]) -> list[int]:
    vocab = int(model.cfg.d_vocab)
    ids = []
    for target in targets:
        if isinstance(target, str):
            if not target:
                raise InputError("a target token is empty; give a word such as 'Apple'")
            encoded = model.tokenizer(target, add_special_tokens=False).input_ids
            if not encoded:
                raise InputError(f"target {target!r} encodes to no tokens")
            ids.append(int(encoded[0]))
        else:
            if not 0 <= int(target) < vocab:
                raise InputError(f"target id {target} is outside the vocabulary [0, {vocab})")
            ids.append(int(target))
    return ids


def run_stack(
    model: ModelLike,
    run: Run,
    *,
    position: int,
    chat: bool | None,
    hooks: Sequence[str],
) -> tuple[EncodedPrompt, int, dict[str, Tensor]]:
    """Encode one run and capture ``hooks`` of every layer at ``position``: ``[n_layers, d]``."""
    check_mask(model, run.mask)
    encoded = encode_prompt(model, run.prompt, chat=chat, instruction=run.instruction)
    absolute = resolve_position(position, len(encoded.tokens), f"the {run.label} prompt")
    acts = layer_activations(model, [encoded.tokens], mask=run.mask, position=absolute, hooks=hooks)
    return encoded, absolute, {hook: value[0] for hook, value in acts.items()}
