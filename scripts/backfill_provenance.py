"""Give every stored result (``results/**/numbers.json``) the ``seeds``, ``date`` and ``data`` of
its run where it predates them (issue 70, item 8); a run writes them itself now
(:func:`lens_heads.core.run_record`, which this script calls with a commit's files).

    python scripts/backfill_provenance.py           # adds what is missing; idempotent
    python scripts/backfill_provenance.py --check   # says what it would add, writes nothing

The fields go where the result keeps its command, code and machine: its ``provenance``, else
(the demo, the compatibility matrix, the benchmark summaries) the top level. Only a result
missing one of them is touched, and only the missing ones are added, after the keys it has, in
the JSON layout it has (its indent, its final newline); a result with uncommitted changes is
refused (its date would be the commit before them). Each reconstructed field says so:

* ``date``: when the commit that last changed the file was committed (``git log -1 --format=%cI
  -- <file>``), in UTC, with ``"date_source": "git"``; a benchmark summary
  (``results/benchmarks/numbers.json``, ``results/benchmarks/gpu/numbers.json``, no command,
  one ``created`` stamp) takes the date its run wrote, ``"date_source": "created"``.
* ``seeds``: the seed settings (:func:`~lens_heads.core._provenance.seeds_of`) of the stored
  command, as a run records them (``"seeds_source": "command"``): an analysis's command parsed
  with its ``Config`` (``analyses._common.run_inputs``: the flags it gave, the defaults of the
  code as it is now -- no seed default changed after the seed settings were added, before any
  stored result), a benchmark's or a script's, its module's ``INPUTS``; either with the
  result's own ``settings`` over them. The demo records its settings (``"settings"``). The
  compatibility matrix has no seed setting (its tiny checkpoints and training seed are fixed
  in its code, covered by ``code.source``): ``{}``. A benchmark summary has no command and no
  settings: ``{}``, ``"seeds_source": "none"``.
* ``data``: the sha256 (:func:`lens_heads.core.content_hash`) of every data file, task file
  and mask those settings name (:func:`~lens_heads.core._provenance.reads_of`), as the commit
  that last changed the result held it (``git show <commit>:<path>``; a folder, its files),
  with ``"data_source": "git"``; ``null`` for a folder the run read that was never committed
  (the ``runs/...`` training and mask folders of the stored commands). The compatibility
  matrix reads no data file (``{}``); a benchmark summary's benchmarks name their tasks in their
  code, so it hashes the whole built-in data folder, ``lens_heads/data``.

A transcription (a ``numbers.json`` with a ``source`` field: numbers typed in, no run behind
them) has no run to describe: it is refused, not backfilled; none are stored since issue 33
(``tests/unit/tools/test_stored_results.py``).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import shlex
import subprocess
import sys
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the analyses and benchmarks packages of this checkout

from lens_heads.core import run_record  # noqa: E402

RESULTS = ROOT / "results"
DATA = "lens_heads/data"  # the built-in data, as a result names it
FIELDS = ("seeds", "date", "data")
#: the folders of the stored commands' earlier runs, read but never committed
RUN_FOLDERS = "runs/"


def git(*args: str, binary: bool = False) -> Any:
    out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, check=True).stdout
    return out if binary else out.decode()


class Commit:
    """The files of one commit, where :func:`lens_heads.core.run_record` reads the data."""

    def __init__(self, sha: str) -> None:
        self.sha = sha
        self.files = set(git("ls-tree", "-r", "--name-only", sha).splitlines())

    def word_tasks(self) -> list[str]:
        return list(json.loads(self.show(f"{DATA}/tasks.json")))

    def show(self, path: str) -> bytes:
        return git("show", f"{self.sha}:{path}", binary=True)

    def exists(self, name: str) -> bool:
        folder = name.rstrip("/") + "/"
        found = name in self.files or any(f.startswith(folder) for f in self.files)
        return found or name.startswith(RUN_FOLDERS)

    def read(self, name: str) -> bytes | list[tuple[str, bytes]] | None:
        if name in self.files:
            return self.show(name)
        folder = name.rstrip("/") + "/"
        inside = sorted(f for f in self.files if f.startswith(folder))
        return [(f[len(folder) :], self.show(f)) for f in inside] or None


def _module(command: list[str]) -> ModuleType | None:
    """The module a stored command ran: ``python -m package.module`` or ``python script.py``."""
    if command[:2] == ["python", "-m"]:
        return importlib.import_module(command[2])
    if command[:1] == ["python"] and command[1].endswith(".py"):
        spec = importlib.util.spec_from_file_location(Path(command[1]).stem, ROOT / command[1])
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    return None


def inputs(numbers: Mapping[str, Any], record: Mapping[str, Any]) -> tuple[dict, tuple, str]:
    """The settings and the always-read data of a stored result's run, and where they came
    from (the rules of the module docstring)."""
    stored = numbers.get("settings") if isinstance(numbers.get("settings"), dict) else {}
    command = shlex.split(record.get("command") or "")
    if not command:
        if "created" in numbers and "results" in numbers:  # a benchmark summary
            return {}, (DATA,), "none"
        raise ValueError("no command and not a benchmark summary")
    if command[0] == "lens-heads":  # the demo: its settings
        return dict(stored), (), "settings"
    module = _module(command)
    if module is None:
        raise ValueError(f"unknown command {record['command']!r}")
    if module.__name__.startswith("analyses."):
        settings, reads = _analysis_inputs(module.Config, command[3:])
        return {**settings, **stored}, reads, "command"
    return {**getattr(module, "INPUTS", {}), **stored}, (), "command"  # as the script records


def _analysis_inputs(config_type: type, argv: list[str]) -> tuple[dict, tuple]:
    """An analysis's settings and always-read data for the command line ``argv``; where its
    ``Config`` refuses a folder that is not here (a ``runs/...`` folder of the stored run), the
    values the command line gives, unchecked."""
    from analyses._common import parse, run_inputs, settings_of
    from lens_heads.cli import add_settings
    from lens_heads.core import InputError

    try:
        return run_inputs(parse(config_type, argv))
    except InputError:
        parser = argparse.ArgumentParser()
        add_settings(parser, config_type)
        values = vars(parser.parse_args(argv))
        unstored = getattr(config_type, "UNSTORED", ())
        settings = {k: v for k, v in settings_of(values).items() if k not in unstored}
        return settings, tuple(getattr(config_type, "READS", ()))


def backfill(path: Path, commits: dict[str, Commit]) -> list[str]:
    """Add the missing fields to ``path``; returns their names (``[]``: nothing missing)."""
    text = path.read_text(encoding="utf-8")
    numbers = json.loads(text)
    record = numbers.get("provenance") if isinstance(numbers.get("provenance"), dict) else numbers
    missing = [field for field in FIELDS if field not in record]
    if not missing:
        return []
    name = path.relative_to(ROOT).as_posix()
    if "source" in numbers:
        raise ValueError(f"{name} is a transcription (a source field): no run to describe")
    indent = next((i for i in (1, 2, 4) if json.dumps(numbers, indent=i) == text.rstrip("\n")), 0)
    if not indent:
        raise ValueError(f"{name}: not in a json.dumps layout; its layout would change")
    if git("status", "--porcelain", "--", name).strip():
        raise ValueError(f"{name} has uncommitted changes: commit them first")
    sha = git("log", "-1", "--format=%H", "--", name).strip()
    if not sha:
        raise ValueError(f"{name} was never committed")
    commit = commits.setdefault(sha, Commit(sha))
    settings, reads, seeds_source = inputs(numbers, record)
    if seeds_source == "none":  # a benchmark summary: the date its run wrote
        date, date_source = datetime.strptime(numbers["created"], "%Y-%m-%dT%H:%M:%S%z"), "created"
    else:
        date = datetime.fromisoformat(git("log", "-1", "--format=%cI", sha).strip())
        date_source = "git"
    run = run_record(
        settings,
        reads,
        date=date,
        exists=commit.exists,
        read=commit.read,
        word_tasks=commit.word_tasks(),
    )
    marks = {"seeds": seeds_source, "date": date_source, "data": "git"}
    for field in missing:
        record |= {field: run[field], f"{field}_source": marks[field]}
    path.write_text(json.dumps(numbers, indent=indent) + text[len(text.rstrip("\n")) :], "utf-8")
    return missing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="say what is missing, write nothing")
    args = parser.parse_args(argv)
    commits: dict[str, Commit] = {}
    files = sorted(RESULTS.rglob("numbers.json"))
    changed = 0
    for path in files:
        name = path.relative_to(ROOT).as_posix()
        if args.check:
            numbers = json.loads(path.read_text(encoding="utf-8"))
            record = numbers.get("provenance", numbers)
            missing = [field for field in FIELDS if field not in record]
        else:
            missing = backfill(path, commits)
        if missing:
            changed += 1
            print(f"{name}: {'missing' if args.check else 'added'} {', '.join(missing)}")
    print(f"{changed} of {len(files)} results {'lack fields' if args.check else 'backfilled'}")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    raise SystemExit(main())
