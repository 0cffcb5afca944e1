"""Plans held to measurements on the CPU (issue 44): the peak memory :func:`lens_heads.plan`
predicts for mask training, a removal sweep and the atlas's single-head effects against the peak
each really reaches, on SmolLM2, Gemma 3 270M and random-weight Qwen2.5-0.5B and 1.5B, with the
time per step beside the plan's; then time and memory against parameter count and prompt count.

    python -m benchmarks.bench_scale --out results/benchmarks/scale [--only NAME] [--quick]

Each measurement runs in a fresh interpreter (``--case``), so nothing an earlier one allocated
counts: the peak is the highest resident set during the job (``VmHWM``, reset once the model is
in memory and warm) less the resident set before the model loaded. The interpreter runs with
``MALLOC_MMAP_THRESHOLD_=131072``: glibc then returns every freed block of 128 KiB or more to the
system at once, so the resident set follows the live tensors (one step after the warm-up gives
the peak). The cases of :data:`TIMED` run again with glibc's default allocator and one thread:
their time is the job's (the returning allocator's page faults slow it; with one thread the CPU
time hardly depends on what else the machine runs) and their peak is higher by the freed blocks
the allocator keeps. Random-weight models get the token ids of SmolLM2's tokenizer (valid in their
larger vocabularies), so their prompts keep the task's real token lengths.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: the peak's resident set follows live memory: glibc returns freed blocks of >= 128 KiB
RETURNING = {"MALLOC_MMAP_THRESHOLD_": "131072"}
REAL = ("smollm2-135m-instruct", "gemma-3-270m")
SOURCE = "smollm2-135m-instruct"  # whose tokenizer gives random-weight models their token ids
TRAIN_TASK, WORD_TASK = "en-fr", "capitalize"

SMOLLM2, GEMMA = "smollm2-135m-instruct", "gemma-3-270m"
QWEN05, QWEN15 = "qwen2.5-0.5b-instruct", "qwen2.5-1.5b-instruct"
#: what the provenance of a run takes its seeds and data from: the tasks and the shipped
#: configurations of the random-weight models
INPUTS = {
    "tasks": (TRAIN_TASK, WORD_TASK),
    "configs": tuple(f"lens_heads/data/model_configs/{alias}.json" for alias in (QWEN05, QWEN15)),
}
F32, BF16 = "float32", "bfloat16"


def _case(name: str, model: str, job: str, weights: str = F32, precision: str = F32,
          checkpoint: bool = False, batch: int = 16) -> tuple:  # fmt: skip
    """(name, model, job, weights dtype, training precision, checkpointing, batch)"""
    return (name, model, job, weights, precision, checkpoint, batch)


CASES: list[tuple] = [
    _case("smollm2 train fp32", SMOLLM2, "train-mask"),
    _case("smollm2 train autocast", SMOLLM2, "train-mask", precision=BF16),
    _case("smollm2 train bf16", SMOLLM2, "train-mask", BF16, BF16),
    _case("smollm2 train checkpointed", SMOLLM2, "train-mask", precision=BF16, checkpoint=True),
    _case("smollm2 train autocast b4", SMOLLM2, "train-mask", precision=BF16, batch=4),
    _case("smollm2 train autocast b8", SMOLLM2, "train-mask", precision=BF16, batch=8),
    _case("smollm2 train autocast b32", SMOLLM2, "train-mask", precision=BF16, batch=32),
    _case("gemma train autocast", GEMMA, "train-mask", precision=BF16),
    _case("gemma train bf16", GEMMA, "train-mask", BF16, BF16),
    _case("qwen0.5b train autocast", QWEN05, "train-mask", precision=BF16),
    _case("qwen0.5b train bf16", QWEN05, "train-mask", BF16, BF16),
    _case("qwen0.5b train checkpointed", QWEN05, "train-mask", precision=BF16, checkpoint=True),
    _case("qwen1.5b train autocast", QWEN15, "train-mask", precision=BF16),
    _case("qwen1.5b train bf16", QWEN15, "train-mask", BF16, BF16),
    _case("smollm2 sweep fp32", SMOLLM2, "sweep", batch=0),
    _case("gemma sweep fp32", GEMMA, "sweep", batch=0),
    _case("qwen0.5b sweep fp32", QWEN05, "sweep", batch=0),
    _case("qwen1.5b sweep bf16", QWEN15, "sweep", BF16, batch=0),
    _case("smollm2 atlas fp32", SMOLLM2, "atlas", batch=8),
    _case("gemma atlas fp32", GEMMA, "atlas", batch=8),
    _case("qwen0.5b atlas fp32", QWEN05, "atlas", batch=8),
    _case("qwen1.5b atlas bf16", QWEN15, "atlas", BF16, batch=8),
]

#: the atlas of a model this large runs the effects of its first layers only (its peak is the
#: first layer's, which runs every block; the time per head comes from the layers it ran)
ATLAS_LAYERS = {"qwen2.5-0.5b-instruct": 3, "qwen2.5-1.5b-instruct": 2}
#: the cases also run with glibc's default allocator, which time their job (the returning
#: allocator's page faults slow it): time against parameters and against prompts per step
TIMED = {
    "smollm2 train autocast", "smollm2 train autocast b4", "smollm2 train autocast b8",
    "smollm2 train autocast b32", "gemma train autocast", "qwen0.5b train autocast",
    "qwen1.5b train autocast", "smollm2 train fp32", "smollm2 sweep fp32", "gemma atlas fp32",
}  # fmt: skip
SWEEP_CHUNKS = 2


# -- the parent: token ids, subprocesses, the stored result ---------------------------------
def _source_tokenizer() -> Any:
    from transformers import AutoTokenizer

    from lens_heads.core._models import MODEL_ALIASES, _cached_model_dir, prepare_model

    prepare_model(SOURCE)
    return AutoTokenizer.from_pretrained(_cached_model_dir(MODEL_ALIASES[SOURCE].sha256()))


def _inputs() -> dict[str, Any]:
    """SmolLM2's token ids of the tasks in its chat template: the training examples (prompt and
    answer with its end-of-turn token), the word prompts and their answers' first tokens."""
    import lens_heads as lh
    from lens_heads.core._prompts import (
        PromptFormat,
        answer_end_tokens,
        encode_example,
        encode_text,
    )

    tokenizer = _source_tokenizer()
    end = answer_end_tokens(tokenizer, chat=True)
    fmt = PromptFormat(chat=True)
    train = []
    for example in lh.get_task(TRAIN_TASK).examples:
        prompt = fmt.render(example.input, tokenizer)
        train.append(encode_example(tokenizer, prompt, example.output, chat=True, end_tokens=end))
    words = lh.get_task(WORD_TASK).examples[:40]
    return {
        "train": [[example.tokens, example.answer_start] for example in train],
        "prompts": [encode_text(tokenizer, e.input, chat=True) for e in words],
        "answers": [tokenizer(e.output, add_special_tokens=False).input_ids[0] for e in words],
        "sweep_prompt_tokens": len(encode_text(tokenizer, "apple", chat=True)),
    }


