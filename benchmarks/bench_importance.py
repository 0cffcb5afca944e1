"""Head-importance benchmark (issue 14, LAHIS).

``bench_importance``: gradient importance over 100 English documents of the built-in corpus on
Gemma 3 270M. Ours (:func:`lens_heads.head_importance`: frozen weights, documents batched with
right padding and one mask of ones per document, answer positions unembedded only, bf16
autocast where native) against the reference's way (one document at a time, fp32, the model's
weights with ``requires_grad`` so every backward also computes weight gradients, full logits).
Target: >= 5x, with Spearman >= 0.95 between the two score matrices. Also the peak memory the
batched run adds (resident set sampled during the run) and a check that no weight got a
gradient in our run.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from benchmarks.bench_training import peak_step_memory_mb
from benchmarks.harness import BenchmarkResult

ALIAS = "gemma-3-270m"


def reference_importance(model: Any, texts: list[str]) -> torch.Tensor:
    """The reference's loop (without its optimiser step): batch 1, fp32, weights not frozen."""
    from lens_heads.core.hooks import mask_hooks
    from lens_heads.lahis.importance import scores_from_gradients

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


def bench_importance(quick: bool = False) -> BenchmarkResult:
    import lens_heads as lh
    from lens_heads.lahis.importance import head_importance, spearman
    from lens_heads.lahis.languages import load_texts_by_language

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
    return BenchmarkResult(
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
            "dtype": "bf16 autocast" if lh.training.native_bf16() else "float32",
        },
    )
