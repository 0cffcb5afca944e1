"""Gradient head importance (LAHIS): the gradient of the LM loss with respect to a head mask of
ones, one gradient per document, the model's weights frozen.

>>> import lens_heads as lh
>>> model = lh.tiny_model(n_layers=2, n_heads=4)
>>> result = lh.head_importance(model, ["hello world", "a b c d"], progress=False)
>>> tuple(result.scores.shape), tuple(result.gradients.shape), len(result.top(3))
((2, 4), (2, 2, 4), 3)

For each document ``d`` the loss ``L_d`` is the mean next-token cross-entropy over its tokens;
``g_d = dL_d / dm`` at ``m = 1`` (the multiplier on ``blocks.{l}.attn.hook_z``, through
:func:`lens_heads.mask_hooks`). Documents are right-padded into batches with one mask of ones
*per document* (``[batch, n_layers, n_heads]``), so one backward pass gives every document's own
gradient, equal to running it alone. Scores over documents:

- ``"lahis"``: ``mean |g| * P(g < 0)`` (the reference's score: heads whose removal would raise
  the loss for most documents, weighted by the gradient's size);
- ``"abs_grad"``: ``mean |g|`` (Michel et al. 2019);
- ``"taylor"``: ``mean g`` (signed first-order effect; removing head h changes the loss by about
  ``-g``).

Unlike the reference there is no optimiser step (the mask stays exactly 1 while it measures),
gradients accumulate in float32, and the weights get no gradient (``requires_grad`` is switched
off during the call and restored after).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor
from tqdm.auto import tqdm

from lens_heads.core import (
    HeadMask,
    LensHeadsError,
    answer_logits,
    configure,
    format_head,
    head_shape,
    markdown_table,
    mask_hooks,
    pad_token_id,
)
from lens_heads.core.internal import (
    BatchSetting,
    ComputationError,
    FolderResult,
    InputTypeError,
    MaskLike,
    ModelLike,
    NonFiniteError,
    PrecisionSetting,
    ProgressSetting,
    check_context,
    check_int,
    model_name,
    own_checks,
    partial_unembed_works,
)

__all__ = [
    "METHODS",
    "HeadImportance",
    "ImportanceConfig",
    "ImportanceInputError",
    "document_losses",
    "encode_documents",
    "head_importance",
    "scores_from_gradients",
]

Method = Literal["lahis", "abs_grad", "taylor"]
METHODS: tuple[str, ...] = ("lahis", "abs_grad", "taylor")

#: Tokens per batch when ``batch_size`` is None (documents are grouped by length).
TOKEN_BUDGET = 2048


class ImportanceInputError(LensHeadsError, ValueError):
    """The texts, method or settings given to an importance computation are unusable."""


def scores_from_gradients(
    gradients: Float[Tensor, "n_docs n_layers n_heads"], method: str = "lahis"
) -> Float[Tensor, "n_layers n_heads"]:
    """Head scores from per-document mask gradients (see the module docstring).

    >>> g = torch.tensor([[[-1.0, 2.0]], [[-3.0, -2.0]]])
    >>> scores_from_gradients(g, "lahis").tolist(), scores_from_gradients(g, "taylor").tolist()
    ([[2.0, 1.0]], [[-2.0, 0.0]])
    """
    if method not in METHODS:
        raise ImportanceInputError(f"method must be one of {list(METHODS)}, got {method!r}")
    gradients = gradients.double()
    if method == "abs_grad":
        scores = gradients.abs().mean(0)
    elif method == "taylor":
        scores = gradients.mean(0)
    else:
        scores = gradients.abs().mean(0) * (gradients < 0).double().mean(0)
    return scores.float()


# -- the result -------------------------------------------------------------------------------
@dataclass(repr=False)
class HeadImportance(FolderResult):
    """Per-head importance of a model on a set of documents.

    ``gradients[d, l, h]`` is document ``d``'s loss gradient with respect to head ``(l, h)``'s
    multiplier at 1; ``scores`` the ``method``'s aggregate.

    >>> result = HeadImportance.example()
    >>> result.top(2), result.to_frame().iloc[0]["label"]
    (['L1H0', 'L0H1'], 'L1H0')
    """

    scores: Float[Tensor, "n_layers n_heads"]
    gradients: Float[Tensor, "n_docs n_layers n_heads"]
    losses: Float[Tensor, " n_docs"]
    method: str
    model: str
    n_tokens: int
    meta: dict[str, Any] = field(default_factory=dict)

    _format: ClassVar[str] = "lens_heads.head_importance/1"

    @classmethod
    def example(cls) -> HeadImportance:
        """A small hand-made result (documentation and tests)."""
        gradients = torch.tensor([[[-0.1, -0.5], [-0.9, 0.2]], [[0.1, -0.3], [-0.7, 0.1]]])
        return cls(
            scores=scores_from_gradients(gradients),
            gradients=gradients,
            losses=torch.tensor([2.0, 3.0]),
            method="lahis",
            model="example",
            n_tokens=10,
        )

    @property
    def shape(self) -> tuple[int, int]:
        return int(self.scores.shape[0]), int(self.scores.shape[1])

    @property
    def n_docs(self) -> int:
        return int(self.gradients.shape[0])

    def with_method(self, method: str) -> HeadImportance:
        """The same gradients scored by another method (no model call)."""
        scores = scores_from_gradients(self.gradients, method)
        return HeadImportance(
            scores, self.gradients, self.losses, method, self.model, self.n_tokens, self.meta
        )

    def ranking(self) -> list[str]:
        """All head labels, most important first (ties in layer-major order)."""
        flat = self.scores.flatten()
        order = sorted(range(flat.numel()), key=lambda i: (-float(flat[i]), i))
        n_heads = self.shape[1]
        return [format_head(i // n_heads, i % n_heads) for i in order]

    def top(self, k: int) -> list[str]:
        """The ``k`` most important heads, as labels."""
        if not 0 <= k <= self.scores.numel():
            raise ImportanceInputError(f"k must lie in [0, {self.scores.numel()}], got {k}")
        return self.ranking()[:k]

    def top_fraction(self, fraction: float) -> list[str]:
        """The top ``fraction`` of heads (at least one), e.g. 0.02 for LAHIS's soft masks."""
        if not 0 < fraction <= 1:
            raise ImportanceInputError(f"fraction must lie in (0, 1], got {fraction}")
        return self.top(max(1, round(fraction * self.scores.numel())))

    def mask(self, k: int) -> HeadMask:
        """A binary mask selecting the top ``k`` heads."""
        n_layers, n_heads = self.shape
        return HeadMask.from_heads(self.top(k), n_layers=n_layers, n_heads=n_heads)

    def to_frame(self) -> pd.DataFrame:
        """One row per head, most important first: ``rank, label, layer, head, score,
        mean_grad, mean_abs_grad, frac_negative``."""
        grads = self.gradients.double()
        rows = []
        for rank, label in enumerate(self.ranking(), start=1):
            layer, head = (int(x) for x in label[1:].split("H"))
            g = grads[:, layer, head]
            rows.append(
                {
                    "rank": rank,
                    "label": label,
                    "layer": layer,
                    "head": head,
                    "score": float(self.scores[layer, head]),
                    "mean_grad": float(g.mean()),
                    "mean_abs_grad": float(g.abs().mean()),
                    "frac_negative": float((g < 0).double().mean()),
                }
            )
        return pd.DataFrame(rows)

    def to_markdown(self, k: int = 20) -> str:
        head = (
            f"Head importance ({self.method}) of {self.model} over {self.n_docs} documents "
            f"({self.n_tokens} scored tokens)\n\n"
        )
        return head + markdown_table(self.to_frame().head(k), floatfmt=".4g", index=False) + "\n"

    def plot_heatmap(self) -> Any:
        """Scores per layer x head."""
        from lens_heads.core.internal import head_score_figure

        return head_score_figure(
            self.scores[None],
            panels=[self.method],
            colorbar_title="importance",
            title=f"Head importance ({self.method}): {self.model}, {self.n_docs} documents",
        )

    def plot(self) -> Any:
        """Same as :meth:`plot_heatmap`."""
        return self.plot_heatmap()


