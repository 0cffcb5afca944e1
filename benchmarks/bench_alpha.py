"""Scaled-mask benchmark (issue 15): the alpha curve in one batched pass vs a loop over alphas."""

from __future__ import annotations

from typing import Any

from benchmarks.harness import BenchmarkResult, compare, peak_rss_mb


def measure_alpha_curve(
    model: Any,
    task: Any,
    mask: Any,
    *,
    n_eval: int,
    repeats: int,
    name: str,
    target: float = 3.0,
) -> BenchmarkResult:
    """Time ``lh.alpha_curve`` (all alphas decoded together, per-example masks) against one
    ``lh.evaluate`` call per alpha on the same held-out examples, both instructed; check that
    they agree: the same generations, accuracy and exact match, the answer CE to 1e-4 (a
    matrix product's float sums may depend on its batch's rows; the extra reports whether it
    is bit-identical here)."""
    import lens_heads as lh
    from lens_heads.heads_up._alpha import DEFAULT_ALPHAS

    alphas = DEFAULT_ALPHAS
    outcome: dict[str, Any] = {}

    def loop() -> None:
        outcome["loop"] = [
            lh.evaluate(
                model,
                task,
                ["mask+instruction"],
                mask=mask.with_alpha(alpha),
                n_eval=n_eval,
                progress=False,
            )
            for alpha in alphas
        ]

    def batched() -> None:
        outcome["batched"] = lh.alpha_curve(
            model, task, mask, alphas=alphas, uninstructed=False, n_eval=n_eval, progress=False
        )

    lh.alpha_curve(model, task, mask, alphas=(0, 1), n_eval=2, progress=False)  # warm up
    result = compare(name, loop, batched, target=target, repeats=repeats, warmup=0, speedup=True)
    curve, runs = outcome["batched"], outcome["loop"]
    same_text, max_diff, bitwise = True, 0.0, True
    for alpha, run in zip(alphas, runs, strict=True):
        records = curve.records[curve.records["alpha"] == alpha].reset_index(drop=True)
        reference = run.records
        same_text &= records["generated"].tolist() == reference["generated"].tolist()
        same_text &= records["correct"].tolist() == reference["correct"].tolist()
        same_text &= records["exact"].tolist() == reference["exact"].tolist()
        diff = (records["answer_ce"] - reference["answer_ce"]).abs().max()
        max_diff = max(max_diff, float(diff))
        bitwise &= records["answer_ce"].tolist() == reference["answer_ce"].tolist()
    result.same_outputs = bool(same_text and max_diff <= 1e-4)
    result.extra.update(
        {
            "alphas": len(alphas),
            "examples": int(curve.config["n_eval"]),
            "best alpha": curve.best_alpha,
            "answer CE at alpha 0 / best / 1": tuple(
                round(curve.value(a), 4) for a in (0.0, curve.best_alpha, 1.0)
            ),
            "same generations, accuracy and exact match": same_text,
            "answer CE bit-identical": bitwise,
            "max |answer CE difference|": max_diff,
            "peak RSS (MiB)": round(peak_rss_mb()),
        }
    )
    return result


def bench_alpha_curve(quick: bool) -> BenchmarkResult:
    """Figure 6 on SmolLM2: 11 alphas x 100 held-out capitalize examples (``quick``: 40), with
    the instruction, batched (``lh.alpha_curve``: a batch is 16 prompts x 11 alphas) vs one
    ``lh.evaluate`` per alpha (batches of 16 prompts); target >= 3x. The mask keeps 90 of the
    270 heads at random (seeded): the timing does not depend on which heads."""
    import torch

    import lens_heads as lh

    model = lh.load_model("smollm2-135m-instruct")
    generator = torch.Generator().manual_seed(0)
    values = torch.zeros(270)
    values[torch.randperm(270, generator=generator)[:90]] = 1.0
    mask = lh.HeadMask(values.view(30, 9))
    return measure_alpha_curve(
        model,
        lh.get_task("capitalize"),
        mask,
        n_eval=40 if quick else 100,
        repeats=1 if quick else 2,
        name="alpha curve, 11 alphas: loop / batched (SmolLM2)",
    )
