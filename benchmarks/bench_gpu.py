"""GPU against CPU on SmolLM2 (issue 16): one mask-training step and a removal sweep, each timed
with the model on the CPU and on CUDA in the same run. Skipped (returns None) without a GPU;
``python -m benchmarks.run --only bench_gpu`` on a GPU machine records the ratios.

Where SmolLM2's weights cannot reach the GPU machine, ``scripts/gpu_check.sh`` builds a checkpoint
of SmolLM2-135M-Instruct's shape (its config and tokenizer) with random weights and names it in
``LENS_HEADS_GPU_BENCH_MODEL``; the timings then hold for the shape, and the result says so."""

from __future__ import annotations

import os
import statistics
from pathlib import Path
from typing import Any

import torch

from benchmarks.harness import BenchmarkResult, time_call

ALIAS = "smollm2-135m-instruct"
#: a checkpoint folder timed instead of ``ALIAS`` (see the module docstring)
MODEL_ENV = "LENS_HEADS_GPU_BENCH_MODEL"


def _training_step_seconds(model: Any, repeats: int, batch_size: int = 16) -> float:
    import lens_heads as lh
    from lens_heads.engine import MaskTrainer, TrainingConfig

    config = TrainingConfig(batch_size=batch_size)
    trainer = MaskTrainer(model, lh.get_task("capitalize"), config)
    trainer.step()  # warm up (kernels, the partial-unembedding check)
    return statistics.median(time_call(trainer.step) for _ in range(repeats))


def _plain_step_seconds(source: str, repeats: int, batch_size: int = 16) -> float:
    """Forward and backward of the same checkpoint in plain ``transformers`` on the GPU (bf16,
    no hooks, no mask, frozen weights, a gradient to the input embeddings), on the first
    ``batch_size`` capitalize prompts in the chat template, right-padded: the eager floor that a
    training step of lens_heads cannot go below."""
    import lens_heads as lh
    from lens_heads.core._compatibility import Reference, reference_source

    reference = Reference.from_pretrained(reference_source(source))
    model = reference.model.to("cuda", torch.bfloat16).requires_grad_(False)
    rows = [reference.encode(text, chat=True) for text in lh.get_task("capitalize").inputs]
    rows = rows[:batch_size]
    width = max(map(len, rows))
    ids = torch.tensor([row + row[-1:] * (width - len(row)) for row in rows], device="cuda")

    def step() -> None:
        embeds = model.get_input_embeddings()(ids).detach().requires_grad_()
        model(inputs_embeds=embeds).logits[:, -1].float().logsumexp(-1).mean().backward()
        torch.cuda.synchronize()

    step()
    return statistics.median(time_call(step) for _ in range(repeats))


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
    source = os.environ.get(MODEL_ENV) or ALIAS
    cpu = lh.load_model(source)
    gpu = lh.load_model(source, device="cuda", dtype="auto")
    step_cpu, step_gpu = _training_step_seconds(cpu, repeats), _training_step_seconds(gpu, repeats)
    sweep_cpu, sweep_gpu = _sweep_seconds(cpu, every), _sweep_seconds(gpu, every)
    # a step that barely lengthens with 4x and 16x the batch is bound by per-step overhead
    larger = {size: _training_step_seconds(gpu, repeats, size) for size in (64, 256)}
    plain = _plain_step_seconds(source, repeats)
    return BenchmarkResult(
        "SmolLM2 training step (batch 16), CPU / GPU",
        step_cpu,
        step_gpu,
        step_cpu / step_gpu,
        target=3.0,
        higher_is_better=True,
        extra={
            "model": ALIAS if source == ALIAS else f"{Path(source).name} (random weights)",
            "GPU": torch.cuda.get_device_name(0),
            "GPU weights dtype": str(next(gpu.parameters()).dtype),
            f"removal sweep (every {every}) CPU s": round(sweep_cpu, 2),
            f"removal sweep (every {every}) GPU s": round(sweep_gpu, 2),
            "removal sweep CPU / GPU": round(sweep_cpu / sweep_gpu, 2),
            **{f"GPU training step s, batch {size}": round(t, 4) for size, t in larger.items()},
            "plain transformers forward and backward on the GPU s, batch 16": round(plain, 4),
            "peak GPU memory MiB": round(torch.cuda.max_memory_allocated() / 2**20, 1),
        },
    )
