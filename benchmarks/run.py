"""Run the benchmarks: ``python -m benchmarks.run [--quick] [--only SUBSTRING] [--out FILE]``.

Every ``bench_*`` function of every ``benchmarks/bench_*.py`` module runs; each prints one line
(baseline, candidate, ratio against its target) and all go into a JSON summary that records the
machine and the code version (with ``--only``, the summary's other entries are kept). The exit
code is 1 when a target is missed or when a benchmark's two sides give different outputs.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil
import sys
from pathlib import Path

from benchmarks.harness import BenchmarkResult, write_summary


def discover() -> list[tuple[str, object]]:
    import benchmarks

    found = []
    for info in pkgutil.iter_modules(benchmarks.__path__):
        if not info.name.startswith("bench_"):
            continue
        module = importlib.import_module(f"benchmarks.{info.name}")
        for name, function in inspect.getmembers(module, inspect.isfunction):
            if name.startswith("bench_") and function.__module__ == module.__name__:
                found.append((f"{info.name}.{name}", function))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repeats and smaller inputs")
    parser.add_argument("--only", default="", help="run benchmarks whose name contains this")
    parser.add_argument("--out", default="benchmarks/results/summary.json", type=Path)
    args = parser.parse_args(argv)
    results, skipped = [], []
    for name, function in discover():
        if args.only not in name:
            continue
        print(f"running {name} ...", flush=True)
        value = function(quick=args.quick)
        if value is None:  # e.g. a GPU benchmark on a machine without one
            print(f"skipped {name}: not available on this machine", flush=True)
            skipped.append(name)
            continue
        for item in value if isinstance(value, list) else [value]:
            result = BenchmarkResult.from_any(item)
            print(result.line(), flush=True)
            for key, extra in result.extra.items():
                print(f"    {key}: {extra}")
            results.append(result)
    write_summary(results, args.out, merge=bool(args.only))
    print(f"summary: {args.out}")
    missed = [result.name for result in results if not result.passed]
    for name in missed:
        print(f"target missed: {name}")
    return 0 if (results or skipped) and not missed else 1


if __name__ == "__main__":
    sys.exit(main())
