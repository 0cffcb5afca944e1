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
            f"{summary['cases']} cases are within `±15 %`; the largest error by job: {worst}."
            + _time_sentence(summary),
            "",
            *lines,
            "",
            f"Stored: `results/{CPU}/numbers.json`, the curves in `results/{CPU}/figure.html`. "
            "Load is the machine's load average during the timed run: the wall time of a shared "
            "machine grows with it, the CPU time over the threads (what the job would take with "
            "the cores to itself) much less; the plan's CPU throughput is fitted to the latter.",
        ]
    )


def _time_sentence(summary: dict[str, Any]) -> str:
    """How the plan's CPU times compare with the timed cases', said as the in-sample fit it is."""
    errors = summary.get("time error % by case")
    if not errors:
        return ""
    low, high = min(errors.values()), max(errors.values())
    verdict = "hold" if summary["time within 15 %"] == summary["timed cases"] else "do not hold"
    return (
        f" The plan's CPU times, whose constants are fitted to these same timed cases, are within "
        f"`±15 %` of the measured CPU time for {summary['time within 15 %']} of "
        f"{summary['timed cases']} (errors from {low:+.0f} % to {high:+.0f} %): its time "
        f"predictions {verdict} to `±15 %` on this CPU, even in sample."
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


def gpu_plan(results: Path) -> str:
    """The plan's predictions for the GPU runs (``lh.plan(..., device="cuda", gpu="h100")``), as
    ``benchmarks/bench_scale.py`` stored them with the code that computed them: predictions, not
    measurements."""
    try:
        record = _read(results, CPU, CPU_COMMAND)
    except NotMeasured as missing:
        return _first_up(missing.cell()) + "."
    predictions = record.get("gpu predictions")
    if not predictions:
        return f"Not stored yet: `{CPU_COMMAND} --replan` computes them."
    lines = [
        "| run (prediction, one H100 `80 GB`, bf16 weights, bf16 autocast) | peak (tensors) "
        "| fits | time |",
        "|---|---|---|---|",
    ]
    for row in predictions["rows"]:
        time = f"{row['seconds per unit']:.3g} s per {row['per']}"
        if row["samples per second"] is not None:
            time += f", {row['samples per second']:.0f} samples/s"
        if row["units"] > 1:
            time += f"; {row['seconds']:.0f} s for all"
        fits = "yes" if row["fits"] else "**no**"
        lines.append(f"| {row['run']} | {row['peak GiB (tensors)']:.2f} GiB | {fits} | {time} |")
    lines += ["", f"Computed by source {predictions['code']['source']}."]
    return "\n".join(lines)
