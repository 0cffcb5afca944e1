"""A plan before the run: the peak memory a job needs on each device and the time it takes, from
the model's configuration alone -- no weights, no download, about a millisecond.

>>> import lens_heads as lh
>>> plan = lh.plan("llama-3.1-8b-instruct", "train-mask", batch_size=16, device="cuda")
>>> round(plan.weights_gib, 2), plan.fits
(14.96, True)

The memory model (``docs/scale.md`` writes it out and holds it to measurements) counts what this
code keeps, not a textbook's transformer:

* **weights**: parameters x bytes of the weights dtype (embeddings once when tied);
* **training** keeps, for the backward pass through every layer above the first masked one (all
  of them: the first mask sits in layer 0), per token and layer: the inputs of the RMS norms
  (upcast to float32 by every family here) with their inverse RMS, q, k and v (k and v repeated
  to every query head by eager grouped-query attention), the softmax output (``[batch, heads,
  pos, pos]`` in float32, plus its copy in the compute dtype), ``z`` (the mask's gradient needs
  it) and the gated MLP's three ``d_mlp``-wide tensors. Layer 0 keeps only what follows its
  masked ``z``. No weight gradient exists, but frozen linear layers keep their weight for the
  input's gradient, so **bf16 autocast over float32 weights keeps a bf16 copy of every weight the
  backward pass uses** (all but layer 0's q, k and v, plus the unembedding). The loss adds the
  answer positions' logits (float32, with their log-softmax and gradient); the backward pass
  needs working memory of about :data:`TRANSIENT_LAYERS` layers' activations; the mask logits
  and their AdamW state are float32 and tiny. **Activation checkpointing** keeps each block's
  input instead (the last block in full) and recomputes one block at a time.
* **inference** (sweeps, atlas effects, evaluation, generation) keeps no activations: one
  layer's working memory at a time, the logits of every position of a forward (a sweep chunk,
  a prefill), the KV cache of generated tokens and, for the atlas, every layer's residual
  stream of its batch (or a shared prefix's KV cache for one row per head).
* **runtime**: on a CPU the interpreter's model objects and the tokenizer; on a GPU the CUDA
  context, outside the allocator (a plan's "tensors" exclude it, as ``max_memory_allocated``
  does).

Time is floating-point work (2 FLOP per weight per token forward, as much again backward, one
more forward with checkpointing; eager attention's ``pos x pos`` products; the unembedding only
where logits are computed) over the device's throughput, plus a fixed cost per layer call that
dominates small models on a GPU (:data:`GPU_LAYER_SECONDS`).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lens_heads.core import InputError, configure
from lens_heads.core.internal import ModelShape, model_shape, shape_of_model
from lens_heads.scale._plan_config import GPUS, GpuSpec, PlanConfig
from lens_heads.scale._plan_result import Plan

__all__ = [
    "CPU_GFLOPS_PER_THREAD",
    "CPU_LAYER_SECONDS",
    "CPU_RUNTIME_BYTES",
    "CUDA_CONTEXT_BYTES",
    "GPU_EFFICIENCY",
    "GPU_LAYER_SECONDS",
    "HOST_LINK_BYTES_PER_S",
    "TOKENIZER_BYTES_PER_TOKEN",
    "TRANSIENT_LAYERS",
    "Plan",
    "PlanConfig",
    "available_memory",
    "fixes",
    "plan",
]

MIB = 2**20

#: a CPU process's model objects besides the weights (bridge, hooks, configuration), measured
#: on SmolLM2, Gemma 3 270M and random-weight Qwen2.5-0.5B (benchmarks/bench_scale.py)
CPU_RUNTIME_BYTES = 185 * MIB
#: a real checkpoint's tokenizer in memory, per vocabulary entry (SmolLM2's 49,152 and Gemma's
#: 262,144 entries: about 1 KiB each); a random-weight model's byte-level tokenizer is negligible
TOKENIZER_BYTES_PER_TOKEN = 1024
#: the CUDA context, outside what the caching allocator reports (a typical size)
CUDA_CONTEXT_BYTES = 512 * MIB
#: the backward pass's working memory, in layers' worth of kept activations (the gradients of
#: one layer's tensors and the next layer's outputs live at once)
TRANSIENT_LAYERS = 2.0
#: a forward's working memory beyond the live layer's tensors (temporaries of the ops)
FORWARD_SLACK = 1.5
#: effective CPU throughput per torch thread in GFLOP/s for float32 and for bf16 where the CPU
#: computes bf16 natively (the "fitted CPU constants" of results/benchmarks/scale/numbers.json:
#: least squares over its one-thread timed training steps, on an AMD EPYC with native bf16; bf16
#: without native support is about 3.5x slower than float32)
CPU_GFLOPS_PER_THREAD = {"float32": 97.7, "bfloat16": 187.3}
#: the share of a GPU's datasheet throughput eager PyTorch reaches on these shapes (an
#: assumption until scripts/gpu_check.sh measures it)
GPU_EFFICIENCY = 0.4
#: fixed seconds per layer call on a GPU: a training step (forward and backward) and a forward
#: (from the stored SmolLM2-shape GPU benchmark: a 30-layer step took about the same time at
#: batch 16 and 256, about 4.7 ms per layer)
GPU_LAYER_SECONDS = {"train": 4.7e-3, "forward": 1.6e-3}
#: fixed seconds per layer call on a CPU (the bridge's hooks and Python around each block; the
#: same fit)
CPU_LAYER_SECONDS = {"train": 0.0260, "forward": 0.0204}
#: host-to-GPU copies of offloaded layers (pageable memory over PCIe; an assumption)
HOST_LINK_BYTES_PER_S = 12e9

_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def plan(
    model: Any,
    job: str = "train-mask",
    config: PlanConfig | None = None,
    **overrides: Any,
) -> Plan:
    """The plan of ``job`` for ``model`` (a loaded model, a :class:`ModelShape`, or anything
    :func:`lens_heads.core._model_shape.model_shape` reads: a shipped configuration's alias, an
    offline alias, a checkpoint folder), as a :class:`Plan`: predicted peak memory per device,
    the memory available there, whether it fits (and the fix when not), time per step or head.

    ``config`` (a :class:`PlanConfig`) holds the settings, its fields also as keywords
    (``batch_size=16, device="cuda"``).
    """
    config = configure(PlanConfig, config, {"job": job, **overrides}, "plan")
    shape, random_weights = _shape(model)
    return _plan(shape, config, random_weights)


def _shape(model: Any) -> tuple[ModelShape, bool]:
    """The model's shape and whether it has (or will have) random weights."""
    from lens_heads.core.internal import CONFIG_ALIASES

    if isinstance(model, ModelShape):
        return model, model.name in CONFIG_ALIASES
    if isinstance(model, (str, os.PathLike)):
        shape = model_shape(model)
        if shape is None or not shape.complete:
            raise InputError(
                f"{os.fspath(model)!r}: its configuration is not readable before loading (a "
                ".gguf file or a hub id); plan with a checkpoint folder, a shipped configuration "
                "or a loaded model"
            )
        return shape, os.fspath(model) in CONFIG_ALIASES
    return shape_of_model(model), bool(getattr(model, "lens_heads_random_weights", False))


