"""Mask-training benchmarks (issue 4).

* ``bench_training_step``: one training step on SmolLM2 (batch 16 of country-capital), two
  ratios. Against the reference code's way (a Hugging Face model whose weights are not frozen,
  the full logits, fp32, the loss from ``labels``): what a user of the reference code pays;
  target >= 3.5x. Like for like: a plain loop on the same frozen model, in the same precision,
  on the same batch and the same sampled mask (Hugging Face forward with a pre-hook on each
  ``o_proj``, full logits, ``labels`` loss) against ours (TransformerBridge, the one mask hook,
  answer positions unembedded only); before timing, both must give the same loss (relative
  1e-4 in fp32, 2e-2 under bf16 autocast) and the same mask gradient (cosine >= 0.999 in fp32,
  0.99 in bf16), else the benchmark fails; target >= 1.0 (the toolkit costs nothing). Also
  tokens per second and the peak memory a step adds on top of the loaded model.
* ``bench_bf16_mask_agreement``: the short schedule on capitalize in bf16 autocast and in fp32:
  the speed-up, the Jaccard similarity of the two masks and the answer CE / accuracy under each.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import torch

from benchmarks.harness import BenchmarkResult, compare, time_call

ALIAS = "smollm2-135m-instruct"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _rss_mb() -> float:
    with open("/proc/self/statm") as file:
        return int(file.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_step_memory_mb(function: Callable[[], Any], interval: float = 0.002) -> float:
    """Peak resident memory (MiB) ``function`` adds above the resident memory before it,
    sampled from ``/proc/self/statm`` every ``interval`` seconds."""
    before = _rss_mb()
    peak = [before]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _rss_mb())
            time.sleep(interval)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        function()
    finally:
        done.set()
        thread.join()
    peak[0] = max(peak[0], _rss_mb())
    return peak[0] - before


def _step_memory_child(variant: str, task_name: str) -> None:
    """In a fresh process: load, then print the peak memory one step of ``variant`` adds."""
    import lens_heads as lh
    from lens_heads.engine import MaskTrainer, TrainingConfig

    model = lh.load_model(ALIAS)
    ours = MaskTrainer(model, lh.get_task(task_name), TrainingConfig(batch_size=16))
    tokens, answer_mask = ours.batch(0)
    if variant == "baseline":
        run = _OriginalStyleStep(tokens, answer_mask).step
    else:
        ours.batch = lambda step: (tokens, answer_mask)  # type: ignore[method-assign]
        run = ours.step
    print(json.dumps({"peak_mb": peak_step_memory_mb(run)}))


def step_memory_mb(variant: str, task_name: str) -> float:
    """Peak memory (MiB) the first training step of ``variant`` ("ours" or "baseline") adds to
    a freshly loaded process. A fixed malloc mmap threshold makes freed tensors leave the
    resident set, so the sampled RSS follows the live tensors."""
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072"}
    code = (
        "from benchmarks.bench_training import _step_memory_child as run; "
        f"run({variant!r}, {task_name!r})"
    )
    process = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True
    )
    if process.returncode != 0:
        raise RuntimeError(f"memory measurement of {variant} failed:\n{process.stderr[-2000:]}")
    return float(json.loads(process.stdout.strip().splitlines()[-1])["peak_mb"])


class _PlainStep:
    """The like-for-like loop: the same frozen Hugging Face weights in the trainer's precision,
    the mask applied by a forward pre-hook on each ``o_proj``, full logits, ``labels`` loss."""

    def __init__(self, tokens: torch.Tensor, answer_mask: torch.Tensor, dtype: str) -> None:
        from transformers import AutoModelForCausalLM

        from lens_heads.core._models import prepare_model

        self.model = AutoModelForCausalLM.from_pretrained(prepare_model(ALIAS), dtype=torch.float32)
        self.model.requires_grad_(False)
        self.bf16 = dtype == "bfloat16"
        config = self.model.config
        self.n_heads = config.num_attention_heads
        self.d_head = config.hidden_size // self.n_heads
        self.tokens = tokens
        self.labels = torch.where(answer_mask, tokens, torch.full_like(tokens, -100))
        self.current: torch.Tensor | None = None
        for layer, block in enumerate(self.model.model.layers):
            block.self_attn.o_proj.register_forward_pre_hook(self._hook(layer))

    def _hook(self, layer: int) -> Callable[..., Any]:
        def hook(module: Any, inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
            (x,) = inputs
            assert self.current is not None
            batch, pos, _ = x.shape
            heads = x.view(batch, pos, self.n_heads, self.d_head)
            heads = heads * self.current[:, layer, None, :, None].to(x.dtype)
            return (heads.view(batch, pos, -1),)

        return hook

    def loss(self, mask: torch.Tensor) -> torch.Tensor:
        """The answer-token CE under the per-example ``mask`` ``[batch, layers, heads]``."""
        self.current = mask
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):
            logits = self.model(input_ids=self.tokens).logits
        shifted = logits[:, :-1].float().flatten(0, 1)
        return torch.nn.functional.cross_entropy(shifted, self.labels[:, 1:].flatten())


def same_loss_and_gradient(
    ours: Any, plain: _PlainStep, tokens: torch.Tensor, answer_mask: torch.Tensor
) -> dict[str, float]:
    """Loss and mask gradient of both sides on one sampled mask (the same W and noise)."""
    from lens_heads.engine._training import gumbel_noise, straight_through_mask

    noise = gumbel_noise((tokens.shape[0], *ours.W.shape), torch.Generator().manual_seed(1))
    results = []
    for side in ("ours", "plain"):
        W = ours.W.detach().clone().requires_grad_(True)
        mask = straight_through_mask(W, noise, 2.0)
        if side == "ours":
            loss = ours.loss(tokens, answer_mask, mask)
        else:
            loss = plain.loss(mask)
        loss.backward()
        results.append((float(loss.detach()), W.grad.flatten()))
    (loss_a, grad_a), (loss_b, grad_b) = results
    cosine = torch.nn.functional.cosine_similarity(grad_a, grad_b, dim=0)
    return {"loss ours": loss_a, "loss plain": loss_b, "gradient cosine": float(cosine)}


class _OriginalStyleStep:
    """One step as the reference code trains: every weight requires grad, fp32, full logits,
    HF ``labels`` loss; the mask multiplies each head's output before ``o_proj``."""

    def __init__(self, tokens: torch.Tensor, answer_mask: torch.Tensor, seed: int = 0) -> None:
        from transformers import AutoModelForCausalLM

        from lens_heads.core._models import prepare_model
        from lens_heads.engine._training import gumbel_noise, straight_through_mask

        self.model = AutoModelForCausalLM.from_pretrained(prepare_model(ALIAS), dtype=torch.float32)
        self.model.requires_grad_(True)  # the reference does not freeze the model
        config = self.model.config
        self.n_layers, self.n_heads = config.num_hidden_layers, config.num_attention_heads
        self.d_head = config.hidden_size // self.n_heads
        self.tokens = tokens
        self.labels = torch.where(answer_mask, tokens, torch.full_like(tokens, -100))
        self.W = torch.full((self.n_layers, self.n_heads), 4.0, requires_grad=True)
        self.optimizer = torch.optim.AdamW([self.W], lr=1e-2, weight_decay=0.0)
        self.generator = torch.Generator().manual_seed(seed)
        self._noise, self._ste = gumbel_noise, straight_through_mask
        self.current: torch.Tensor | None = None
        for layer, block in enumerate(self.model.model.layers):
            block.self_attn.o_proj.register_forward_pre_hook(self._hook(layer))

    def _hook(self, layer: int) -> Callable[..., Any]:
        def hook(module: Any, inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
            (x,) = inputs
            assert self.current is not None
            batch, pos, _ = x.shape
            heads = x.view(batch, pos, self.n_heads, self.d_head)
            heads = heads * self.current[:, layer, None, :, None]
            return (heads.view(batch, pos, -1),)

        return hook

    def step(self) -> float:
        batch = self.tokens.shape[0]
        noise = self._noise((batch, self.n_layers, self.n_heads), self.generator)
        self.current = self._ste(self.W, noise, 2.0)
        loss = self.model(input_ids=self.tokens, labels=self.labels).loss
        self.optimizer.zero_grad()
        self.model.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return float(loss.detach())


def bench_training_step(quick: bool) -> list[BenchmarkResult]:
    """One mask-training step, SmolLM2, batch 16 of country-capital: the reference code's way /
    ours, and a plain loop / ours like for like."""
    import lens_heads as lh

    return _training_step(lh.load_model(ALIAS), "country-capital", quick)


def _training_step(model: Any, task_name: str, quick: bool) -> list[BenchmarkResult]:
    import lens_heads as lh
    from lens_heads.engine._training import MaskTrainer, TrainingConfig, native_bf16
    from lens_heads.engine._training_data import batch_indices

    task = lh.get_task(task_name)
    ours = MaskTrainer(model, task, TrainingConfig(batch_size=16))  # precision "auto"
    other_dtype = "float32" if ours.config.precision == "bfloat16" else "bfloat16"
    other = MaskTrainer(model, task, TrainingConfig(batch_size=16, precision=other_dtype))
    tokens, answer_mask = ours.batch(0)
    for trainer in (ours, other):  # every step of every variant trains on the same batch
        trainer.batch = lambda step: (tokens, answer_mask)  # type: ignore[method-assign]
    baseline = _OriginalStyleStep(tokens, answer_mask)
    rows = batch_indices(0, len(ours.encoded), 16, ours.config.seed)
    real_tokens = sum(len(ours.encoded[i].tokens) for i in rows)

    result = compare(
        f"mask training step: original style / ours {ours.config.precision} (SmolLM2, batch 16)",
        baseline.step,
        ours.step,
        target=3.5,
        repeats=3 if quick else 7,
        speedup=True,
    )
    other.step()  # warm up
    other_time = statistics.median(time_call(other.step) for _ in range(1 if quick else 3))
    memory_baseline = step_memory_mb("baseline", task_name)
    memory_ours = step_memory_mb("ours", task_name)
    result.extra.update(
        {
            "native bf16 on this CPU (avx512_bf16/amx_bf16)": native_bf16("cpu"),
            "batch x width (real tokens, answer tokens)": (
                f"{tokens.shape[0]} x {tokens.shape[1]} ({real_tokens}, {int(answer_mask.sum())})"
            ),
            "tokens/s original style": round(real_tokens / result.baseline_s, 1),
            f"tokens/s ours ({ours.config.precision})": round(real_tokens / result.candidate_s, 1),
            f"ours {other_dtype} s/step": round(other_time, 3),
            f"speed-up of ours {other_dtype}": round(result.baseline_s / other_time, 2),
            "peak memory added by a step, original style (MiB)": round(memory_baseline),
            "peak memory added by a step, ours (MiB)": round(memory_ours),
            "partial unembedding": ours.partial,
        }
    )
    return [result, _like_for_like(ours, tokens, answer_mask, quick)]


def _like_for_like(
    ours: Any, tokens: torch.Tensor, answer_mask: torch.Tensor, quick: bool
) -> BenchmarkResult:
    """A plain loop / ours on the same frozen model, precision, batch and sampled mask."""
    from lens_heads.engine._training import gumbel_noise, straight_through_mask

    plain = _PlainStep(tokens, answer_mask, ours.config.precision)
    check = same_loss_and_gradient(ours, plain, tokens, answer_mask)
    bf16 = ours.config.precision == "bfloat16"
    loss_tolerance, cosine_floor = (2e-2, 0.99) if bf16 else (1e-4, 0.999)
    relative = abs(check["loss ours"] - check["loss plain"]) / abs(check["loss plain"])
    same = relative <= loss_tolerance and check["gradient cosine"] >= cosine_floor
    W = ours.W.detach().clone().requires_grad_(True)
    optimizer = torch.optim.AdamW([W], lr=1e-2, weight_decay=0.0)
    generator = torch.Generator().manual_seed(0)

    def plain_step() -> None:
        noise = gumbel_noise((tokens.shape[0], *W.shape), generator)
        loss = plain.loss(straight_through_mask(W, noise, 2.0))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    result = compare(
        f"mask training step, like for like ({ours.config.precision}): plain loop / ours "
        "(SmolLM2, batch 16)",
        plain_step,
        ours.step,
        target=1.0,
        repeats=3 if quick else 7,
        speedup=True,
    )
    result.same_outputs = same
    result.extra.update(
        {
            **{key: round(value, 6) for key, value in check.items()},
            "relative loss difference (tolerance)": f"{relative:.2e} ({loss_tolerance:g})",
            "gradient cosine floor": cosine_floor,
            "precision": ours.config.precision,
        }
    )
    return result


def bench_bf16_mask_agreement(quick: bool) -> BenchmarkResult:
    """The short schedule on capitalize in fp32 and in bf16 autocast: time, Jaccard of the two
    masks, answer CE and accuracy under each on 40 held-out examples."""
    import lens_heads as lh
    from lens_heads.engine import TrainingConfig, train_mask

    model = lh.load_model(ALIAS)
    task = lh.get_task("capitalize")
    steps = 100 if quick else 200
    results = {}
    for dtype in ("float32", "bfloat16"):
        config = TrainingConfig.short(steps=steps, precision=dtype)
        results[dtype] = train_mask(model, task, config, progress=False)
    masks = {dtype: result.mask for dtype, result in results.items()}
    extra: dict[str, Any] = {"steps": steps, "task": task.name}
    for dtype, mask in masks.items():
        table = lh.evaluate(model, task, ["mask"], mask=mask, n_eval=40, progress=False).to_frame()
        extra[f"{dtype}: heads kept"] = mask.n_selected
        extra[f"{dtype}: accuracy"] = round(float(table["accuracy"].iloc[0]), 3)
        extra[f"{dtype}: answer CE"] = round(float(table["answer CE (paper: PPL)"].iloc[0]), 3)
        extra[f"{dtype}: final training loss"] = round(results[dtype].final_loss, 3)
    extra["Jaccard(bf16 mask, fp32 mask)"] = round(
        lh.jaccard(masks["float32"], masks["bfloat16"]), 3
    )
    extra["expected Jaccard of random masks of these sizes"] = round(
        lh.expected_random_jaccard(masks["float32"], masks["bfloat16"]), 3
    )
    fp32_s = results["float32"].timing["seconds"]
    bf16_s = results["bfloat16"].timing["seconds"]
    return BenchmarkResult(
        f"short schedule ({steps} steps, capitalize): fp32 / bf16 training time",
        baseline_s=fp32_s,
        candidate_s=bf16_s,
        ratio=fp32_s / bf16_s,
        target=2.0,
        higher_is_better=True,
        extra=extra,
    )
