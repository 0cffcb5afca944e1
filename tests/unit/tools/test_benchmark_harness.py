"""The benchmark harness: ratios, verdicts and the JSON summary that ``--only`` updates."""

from __future__ import annotations

import json

from benchmarks.harness import BenchmarkResult, compare, write_summary


def test_speedup_ratio_and_verdict():
    result = BenchmarkResult(
        "x", baseline_s=4.0, candidate_s=1.0, ratio=4.0, target=3.5, higher_is_better=True
    )
    assert result.passed and "ok" in result.line()
    slow = BenchmarkResult("y", baseline_s=1.0, candidate_s=2.0, ratio=2.0, target=1.05)
    assert not slow.passed and "MISSED" in slow.line()


def test_compare_reports_the_median_pair_ratio():
    result = compare("noop", lambda: None, lambda: None, target=1e9, repeats=3, warmup=0)
    assert result.ratio > 0 and result.passed


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
