"""Head-importance benchmark (issue 14, LAHIS).

``bench_importance``: gradient importance over 100 English documents of the built-in corpus on
Gemma 3 270M. Ours (:func:`lens_heads.head_importance`: frozen weights, documents batched with
right padding and one mask of ones per document, answer positions unembedded only, bf16
autocast where native) against the reference's way (one document at a time, fp32, the model's
weights with ``requires_grad`` so every backward also computes weight gradients, full logits).
Target: >= 5x, with Spearman >= 0.95 between the two score matrices (the reference differs in
precision where ours runs in bf16). Like for like beside it: a plain loop on the same frozen
model, in the same precision and on the same right-padded batches with one mask of ones per
document, computing the full logits (ours unembeds only the predicted positions); both must give
the same mask gradients (in fp32: every difference within 1e-3 of the largest gradient and
Spearman >= 0.9999 -- float32 sums over a 262k-token vocabulary in another order; under bf16:
Spearman >= 0.999), else the benchmark fails; target >= 1.0, three A/B pairs. Also the peak
memory the batched run adds (resident set sampled during the run) and a check that no weight
got a gradient in our run.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from benchmarks.bench_training import peak_step_memory_mb
from benchmarks.harness import BenchmarkResult, compare

ALIAS = "gemma-3-270m"


def reference_importance(model: Any, texts: list[str]) -> torch.Tensor:
    """The reference's loop (without its optimiser step): batch 1, fp32, weights not frozen."""
    from lens_heads.core._hooks import mask_hooks
    from lens_heads.lahis._importance import scores_from_gradients

    parameters = list(model.parameters())
    flags = [p.requires_grad for p in parameters]
    for parameter in parameters:
        parameter.requires_grad_(True)
    n_layers, n_heads = int(model.cfg.n_layers), int(model.cfg.n_heads)
    gradients = []
    try:
        for text in texts:
            tokens = torch.tensor([model.tokenizer(text).input_ids])
            mask = torch.ones(n_layers, n_heads, requires_grad=True)
            logits = model.run_with_hooks(tokens, fwd_hooks=mask_hooks(mask, model))
            loss = torch.nn.functional.cross_entropy(logits[0, :-1].float(), tokens[0, 1:])
            loss.backward()
            gradients.append(mask.grad.detach().clone())
            model.zero_grad(set_to_none=True)
    finally:
        for parameter, flag in zip(parameters, flags, strict=True):
            parameter.requires_grad_(flag)
    return scores_from_gradients(torch.stack(gradients), "lahis")


def plain_importance(model: Any, texts: list[str], dtype: str = "auto") -> torch.Tensor:
    """Mask gradients ``[document, layer, head]`` the plain way: the same frozen model, batches,
    padding and precision as :func:`lens_heads.head_importance`, the full logits."""
    from lens_heads.core._hooks import mask_hooks
    from lens_heads.core._models import head_shape
    from lens_heads.core._prompts import pad_token_id
    from lens_heads.lahis import _importance as importance

    encoded = importance.encode_documents(model, texts, None)
    device = torch.device(model.cfg.device)
    n_layers, n_heads = head_shape(model)
    gradients = torch.zeros(len(encoded), n_layers, n_heads)
    for batch in importance._batches([len(d) for d in encoded], None):
        tokens, valid = importance._pad(
            [encoded[i] for i in batch], pad_token_id(model.tokenizer), device
        )
        ones = torch.ones(len(batch), n_layers, n_heads, requires_grad=True)
        with torch.enable_grad(), importance._autocast(dtype, device):
            logits = model.run_with_hooks(tokens, fwd_hooks=mask_hooks(ones, model)).float()
            ce = torch.nn.functional.cross_entropy(
                logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none"
            )
            weights = valid[:, 1:].float()
            per_doc = (ce * weights).sum(1) / weights.sum(1)
            (grad,) = torch.autograd.grad(per_doc.sum(), ones)
        gradients[batch] = grad.float()
    return gradients


def bench_importance(quick: bool = False) -> list[BenchmarkResult]:
    import lens_heads as lh
    from lens_heads.core._devices import native_bf16
    from lens_heads.lahis._importance import head_importance, spearman
    from lens_heads.lahis._languages import load_texts_by_language

    model = lh.load_model(ALIAS)
    texts = load_texts_by_language()["en"][: 20 if quick else 100]
    head_importance(model, texts[:4], progress=False)  # warm-up (kernels, partial-unembed check)
    start = time.perf_counter()
    reference = reference_importance(model, texts)
    baseline_s = time.perf_counter() - start
    box: dict[str, Any] = {}

    def ours() -> None:
        box["result"] = head_importance(model, texts, progress=False)

    start = time.perf_counter()
    peak = peak_step_memory_mb(ours)
    candidate_s = time.perf_counter() - start
    result = box["result"]
    no_grads = all(p.grad is None for p in model.parameters())
    rho = spearman(result.scores, reference)
    speedup = baseline_s / candidate_s
    reference_result = BenchmarkResult(
        name="importance_100_docs_gemma" if not quick else "importance_20_docs_gemma",
        baseline_s=baseline_s,
        candidate_s=candidate_s,
        ratio=speedup if rho >= 0.95 else 0.0,
        target=5.0,
        higher_is_better=True,
        extra={
            "documents": len(texts),
            "spearman": round(rho, 4),
            "peak_added_mb": round(peak, 1),
            "no_weight_grads": no_grads,
            "top10_ours": result.top(10),
            "dtype": "bf16 autocast" if native_bf16() else "float32",
        },
    )
    return [reference_result, _like_for_like(model, texts, result)]


def _like_for_like(model: Any, texts: list[str], ours: Any) -> BenchmarkResult:
    from lens_heads.core._devices import native_bf16
    from lens_heads.lahis._importance import head_importance, spearman

    plain = plain_importance(model, texts)
    bf16 = native_bf16()
    rho = spearman(plain, ours.gradients)
    if bf16:
        same = rho >= 0.999
    else:
        scale = float(ours.gradients.abs().max())
        same = float((plain - ours.gradients).abs().max()) <= 1e-3 * scale and rho >= 0.9999
    result = compare(
        f"importance, {len(texts)} documents, like for like: plain loop / ours (Gemma 3 270M)",
        lambda: plain_importance(model, texts),
        lambda: head_importance(model, texts, progress=False),
        target=1.0,
        repeats=3,
        warmup=0,
        speedup=True,
    )
    result.same_outputs = same
    result.extra.update(
        {
            "max |gradient difference|": float((plain - ours.gradients).abs().max()),
            "Spearman (plain, ours)": round(rho, 6),
            "precision": "bf16 autocast" if bf16 else "float32",
        }
    )
    return result
