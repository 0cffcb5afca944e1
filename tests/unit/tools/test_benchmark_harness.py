"""The benchmark harness: ratios, verdicts and the JSON summary that ``--only`` updates."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.harness import BenchmarkResult, compare, write_summary

ROOT = Path(__file__).resolve().parents[3]


def test_speedup_ratio_and_verdict():
    result = BenchmarkResult(
        "x", baseline_s=4.0, candidate_s=1.0, ratio=4.0, target=3.5, higher_is_better=True
    )
    assert result.passed and "ok" in result.line()
    slow = BenchmarkResult("y", baseline_s=1.0, candidate_s=2.0, ratio=2.0, target=1.05)
    assert not slow.passed and "MISSED" in slow.line()


def _scripted(monkeypatch, times: dict[str, list[float]]) -> list[str]:
    """Replace the clock: each call of side ``"A"`` or ``"B"`` takes the next of its ``times``
    (warm-up calls are not timed); returns the order in which the sides ran."""
    import benchmarks.harness as harness

    calls: list[str] = []
    queues = {side: list(values) for side, values in times.items()}

    def time_call(function):
        function()
        return queues[calls[-1]].pop(0)

    monkeypatch.setattr(harness, "time_call", time_call)
    return calls


def test_compare_reports_the_median_pair_ratio(monkeypatch):
    # pairs (baseline, candidate): (1, 3), (2, 1), (4, 4): pair ratios 3, 0.5, 1 -> median 1.0;
    # the ratio of the medians would be 3 / 2 = 1.5 and the mean pair ratio 1.5
    calls = _scripted(monkeypatch, {"A": [1.0, 2.0, 4.0, 2.0], "B": [3.0, 1.0, 4.0, 2.0]})
    result = compare(
        "scripted",
        lambda: calls.append("A"),
        lambda: calls.append("B"),
        target=1.2,
        repeats=3,
        warmup=0,
    )
    assert result.ratio == 1.0 and result.passed
    assert (result.baseline_s, result.candidate_s) == (2.0, 3.0)  # the medians of each side
    assert calls == ["A", "B"] * 3, "baseline and candidate alternate, pair by pair"
    missed = compare(
        "scripted",
        lambda: calls.append("A"),
        lambda: calls.append("B"),
        target=0.9,
        repeats=1,
        warmup=0,
    )
    assert missed.ratio == 1.0 and not missed.passed  # one pair (2, 2) against target 0.9


def test_compare_speedup_is_the_median_of_baseline_over_candidate(monkeypatch):
    # pair speed-ups 4 / 1, 2 / 4, 3 / 2, 5 / 2, 6 / 1 = 4, 0.5, 1.5, 2.5, 6 -> median 2.5
    calls = _scripted(monkeypatch, {"A": [4.0, 2.0, 3.0, 5.0, 6.0], "B": [1.0, 4.0, 2.0, 2.0, 1.0]})
    result = compare(
        "scripted",
        lambda: calls.append("A"),
        lambda: calls.append("B"),
        target=2.0,
        repeats=5,
        warmup=2,
        speedup=True,
    )
    assert result.ratio == 2.5 and result.higher_is_better and result.passed
    assert calls == ["A", "B"] * 7, "warm-up pairs run first, untimed"


def test_merged_summary_keeps_other_entries_and_replaces_the_rerun(tmp_path):
    path = tmp_path / "summary.json"
    first = [BenchmarkResult("a", 1, 1, 1.0, 2.0), BenchmarkResult("b", 1, 1, 1.0, 2.0)]
    write_summary(first, path)
    write_summary([BenchmarkResult("b", 1, 3, 3.0, 2.0)], path, merge=True)
    entries = {e["name"]: e for e in json.loads(path.read_text())["results"]}
    assert set(entries) == {"a", "b"}
    assert entries["b"]["ratio"] == 3.0 and entries["b"]["passed"] is False
    write_summary([BenchmarkResult("c", 1, 1, 1.0, 2.0)], path)  # no merge: replaced
    assert [e["name"] for e in json.loads(path.read_text())["results"]] == ["c"]


def test_unreadable_summary_is_rewritten(tmp_path):
    path = tmp_path / "summary.json"
    path.write_text("{not json")
    write_summary([BenchmarkResult("a", 1, 1, 1.0, 2.0)], path, merge=True)
    assert [e["name"] for e in json.loads(path.read_text())["results"]] == ["a"]


def test_a_benchmark_that_cannot_run_here_is_skipped(tmp_path, monkeypatch, capsys):
    """A GPU benchmark returns None without a GPU: reported as skipped, not as a missed target."""
    import torch

    from benchmarks import run

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert run.main(["--only", "bench_gpu", "--out", str(tmp_path / "s.json")]) == 0
    assert "skipped bench_gpu.bench_gpu_training_step_and_sweep" in capsys.readouterr().out
    assert run.main(["--only", "no_such_benchmark", "--out", str(tmp_path / "t.json")]) == 1


def test_a_child_process_reports_its_own_peak_not_its_parents():
    """Issue 47: the side-by-side runs each tool in a child process; Linux keeps ``ru_maxrss``
    across fork and exec, so a child read that way reports at least its parent's resident set.
    A parent holding 400 MiB starts a child that allocates almost nothing: the child's peak is
    far below it."""
    import subprocess
    import sys

    from benchmarks.harness import peak_rss_mb

    held = bytearray(400 * 1024 * 1024)  # touched, so resident
    held[::4096] = b"\x01" * len(held[::4096])
    assert peak_rss_mb() >= 400
    code = "from benchmarks.harness import peak_rss_mb; print(peak_rss_mb())"
    child = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 check=True, cwd=ROOT).stdout)  # fmt: skip
    assert child < 200, child
    del held
