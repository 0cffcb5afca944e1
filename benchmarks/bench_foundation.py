"""Foundation benchmarks: the cost of the mask hook, and what the weights cache saves."""

from __future__ import annotations

import os
import shutil
import tempfile

import torch

from benchmarks.harness import BenchmarkResult, compare, time_call


def bench_mask_hook_overhead(quick: bool) -> BenchmarkResult:
    """Forward pass of SmolLM2 with an all-ones mask hook vs no hook (target <= 1.05x)."""
    import lens_heads as lh
    from lens_heads.core._prompts import encode_text

    model = lh.load_model("smollm2-135m-instruct")
    text = "The quick brown fox jumps over the lazy dog. " * 4
    tokens = torch.tensor([encode_text(model.tokenizer, text)] * 8)
    ones = lh.mask_hooks(lh.HeadMask.ones(model))

    @torch.inference_mode()
    def plain() -> None:
        model(tokens)

    @torch.inference_mode()
    def masked() -> None:
        model.run_with_hooks(tokens, fwd_hooks=ones)

    result = compare(
        "forward: all-ones mask hook / no hook",
        plain,
        masked,
        target=1.05,
        repeats=5 if quick else 15,
        extra={"batch x pos": f"{tokens.shape[0]} x {tokens.shape[1]}"},
    )
    with torch.inference_mode():
        result.same_outputs = bool(
            torch.equal(model(tokens), model.run_with_hooks(tokens, fwd_hooks=ones))
        )
    return result


def bench_cached_load(quick: bool) -> BenchmarkResult:
    """Loading SmolLM2 from the safetensors cache vs dequantizing the GGUF (target <= 0.2x)."""
    import lens_heads as lh

    scratch = tempfile.mkdtemp(prefix="lens-heads-bench-")
    previous = os.environ.get("LENS_HEADS_CACHE")
    os.environ["LENS_HEADS_CACHE"] = scratch
    try:
        uncached, cached, logits = [], [], {}

        def load(kind: str) -> None:
            model = lh.load_model("smollm2-135m-instruct")
            with torch.inference_mode():
                logits[kind] = model(torch.tensor([[1, 2, 3, 4]]))

        for _ in range(1 if quick else 3):  # a load takes well under a minute
            shutil.rmtree(scratch, ignore_errors=True)
            uncached.append(time_call(lambda: load("uncached")))
            cached.append(time_call(lambda: load("cached")))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if previous is None:
            os.environ.pop("LENS_HEADS_CACHE", None)
        else:
            os.environ["LENS_HEADS_CACHE"] = previous
    ratios = sorted(c / u for u, c in zip(uncached, cached, strict=True))
    return BenchmarkResult(
        "model load: cached / uncached (SmolLM2)",
        baseline_s=sorted(uncached)[len(uncached) // 2],
        candidate_s=sorted(cached)[len(cached) // 2],
        ratio=ratios[len(ratios) // 2],
        target=0.2,
        same_outputs=bool(torch.equal(logits["uncached"], logits["cached"])),
        pairs=len(ratios),
    )


def bench_guards(quick: bool) -> BenchmarkResult:
    """The library guards run on each model's first use (KV-cached logits against full
    forwards, hook_pattern against eager attention) against the README demo they protect, both
    on SmolLM2 (target <= 0.01: well under 1 % of the demo)."""
    import statistics

    import lens_heads as lh
    from lens_heads.core._guards import forget_checks, verify_model
    from lens_heads.demo import run_demo

    model = lh.load_model("smollm2-135m-instruct")
    scratch = tempfile.mkdtemp(prefix="lens-heads-bench-demo-")
    try:
        demo = time_call(lambda: run_demo(scratch, model=model, fresh=True, progress=False))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    times, checked = [], {}
    for _ in range(3 if quick else 5):
        forget_checks(model)
        times.append(time_call(lambda: checked.update(verify_model(model))))
    guard = statistics.median(times)
    return BenchmarkResult(
        "library guards / the demo they protect (SmolLM2)",
        baseline_s=demo,
        candidate_s=guard,
        ratio=guard / demo,
        target=0.01,
        extra={"largest differences": {k: f"{v:.1e}" for k, v in checked.items()}},
        pairs=len(times),
    )