# -- encoding and the batched loss ------------------------------------------------------------
def encode_documents(
    model: ModelLike, texts: Any, max_tokens: int | None = None
) -> list[list[int]]:
    """Token ids of each document (the tokenizer's own special tokens, e.g. Gemma's BOS),
    truncated to ``max_tokens``; a clear error for empty texts or documents under 2 tokens."""
    if isinstance(texts, str):
        raise ImportanceInputError("texts must be a list of documents, not one string")
    if not isinstance(texts, Sequence):
        raise InputTypeError(f"texts must be a list of documents, got {type(texts).__name__}")
    if len(texts) == 0:
        raise ImportanceInputError("texts is empty: give at least one document")
    if max_tokens is not None:
        check_int("max_tokens", max_tokens, minimum=2)  # the LM loss needs two tokens
    encoded = []
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise InputTypeError(f"document {index} must be a string, got {type(text).__name__}")
        if not text.strip():
            raise ImportanceInputError(f"document {index} is empty; remove it or give its text")
        ids = list(model.tokenizer(text).input_ids)
        if max_tokens is not None:
            ids = ids[:max_tokens]
        if len(ids) < 2:
            raise ImportanceInputError(
                f"document {index} ({text!r}) has {len(ids)} token(s); the LM loss needs at least 2"
            )
        what = f"document {index} ({text[:30]!r}; max_tokens truncates it)"
        check_context(model, len(ids), what=what)
        encoded.append(ids)
    return encoded