def write_tokens(path: Path) -> None:
    """The token ids the GPU benchmark runs (benchmarks/bench_scale_gpu.py): no tokenizer has to
    travel to the GPU machine."""
    from lens_heads.core._storage import write_atomic

    found = _inputs()
    found["source"] = (
        f"{SOURCE}'s tokenizer: the {TRAIN_TASK} task's examples (prompt in the chat template, "
        f"answer, end-of-turn token) and the first 40 {WORD_TASK} prompts with their answers' "
        "first tokens (python -m benchmarks.bench_scale --write-tokens)"
    )
    write_atomic(path, json.dumps(found, separators=(",", ":")) + "\n")


def _run_case(case: tuple, inputs_file: Path, allocator: str, quick: bool) -> dict[str, Any]:
    env = dict(os.environ)
    env.pop("MALLOC_MMAP_THRESHOLD_", None)
    if allocator == "returning":
        env.update(RETURNING)
    else:  # one thread: a shared machine's other processes then change its CPU time little
        env["LENS_HEADS_BENCH_THREADS"] = "1"
    spec = {"case": list(case), "inputs": str(inputs_file), "quick": quick}
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_scale", "--case", json.dumps(spec)],
        capture_output=True, text=True, env=env, timeout=3600,
    )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"case {case[0]} failed:\n{done.stderr[-3000:]}")
    return json.loads(lines[-1])


