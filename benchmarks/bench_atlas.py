"""Head-atlas benchmarks (issue 35): every single-head ablation of SmolLM2, batched from each
head's layer on, against the plain way (one hook per head, a full forward each); and the whole
atlas of SmolLM2, from a loaded model, with the time of each stage."""

from __future__ import annotations

import tempfile
import time
from typing import Any

from benchmarks.harness import BenchmarkResult, compare, peak_rss_mb


def _prompts(model: Any, n_eval: int) -> tuple[list[list[int]], list[str]]:
    import lens_heads as lh
    from lens_heads.core._capture import encode_prompt

    task = lh.get_task("capitalize")
    _, held_out = task.split(n_eval=n_eval)
    prompts = [
        encode_prompt(model, text, instruction=task.instruction).tokens for text in held_out.inputs
    ]
    return prompts, list(held_out.outputs)


def bench_single_head_effects(quick: bool) -> BenchmarkResult:
    """Zero-ablation effects of all 270 SmolLM2 heads on 40 instructed capitalize prompts
    (``quick``: 12): :func:`lens_heads.atlas.single_head_effects` against
    :func:`~lens_heads.atlas.plain_single_head_effects`; target >= 4x, identical effects (to
    float rounding). The plain way costs one full forward of every prompt per head (270)."""
    import lens_heads as lh
    from lens_heads.atlas import EffectsConfig, plain_single_head_effects, single_head_effects

    model = lh.load_model("smollm2-135m-instruct")
    prompts, answers = _prompts(model, 12 if quick else 40)
    config = EffectsConfig(ablations=("zero",), batch_size=8)
    outcome: dict[str, Any] = {}

    def plain() -> None:
        outcome["plain"] = plain_single_head_effects(model, prompts, answers, config=config)

    def batched() -> None:
        outcome["batched"] = single_head_effects(model, prompts, answers, config=config)

    result = compare(
        "single-head effects, 270 heads: one hook per head / batched from the layer (SmolLM2)",
        plain,
        batched,
        target=4.0,
        repeats=1,
        warmup=0,
        speedup=True,
    )
    difference = float((outcome["plain"]["zero"] - outcome["batched"]["zero"]).abs().max())
    from lens_heads.atlas._effects import common_prefix, prefix_pays

    shared = common_prefix(prompts)
    prefix_path = prefix_pays(prompts, shared, config.batch_size)
    batch, suffix = min(config.batch_size, len(prompts)), max(map(len, prompts)) - shared
    result.same_outputs = difference <= 1e-3
    layers, heads = lh.head_shape(model)
    result.extra.update(
        {
            "prompts": len(prompts),
            "max |effect difference|": difference,
            "largest effect": float(outcome["plain"]["zero"].abs().max()),
            "full forwards (plain)": layers * heads,
            "shared prefix tokens": shared,
            "path": "shared prefix" if prefix_path else "from each head's layer on",
            "full-forward equivalents (batched)": round(
                heads * layers * (shared + batch * suffix) / (batch * (shared + suffix))
                if prefix_path
                else sum(heads * (layers - layer) / layers for layer in range(layers)),
                1,
            ),
            "peak RSS (MiB)": round(peak_rss_mb()),
            "largest-effect head": "L{}H{}".format(
                *divmod(int(outcome["batched"]["zero"].flatten().argmax()), heads)
            ),
        }
    )
    return result


def bench_whole_atlas(quick: bool) -> BenchmarkResult:
    """The whole atlas of SmolLM2 from a loaded model (``quick``: 12 prompts, 500
    permutations), each stage timed; reported against the model's load time (no target: the
    figure is the stage times)."""
    import lens_heads as lh
    from lens_heads.atlas import AtlasConfig, head_atlas

    start = time.perf_counter()
    model = lh.load_model("smollm2-135m-instruct")
    loaded = time.perf_counter() - start
    config = AtlasConfig(n_eval=12 if quick else 40, permutations=500 if quick else 2000)
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        atlas = head_atlas(model, config, out=out)
        total = time.perf_counter() - start
        from lens_heads.core._storage import Stages

        stages = Stages(out)
        seconds = {name: stages.provenance(name).get("seconds") for name in (
            "detectors", "readouts", "effects")}  # fmt: skip
    return BenchmarkResult(
        "whole atlas (SmolLM2): model load / atlas",
        loaded,
        total,
        total / loaded,
        target=float("inf"),
        extra={"stage seconds": seconds, "measures": len(atlas.measures)},
    )
