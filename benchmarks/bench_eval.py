"""Evaluation benchmark: the settings table batched vs one example at a time (issue 3)."""

from __future__ import annotations

from benchmarks.harness import BenchmarkResult, compare


def bench_eval_batching(quick: bool) -> BenchmarkResult:
    """``lh.evaluate`` of 100 antonym examples (instructed; greedy generation + teacher-forced
    answer CE) on SmolLM2 with batch_size=16 vs batch_size=1 (target >= 4x); both must give the
    same 100 predictions and answer CEs within 1e-4 (float32 sums reorder with the batch's shape
    and padding: 2.6e-5 measured on an AMD EPYC without bf16, on answer CEs of a few nats). The
    task has 281 examples, so the last 100 really are 100 (a task under 200 examples evaluates
    half)."""
    import lens_heads as lh

    model = lh.load_model("smollm2-135m-instruct")
    task = lh.get_task("antonym")
    outcomes: dict[int, lh.EvaluationResult] = {}

    def run(batch_size: int) -> None:
        outcomes[batch_size] = lh.evaluate(
            model, task, ["instruction"], n_eval=100, batch_size=batch_size, progress=False
        )

    lh.evaluate(model, task, ["instruction"], n_eval=4, progress=False)  # warm up
    result = compare(
        "evaluate 100 examples: one at a time / batched 16 (SmolLM2)",
        lambda: run(1),
        lambda: run(16),
        target=4.0,
        repeats=1 if quick else 3,
        warmup=0,
        speedup=True,
    )
    one, batched = outcomes[1].records, outcomes[16].records
    assert len(batched) == 100, f"evaluated {len(batched)} examples, not 100"
    ce_difference = float((one["answer_ce"] - batched["answer_ce"]).abs().max())
    result.same_outputs = bool(
        (one["prediction"] == batched["prediction"]).all() and ce_difference <= 1e-4
    )
    result.extra.update(
        {
            "examples": len(batched),
            "same predictions": int((one["prediction"] == batched["prediction"]).sum()),
            "accuracy (batched, one at a time)": (
                float(batched["correct"].mean()),
                float(one["correct"].mean()),
            ),
            "max |answer CE difference|": float(
                (one["answer_ce"] - batched["answer_ce"]).abs().max()
            ),
        }
    )
    return result