def measure_all(only: str = "", quick: bool = False, default_allocator: bool = True) -> list[dict]:
    """Every case (those whose name contains ``only``, or one of its comma-separated parts), each
    in a fresh interpreter."""
    import tempfile

    inputs_file = Path(tempfile.mkdtemp()) / "inputs.json"
    inputs_file.write_text(json.dumps(_inputs()))
    found = []
    for case in CASES:
        if not any(part in case[0] for part in only.split(",")):
            continue
        print(f"measuring {case[0]} ...", flush=True)
        row = _run_case(case, inputs_file, "returning", quick)
        if default_allocator and case[0] in TIMED:  # glibc's default: the time, its own peak
            timed = _run_case(case, inputs_file, "default", quick)
            row["measured peak MiB, default allocator"] = timed["measured peak MiB"]
            row["seconds per unit, returning allocator"] = row["seconds per unit"]
            row["seconds per unit"] = timed["seconds per unit"]
            row["compute seconds per unit"] = timed["compute seconds per unit"]
            row["timed threads"] = timed["threads"]
            row |= predict(row)
            row["load average"] = timed["load average"]
        row["timed"] = default_allocator and case[0] in TIMED
        print(json.dumps({k: row[k] for k in _SHOWN if k in row}), flush=True)
        found.append(row)
    return found


_SHOWN = ("name", "predicted peak MiB", "measured peak MiB", "error %",
          "measured peak MiB, default allocator", "seconds per unit", "compute seconds per unit",
          "predicted seconds per unit", "load average")  # fmt: skip


# -- one case, in its own interpreter -----------------------------------------------------------
def _resident() -> tuple[float, float]:
    """(resident, peak resident) MiB of this process."""
    with open("/proc/self/status", encoding="utf-8") as file:
        fields = dict(line.split(":", 1) for line in file if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w", encoding="utf-8") as file:
        file.write("5")  # the peak resident set starts again from the current one


def _trim() -> None:
    import ctypes
    import gc

    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)


def predict(row: dict[str, Any]) -> dict[str, Any]:
    """The plan's numbers for a measured case, from what the case ran (``row["plan"]``)."""
    import torch

    import lens_heads as lh

    fields = {k: v for k, v in row["plan"].items() if k != "components MiB"}
    if "ablations" in fields:
        fields["ablations"] = tuple(fields["ablations"])
    threads = torch.get_num_threads()
    torch.set_num_threads(row.get("timed threads") or row["threads"])  # the time's threads
    try:
        found = lh.plan(
            row["model"], row["job"], device="cpu", dtype=row["weights"],
            precision=row["precision"], checkpoint_activations=row["checkpoint_activations"],
            **fields,
        )  # fmt: skip
    finally:
        torch.set_num_threads(threads)
    predicted, measured = found.peak("cpu") / 2**20, row["measured peak MiB"]
    components = {k: round(v / 2**20, 1) for k, v in found.components["cpu"].items()}
    return {
        "plan": {**fields, "components MiB": components},
        "predicted peak MiB": round(predicted, 1),
        "error %": round(100 * (predicted - measured) / measured, 1),
        "predicted seconds per unit": found.seconds_per_unit,
        "FLOP per unit": found.time["flops"] / found.time["units"],
        "layer calls per unit": found.time["layer calls"] / found.time["units"],
        "unit": found.time["per"],
    }


