"""GPU against CPU on SmolLM2 (issue 16): one mask-training step and a removal sweep, each timed
with the model on the CPU and on CUDA in the same run. Skipped (returns None) without a GPU;
``python -m benchmarks.run --only bench_gpu`` on a GPU machine records the ratios."""

from __future__ import annotations

import statistics
from typing import Any

import torch

from benchmarks.harness import BenchmarkResult, time_call

ALIAS = "smollm2-135m-instruct"


def _training_step_seconds(model: Any, repeats: int) -> float:
    import lens_heads as lh
    from lens_heads.engine import MaskTrainer, TrainingConfig

    trainer = MaskTrainer(model, lh.get_task("capitalize"), TrainingConfig(batch_size=16))
    trainer.step()  # warm up (kernels, the partial-unembedding check)
    return statistics.median(time_call(trainer.step) for _ in range(repeats))


def _sweep_seconds(model: Any, every: int) -> float:
    import lens_heads as lh

    weights = torch.linspace(-1.0, 1.0, 270).reshape(30, 9)
    kwargs = dict(target="Apple", max_new_tokens=20, every=every, progress=False)
    lh.removal_sweep(model, "apple", weights, **kwargs)  # warm up
    return time_call(lambda: lh.removal_sweep(model, "apple", weights, **kwargs))


def bench_gpu_training_step_and_sweep(quick: bool) -> BenchmarkResult | None:
    """CPU / GPU wall time of a training step (batch 16) and of a removal sweep on SmolLM2."""
    if not torch.cuda.is_available():
        return None
    import lens_heads as lh

    repeats, every = (3, 10) if quick else (7, 2)
    cpu = lh.load_model(ALIAS)
    gpu = lh.load_model(ALIAS, device="cuda", dtype="auto")
    step_cpu, step_gpu = _training_step_seconds(cpu, repeats), _training_step_seconds(gpu, repeats)
    sweep_cpu, sweep_gpu = _sweep_seconds(cpu, every), _sweep_seconds(gpu, every)
    return BenchmarkResult(
        "SmolLM2 training step (batch 16), CPU / GPU",
        step_cpu,
        step_gpu,
        step_cpu / step_gpu,
        target=3.0,
        higher_is_better=True,
        extra={
            "GPU": torch.cuda.get_device_name(0),
            "GPU weights dtype": str(next(gpu.parameters()).dtype),
            f"removal sweep (every {every}) CPU s": round(sweep_cpu, 2),
            f"removal sweep (every {every}) GPU s": round(sweep_gpu, 2),
            "removal sweep CPU / GPU": round(sweep_cpu / sweep_gpu, 2),
            "peak GPU memory MiB": round(torch.cuda.max_memory_allocated() / 2**20, 1),
        },
    )
