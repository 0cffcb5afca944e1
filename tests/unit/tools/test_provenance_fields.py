"""Every stored result records its seeds, its date and a content hash of every data file, task
file and mask it read (issue 70, item 8): a run writes them
(:func:`lens_heads.core._provenance.run_record`), ``scripts/backfill_provenance.py`` gave them
to the results stored before, each marked as reconstructed (``date_source``, ``data_source``).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lens_heads.core._provenance import (
    DATA,
    content_hash,
    data_hashes,
    hash_sources,
    reads_of,
    run_record,
    seeds_of,
    task_data,
)

ROOT = Path(__file__).resolve().parents[3]
RESULTS = ROOT / "results"
FIELDS = ("seeds", "date", "data")
SHA256 = re.compile(r"[0-9a-f]{64}")


def record_of(numbers: dict[str, Any]) -> dict[str, Any]:
    """Where a result keeps its command, code and machine: its ``provenance``, else the top
    level (the demo, the compatibility matrix, the benchmark summaries)."""
    provenance = numbers.get("provenance")
    return provenance if isinstance(provenance, dict) else numbers


def problems(file: Path) -> list[str]:
    """What the result ``file`` lacks or records wrong, each naming the file and the field."""
    record = record_of(json.loads(file.read_text("utf-8")))
    found = [f"{file}: no {field!r}" for field in FIELDS if field not in record]
    if not isinstance(record.get("seeds", {}), (dict, list)):
        found.append(f"{file}: 'seeds' is not a mapping or list of seeds")
    if "date" in record:
        try:
            offset = datetime.fromisoformat(record["date"]).utcoffset()
        except (TypeError, ValueError):
            offset = None
        if offset != timedelta(0):
            found.append(f"{file}: 'date' {record['date']!r} is not ISO 8601 in UTC")
    data = record.get("data", {})
    if not isinstance(data, dict):
        found.append(f"{file}: 'data' is not a mapping of names to sha256")
    else:
        for name, digest in data.items():
            # only a reconstructed record may lack a hash: a run's folder never committed
            if digest is None and record.get("data_source") == "git":
                continue
            if not (isinstance(digest, str) and SHA256.fullmatch(digest)):
                found.append(f"{file}: 'data' of {name!r} is {digest!r}, not a sha256")
    return found


def check(results: Path) -> list[str]:
    """The problems of every ``numbers.json`` under ``results``."""
    return [problem for file in sorted(results.rglob("numbers.json")) for problem in problems(file)]


FILES = sorted(RESULTS.rglob("numbers.json"))


@pytest.mark.parametrize(
    "file", FILES, ids=[f.parent.relative_to(RESULTS).as_posix() for f in FILES]
)
def test_every_stored_result_records_its_seeds_date_and_data(file):
    assert not problems(file), "\n".join(problems(file))


@pytest.mark.parametrize("field", FIELDS)
def test_the_check_names_the_file_and_the_missing_field(tmp_path, field):
    """The defect planted: a stored result copied with one field removed fails, naming both."""
    source = RESULTS / "figure7" / "smollm2-135m-instruct" / "numbers.json"
    copy = tmp_path / "results" / "figure7" / "numbers.json"
    copy.parent.mkdir(parents=True)
    shutil.copy(source, copy)
    assert check(tmp_path / "results") == []
    numbers = json.loads(copy.read_text("utf-8"))
    del record_of(numbers)[field]
    copy.write_text(json.dumps(numbers, indent=2), "utf-8")
    assert check(tmp_path / "results") == [f"{copy}: no {field!r}"]


def test_the_check_refuses_a_date_not_in_utc_and_a_run_without_a_hash(tmp_path):
    file = tmp_path / "numbers.json"
    record = {"seeds": {}, "date": "2026-01-02T03:04:05+02:00", "data": {"x.json": None}}
    file.write_text(json.dumps({"provenance": record}))
    assert problems(file) == [
        f"{file}: 'date' '2026-01-02T03:04:05+02:00' is not ISO 8601 in UTC",
        f"{file}: 'data' of 'x.json' is None, not a sha256",
    ]


def test_the_backfill_has_nothing_left_to_add(capsys):
    """``scripts/backfill_provenance.py`` is idempotent: after it ran, nothing is missing."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import backfill_provenance
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    assert backfill_provenance.main(["--check"]) == 0
    assert capsys.readouterr().out.strip().endswith(f"0 of {len(FILES)} results lack fields")