def one_case(spec: dict[str, Any]) -> dict[str, Any]:
    import torch

    import lens_heads as lh

    name, alias, job, weights, precision, checkpoint, _ = spec["case"]
    if os.environ.get("LENS_HEADS_BENCH_THREADS"):
        torch.set_num_threads(int(os.environ["LENS_HEADS_BENCH_THREADS"]))
    inputs = json.loads(Path(spec["inputs"]).read_text())
    _trim()
    base = _resident()[0]
    started = time.perf_counter()
    if alias in REAL:
        model = lh.load_model(alias, dtype=weights, verify=False)
    else:
        model = lh.random_model(alias, dtype=weights, verify=False)
    loaded = time.perf_counter() - started
    run = {"train-mask": _train, "sweep": _sweep, "atlas": _atlas}[job]
    measured, plan_fields, seconds, cpu, units = run(model, alias, inputs, spec, _measure(base))
    row = {
        "name": name, "model": alias, "job": job, "weights": weights, "precision": precision,
        "checkpoint_activations": checkpoint, "random weights": alias not in REAL,
        "parameters": sum(p.numel() for p in model.parameters()), "plan": plan_fields,
        "measured peak MiB": round(measured, 1),
        "seconds per unit": seconds / units,  # the plan's units: steps, removal steps, heads
        # CPU time over the threads: the wall time with the cores to itself (a shared machine's
        # other processes lengthen the wall time, not the CPU time)
        "compute seconds per unit": cpu / units / torch.get_num_threads(),
        "units measured": units, "load seconds": round(loaded, 1),
        "threads": torch.get_num_threads(),
        "allocator": "returning" if os.environ.get("MALLOC_MMAP_THRESHOLD_") else "default",
        "load average": round(os.getloadavg()[0], 2),
    }  # fmt: skip
    return {**row, **predict(row)}


class _measure:
    """The peak of a job: after ``warm()`` the peak restarts; ``peak()`` is the highest resident
    set since, less the resident set before the model loaded."""

    def __init__(self, base: float) -> None:
        self.base = base

    def warm(self) -> None:
        _trim()
        _reset_peak()

    def peak(self) -> float:
        return _resident()[1] - self.base


def _train(model: Any, alias: str, inputs: dict, spec: dict, meter: _measure) -> tuple:
    import lens_heads as lh
    from lens_heads.core._prompts import EncodedExample
    from lens_heads.engine import MaskTrainer, TrainingConfig

    _, _, _, _, precision, checkpoint, batch = spec["case"]
    config = TrainingConfig(
        steps=100,
        batch_size=batch,
        n_eval=0,
        precision=precision,
        checkpoint_activations=checkpoint,
    )
    trainer = MaskTrainer(model, lh.get_task(TRAIN_TASK), config)
    if alias not in REAL:  # SmolLM2's token ids: the real prompt lengths
        trainer.encoded = [EncodedExample(tokens, start) for tokens, start in inputs["train"]]
    trainer.step()  # warm-up: the partial-unembedding check, first-call allocations
    meter.warm()
    timed = not os.environ.get("MALLOC_MMAP_THRESHOLD_")
    steps = 3 if timed and not spec["quick"] else 1  # the peak: one step after the warm-up
    widths, answers, times, cpu = [], [], [], []
    for _ in range(steps):
        tokens, answer_mask = trainer.batch(trainer.step_index)
        widths.append(tokens.shape[1])
        answers.append(int(answer_mask.sum()))
        tick, cpu_tick = time.perf_counter(), time.process_time()
        trainer.step()
        times.append(time.perf_counter() - tick)
        cpu.append(time.process_time() - cpu_tick)
    fields = {"batch_size": batch, "seq_len": max(widths),
              "answer_tokens": math.ceil(max(answers) / batch)}  # fmt: skip
    return meter.peak(), fields, min(times), min(cpu), 1


