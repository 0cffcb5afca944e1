"""The papers' model sizes on one GPU (issue 44), in one pass that a 15-minute GPU window fits:
random-weight models made on the GPU (no weights travel), each measurement beside the plan's
prediction (:func:`lens_heads.plan`: the allocator's tensors, as ``max_memory_allocated``).

    python -m benchmarks.bench_scale_gpu --out gpu-check/scale [--budget 420]
    python -m benchmarks.bench_scale_gpu --out /tmp/scale-dry --dry-run    # the same code, CPU

The steps, in order of priority, each skipped when the time left is below its estimate and cut
at its cap: Llama-3.1-8B-shape mask training (batch 16, translation-length prompts) and plain
``transformers``' forward and backward of the same batch; every single-head effect of its 1,024
query heads on 40 prompts; a removal sweep; head-role gate fits (4 masks at once) beside Causal
Head Gating's 32 GB for Llama 8B; larger batches and activation checkpointing; the Qwen2.5-14B
shape; the 8B with some layers' weights in CPU memory. ``--dry-run`` runs every step on the CPU
with scaled-down shapes (2 layers, 4 heads): it checks the code path, its numbers measure
nothing. Prompts are SmolLM2's token ids of the built-in tasks in its chat template
(``scale_tokens.json``, written by ``python -m benchmarks.bench_scale --write-tokens``): the
tasks' real token lengths, valid ids in every shipped vocabulary.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

TOKENS = Path(__file__).with_name("scale_tokens.json")
LLAMA8, QWEN14 = "llama-3.1-8b-instruct", "qwen2.5-14b-instruct"
#: the scaled-down shape of a dry run (the configuration's other values kept)
DRY = {
    "num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "head_dim": 16,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512,
}  # fmt: skip
DRY_NOTE = "; a dry run on the CPU with scaled-down shapes measures nothing"
#: Causal Head Gating's own estimate for Llama 8B (its slurm/README.md; DESIGN.md section 9)
CHG_GB = 32


class Run:
    """One pass: the device, dry or not, the time left, and what each step found."""

    def __init__(self, dry: bool, budget: float) -> None:
        self.dry = dry
        self.device = "cpu" if dry else "cuda"
        self.deadline = time.monotonic() + budget
        self.steps: dict[str, dict[str, Any]] = {}
        data = json.loads(TOKENS.read_text())
        self.train, self.prompts, self.answers = data["train"], data["prompts"], data["answers"]

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def config(self, alias: str) -> dict[str, Any]:
        from lens_heads.core._model_configs import model_config

        values = model_config(alias)["config"]
        if self.dry:
            values.update(DRY)
        return values

    def shape(self, alias: str) -> Any:
        from lens_heads.core._model_shape import ModelShape

        return ModelShape.from_config(alias, self.config(alias))

    def ids(self, tokens: list[int], vocab: int) -> list[int]:
        return [t % vocab for t in tokens] if self.dry else tokens

    def model(self, alias: str, **kwargs: Any) -> Any:
        import lens_heads as lh

        spec = self.config(alias) if self.dry else alias
        return lh.random_model(spec, device=self.device, dtype="bfloat16", **kwargs)

    def step(self, name: str, estimate: float, cap: float, work: Callable[[float], dict]) -> None:
        """Run ``work(cap)`` when the time left covers ``estimate``; record what it found."""
        if self.left() < estimate:
            self.steps[name] = {"status": "skipped", "reason": f"{self.left():.0f} s left, "
                                f"about {estimate:.0f} s needed"}  # fmt: skip
            print(f"== {name}: skipped", flush=True)
            return
        started = time.monotonic()
        try:
            found = {"status": "ok", **work(min(cap, self.left()))}
        except Exception as error:  # a step that fails must not cost the others their turn
            found = {"status": "error", "error": f"{type(error).__name__}: {error}"[:1500]}
        found["seconds"] = round(time.monotonic() - started, 1)
        self.steps[name] = found
        print(f"== {name}: {json.dumps(found, default=str)[:600]}", flush=True)
        _free()


def _free() -> None:
    import gc

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


@contextlib.contextmanager
def _peak(device: str) -> Iterator[dict[str, float | None]]:
    """The allocator's peak (GiB) over the block (None on a CPU)."""
    found: dict[str, float | None] = {"peak GiB": None}
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    yield found
    if device == "cuda":
        torch.cuda.synchronize()
        found["peak GiB"] = torch.cuda.max_memory_allocated() / 2**30


