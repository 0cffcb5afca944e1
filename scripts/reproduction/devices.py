"""Blocks on where lens_heads computes: the compatibility matrix's summary numbers, and the GPU
check (``scripts/gpu_check.sh``: the device tests, the matrix with the bridge on the GPU, the
GPU benchmark), read from what that script stored under ``results/``."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

from reproduction import NotMeasured

#: the matrix's columns: check -> header
MATRIX_CHECKS = {
    "ones": "1. mask of ones",
    "head": "2. query head",
    "generate": "3. generate",
    "pattern": "4. hook_pattern",
    "gradient": "5. mask gradient",
    "training": "6. train, resume, sweep",
}
GPU_MATRIX = "compatibility/cuda"
GPU_BENCHMARK = "benchmarks/gpu"
GPU_COMMAND = "bash scripts/gpu_check.sh  # on a machine with a CUDA GPU"


def matrix_summary(run: dict[str, Any]) -> dict[str, Any]:
    """Cells passed, cells in all, and the largest logit difference (relative), attention-pattern
    difference and mask-gradient error (in tolerances) of one stored matrix."""
    cells = [row["results"][check] for row in run["rows"] for check in MATRIX_CHECKS]

    def largest(check: str) -> float:
        return max(row["results"][check]["max_diff"] or 0.0 for row in run["rows"])

    return {
        "passed": sum(cell["status"] == "pass" for cell in cells),
        "cells": len(cells),
        "logits": max(largest(check) for check in ("ones", "head", "training")),
        "pattern": largest("pattern"),
        "gradient": largest("gradient"),
    }


def _newest(folder: Path) -> Path | None:
    files = sorted(folder.glob("transformers-*/numbers.json"))
    return files[-1] if files else None


def _tests(file: Path) -> tuple[int, int]:
    """(passed, run) of a pytest JUnit XML report."""
    suite = ElementTree.parse(file).getroot().find("testsuite")
    assert suite is not None, f"{file}: no testsuite"
    run = int(suite.get("tests", 0)) - int(suite.get("skipped", 0))
    failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
    return run - failed, run


#: which commit each GPU record's source hash came from (``scripts/source_commit.py --out``)
GPU_SOURCES = "benchmarks/gpu/sources.json"


def source_words(source: str, commits: dict[str, str | None]) -> str:
    """A stored record's source hash with the commit it came from, as
    ``scripts/source_commit.py`` found it: the commit, none (edited code), or not looked up.

    >>> source_words("ab12", {"ab12": "9e616c733533a286"})
    'source ab12, the code of commit 9e616c7'
    >>> source_words("cd34", {"cd34": None})
    'source cd34, which no commit has: it ran on edited, uncommitted code'
    """
    if source not in commits:
        return f"source {source} (its commit not looked up: `python scripts/source_commit.py`)"
    commit = commits[source]
    if commit is None:
        return f"source {source}, which no commit has: it ran on edited, uncommitted code"
    return f"source {source}, the code of commit {commit[:7]}"


def gpu_check(results: Path) -> str:
    """What ``scripts/gpu_check.sh`` measured on the one GPU it ran on: the device tests, the
    matrix with the bridge on the GPU, and the CPU/GPU timings of the GPU benchmark."""
    benchmark_file = results / GPU_BENCHMARK / "numbers.json"
    matrix_file = _newest(results / GPU_MATRIX)
    if not benchmark_file.is_file() or matrix_file is None:
        return NotMeasured(GPU_BENCHMARK, GPU_COMMAND).cell().capitalize() + "."
    [entry] = json.loads(benchmark_file.read_text(encoding="utf-8"))["results"]
    matrix = json.loads(matrix_file.read_text(encoding="utf-8"))
    summary = matrix_summary(matrix)
    sources_file = results / GPU_SOURCES
    commits = (
        json.loads(sources_file.read_text(encoding="utf-8"))["commits"]
        if sources_file.is_file()
        else {}
    )
    matrix_source = matrix["code"]["source"]
    rerun = (
        " (the next lent GPU re-runs it: `bash scripts/gpu_check.sh matrix`)"
        if commits.get(matrix_source, "") is None
        else ""
    )
    passed, run = _tests(results / GPU_BENCHMARK / "tests.xml")
    extra, machine = entry["extra"], entry["machine"]
    libraries = ", ".join(f"{name} {v}" for name, v in machine["libraries"].items())
    sweep = next(key for key in extra if key.endswith(" CPU s")).removesuffix(" CPU s")
    step_16 = entry["candidate_s"]
    steps = {16: step_16} | {
        int(key.rsplit(" ", 1)[1]): value
        for key, value in extra.items()
        if key.startswith("GPU training step s, batch ")
    }
    widest = max(steps)
    # TrainingConfig's precision="auto": bf16 autocast where the CPU computes bf16 natively
    cpu_precision = "bf16 autocast" if machine["native_bf16"] else "float32"
    met = "met" if entry["ratio"] >= entry["target"] else "missed"
    rows = [
        ("device tests (`tests/unit/core/test_devices.py`)", f"{passed} of {run} passed"),
        (
            "compatibility matrix, the bridge on the GPU (float32) against `transformers` on "
            "the CPU",
            f"{summary['passed']} of {summary['cells']} cells pass; largest logit difference "
            f"{summary['logits']:.1e} (relative), pattern {summary['pattern']:.1e}, mask "
            f"gradient {summary['gradient']:.2f} of its tolerance; "
            f"{source_words(matrix_source, commits)}{rerun}",
        ),
        (
            f"training step, batch 16: CPU ({machine['threads']} threads, {cpu_precision}) → "
            f"GPU ({extra['GPU weights dtype'].removeprefix('torch.')} weights)",
            f"{entry['baseline_s']:.3f} s → {step_16:.3f} s: {entry['ratio']:.2f}× (target "
            f"≥ {entry['target']:g}: {met})",
        ),
        (
            f"{sweep}: CPU → GPU",
            f"{extra[sweep + ' CPU s']:.2f} s → {extra[sweep + ' GPU s']:.2f} s: "
            f"{extra['removal sweep CPU / GPU']:.2f}×",
        ),
        (
            "GPU training step by batch size",
            ", ".join(f"{size}: {seconds:.3f} s" for size, seconds in sorted(steps.items()))
            + f" ({widest // 16}× the batch takes {steps[widest] / step_16:.1f}× as long)",
        ),
    ]
    floor = extra.get("plain transformers forward and backward on the GPU s, batch 16")
    if floor is not None:
        rows.append(
            (
                "plain `transformers` forward and backward on the GPU, batch 16 (no hooks, no "
                "mask: the eager floor)",
                f"{floor:.3f} s; the lens_heads step takes {step_16 / floor:.1f}× as long",
            )
        )
    table = ["| check | result |", "|---|---|"] + [f"| {a} | {b} |" for a, b in rows]
    return "\n".join(
        [
            f"On one {extra['GPU']} ({machine['cpu']}, {machine['cores']} cores; {libraries}), "
            f"`{GPU_COMMAND.split('  #')[0]}` ({source_words(entry['code']['source'], commits)}); "
            "the benchmark "
            f"model is {extra['model']}, peak GPU memory {extra['peak GPU memory MiB']:.0f} MiB:",
            "",
            *table,
            "",
            f"Stored: `results/{GPU_BENCHMARK}/` (benchmark and test report), "
            f"`results/{matrix_file.parent.relative_to(results).as_posix()}/`; the commits of "
            f"their sources: `results/{GPU_SOURCES}`.",
        ]
    )