def _sweep(model: Any, alias: str, inputs: dict, spec: dict, meter: _measure) -> tuple:
    import lens_heads as lh
    from lens_heads.core._prompts import encode_text, has_chat_template
    from lens_heads.heads_up._sweep_inputs import default_batch_size

    n_layers, n_heads = lh.head_shape(model)
    if alias in REAL:
        prompt, target, chat = "apple", "Apple", has_chat_template(model.tokenizer)
    else:  # a byte-level tokenizer: one token a character, as long as SmolLM2's chat prompt
        prompt, target, chat = "x" * (inputs["sweep_prompt_tokens"] - 1), 65, False
    prompt_len = len(encode_text(model.tokenizer, prompt, chat=chat))
    rows = default_batch_size(model, prompt_len + 20)
    heads = [f"L{layer}H{head}" for layer in range(n_layers) for head in range(n_heads)]
    order = heads[: min(len(heads), SWEEP_CHUNKS * rows - 1)]
    options = dict(target=target, max_new_tokens=20, chat=chat, progress=False)
    lh.removal_sweep(model, prompt, order[:1], **options)  # warm-up
    meter.warm()
    tick, cpu_tick = time.perf_counter(), time.process_time()
    lh.removal_sweep(model, prompt, order, **options)
    seconds, cpu = time.perf_counter() - tick, time.process_time() - cpu_tick
    steps = len(order) + 1
    chunk = math.ceil(steps / math.ceil(steps / rows))
    return meter.peak(), {"batch_size": chunk, "seq_len": prompt_len}, seconds, cpu, steps


def _atlas(model: Any, alias: str, inputs: dict, spec: dict, meter: _measure) -> tuple:
    import itertools

    import lens_heads as lh
    from lens_heads.atlas import _effects as effects
    from lens_heads.core._capture import encode_prompt, target_token_ids

    n_layers, n_heads = lh.head_shape(model)
    if alias in REAL:
        words = lh.get_task(WORD_TASK).examples[:40]
        prompts = [list(encode_prompt(model, e.input).tokens) for e in words]
        answers = target_token_ids(model, [e.output for e in words])
    else:
        prompts, answers = inputs["prompts"], inputs["answers"]
    layers = ATLAS_LAYERS.get(alias, n_layers)
    shared = effects.common_prefix(prompts)
    config = effects.EffectsConfig(ablations=("zero",), batch_size=spec["case"][6])
    prefix = effects.prefix_pays(prompts, shared, config.batch_size) and shared > 0
    effects.single_head_effects(model, prompts[:1], answers[:1], config=config)  # warm-up
    if layers < n_layers:  # the first layers only: the prefix path iterates (layer, ablation)
        assert prefix, "a partial atlas needs the shared-prefix path"
        effects.tqdm = lambda steps, **kw: itertools.islice(steps, layers)
    meter.warm()
    tick, cpu_tick = time.perf_counter(), time.process_time()
    effects.single_head_effects(model, prompts, answers, config=config)
    seconds, cpu = time.perf_counter() - tick, time.process_time() - cpu_tick
    fields = {"batch_size": config.batch_size, "seq_len": max(map(len, prompts)),
              "prefix_len": shared if prefix else 0, "n_eval": len(prompts),
              "ablations": ("zero",)}  # fmt: skip
    return meter.peak(), fields, seconds, cpu, layers * n_heads


