"""Blocks of ``docs/scale.md`` on plans (issue 44): the plan's CPU predictions against the peaks
and times ``benchmarks/bench_scale.py`` measured, what ``scripts/gpu_check.sh`` measured on a GPU
(or that it has not run), and the plan's predictions for the GPU runs, computed by the code as it
is and labelled as predictions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from reproduction import NotMeasured

CPU = "benchmarks/scale"
CPU_COMMAND = "python -m benchmarks.bench_scale --out results/benchmarks/scale"
GPU = "benchmarks/gpu/scale"
GPU_COMMAND = "bash scripts/gpu_check.sh scale  # on a machine with a CUDA GPU"


def _read(results: Path, path: str, command: str) -> dict[str, Any]:
    file = results / path / "numbers.json"
    if not file.is_file():
        raise NotMeasured(path, command, "has not been run yet")
    return json.loads(file.read_text(encoding="utf-8"))


def _first_up(text: str) -> str:
    return text[:1].upper() + text[1:]


def _machine(record: dict[str, Any]) -> str:
    machine = record["provenance"]["machine"]
    versions = ", ".join(f"{k} {v}" for k, v in machine["libraries"].items())
    return f"{machine['cpu']}, {machine['threads']} threads ({versions})"


def cpu_table(results: Path) -> str:
    """Every measured case: the plan's peak against the measured one, the error, the peak under
    glibc's default allocator, the time per unit against the plan's."""
    try:
        record = _read(results, CPU, CPU_COMMAND)
    except NotMeasured as missing:
        return _first_up(missing.cell()) + "."
    lines = [
        "| case | parameters | weights, training precision | rows x tokens | plan's peak "
        "| measured peak | error | peak, glibc default | time: wall (CPU time / threads) "
        "| plan's time | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in record["cases"]:
        plan = row["plan"]
        precision = row["precision"] if row["job"] == "train-mask" else "inference"
        if row.get("checkpoint_activations"):
            precision += ", checkpointed"
        default = row.get("measured peak MiB, default allocator")
        lines.append(
            f"| {row['name']}{' (random weights)' if row['random weights'] else ''} "
            f"| {row['parameters'] / 1e6:.0f} M | {row['weights']}, {precision} "
            f"| {plan['batch_size']} x {plan['seq_len']} | {row['predicted peak MiB']:.0f} MiB "
            f"| {row['measured peak MiB']:.0f} MiB | {row['error %']:+.1f} % "
            f"| {'' if default is None else f'{default:.0f} MiB'} "
            f"| {_time(row)} | {row.get('load average', '') if row.get('timed') else ''} |"
        )
    summary = record["summary"]
    worst = ", ".join(
        f"{job} {value:.1f} %" for job, value in summary["largest |error| % by job"].items()
    )
    return "\n".join(
        [
            f"Measured on {_machine(record)}: {_runs(record)} (predictions by source "
            f"{record['predictions']['code']['source']}). {summary['within 15 %']} of "
            f"{summary['cases']} cases are within ±15 %; the largest error by job: {worst}.",
            "",
            *lines,
            "",
            f"Stored: `results/{CPU}/numbers.json`, the curves in `results/{CPU}/figure.html`. "
            "Load is the machine's load average during the timed run: the wall time of a shared "
            "machine grows with it, the CPU time over the threads (what the job would take with "
            "the cores to itself) much less; the plan's CPU throughput is fitted to the latter.",
        ]
    )


def _runs(record: dict[str, Any]) -> str:
    """The run, or the runs, that measured the stored cases, with the cases of each."""
    provenance = record["provenance"]
    runs: dict[tuple[str, str], list[str]] = {}
    for row in record["cases"]:
        by = row.get("measured by") or provenance
        runs.setdefault((by["command"], by["code"]["source"]), []).append(row["name"])
    if len(runs) == 1:
        (command, source), _ = next(iter(runs.items()))
        return f"`{command}` (source {source})"
    parts = [
        f"`{command}` (source {source}): {len(names)} case{'s' * (len(names) > 1)}"
        + (f" ({', '.join(names)})" if len(names) <= 3 else "")
        for (command, source), names in runs.items()
    ]
    return f"{len(runs)} runs, " + "; ".join(parts)


def _time(row: dict[str, Any]) -> str:
    plan = f"{row['predicted seconds per unit']:.3g} s per {row['unit']}"
    if not row.get("timed"):
        return f"not timed | {plan}"
    wall, compute = row["seconds per unit"], row["compute seconds per unit"]
    return f"{wall:.3g} s ({compute:.3g} s) | {plan}"


def gpu_table(results: Path) -> str:
    """What ``bench_scale_gpu.py`` measured on a GPU, each step beside the plan."""
    try:
        record = _read(results, GPU, GPU_COMMAND)
    except NotMeasured as missing:
        return _first_up(missing.cell()) + ": no GPU has run it yet."
    lines = ["| step | measured | plan |", "|---|---|---|"]
    for name, step in record["steps"].items():
        if step["status"] != "ok":
            lines.append(
                f"| {name} | {step['status']}: {step.get('error') or step.get('reason')} | |"
            )
            continue
        measured = [f"peak {step['peak GiB']:.2f} GiB"] if step.get("peak GiB") else []
        for key in ("samples per second", "seconds per step", "seconds per head",
                    "seconds per removal step", "seconds for all heads (extrapolated)",
                    "lens_heads / plain"):  # fmt: skip
            if key in step:
                measured.append(f"{key} {step[key]:.3g}")
        planned = f"peak {step['predicted peak GiB']:.2f} GiB ({step.get('error %', '')} %)"
        lines.append(f"| {name} | {'; '.join(measured)} | {planned} |")
    provenance = record["provenance"]
    return "\n".join(
        [f"On {provenance['machine'].get('cuda')}: `{provenance['command']}`.", "", *lines]
    )


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


def gpu_plan(results: Path) -> str:
    """The plan's predictions for the GPU runs (``lh.plan(..., device="cuda", gpu="h100")``),
    computed by the code as it is: predictions, not measurements."""
    import lens_heads as lh
    from lens_heads.scale.plan_result import gib

    lines = [
        "| run (prediction, one H100 80 GB, bf16 weights, bf16 autocast) | peak (tensors) "
        "| fits | time |",
        "|---|---|---|---|",
    ]
    for label, alias, job, fields in PREDICTED:
        found = lh.plan(alias, job, device="cuda", gpu="h100", **fields)
        time = f"{found.seconds_per_unit:.3g} s per {found.time['per']}"
        if found.samples_per_second is not None:
            time += f", {found.samples_per_second:.0f} samples/s"
        if int(found.time["units"]) > 1:
            time += f"; {float(found.time['seconds']):.0f} s for all"
        fits = "yes" if found.fits else "**no**"
        lines.append(f"| {label} | {gib(found.tensors())} | {fits} | {time} |")
    return "\n".join(lines)