def _batches(lengths: Sequence[int], batch_size: int | None) -> list[list[int]]:
    """Document indices grouped by length (longest first) into batches."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:
        width = lengths[current[0]] if current else lengths[index]
        full = (
            len(current) >= batch_size
            if batch_size is not None
            else (len(current) + 1) * width > TOKEN_BUDGET
        )
        if current and full:
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches


def _pad(docs: Sequence[Sequence[int]], pad_id: int, device: Any) -> tuple[Tensor, Tensor]:
    width = max(len(doc) for doc in docs)
    tokens = torch.full((len(docs), width), pad_id, dtype=torch.long)
    valid = torch.zeros((len(docs), width), dtype=torch.bool)
    for row, doc in enumerate(docs):
        tokens[row, : len(doc)] = torch.tensor(doc, dtype=torch.long)
        valid[row, 1 : len(doc)] = True  # positions whose token is predicted
    return tokens.to(device), valid.to(device)


def _losses(
    model: ModelLike,
    tokens: Int[Tensor, "batch pos"],
    valid: Tensor,
    hooks: list[tuple[str, Callable[..., Any]]],
    partial: bool,
) -> Float[Tensor, " batch"]:
    """Per-document token-mean next-token CE (float32) of a right-padded batch."""

    logits = answer_logits(model, tokens, valid, hooks, partial=partial).float()
    ce = torch.nn.functional.cross_entropy(logits, tokens[valid], reduction="none")
    rows = valid.nonzero(as_tuple=True)[0]
    counts = valid.sum(1).to(ce.dtype)
    return torch.zeros(tokens.shape[0], device=ce.device).index_add(0, rows, ce) / counts


def _autocast(dtype: str, device: torch.device) -> Any:
    from lens_heads.core.internal import native_bf16

    if dtype not in ("auto", "float32", "bfloat16"):
        raise ImportanceInputError(f"dtype must be 'auto', 'float32' or 'bfloat16', got {dtype!r}")
    use_bf16 = dtype == "bfloat16" or (dtype == "auto" and native_bf16(device))
    return torch.autocast(device.type, dtype=torch.bfloat16) if use_bf16 else nullcontext()


def _device(model: ModelLike) -> torch.device:
    return torch.device(str(getattr(model.cfg, "device", "cpu") or "cpu"))


def document_losses(
    model: ModelLike,
    texts: Sequence[str],
    *,
    mask: MaskLike | None = None,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    dtype: str = "auto",
) -> Float[Tensor, " n_docs"]:
    """Mean next-token cross-entropy of each document (``exp`` of it is its perplexity), with
    an optional head mask or scale; batched with right padding, same numbers as one by one.

    >>> import lens_heads as lh
    >>> model = lh.tiny_model(n_layers=2, n_heads=4)
    >>> document_losses(model, ["hello", "a b c"]).shape
    torch.Size([2])
    """
    encoded = encode_documents(model, texts, max_tokens)
    device = _device(model)
    pad_id = pad_token_id(model.tokenizer)
    hooks = [] if mask is None else mask_hooks(mask, model)
    out = torch.empty(len(encoded))
    with torch.inference_mode(), _autocast(dtype, device):
        for batch in _batches([len(d) for d in encoded], batch_size):
            tokens, valid = _pad([encoded[i] for i in batch], pad_id, device)
            out[batch] = _losses(model, tokens, valid, hooks, partial=False).float().cpu()
    return out


# -- the computation -----------------------------------------------------------------------
@own_checks
@dataclass(frozen=True, kw_only=True)
class ImportanceConfig(
    ProgressSetting, PrecisionSetting, BatchSetting.with_defaults(batch_size=None)
):
    """How :func:`head_importance` scores the heads (``batch_size``: documents per pass; None
    groups them by length, about ``TOKEN_BUDGET`` tokens a pass)."""

    method: str = "lahis"
    """The score from each head's gradient: lahis (the paper's), abs_grad or taylor."""
    max_tokens: int | None = None
    """Cut longer documents to this many tokens (None: keep them whole)."""

    RENAMED: ClassVar[dict[str, str]] = {"dtype": "precision"}

    def __post_init__(self) -> None:
        super().__post_init__()  # the shared parts' checks
        if self.method not in METHODS:
            raise ImportanceInputError(
                f"method must be one of {list(METHODS)}, got {self.method!r}"
            )
        if self.max_tokens is not None:  # the language-model loss needs two tokens
            check_int("max_tokens", self.max_tokens, minimum=2)


def head_importance(
    model: ModelLike,
    texts: Sequence[str],
    config: ImportanceConfig | None = None,
    **overrides: Any,
) -> HeadImportance:
    """Gradient importance of every head on ``texts`` (see the module docstring); ``config`` is
    an :class:`ImportanceConfig` (its fields also as keywords: ``precision="float32"``). The
    model's weights get no gradient.
    """
    config = configure(ImportanceConfig, config, overrides, "head_importance")
    method, batch_size, max_tokens = config.method, config.batch_size, config.max_tokens
    dtype, progress = config.precision, config.progress
    encoded = encode_documents(model, texts, max_tokens)
    device = _device(model)
    n_layers, n_heads = head_shape(model)
    pad_id = pad_token_id(model.tokenizer)
    parameters = list(model.parameters()) if callable(getattr(model, "parameters", None)) else []
    trainable = [p for p in parameters if p.requires_grad]
    had_grad = {id(p) for p in parameters if p.grad is not None}
    gradients = torch.zeros(len(encoded), n_layers, n_heads, dtype=torch.float32)
    losses = torch.zeros(len(encoded), dtype=torch.float32)
    batches = _batches([len(d) for d in encoded], batch_size)

    for parameter in trainable:
        parameter.requires_grad_(False)
    try:
        first_tokens, first_valid = _pad([encoded[i] for i in batches[0][:2]], pad_id, device)
        partial = partial_unembed_works(model, first_tokens, first_valid)
        for batch in tqdm(batches, desc="head importance", disable=not progress):
            tokens, valid = _pad([encoded[i] for i in batch], pad_id, device)
            ones = torch.ones(len(batch), n_layers, n_heads, device=device, requires_grad=True)
            with torch.enable_grad(), _autocast(dtype, device):
                per_doc = _losses(model, tokens, valid, mask_hooks(ones, model), partial)
                if not bool(torch.isfinite(per_doc).all()):
                    raise NonFiniteError(
                        f"non-finite loss in the importance pass (precision {dtype}); use "
                        "precision='float32'"
                    )
                (grad,) = torch.autograd.grad(per_doc.sum(), ones)
            gradients[batch] = grad.float().cpu()
            losses[batch] = per_doc.detach().float().cpu()
    finally:
        for parameter in trainable:
            parameter.requires_grad_(True)
    leaked = [p for p in parameters if p.grad is not None and id(p) not in had_grad]
    if leaked:  # pragma: no cover - a guard, never expected
        raise ComputationError(f"{len(leaked)} model parameters received a gradient")
    n_tokens = sum(len(d) - 1 for d in encoded)
    return HeadImportance(
        scores=scores_from_gradients(gradients, method),
        gradients=gradients,
        losses=losses,
        method=method,
        model=model_name(model),
        n_tokens=n_tokens,
        meta={"batch_size": batch_size, "max_tokens": max_tokens, "precision": dtype},
    )