# -- the hashing helper -----------------------------------------------------------------------
def test_content_hash_of_a_file_is_its_sha256(tmp_path):
    file = tmp_path / "task.json"
    file.write_bytes(b'[{"input": "a", "output": "A"}]')
    expected = hashlib.sha256(file.read_bytes()).hexdigest()
    assert content_hash(file.read_bytes()) == expected
    assert data_hashes([str(file)]) == {str(file): expected}


def test_content_hash_of_a_folder_covers_every_file_name_and_content(tmp_path):
    folder = tmp_path / "mask"
    (folder / "sub").mkdir(parents=True)
    (folder / "training.json").write_text("{}")
    (folder / "sub" / "mask.safetensors").write_bytes(b"\x00\x01")
    pairs = [("sub/mask.safetensors", b"\x00\x01"), ("training.json", b"{}")]
    before = data_hashes([str(folder)])[str(folder)]
    assert before == content_hash(pairs)  # the files sorted by relative path
    (folder / "training.json").write_text('{"steps": 1}')
    assert data_hashes([str(folder)])[str(folder)] != before  # a changed file changes it
    (folder / "training.json").write_text("{}")
    (folder / "sub" / "mask.safetensors").rename(folder / "mask.safetensors")
    assert data_hashes([str(folder)])[str(folder)] != before  # so does a moved one


def test_the_source_hash_is_the_same_hash():
    pairs = [("lens_heads/a.py", b"x = 1"), ("lens_heads/b.py", b"y = 2")]
    assert hash_sources(pairs) == content_hash(pairs)[:16]


def test_data_hashes_says_none_for_what_is_not_there(tmp_path):
    missing = str(tmp_path / "gone")
    assert data_hashes([missing]) == {missing: None}


def test_builtin_data_is_hashed_from_the_installed_package():
    name = f"{DATA}/tasks/capitalize.json"
    installed = (
        Path(__import__("lens_heads").__file__).parent / "data" / "tasks" / "capitalize.json"
    )
    assert data_hashes([name]) == {name: hashlib.sha256(installed.read_bytes()).hexdigest()}


def test_the_data_and_seeds_a_run_records(tmp_path):
    mask = tmp_path / "training"
    mask.mkdir()
    (mask / "training.json").write_text("{}")
    settings = {
        "model": "smollm2-135m-instruct",
        "tasks": ("capitalize", "en-fr", "ioi"),
        "mask": str(mask),
        "precision": "float32",
        "seed": 0,
        "random_seeds": (0, 1),
        "methods": ("integrated", "random-1"),
    }
    assert reads_of(settings) == [
        f"{DATA}/tasks.json",
        f"{DATA}/tasks/capitalize.json",
        f"{DATA}/parallel.jsonl",
        f"{DATA}/ioi.jsonl",
        str(mask),
    ]
    assert seeds_of(settings) == {"seed": 0, "random_seeds": [0, 1], "methods": ["random-1"]}
    assert task_data("no-such-task") == []
    record = run_record(settings, reads=[f"{DATA}/parallel.jsonl"])
    assert list(record) == ["seeds", "date", "data"]
    assert datetime.fromisoformat(record["date"]).utcoffset() == timedelta(0)
    assert all(SHA256.fullmatch(digest) for digest in record["data"].values())
    assert run_record({"steps": 4})["seeds"] == {}  # nothing drawn at random: said so


def test_an_analysis_records_them_in_its_provenance():
    from analyses._common import provenance_of

    provenance = provenance_of(["python", "-m", "analyses.x"], config={"task": "capitalize"})
    assert {"command", "code", "machine", "precision", "seeds", "date", "data"} <= set(provenance)
    assert list(provenance["data"]) == [f"{DATA}/tasks.json", f"{DATA}/tasks/capitalize.json"]
    assert provenance["seeds"] == {}


def test_seeds_and_data_of_a_section_count():
    settings = {"training": {"seed": 0, "split_seed": None}, "task": "capitalize"}
    assert seeds_of(settings) == {"seed": 0, "split_seed": None}
    assert reads_of(settings) == [f"{DATA}/tasks.json", f"{DATA}/tasks/capitalize.json"]


def test_what_an_analysis_reads_whatever_its_settings_is_what_the_library_reads():
    from analyses import head_atlas
    from lens_heads.atlas._readouts import RELATION_TASKS

    assert set(head_atlas.Config.READS) == {"capitalize", *RELATION_TASKS.values()}