# -- the CPU's throughput, fitted ------------------------------------------------------------------
def fit_cpu(rows: list[dict]) -> dict[str, Any]:
    """The plan's CPU constants from the timed cases (one thread, CPU seconds): a training step
    takes FLOP / throughput + layer calls x a fixed cost; the bf16-autocast steps give the bf16
    throughput and the cost per layer call (least squares), the float32 step the float32
    throughput, the sweep and the atlas the cost per forward layer call."""
    import numpy as np

    timed = [r for r in rows if r.get("timed")]
    bf16 = [r for r in timed if r["job"] == "train-mask" and r["precision"] == "bfloat16"
            and r["weights"] == "float32"]  # fmt: skip
    if len(bf16) < 2:
        return {}
    design = np.array([[r["FLOP per unit"], r["layer calls per unit"]] for r in bf16])
    seconds = np.array([r["compute seconds per unit"] for r in bf16])
    (inverse, per_call), *_ = np.linalg.lstsq(design, seconds, rcond=None)
    per_call = max(0.0, float(per_call))
    found: dict[str, Any] = {"bfloat16 GFLOP/s per thread": 1e-9 / float(inverse)}
    fp32 = [r for r in timed if r["job"] == "train-mask" and r["precision"] == "float32"]
    if fp32:
        rates = [r["FLOP per unit"] / (r["compute seconds per unit"]
                 - per_call * r["layer calls per unit"]) for r in fp32]  # fmt: skip
        found["float32 GFLOP/s per thread"] = 1e-9 * float(np.mean(rates))
    found["seconds per training layer call"] = per_call
    forward = [r for r in timed if r["job"] in ("sweep", "atlas") and r["weights"] == "float32"]
    if forward and "float32 GFLOP/s per thread" in found:
        rate = found["float32 GFLOP/s per thread"] * 1e9
        costs = [(r["compute seconds per unit"] - r["FLOP per unit"] / rate)
                 / r["layer calls per unit"] for r in forward]  # fmt: skip
        found["seconds per forward layer call"] = max(0.0, float(np.mean(costs)))
    found["cases"] = [r["name"] for r in timed]
    return found


#: (row, job, plan fields) of the GPU runs the issue asks for: predictions on one H100
PREDICTED = (
    ("Llama-3.1-8B mask training, batch 16", "llama-3.1-8b-instruct", "train-mask", {}),
    ("the same, activation checkpointing", "llama-3.1-8b-instruct", "train-mask",
     {"checkpoint_activations": True}),
    ("the same, batch 64", "llama-3.1-8b-instruct", "train-mask", {"batch_size": 64}),
    ("Llama-3.1-8B every single-head effect, 40 prompts", "llama-3.1-8b-instruct", "atlas",
     {"ablations": ("zero",), "seq_len": 32, "prefix_len": 24}),
    ("Llama-3.1-8B removal sweep, 20 tokens a step", "llama-3.1-8b-instruct", "sweep", {}),
    ("Llama-3.1-8B head roles, 4 gate fits, batch 8", "llama-3.1-8b-instruct", "roles", {}),
    ("Qwen2.5-14B mask training, batch 16", "qwen2.5-14b-instruct", "train-mask", {}),
    ("Llama-3.1-8B, 8 layers' weights in CPU memory", "llama-3.1-8b-instruct", "train-mask",
     {"offload_layers": 8}),
    ("Llama-3.1-70B mask training, batch 16", "llama-3.1-70b-instruct", "train-mask", {}),
)  # fmt: skip


def gpu_predictions() -> dict[str, Any]:
    """The plan's predictions for the GPU runs the issue asks for (one H100), stored with the
    code that computed them, so the docs show them without importing the package."""
    import lens_heads as lh
    from lens_heads.core._provenance import code_version

    rows = []
    for label, alias, job, fields in PREDICTED:
        found = lh.plan(alias, job, device="cuda", gpu="h100", **fields)
        rows.append({
            "run": label, "model": alias, "job": job, "fields": fields,
            "peak GiB (tensors)": found.tensors() / 2**30, "fits": bool(found.fits),
            "seconds per unit": float(found.seconds_per_unit), "per": found.time["per"],
            "samples per second": None if found.samples_per_second is None
            else float(found.samples_per_second),
            "units": int(found.time["units"]), "seconds": float(found.time["seconds"]),
        })  # fmt: skip
    return {"code": code_version(), "rows": rows}


