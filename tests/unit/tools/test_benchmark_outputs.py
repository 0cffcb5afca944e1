"""A benchmark whose two sides disagree fails, whatever its speed; a benchmark may report
several ratios (against the reference code's way and like for like); every stored result names
the machine and the code version (issue 23)."""

from __future__ import annotations

import json

from benchmarks import run
from benchmarks.harness import BenchmarkResult, compare
from lens_heads.core._provenance import code_version


def test_different_outputs_fail_a_fast_benchmark():
    fast = BenchmarkResult("x", 10.0, 1.0, 10.0, target=2.0, higher_is_better=True)
    assert fast.passed
    fast.same_outputs = False
    assert not fast.passed and "different outputs" in fast.line()
    fast.same_outputs = True
    assert fast.passed


def test_compare_records_its_pairs():
    result = compare("x", lambda: None, lambda: None, target=10.0, repeats=3, warmup=0)
    assert result.pairs == 3 and result.same_outputs is None


def test_run_fails_on_different_outputs_and_stores_the_machine(tmp_path, monkeypatch, capsys):
    def bench_two(quick):
        good = BenchmarkResult("reference way", 4.0, 1.0, 4.0, target=2.0, higher_is_better=True)
        bad = BenchmarkResult("like for like", 1.5, 1.0, 1.5, target=1.0, higher_is_better=True)
        bad.same_outputs = False  # planted: the two sides compute different losses
        return [good, bad]

    monkeypatch.setattr(run, "discover", lambda: [("bench_fake.bench_two", bench_two)])
    out = tmp_path / "summary.json"
    assert run.main(["--out", str(out)]) == 1
    assert "target missed: like for like" in capsys.readouterr().out
    summary = json.loads(out.read_text())
    assert [entry["name"] for entry in summary["results"]] == ["reference way", "like for like"]
    for entry in summary["results"]:
        assert entry["code"] == code_version() and entry["machine"]["cpu"]
        assert "native_bf16" in entry["machine"]
    assert [entry["passed"] for entry in summary["results"]] == [True, False]
