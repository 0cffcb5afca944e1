"""A small benchmark harness: every figure is a ratio against a baseline measured in the same run.

Machines here are noisy, so absolute times mean little; a benchmark times its baseline and its
candidate alternately (A B A B ...) and reports the median of the per-pair ratios.

A benchmark is a function ``bench_<name>(quick: bool)`` in a module ``benchmarks/bench_<topic>.py``
returning a :class:`BenchmarkResult` (or a dict with the same fields), or a list of them (e.g.
the ratio against the reference code's way and the like-for-like ratio); ``python -m
benchmarks.run`` finds them. A result whose two sides should compute the same thing records
whether they did (``same_outputs``): when they do not, the benchmark fails whatever its speed.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["BenchmarkResult", "compare", "peak_rss_mb", "time_call"]


@dataclass
class BenchmarkResult:
    """One benchmark: ``ratio = candidate / baseline`` (lower is better unless stated)."""

    name: str
    baseline_s: float
    candidate_s: float
    ratio: float
    target: float
    higher_is_better: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    #: whether both sides gave the same outputs (None: the benchmark does not compare them)
    same_outputs: bool | None = None
    #: A/B pairs timed (the ratio is their median)
    pairs: int = 1

    @property
    def passed(self) -> bool:
        if self.same_outputs is False:
            return False
        return self.ratio >= self.target if self.higher_is_better else self.ratio <= self.target

    @classmethod
    def from_any(cls, value: BenchmarkResult | dict[str, Any]) -> BenchmarkResult:
        if isinstance(value, BenchmarkResult):
            return value
        known = {k: value[k] for k in cls.__dataclass_fields__ if k in value}
        known.setdefault("extra", {})
        known["extra"].update({k: v for k, v in value.items() if k not in cls.__dataclass_fields__})
        return cls(**known)

    def line(self) -> str:
        sense = ">=" if self.higher_is_better else "<="
        verdict = "ok" if self.passed else "MISSED"
        if self.same_outputs is False:
            verdict = "FAILED: the two sides give different outputs"
        return (
            f"{self.name:40s} baseline {self.baseline_s:8.3f} s  "
            f"candidate {self.candidate_s:8.3f} s  "
            f"ratio {self.ratio:6.3f} (target {sense} {self.target}) {verdict}"
        )

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "passed": self.passed}


def time_call(function: Callable[[], Any]) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def compare(
    name: str,
    baseline: Callable[[], Any],
    candidate: Callable[[], Any],
    *,
    target: float,
    repeats: int = 5,
    warmup: int = 1,
    higher_is_better: bool = False,
    speedup: bool = False,
    extra: dict[str, Any] | None = None,
) -> BenchmarkResult:
    """Time ``baseline`` and ``candidate`` alternately; the ratio is the median pair ratio.

    With ``speedup=True`` the ratio is baseline / candidate (a speed-up, higher is better).
    """
    for _ in range(warmup):
        baseline()
        candidate()
    pairs = []
    for _ in range(repeats):
        pairs.append((time_call(baseline), time_call(candidate)))
    base = statistics.median(b for b, _ in pairs)
    cand = statistics.median(c for _, c in pairs)
    if speedup:
        ratio = statistics.median(b / c for b, c in pairs)
        higher_is_better = True
    else:
        ratio = statistics.median(c / b for b, c in pairs)
    return BenchmarkResult(
        name, base, cand, ratio, target, higher_is_better, dict(extra or {}), pairs=repeats
    )


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MiB: ``VmHWM`` of its own address space
    on Linux. Not ``ru_maxrss``: Linux keeps that across fork and exec, so a benchmark's child
    process would report at least the resident set its parent had when it started it (two
    children of a parent holding a model reported the same peak); ``ru_maxrss`` only where there
    is no ``/proc`` (macOS counts it in bytes)."""
    status = Path("/proc/self/status")
    if status.is_file():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    import platform
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024 / (1024 if platform.system() == "Darwin" else 1)


def write_summary(results: list[BenchmarkResult], path: Path, *, merge: bool = False) -> None:
    """Write the JSON summary atomically; with ``merge`` the earlier entries of other benchmarks
    in ``path`` are kept (``--only`` re-runs one without losing the rest), each stamped with the
    time it was measured."""
    from lens_heads.core._provenance import DATA, code_version, machine, run_record
    from lens_heads.core._storage import write_atomic

    now = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    entries = [{**result.to_json(), "measured": now} for result in results]
    if merge and path.exists():
        try:
            earlier = json.loads(path.read_text()).get("results", [])
        except (json.JSONDecodeError, AttributeError):
            earlier = []  # an unreadable summary is rewritten, not merged
        names = {entry["name"] for entry in entries}
        entries = [e for e in earlier if e.get("name") not in names] + entries
    stamp = {"machine": machine(), "code": code_version()}
    entries = [{**stamp, **entry} if "machine" not in entry else entry for entry in entries]
    # the benchmarks name their tasks in their code: the record hashes all the built-in data
    payload = {"created": now, **stamp, "results": entries, **run_record(reads=[DATA])}
    write_atomic(path, json.dumps(payload, indent=2, default=str))