# -- the stored result ----------------------------------------------------------------------------
def summary(rows: list[dict]) -> dict[str, Any]:
    """Per job, the largest error and whether every case is within 15 %."""
    within = {row["name"]: abs(row["error %"]) <= 15 for row in rows}
    jobs: dict[str, float] = {}
    for row in rows:
        jobs[row["job"]] = max(jobs.get(row["job"], 0.0), abs(row["error %"]))
    timed = {row["name"]: _time_error(row) for row in rows if row.get("timed")}
    return {"cases": len(rows), "within 15 %": sum(within.values()),
            "largest |error| % by job": jobs, "all within 15 %": all(within.values()),
            "timed cases": len(timed),
            "time within 15 %": sum(abs(error) <= 15 for error in timed.values()),
            "time error % by case": timed}  # fmt: skip


def _time_error(row: dict[str, Any]) -> float:
    """The plan's time per unit against the measured CPU time (over the timed run's threads), in
    percent. The plan's CPU constants are fitted to these same cases: an in-sample error."""
    measured = row["compute seconds per unit"]
    return round(100 * (row["predicted seconds per unit"] - measured) / measured, 1)


def curves() -> dict[str, Any]:
    """The plan's curves beside the measurements: time and peak of a training step (batch 16,
    float32 weights, bf16 autocast, translation-length prompts) over the Qwen2.5 sizes, and of
    SmolLM2's step over the batch size."""
    import lens_heads as lh

    sizes = {}
    for alias in ("qwen2.5-0.5b-instruct", "qwen2.5-1.5b-instruct", "qwen2.5-3b-instruct",
                  "qwen2.5-7b-instruct", "qwen2.5-14b-instruct"):  # fmt: skip
        found = lh.plan(alias, "train-mask", device="cpu", dtype="float32", precision="bfloat16")
        sizes[alias] = {"parameters": found.shape["n_params"],
                        "peak MiB": found.peak("cpu") / 2**20,
                        "seconds per step": found.seconds_per_unit}  # fmt: skip
    batches = {}
    for batch in (1, 2, 4, 8, 12, 16, 24, 32):
        found = lh.plan(SOURCE, "train-mask", batch_size=batch, seq_len=53, answer_tokens=10,
                        dtype="float32", precision="bfloat16")  # fmt: skip
        batches[batch] = {"peak MiB": found.peak("cpu") / 2**20,
                          "seconds per step": found.seconds_per_unit}  # fmt: skip
    return {"by parameters": sizes, "by batch (SmolLM2)": batches}