def _beside(found: dict[str, Any], plan: Any, device: str) -> dict[str, Any]:
    """The plan's prediction beside a measurement: tensors on the device, the error in %."""
    predicted = plan.tensors("cuda" if device == "cuda" else "cpu") / 2**30
    found["predicted peak GiB"] = round(predicted, 3)
    if found.get("peak GiB"):
        found["error %"] = round(100 * (predicted - found["peak GiB"]) / found["peak GiB"], 1)
    found["predicted seconds per unit"] = plan.seconds_per_unit
    return found


# -- training steps ------------------------------------------------------------------------------
def _trainer(run: Run, model: Any, batch: int, **fields: Any) -> Any:
    import lens_heads as lh
    from lens_heads.core._prompts import EncodedExample
    from lens_heads.engine import MaskTrainer, TrainingConfig

    config = TrainingConfig(
        steps=10_000, batch_size=batch, n_eval=0, precision="bfloat16", **fields
    )
    trainer = MaskTrainer(model, lh.get_task("en-fr"), config)
    vocab = int(model.cfg.d_vocab)
    trainer.encoded = [EncodedExample(run.ids(t, vocab), start) for t, start in run.train]
    return trainer


def train_steps(run: Run, model: Any, alias: str, batch: int, cap: float, **fields: Any) -> dict:
    """Median seconds per step, samples/s and the peak of mask training at ``batch``."""
    import lens_heads as lh

    trainer = _trainer(run, model, batch, **fields)
    trainer.step()  # warm-up
    _sync(run.device)
    widths, answers, times = [], [], []
    started = time.monotonic()
    with _peak(run.device) as found:
        while len(times) < (2 if run.dry else 8) and (time.monotonic() - started) < cap / 2:
            tokens, answer_mask = trainer.batch(trainer.step_index)
            widths.append(tokens.shape[1])
            answers.append(int(answer_mask.sum()))
            tick = time.perf_counter()
            trainer.step()
            _sync(run.device)
            times.append(time.perf_counter() - tick)
    seconds = statistics.median(times)
    rows = batch * fields.get("n_masks", 1)
    job = "roles" if fields.get("gates") == "sigmoid" else "train-mask"
    plan = lh.plan(
        run.shape(alias), job, batch_size=batch, seq_len=max(widths),
        answer_tokens=-(-max(answers) // batch), device=run.device, dtype="bfloat16",
        precision="bfloat16", checkpoint_activations=fields.get("checkpoint_activations", False),
        n_masks=fields.get("n_masks", 4),
    )  # fmt: skip
    found |= {"batch": batch, "rows": rows, "seconds per step": seconds,
              "samples per second": rows / seconds, "steps timed": len(times),
              "tokens per row": max(widths)}  # fmt: skip
    return _beside(found, plan, run.device)


def plain_step(run: Run, alias: str, batch: int) -> dict:
    """Plain ``transformers``: forward and backward of the same batch (bf16 weights, bf16
    autocast, no hooks, no mask; logits at the answer positions, a gradient to the input
    embeddings), the floor a lens_heads step cannot go below."""
    from transformers import AutoModelForCausalLM

    from lens_heads.core._model_configs import hf_config
    from lens_heads.core._prompts import EncodedExample, collate

    with torch.device(run.device):
        model = AutoModelForCausalLM.from_config(hf_config(run.config(alias)), dtype=torch.bfloat16)
    model.requires_grad_(False).eval()
    vocab = model.config.vocab_size
    examples = [EncodedExample(run.ids(t, vocab), s) for t, s in run.train[:batch]]
    tokens, answer_mask, _ = collate(examples, 0)
    tokens, answer_mask = tokens.to(run.device), answer_mask.to(run.device)
    rows, cols = answer_mask.nonzero(as_tuple=True)

    def step() -> None:
        with torch.autocast(run.device, dtype=torch.bfloat16):
            embeds = model.get_input_embeddings()(tokens).detach().requires_grad_()
            hidden = model.model(inputs_embeds=embeds).last_hidden_state
            logits = model.lm_head(hidden[rows, cols - 1]).float()
        torch.nn.functional.cross_entropy(logits, tokens[answer_mask]).backward()
        _sync(run.device)

    step()
    times = []
    for _ in range(2 if run.dry else 8):
        tick = time.perf_counter()
        step()
        times.append(time.perf_counter() - tick)
    return {"seconds per step": statistics.median(times), "tokens per row": tokens.shape[1]}


# -- inference: the atlas's effects, a sweep -------------------------------------------------------
def atlas_effects(run: Run, model: Any, alias: str, cap: float) -> dict:
    """Every single-head effect on 40 prompts (zero ablation), cut at ``cap`` seconds."""
    import lens_heads as lh
    from lens_heads.atlas import _effects as effects

    n_layers, n_heads = lh.head_shape(model)
    vocab = int(model.cfg.d_vocab)
    prompts = [run.ids(p, vocab) for p in run.prompts[:40]]
    answers = [a % vocab for a in run.answers[:40]]
    config = effects.EffectsConfig(ablations=("zero",), batch_size=8)
    shared = effects.common_prefix(prompts)
    done = {"layers": 0}
    started = time.monotonic()

    def timed(steps: Any, **kwargs: Any) -> Any:  # the prefix path: one step per layer
        for item in steps:
            if time.monotonic() - started > cap:
                return
            yield item
            done["layers"] += 1

    original = effects.tqdm
    effects.tqdm = timed
    try:
        with _peak(run.device) as found:
            tick = time.perf_counter()
            effects.single_head_effects(model, prompts, answers, config=config)
            _sync(run.device)
            seconds = time.perf_counter() - tick
    finally:
        effects.tqdm = original
    prefix = effects.prefix_pays(prompts, shared, config.batch_size)
    heads = (done["layers"] or n_layers) * n_heads
    plan = lh.plan(
        run.shape(alias), "atlas", batch_size=8, seq_len=max(map(len, prompts)),
        prefix_len=shared if prefix else 0, n_eval=len(prompts), ablations=("zero",),
        device=run.device, dtype="bfloat16",
    )  # fmt: skip
    found |= {
        "heads": heads, "of heads": n_layers * n_heads, "prompts": len(prompts),
        "seconds per head": seconds / heads, "shared prefix": shared if prefix else 0,
        "seconds for all heads (extrapolated)": seconds / heads * n_layers * n_heads,
    }  # fmt: skip
    return _beside(found, plan, run.device)


def sweep(run: Run, model: Any, alias: str, cap: float) -> dict:
    """A removal sweep of the first heads (20 greedy tokens per step) for ``cap`` seconds."""
    import lens_heads as lh
    from lens_heads.core._prompts import encode_text
    from lens_heads.heads_up._sweep_inputs import default_batch_size

    n_layers, n_heads = lh.head_shape(model)
    prompt = "x" * (len(run.prompts[0]) - 1)  # byte-level: as long as the real chat prompt
    prompt_len = len(encode_text(model.tokenizer, prompt, chat=False))
    rows = default_batch_size(model, prompt_len + 20)
    options = dict(target=65, max_new_tokens=20, chat=False, progress=False)
    lh.removal_sweep(model, prompt, ["L0H0"], **options)  # warm-up
    heads = [f"L{layer}H{head}" for layer in range(n_layers) for head in range(n_heads)]
    tick = time.perf_counter()
    lh.removal_sweep(model, prompt, heads[: rows - 1], **options)  # one chunk: its time
    chunk = time.perf_counter() - tick
    count = max(rows - 1, min(len(heads), int(cap / max(chunk, 1e-3)) * rows - 1))
    with _peak(run.device) as found:
        tick = time.perf_counter()
        lh.removal_sweep(model, prompt, heads[:count], **options)
        seconds = time.perf_counter() - tick
    plan = lh.plan(run.shape(alias), "sweep", batch_size=rows, seq_len=prompt_len,
                   device=run.device, dtype="bfloat16")  # fmt: skip
    per_step = seconds / (count + 1)
    found |= {
        "removal steps": count + 1, "steps per chunk": rows, "seconds per removal step": per_step,
        "seconds for all heads (extrapolated)": per_step * (len(heads) + 1),
    }  # fmt: skip
    return _beside(found, plan, run.device)


# -- the pass ------------------------------------------------------------------------------------
def run_all(run: Run) -> None:

    lh_model: dict[str, Any] = {}

    def llama() -> Any:
        if "model" not in lh_model:
            lh_model["model"] = run.model(LLAMA8)
        return lh_model["model"]

    def train16(cap: float) -> dict:
        found = train_steps(run, llama(), LLAMA8, 16, cap)
        plain = plain_step(run, LLAMA8, 16)
        found["plain transformers seconds per step"] = plain["seconds per step"]
        found["lens_heads / plain"] = found["seconds per step"] / plain["seconds per step"]
        return found

    run.step("llama8b train-mask batch 16", 60, 120, train16)
    run.step("llama8b atlas 1024 heads x 40 prompts", 60, 150,
             lambda cap: atlas_effects(run, llama(), LLAMA8, cap))  # fmt: skip
    run.step("llama8b removal sweep", 40, 60, lambda cap: sweep(run, llama(), LLAMA8, cap))
    run.step("llama8b roles (4 gate fits at once, batch 8)", 30, 60,
             lambda cap: train_steps(run, llama(), LLAMA8, 8, cap, gates="sigmoid", n_masks=4)
             | {"Causal Head Gating's estimate GB": CHG_GB})  # fmt: skip
    for batch in (32, 64):
        run.step(f"llama8b train-mask batch {batch}", 30, 45,
                 lambda cap, b=batch: train_steps(run, llama(), LLAMA8, b, cap))  # fmt: skip
    run.step(
        "llama8b train-mask batch 16, checkpointed", 30, 45,
        lambda cap: train_steps(run, llama(), LLAMA8, 16, cap, checkpoint_activations=True),
    )  # fmt: skip
    lh_model.clear()
    _free()

    def qwen14(cap: float) -> dict:
        model = run.model(QWEN14)
        try:
            return train_steps(run, model, QWEN14, 16, cap)
        finally:
            del model

    run.step("qwen2.5-14b train-mask batch 16", 60, 90, qwen14)
    run.step(
        "llama8b split: the last layers' weights in CPU memory",
        60,
        90,
        lambda cap: split(run, cap),
    )


def split(run: Run, cap: float) -> dict:
    """The 8B with its last ``k`` layers' weights in CPU memory (a device map), moved to the GPU
    for each forward: a training step's time and the GPU's peak, beside the plan's."""
    import lens_heads as lh

    shape = run.shape(LLAMA8)
    offload = max(1, shape.n_layers // 4)
    gpu: Any = "cpu" if run.dry else 0
    layout = {"model.embed_tokens": gpu, "model.norm": gpu, "model.rotary_emb": gpu, "lm_head": gpu}
    for layer in range(shape.n_layers):
        layout[f"model.layers.{layer}"] = "cpu" if layer >= shape.n_layers - offload else gpu
    model = run.model(LLAMA8, device_map=layout, verify=False)
    try:
        found = train_steps(run, model, LLAMA8, 16, cap)
    finally:
        del model
    plan = lh.plan(
        shape, "train-mask", batch_size=16, seq_len=found["tokens per row"], device=run.device,
        dtype="bfloat16", offload_layers=0 if run.dry else offload,
    )  # fmt: skip
    found["layers in CPU memory"] = offload
    return _beside(found, plan, run.device)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for numbers.json")
    parser.add_argument("--budget", type=float, default=420.0, help="seconds for all steps")
    parser.add_argument("--dry-run", action="store_true", help="the same steps, CPU, tiny shapes")
    args = parser.parse_args(argv)
    if not args.dry_run and not torch.cuda.is_available():
        print("no CUDA GPU: run with --dry-run to check the code path on the CPU")
        return 2
    from lens_heads.core._provenance import code_version, machine
    from lens_heads.core._storage import write_atomic

    run = Run(args.dry_run, args.budget)
    started = time.monotonic()
    run_all(run)
    record = {
        "dry run": args.dry_run,
        "note": "random weights: time and memory only" + (DRY_NOTE if args.dry_run else ""),
        "steps": run.steps,
        "provenance": {"command": " ".join(["python", "-m", "benchmarks.bench_scale_gpu",
                                           *(argv or sys.argv[1:])]),
                       "code": code_version(), "machine": machine(),
                       "precision": "bfloat16", "seconds": round(time.monotonic() - started, 1)},
    }  # fmt: skip
    out = Path(args.out)
    write_atomic(out / "numbers.json", json.dumps(record, indent=2, default=str))
    failed = [name for name, step in run.steps.items() if step["status"] == "error"]
    print(f"wrote {out / 'numbers.json'}; {len(failed)} step(s) failed: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
