"""Every stored result that a run computed says which libraries computed it (issue 32): the
machine record of each run and benchmark names torch, transformers, transformer-lens and
lens_heads. Transcriptions (a ``source`` field: numbers typed in before results were stored)
have no run behind them; they are listed here so the list can only shrink (issue 33)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lens_heads.core._libraries import LIBRARIES

ROOT = Path(__file__).resolve().parents[3]
RESULTS = ROOT / "results"

#: transcribed records still kept: none since issue 33 re-ran the last one (the set may only
#: shrink, so a new transcription fails the tests)
TRANSCRIBED: set[str] = set()


def _records() -> list[tuple[str, dict[str, Any]]]:
    return [
        (file.parent.relative_to(RESULTS).as_posix(), json.loads(file.read_text("utf-8")))
        for file in sorted(RESULTS.rglob("numbers.json"))
    ]


def _machines(value: Any) -> Iterator[dict[str, Any]]:
    """Every machine record inside a stored result (runs nest theirs under ``provenance``,
    benchmarks keep one per entry)."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "machine" and isinstance(inner, dict):
                yield inner
            else:
                yield from _machines(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _machines(inner)


def missing_versions(record: dict[str, Any]) -> list[str]:
    """What a run's record lacks: no machine record, or one without every library's version."""
    machines = list(_machines(record))
    if not machines:
        return ["no machine record"]
    gaps = []
    for machine in machines:
        libraries = machine.get("libraries") or {}
        gaps += [name for name in LIBRARIES if not libraries.get(name)]
    return sorted(set(gaps))


RUNS = [(name, record) for name, record in _records() if name not in TRANSCRIBED]


@pytest.mark.parametrize("name, record", RUNS, ids=[name for name, _ in RUNS])
def test_every_run_records_the_libraries_that_computed_it(name, record):
    assert "source" not in record, f"{name} is a transcription: list it in TRANSCRIBED"
    assert not missing_versions(record), (
        f"results/{name}: no version recorded for {missing_versions(record)}; re-run its "
        "command (the machine record of lens_heads.core._provenance.machine() has them)"
    )


def test_the_check_rejects_a_record_without_versions():
    old = {"provenance": {"machine": {"cpu": "AMD EPYC", "torch": "2.13.0+cpu"}}}
    assert missing_versions(old) == sorted(LIBRARIES)
    assert missing_versions({"results": [{"name": "x"}]}) == ["no machine record"]


def test_transcriptions_only_leave():
    stored = {name for name, record in _records() if "source" in record}
    stored |= {name for name, _ in _records() if name.startswith("transcribed/")}
    assert stored <= TRANSCRIBED, f"new transcriptions: {sorted(stored - TRANSCRIBED)}"
    gone = TRANSCRIBED - stored
    assert not gone, f"replaced by runs: remove {sorted(gone)} from TRANSCRIBED"
