"""Removal-sweep benchmark (issue 5): the batched engine against the naive step-by-step loop."""

from __future__ import annotations

import time

from benchmarks.harness import BenchmarkResult, peak_rss_mb


def bench_sweep_batched(quick: bool) -> BenchmarkResult:
    """The full sweep over all 270 heads of SmolLM2 (271 steps), each step with its ranks, the
    hidden-state similarity to a reference run and a 20-token greedy continuation: the naive
    loop (one forward and one generation per step) against the batched engine (chunks of steps
    as per-example masks, KV-cached batched generation); target >= 4x. ``quick``: the first 60
    heads of the order only. The two results must be identical (ranks, top-1, continuations), else
    the benchmark fails; one pair (the naive run alone takes minutes)."""
    import torch

    import lens_heads as lh
    from lens_heads.heads_up._sweep_inputs import removal_order

    model = lh.load_model("smollm2-135m-instruct")
    weights = torch.randn(30, 9, generator=torch.Generator().manual_seed(0))
    order = [f"L{layer}H{head}" for layer, head in removal_order(model, weights)]
    if quick:
        order = order[:60]
    kwargs = dict(
        target="Apple",
        reference_prompt="Capitalize the given word.\n\nInput:\n\napple\n\nOutput:\n\n",
        max_new_tokens=20,
        progress=False,
    )
    lh.removal_sweep(model, "apple", order[:2], **kwargs)  # warm up
    start = time.perf_counter()
    batched = lh.removal_sweep(model, "apple", order, **kwargs)
    batched_s = time.perf_counter() - start
    start = time.perf_counter()
    naive = lh.removal_sweep(model, "apple", order, engine="naive", **kwargs)
    naive_s = time.perf_counter() - start
    identical = (
        torch.equal(batched.ranks, naive.ranks)
        and batched.top1_ids == naive.top1_ids
        and batched.output_ids == naive.output_ids
    )
    return BenchmarkResult(
        same_outputs=identical,
        name=f"removal sweep, {len(order)} heads x 20 tokens: naive / batched (SmolLM2)",
        baseline_s=naive_s,
        candidate_s=batched_s,
        ratio=naive_s / batched_s,
        target=4.0,
        higher_is_better=True,
        extra={
            "steps": batched.n_steps,
            "batched wall time (s)": round(batched_s, 1),
            "naive wall time (s)": round(naive_s, 1),
            "steps per chunk": batched.metadata["batch_size"],
            "identical ranks, top-1 and continuations": identical,
            "max |logit difference|": float((batched.logits - naive.logits).abs().max()),
            "peak RSS (MiB)": round(peak_rss_mb()),
        },
    )