def figure(rows: list[dict], plan_curves: dict[str, Any]) -> Any:
    """Measured peak and time (points) against parameters and prompts, the plan's beside."""
    from plotly.subplots import make_subplots

    titles = (
        "peak memory of a training step vs parameters", "time per step vs parameters",
        "peak memory vs prompts per step (SmolLM2)", "time per step vs prompts (SmolLM2)",
    )  # fmt: skip
    fig = make_subplots(rows=2, cols=2, subplot_titles=titles)
    train = [r for r in rows if r["job"] == "train-mask" and r["precision"] == "bfloat16"
             and r["weights"] == "float32" and not r["checkpoint_activations"]
             and r.get("timed")]  # fmt: skip
    by_size = [r for r in train if r["plan"]["batch_size"] == 16]
    batch = [r for r in train if r["model"] == SOURCE]
    curve = plan_curves["by parameters"].values()
    xs = [c["parameters"] for c in curve]
    for col, key, measured in ((1, "peak MiB", "measured peak MiB"),
                               (2, "seconds per step", "compute seconds per unit")):  # fmt: skip
        fig.add_scatter(x=xs, y=[c[key] for c in curve], mode="lines+markers", name=f"plan: {key}",
                        row=1, col=col)  # fmt: skip
        fig.add_scatter(x=[r["parameters"] for r in by_size], y=[r[measured] for r in by_size],
                        mode="markers", marker={"size": 11}, name=f"measured: {key}",
                        text=[r["name"] for r in by_size], row=1, col=col)  # fmt: skip
        points = plan_curves["by batch (SmolLM2)"]
        fig.add_scatter(x=list(points), y=[p[key] for p in points.values()], mode="lines",
                        name=f"plan (SmolLM2): {key}", row=2, col=col)  # fmt: skip
        fig.add_scatter(x=[r["plan"]["batch_size"] for r in batch], y=[r[measured] for r in batch],
                        mode="markers", marker={"size": 11}, name=f"measured (SmolLM2): {key}",
                        row=2, col=col)  # fmt: skip
    fig.update_xaxes(type="log", title_text="parameters", row=1)
    fig.update_xaxes(title_text="prompts per step", row=2)
    fig.update_yaxes(type="log", row=1)
    fig.update_layout(template="plotly_white", height=800,
                      title="Plan (lines) against measurements (points), CPU")  # fmt: skip
    return fig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", help="(internal) one measurement, as JSON")
    parser.add_argument("--out", help="output folder (numbers.json, figure.html)")
    parser.add_argument(
        "--only",
        default="",
        help="the cases whose name contains this (or one of its comma-separated parts)",
    )
    parser.add_argument("--quick", action="store_true", help="one measured training step")
    parser.add_argument(
        "--no-default-allocator", action="store_true", help="skip the runs that time the jobs"
    )
    parser.add_argument(
        "--replan", action="store_true", help="recompute the stored cases' predictions only"
    )
    parser.add_argument("--write-tokens", help="write the GPU benchmark's token ids to this file")
    args = parser.parse_args(argv)
    if args.write_tokens:
        write_tokens(Path(args.write_tokens))
        return 0
    if args.case:
        print(json.dumps(one_case(json.loads(args.case)), default=str), flush=True)
        return 0
    if not args.out:
        parser.error("--out is required")
    from analyses._common import provenance_of
    from lens_heads.core._provenance import code_version
    from lens_heads.core._storage import write_atomic

    started = time.monotonic()
    out = Path(args.out)
    previous = out / "numbers.json"
    command = ["python", "-m", "benchmarks.bench_scale", *(argv or sys.argv[1:])]
    if args.replan:  # the measurements as stored, the predictions of the code as it is
        record = json.loads(previous.read_text())
        rows = [{**row, **predict(row)} for row in record["cases"]]
    else:
        rows = measure_all(args.only, args.quick, not args.no_default_allocator)
        provenance = provenance_of(command, started, INPUTS) | {"precision": "per case"}
        record = {"provenance": provenance}
        for row in rows:  # each case names the run that measured it
            row["measured by"] = {"command": " ".join(command), "code": code_version()}
    if args.only and previous.is_file() and not args.replan:  # keep an earlier run's others
        names = {row["name"] for row in rows}
        earlier = json.loads(previous.read_text())
        kept = [r for r in earlier["cases"] if r["name"] not in names]
        for row in kept:
            row.setdefault("measured by", {
                "command": earlier["provenance"]["command"], "code": earlier["provenance"]["code"]
            })  # fmt: skip
        order = {case[0]: i for i, case in enumerate(CASES)}
        rows = sorted(kept + rows, key=lambda row: order.get(row["name"], len(order)))
        rows = [{**row, **predict(row)} for row in rows]  # every prediction by this code
    plan_curves = curves()
    record |= {
        "cases": rows,
        "summary": summary(rows),
        "fitted CPU constants": fit_cpu(rows),
        "curves": plan_curves,
        "method": __doc__.split("\n\n", 2)[2].strip(),
        "predictions": {"command": " ".join(command), "code": code_version()},
        "gpu predictions": gpu_predictions(),
    }
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "numbers.json", json.dumps(record, indent=2, default=str))
    write_atomic(out / "figure.html", figure(rows, plan_curves).to_html(include_plotlyjs="cdn"))
    print(json.dumps(record["summary"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
