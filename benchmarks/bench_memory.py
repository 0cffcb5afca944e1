"""Memory that stays flat (issue 23): long runs in one process must not leak.

``bench_memory_flat``: 1,000 removal-sweep steps (ten 100-head sweeps with 2-token
continuations) and 1,000 evaluated examples (100 ``lh.evaluate`` calls of 10 examples) on
SmolLM2, in one process. The resident set is read after each sweep and each call; the benchmark
fails when it grows by more than :data:`BOUND_MB` after the first 100 steps (resp. the first 100
examples) -- what caches, allocator pools and the loaded model settle into by then. The ratio
reported is the larger growth in MiB; the target is the bound.
"""

from __future__ import annotations

import gc
import os
import time

from benchmarks.harness import BenchmarkResult

BOUND_MB = 64.0


def resident_mb() -> float:
    """The current resident set of this process, in MiB (Linux)."""
    with open("/proc/self/statm") as file:
        return int(file.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def growth_after_first(readings: list[float]) -> float:
    """How far the readings rise above the first one (MiB; 0 when they never do).

    >>> growth_after_first([500.0, 510.0, 505.0, 530.0])
    30.0
    """
    return max(0.0, max(readings[1:], default=readings[0]) - readings[0])


def bench_memory_flat(quick: bool) -> BenchmarkResult:
    import torch

    import lens_heads as lh
    from lens_heads.heads_up._sweep_inputs import removal_order

    model = lh.load_model("smollm2-135m-instruct")
    weights = torch.randn(30, 9, generator=torch.Generator().manual_seed(0))
    order = [f"L{layer}H{head}" for layer, head in removal_order(model, weights)][:100]
    sweeps, calls = (3, 10) if quick else (10, 100)
    started = time.perf_counter()
    sweep_rss = []
    for _ in range(sweeps):  # 101 steps each
        lh.removal_sweep(model, "apple", order, target="Apple", max_new_tokens=2, progress=False)
        gc.collect()
        sweep_rss.append(resident_mb())
    task = lh.get_task("antonym")
    evaluation_rss = []
    for _ in range(calls):  # 10 examples each
        lh.evaluate(model, task, ["original"], n_eval=10, batch_size=10, progress=False)
        gc.collect()
        evaluation_rss.append(resident_mb())
    seconds = time.perf_counter() - started
    sweep_growth = growth_after_first(sweep_rss)
    evaluation_growth = growth_after_first(evaluation_rss[9:])  # from the 100th example on
    worst = max(sweep_growth, evaluation_growth)
    return BenchmarkResult(
        name=f"memory growth after the first 100 of {sweeps * 101} sweep steps and "
        f"{calls * 10} evaluated examples (MiB; SmolLM2)",
        baseline_s=0.0,
        candidate_s=seconds,
        ratio=worst,
        target=BOUND_MB,
        extra={
            "resident MiB after each sweep": [round(value) for value in sweep_rss],
            "resident MiB after every 10th evaluation call": [
                round(value) for value in evaluation_rss[::10]
            ],
            "growth after the first 100 sweep steps (MiB)": round(sweep_growth, 1),
            "growth after the first 100 evaluated examples (MiB)": round(evaluation_growth, 1),
            "bound (MiB)": BOUND_MB,
        },
    )