@dataclass(frozen=True)
class _Sizes:
    """The numbers of one plan's arithmetic."""

    shape: ModelShape
    config: PlanConfig
    weight_bytes: int  # per element
    act_bytes: int  # per element of the compute dtype

    @property
    def rows(self) -> int:
        config = self.config
        batch = config.value("batch_size")
        if config.job == "roles":
            return batch * config.n_masks
        if config.job == "sweep" and batch == 0:  # as removal_sweep's default_batch_size
            tokens = config.value("seq_len") + config.value("max_new_tokens")
            per_row = max(1, tokens) * (self.shape.d_vocab or 1) * 4
            return max(1, min(64, (1 << 28) // per_row))
        return batch


def _plan(
    shape: ModelShape, config: PlanConfig, random_weights: bool, available: Any = None
) -> Plan:
    weights_dtype = config.resolved_dtype()
    weight_bytes = _BYTES[weights_dtype]
    act_bytes = 2 if (config.autocast() or weight_bytes == 2) else 4
    sizes = _Sizes(shape, config, weight_bytes, act_bytes)
    device = "cuda" if config.on_gpu else "cpu"
    components: dict[str, dict[str, int]] = {device: {}}
    main = components[device]
    offloaded = _offloaded_bytes(sizes)
    main["weights"] = shape.n_params * weight_bytes - offloaded
    if offloaded:
        components["cpu"] = {"offloaded layers' weights": offloaded}
        main["one offloaded layer in transit"] = offloaded // max(1, config.offload_layers)
    main.update(_training(sizes) if config.training else _inference(sizes))
    runtime = CUDA_CONTEXT_BYTES if config.on_gpu else _cpu_runtime(shape, random_weights)
    main["runtime (outside the tensors)" if config.on_gpu else "runtime"] = runtime
    seconds, flops, layer_calls = _time(sizes)
    gpu = _gpu(config) if config.on_gpu else None
    found = Plan(
        model=shape.name,
        job=config.job,
        config=config.to_dict(),
        shape=_shape_record(shape),
        components=components,
        available=_available(config, gpu) if available is None else available,
        time={
            "flops": flops,
            "seconds": seconds,
            "layer calls": layer_calls,
            "per": _unit(config),
            "units": _units(sizes),
            "rows": sizes.rows,
            "device": gpu.name if gpu else f"CPU, {_threads()} threads",
        },
        weights_dtype=weights_dtype,
        autocast=config.autocast(),
        random_weights=random_weights,
    )
    if available is None:  # the plan itself, not one of its fixes' trials
        short = [d for d in found.devices if (found.available.get(d) or 1 << 62) < found.peak(d)]
        found.fixes = {device: fixes(shape, config, found, device) for device in short}
    return found


def _shape_record(shape: ModelShape) -> dict[str, Any]:
    return {
        "n_layers": shape.n_layers, "n_heads": shape.n_heads, "n_kv_heads": shape.n_kv_heads,
        "d_model": shape.d_model, "d_mlp": shape.d_mlp, "d_head": shape.d_head,
        "d_vocab": shape.d_vocab, "tied": shape.tied, "model_type": shape.model_type,
        "qkv_bias": shape.qkv_bias, "n_params": shape.n_params,
    }  # fmt: skip


def _cpu_runtime(shape: ModelShape, random_weights: bool) -> int:
    tokenizer = 0 if random_weights else TOKENIZER_BYTES_PER_TOKEN * (shape.d_vocab or 0)
    return CPU_RUNTIME_BYTES + tokenizer


def _offloaded_bytes(sizes: _Sizes) -> int:
    shape, config = sizes.shape, sizes.config
    if config.offload_layers > shape.n_layers:
        raise InputError(
            f"offload_layers={config.offload_layers} exceeds the model's {shape.n_layers} layers"
        )
    layer = shape.attention_params + shape.mlp_params + shape.norm_params
    return config.offload_layers * layer * sizes.weight_bytes


# -- training: what the backward pass needs ----------------------------------------------------
def _norms(shape: ModelShape) -> int:
    return 4 if (shape.model_type or "").startswith("gemma") else 2


def _layer_bytes_per_token(sizes: _Sizes, first: bool) -> float:
    """Bytes one token keeps for the backward pass in one layer (``first``: layer 0, whose
    attention runs before the first mask and keeps nothing)."""
    shape, e, ew = sizes.shape, sizes.act_bytes, sizes.weight_bytes
    d, m, heads, d_head = shape._d_model, shape.d_mlp or 0, shape.n_heads, shape._d_head
    norm = 4 * d + 4  # the float32 input and inverse RMS of one RMS norm
    kept = ew * heads * d_head + e * 3 * m  # z, the gated MLP
    if first:
        return float((_norms(shape) - 1) * norm + kept)
    pos = sizes.config.value("seq_len")
    softmax = heads * pos * (4 + (e if e != 4 else 0))  # float32 output and its cast copy
    kept += _norms(shape) * norm + e * 3 * heads * d_head + softmax
    if shape.model_type in ("gemma3_text", "gemma3", "qwen3"):  # q and k norms
        kept += (heads + shape._kv) * (4 * d_head + 4)
    return float(kept)


def _training(sizes: _Sizes) -> dict[str, int]:
    shape, config = sizes.shape, sizes.config
    tokens = sizes.rows * config.value("seq_len")
    answers = sizes.rows * config.value("answer_tokens")
    full = _layer_bytes_per_token(sizes, first=False) * tokens
    first = _layer_bytes_per_token(sizes, first=True) * tokens
    layers = shape.n_layers
    copies = 0
    if config.autocast() and sizes.weight_bytes == 4:  # bf16 copies the backward pass keeps
        per_layer = shape.attention_params + shape.mlp_params
        first_qkv = shape._d_model * (shape.n_heads + 2 * shape._kv) * shape._d_head
        copies_layers = 2 if config.checkpoint_activations else layers
        copies = 2 * (copies_layers * per_layer - first_qkv + shape.embedding_params)
    if config.checkpoint_activations:
        resid = (4 if sizes.weight_bytes == 4 else sizes.act_bytes) * shape._d_model * tokens
        kept = (layers - 1) * resid + 2 * full  # inputs, the last block, one recomputed block
    else:
        kept = first + (layers - 1) * full
    vocab = shape.d_vocab or 0
    masks = layers * shape.n_heads * config.n_masks * 4 * 4  # W, its gradient, AdamW's moments
    return {
        "activations kept for backward": round(kept),
        "bf16 copies of float32 weights (autocast)": round(copies),
        "answer logits and loss": round(answers * vocab * (sizes.act_bytes + 8)),
        "backward working memory": round(TRANSIENT_LAYERS * full),
        "mask logits and AdamW state (float32)": masks,
    }


# -- inference: one layer at a time, logits, caches --------------------------------------------
def _forward_bytes(sizes: _Sizes, rows: int, pos: int, context: int | None = None) -> float:
    """One layer's working memory for ``rows`` x ``pos`` tokens attending to ``context``."""
    shape, e = sizes.shape, sizes.act_bytes
    d, m, heads, d_head = shape._d_model, shape.d_mlp or 0, shape.n_heads, shape._d_head
    context = context or pos
    attention = rows * pos * (2 * d * e + 4 * d + 3 * heads * d_head * e)
    attention += rows * heads * pos * context * (2 * e + 4)
    mlp = rows * pos * (2 * d * e + 3 * m * e)
    return float(FORWARD_SLACK * max(attention, mlp))


def _kv_bytes(sizes: _Sizes, rows: int, pos: int) -> int:
    shape = sizes.shape
    return 2 * shape.n_layers * rows * shape._kv * pos * shape._d_head * sizes.act_bytes


def _inference(sizes: _Sizes) -> dict[str, int]:
    shape, config = sizes.shape, sizes.config
    rows, pos = sizes.rows, config.value("seq_len")
    new = config.value("max_new_tokens")
    vocab = shape.d_vocab or 0
    if config.job == "atlas":
        return _atlas(sizes, rows, pos)
    return {
        "forward working memory": round(_forward_bytes(sizes, rows, pos)),
        "logits of every position": rows * pos * vocab * sizes.act_bytes + rows * vocab * 4,
        "KV cache": _kv_bytes(sizes, rows, pos + new) if new else 0,
    }


def _atlas_prefix(config: PlanConfig, rows: int, pos: int) -> bool:
    """Whether single_head_effects takes the shared-prefix path (lens_heads.atlas.prefix_pays)."""
    shared = config.prefix_len
    if not shared:
        return False
    suffix = pos - shared
    return shared + rows * suffix < rows * pos / 2


def _atlas(sizes: _Sizes, rows: int, pos: int) -> dict[str, int]:
    shape, config = sizes.shape, sizes.config
    heads, vocab, e = shape.n_heads, shape.d_vocab or 0, sizes.act_bytes
    logits = rows * pos * vocab * e
    if _atlas_prefix(config, rows, pos):
        shared = config.prefix_len
        cache = _kv_bytes(sizes, heads, shared) + _kv_bytes(sizes, heads * rows, pos)
        work = _forward_bytes(sizes, heads * rows, pos - shared, pos)
        return {
            "forward working memory": round(work),
            "logits of every position": logits,
            "KV cache (prefix, one row per head)": cache,
        }
    residuals = (shape.n_layers + 1) * rows * pos * shape._d_model * e
    return {
        "forward working memory": round(_forward_bytes(sizes, heads * rows, pos)),
        "logits of every position": logits,
        "residual stream of every layer": residuals,
    }


# -- time ------------------------------------------------------------------------------------
def _layer_flops(shape: ModelShape, context: int) -> float:
    """FLOP per token and layer: the projections, and eager attention's products over
    ``context`` positions."""
    projections = 2 * (shape.attention_params + shape.mlp_params)
    return float(projections + 4 * shape.n_heads * shape._d_head * context)


def _unit(config: PlanConfig) -> str:
    return {"train-mask": "step", "roles": "update", "sweep": "removal step", "atlas": "head"}.get(
        config.job, "batch"
    )


def _units(sizes: _Sizes) -> int:
    """How many units (steps, heads, batches) the work of :func:`_time` covers."""
    config, shape = sizes.config, sizes.shape
    if config.job == "atlas":
        return shape.n_layers * shape.n_heads
    if config.job == "sweep":
        return shape.n_layers * shape.n_heads + 1
    return 1


def _time(sizes: _Sizes) -> tuple[float, float, float]:
    """(seconds, FLOP, layer calls) of the work :func:`_units` counts."""
    shape, config = sizes.shape, sizes.config
    rows, pos, layers = sizes.rows, config.value("seq_len"), shape.n_layers
    vocab_flops = 2 * shape._d_model * (shape.d_vocab or 0)
    new = config.value("max_new_tokens")
    if config.training:
        forward = rows * pos * layers * _layer_flops(shape, pos)
        forward += rows * config.value("answer_tokens") * vocab_flops
        recompute = forward * (layers - 1) / layers if config.checkpoint_activations else 0.0
        flops, calls, kind = 2 * forward + recompute, float(layers), "train"
    elif config.job == "atlas":
        flops, calls = _atlas_work(sizes)
        kind = "forward"
    else:
        prefill = rows * pos * (layers * _layer_flops(shape, pos) + vocab_flops)
        decode = sum(
            rows * (layers * _layer_flops(shape, pos + t) + vocab_flops) for t in range(new)
        )
        flops, calls, kind = prefill + decode, float(layers * (1 + new)), "forward"
        if config.job == "sweep":
            chunks = math.ceil(_units(sizes) / rows)
            flops, calls = flops * chunks, calls * chunks
    seconds = flops / _throughput(config) + calls * _layer_seconds(config, kind)
    if config.offload_layers:  # each offloaded layer crosses the host link once per pass
        passes = calls / layers
        layer = shape.attention_params + shape.mlp_params + shape.norm_params
        link = config.offload_layers * layer * sizes.weight_bytes / HOST_LINK_BYTES_PER_S
        seconds += passes * link * (2 if config.training else 1)
    return float(seconds), float(flops), float(calls)


def _atlas_work(sizes: _Sizes) -> tuple[float, float]:
    """FLOP and layer calls of every single-head effect over ``n_eval`` prompts."""
    shape, config = sizes.shape, sizes.config
    rows, pos, layers, heads = sizes.rows, config.value("seq_len"), shape.n_layers, shape.n_heads
    n_prompts, ablations = config.n_eval, len(config.ablations)
    batches = math.ceil(n_prompts / rows)
    per_token = _layer_flops(shape, pos)
    if _atlas_prefix(config, rows, pos):
        shared = config.prefix_len
        per_layer = heads * shared + n_prompts * heads * (pos - shared)
        flops = ablations * layers * per_layer * layers * per_token
        calls = ablations * layers * (1 + batches) * layers
    else:
        reruns = sum(layers - layer for layer in range(layers))
        flops = batches * rows * pos * layers * per_token  # the residual streams, once
        flops += ablations * batches * rows * heads * pos * reruns * per_token
        calls = batches * layers + ablations * batches * reruns
    return float(flops), float(calls)


def _throughput(config: PlanConfig) -> float:
    if config.on_gpu:
        gpu = _gpu(config)
        tflops = gpu.fp32_tflops if config.resolved_dtype() == "float32" else gpu.bf16_tflops
        if config.autocast():
            tflops = gpu.bf16_tflops
        return tflops * 1e12 * GPU_EFFICIENCY
    from lens_heads.core.internal import cpu_native_bf16

    bf16 = config.autocast() or config.resolved_dtype() != "float32"
    per_thread = CPU_GFLOPS_PER_THREAD["bfloat16" if bf16 else "float32"]
    if bf16 and not cpu_native_bf16():
        per_thread = CPU_GFLOPS_PER_THREAD["float32"] / 3.5
    return per_thread * 1e9 * _threads()


def _layer_seconds(config: PlanConfig, kind: str) -> float:
    return (GPU_LAYER_SECONDS if config.on_gpu else CPU_LAYER_SECONDS)[kind]


def _threads() -> int:
    import torch

    return torch.get_num_threads()


# -- devices ---------------------------------------------------------------------------------
def _gpu(config: PlanConfig) -> GpuSpec:
    """The GPU a cuda plan assumes: the one named, the visible one, or an H100."""
    if config.gpu != "auto":
        return GPUS[config.gpu]
    if not gpu_may_be_visible():
        return GPUS["h100"]
    import torch

    if torch.cuda.is_available():
        index = int(config.device.split(":")[1]) if ":" in config.device else 0
        properties = torch.cuda.get_device_properties(index)
        name = properties.name
        known = next((spec for key, spec in GPUS.items() if key in name.lower()), GPUS["h100"])
        return GpuSpec(name, properties.total_memory / 2**30, known.bf16_tflops, known.fp32_tflops)
    return GPUS["h100"]


def gpu_may_be_visible() -> bool:
    """False where no GPU driver's device file exists (``/dev/nvidia*``, ROCm's ``/dev/kfd``):
    there torch would see no CUDA device, so a plan need not import torch to ask. True
    elsewhere (and on systems without ``/dev``), where torch is asked.

    >>> isinstance(gpu_may_be_visible(), bool)
    True
    """
    devices = Path("/dev")
    if not devices.is_dir():
        return True
    return any(devices.glob("nvidia[0-9]*")) or (devices / "kfd").exists()


def available_memory(device: str = "cpu") -> int | None:
    """Bytes ``device`` offers: a visible CUDA device's total memory, or the RAM available now
    (``psutil``; ``/proc/meminfo`` without it); None where neither is known."""
    if device.startswith("cuda"):
        if not gpu_may_be_visible():
            return None
        import torch

        if not torch.cuda.is_available():
            return None
        index = int(device.split(":")[1]) if ":" in device else 0
        return int(torch.cuda.get_device_properties(index).total_memory)
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except ImportError:
        try:
            with open("/proc/meminfo", encoding="utf-8") as file:
                for line in file:
                    if line.startswith("MemAvailable:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
    return None


def _available(config: PlanConfig, gpu: GpuSpec | None) -> dict[str, int | None]:
    found = {"cpu": available_memory("cpu")}
    if gpu is not None:
        visible = available_memory(config.device)
        found["cuda"] = visible if visible is not None else round(gpu.memory_gib * 2**30)
    return found


# -- the fix when a plan does not fit ------------------------------------------------------------
def fixes(shape: ModelShape, config: PlanConfig, found: Plan, device: str) -> list[str]:
    """What would make ``found`` fit on ``device``: activation checkpointing, the largest batch
    that fits, bfloat16 weights, layers kept in CPU memory (each with its predicted peak)."""
    from lens_heads.scale._plan_result import gib

    available = found.available[device]
    assert available is not None

    def peak(changed: PlanConfig) -> int:
        return _plan(shape, changed, found.random_weights, found.available).peak(device)

    found_fixes = []
    if config.training and not config.checkpoint_activations:
        changed = config.with_(checkpoint_activations=True)
        if peak(changed) <= available:
            found_fixes.append(
                "activation checkpointing (--checkpoint-activations, TrainingConfig("
                f"checkpoint_activations=True)): {gib(peak(changed))}"
            )
    batch = _largest_batch(config, lambda b: peak(config.with_(batch_size=b)) <= available)
    if batch:
        found_fixes.append(
            f"a batch of {batch} (--batch-size {batch}): "
            f"{gib(peak(config.with_(batch_size=batch)))}"
        )
    if config.resolved_dtype() == "float32":
        changed = config.with_(dtype="bfloat16")
        if peak(changed) <= available:
            found_fixes.append(f"bfloat16 weights (--dtype bfloat16): {gib(peak(changed))}")
    if config.on_gpu:
        for layers in range(config.offload_layers + 1, shape.n_layers + 1):
            changed = config.with_(offload_layers=layers)
            if peak(changed) <= available:
                found_fixes.append(
                    f"{layers} of {shape.n_layers} layers' weights in CPU memory, moved to the "
                    f"GPU for each forward (a device map; --offload-layers {layers}): "
                    f"{gib(peak(changed))} on the GPU"
                )
                break
        found_fixes.append("a GPU with more memory, or a device map over several GPUs")
    else:
        found_fixes.append("a machine with more free memory, or a GPU (--device cuda)")
    return found_fixes


def _largest_batch(config: PlanConfig, fits: Any) -> int:
    """The largest batch below the configured one that fits (0: none does)."""
    current = config.value("batch_size")
    if config.job == "sweep" and current == 0:
        current = 64
    low, high = 0, current - 1
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low
