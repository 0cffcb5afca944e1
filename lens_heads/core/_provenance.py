"""Where a result came from: the code that computed it, the machine it ran on, and the seeds,
date and data of the run (:func:`run_record`).

Every stored result and benchmark records them, so that a number can be traced and a stage
computed by other code is never reused as if it were this code's.

>>> version = code_version()
>>> version["package"] == __import__("lens_heads").__version__, len(version["source"])
(True, 16)
>>> sorted(machine())
['cores', 'cpu', 'cuda', 'libraries', 'native_bf16', 'threads', 'torch']
>>> sorted(machine()["libraries"])
['lens_heads', 'torch', 'transformer-lens', 'transformers']
>>> record = run_record({"task": "capitalize", "seed": 0, "random_seeds": (0, 1)})
>>> record["seeds"]
{'seed': 0, 'random_seeds': [0, 1]}
>>> list(record["data"])
['lens_heads/data/tasks.json', 'lens_heads/data/tasks/capitalize.json']
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

__all__ = [
    "DATA",
    "code_version",
    "content_hash",
    "cpu_native_bf16",
    "data_hashes",
    "hash_sources",
    "machine",
    "read_data",
    "reads_of",
    "run_record",
    "seeds_of",
    "source_hash",
    "task_data",
    "utc_date",
]

_PACKAGE = Path(__file__).resolve().parents[1]

#: How a result names the built-in data: its path in the repository (``lens_heads/data/...``),
#: read from the installed package wherever that is.
DATA = "lens_heads/data"

#: What :func:`content_hash` hashes: a file's bytes, or a folder's ``(relative path, bytes)``.
Contents = bytes | Iterable[tuple[str, bytes]]


@cache
def source_hash(*roots: str | os.PathLike[str]) -> str:
    """A short hash of every ``.py`` file under ``roots`` (paths and contents, in order): any
    edit of the code changes it. Default: the package and the ``analyses`` package installed
    beside it (the analyses compose the library). Computed once per process."""
    folders = [Path(r) for r in roots] or [_PACKAGE, _PACKAGE.parent / "analyses"]
    return hash_sources(
        (f"{root.name}/{path.relative_to(root).as_posix()}", path.read_bytes())
        for root in folders
        for path in (sorted(root.rglob("*.py")) if root.is_dir() else [])
    )


def hash_sources(files: Iterable[tuple[str, bytes]]) -> str:
    """The source hash of ``(name, contents)`` pairs, in the order given (:func:`source_hash`
    gives each root's files sorted by path): what ``scripts/source_commit.py`` computes from a
    commit's files to find the commit a stored result's source came from.

    >>> hash_sources([("lens_heads/a.py", b"x = 1")])
    '0500bc4e470c7254'
    """
    return content_hash(files)[:16]


def content_hash(contents: Contents) -> str:
    """The sha256 (hex) of a file's bytes (what ``sha256sum`` prints), or of a folder given as
    ``(relative path, bytes)`` pairs in order (each name, a NUL, its bytes and ``\\x01``): the
    one hash of every stored result's ``data``, of the source (:func:`hash_sources`, its first
    16 digits) and of ``scripts/backfill_provenance.py`` (a file as a commit held it).

    >>> content_hash(b"abc")[:16]
    'ba7816bf8f01cfea'
    >>> content_hash([("lens_heads/a.py", b"x = 1")])[:16]
    '0500bc4e470c7254'
    """
    digest = hashlib.sha256()
    if isinstance(contents, (bytes, bytearray)):
        digest.update(contents)
    else:
        for name, data in contents:
            digest.update(name.encode() + b"\x00" + data + b"\x01")
    return digest.hexdigest()


def read_data(name: str) -> Contents | None:
    """What :func:`content_hash` hashes of ``name``: a built-in data name (``lens_heads/data/...``,
    read from the installed package) or a path; a folder as its files sorted by relative path;
    None when nothing is there."""
    path = _data_file(name)
    if path.is_file():
        return path.read_bytes()
    if path.is_dir():
        files = sorted((p.relative_to(path).as_posix(), p) for p in path.rglob("*") if p.is_file())
        return [(relative, file.read_bytes()) for relative, file in files]
    return None


def data_hashes(
    names: Iterable[str], read: Callable[[str], Contents | None] = read_data
) -> dict[str, str | None]:
    """``{name: content_hash}`` of every data file or folder named (by default read from disk:
    :func:`read_data`); None where ``read`` finds nothing (a folder a stored run read that was
    never kept)."""
    hashes: dict[str, str | None] = {}
    for name in names:
        if name not in hashes:
            contents = read(name)
            hashes[name] = None if contents is None else content_hash(contents)
    return hashes


_SEED = re.compile(r"(^|_)seeds?$")


def _flat(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` with each section's (a nested mapping's) settings in its place.

    >>> _flat({"training": {"seed": 0, "steps": 4}, "task": "capitalize"})
    {'seed': 0, 'steps': 4, 'task': 'capitalize'}
    """
    flat: dict[str, Any] = {}
    for name, value in settings.items():
        flat |= _flat(value) if isinstance(value, Mapping) else {name: value}
    return flat


_RANDOM_FINDER = re.compile(r"random-\d+")  # lens_heads.finders' random-<seed> head finders


def seeds_of(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The seeds a run's settings chose: every setting (also in a section) named ``seed``,
    ``seeds`` or ``*_seed(s)`` (a count of seeds, as ``seeds = 3``, stays a count) and the
    ``random-<seed>`` entries of a ``methods`` setting; ``{}`` when the settings choose none.
    Seeds fixed in the code are part of the code version (``code.source``), not of these.

    >>> seeds_of({"seed": 0, "random_seeds": (0, 1), "methods": ("integrated", "random-2")})
    {'seed': 0, 'random_seeds': [0, 1], 'methods': ['random-2']}
    >>> seeds_of({"steps": 10})
    {}
    """
    settings = _flat(settings)
    seeds = {
        name: list(value) if isinstance(value, (tuple, list)) else value
        for name, value in settings.items()
        if _SEED.search(name)
    }
    methods = settings.get("methods")
    if isinstance(methods, (tuple, list)):
        drawn = [str(m) for m in methods if _RANDOM_FINDER.fullmatch(str(m))]
        if drawn:
            seeds["methods"] = drawn
    return seeds


_LANGUAGE_PAIR = re.compile(r"([a-z]{2})-([a-z]{2})")


def _word_tasks() -> list[str]:
    """The built-in word tasks: the names of the installed registry, ``tasks.json``."""
    registry = read_data(f"{DATA}/tasks.json")
    return list(json.loads(registry)) if isinstance(registry, bytes) else []


def task_data(name: str, word_tasks: Collection[str] | None = None) -> list[str]:
    """The data :func:`lens_heads.get_task` reads for the task ``name``: the registry
    ``tasks.json`` and ``tasks/<name>.json`` for a word task (``all``: every word task, as
    ``analyses.mask_table`` reads it), ``parallel.jsonl`` for a language pair (``en-fr``),
    ``ioi.jsonl`` for the finders' ``ioi``, and a task file itself (with the registry, which
    names its instruction); ``[]`` for a string that names no task. ``word_tasks``: the names
    of the registry (default: the installed one's).

    >>> task_data("en-fr")
    ['lens_heads/data/tasks.json', 'lens_heads/data/parallel.jsonl']
    >>> task_data("float32")
    []
    """
    words = _word_tasks() if word_tasks is None else word_tasks
    registry = f"{DATA}/tasks.json"
    if name.endswith((".json", ".jsonl")):
        return [registry, name]
    if name == "all":
        return [registry, *(f"{DATA}/tasks/{word}.json" for word in sorted(words))]
    if name in words:
        return [registry, f"{DATA}/tasks/{name}.json"]
    if name == "ioi":
        return [f"{DATA}/ioi.jsonl"]
    pair = _LANGUAGE_PAIR.fullmatch(name)
    if pair and pair[1] != pair[2]:
        return [registry, f"{DATA}/parallel.jsonl"]
    return []


def _data_file(name: str) -> Path:
    """Where the data ``name`` is: a built-in name in the installed package, else the path."""
    return _PACKAGE.parent / name if name == DATA or name.startswith(f"{DATA}/") else Path(name)


def _exists(name: str) -> bool:
    return _data_file(name).exists()


def reads_of(
    settings: Mapping[str, Any],
    exists: Callable[[str], bool] = _exists,
    word_tasks: Collection[str] | None = None,
) -> list[str]:
    """The data a run with ``settings`` reads, as :func:`data_hashes` names it: for every string
    setting (alone or in a list, also in a section) but ``model``, the built-in data it names
    (``lens_heads/data/...``), the task data it names (:func:`task_data`) or, when ``exists``,
    the file or folder (a task file, a mask, a training folder); for ``model``, its built-in
    config (``lens_heads/data/model_configs/<alias>.json``) where there is one.

    >>> reads_of({"task": "capitalize", "precision": "float32"})
    ['lens_heads/data/tasks.json', 'lens_heads/data/tasks/capitalize.json']
    """
    words = _word_tasks() if word_tasks is None else word_tasks
    names: list[str] = []
    for key, value in _flat(settings).items():
        values = value if isinstance(value, (tuple, list)) else [value]
        for text in (v for v in values if isinstance(v, str) and v):
            if key == "model":
                config = f"{DATA}/model_configs/{text}.json"
                names += [config] if "/" not in text and exists(config) else []
            elif text.startswith(f"{DATA}/"):
                names.append(text)
            elif found := task_data(text, words):
                names += found
            elif exists(text):
                names.append(text)
    return list(dict.fromkeys(names))


def utc_date(when: datetime | None = None) -> str:
    """``when`` (default: now) as ISO 8601 in UTC, to the second.

    >>> utc_date(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    '2026-01-02T03:04:05+00:00'
    """
    moment = datetime.now(UTC) if when is None else when.astimezone(UTC)
    return moment.isoformat(timespec="seconds")


def run_record(
    settings: Mapping[str, Any] = {},
    reads: Iterable[str] = (),
    *,
    date: datetime | None = None,
    exists: Callable[[str], bool] = _exists,
    read: Callable[[str], Contents | None] = read_data,
    word_tasks: Collection[str] | None = None,
) -> dict[str, Any]:
    """What every stored result records of its run besides the code and the machine: the
    ``seeds`` its settings chose (:func:`seeds_of`), the ``date`` it was written (UTC; default:
    now) and the content hash of every data file, task file and mask it read (``data``: those
    the settings name and those of ``reads``, the task or data names a run reads whatever its
    settings, both by :func:`reads_of`). ``exists``, ``read`` and ``word_tasks``: where the data
    is (default: this checkout and the installed package; ``scripts/backfill_provenance.py``:
    a commit)."""
    words = _word_tasks() if word_tasks is None else word_tasks
    names = [*reads_of(settings, exists, words), *reads_of({"reads": tuple(reads)}, exists, words)]
    return {
        "seeds": seeds_of(settings),
        "date": utc_date(date),
        "data": data_hashes(names, read),
    }


def code_version() -> dict[str, str]:
    """``{"package": installed version, "source": hash of the source}``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        package = version("lens_heads")
    except PackageNotFoundError:  # run from a source tree that was never installed
        package = "unknown"
    return {"package": package, "source": source_hash()}


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as file:
            for line in file:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_native_bf16() -> bool:
    """Does this CPU compute bfloat16 natively: the ``avx512_bf16`` or ``amx_bf16`` flag in
    ``/proc/cpuinfo`` (without them bf16 matmuls are emulated, several times slower than fp32)?
    Read without torch.

    >>> isinstance(cpu_native_bf16(), bool)
    True
    """
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as file:
            for line in file:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool(flags & {"avx512_bf16", "amx_bf16"})
    except OSError:
        pass
    return False


def machine() -> dict[str, Any]:
    """The CPU model, whether it computes bf16 natively, the torch threads and cores, the GPU
    if one is visible (None otherwise) and the versions of the libraries every number depends
    on (:func:`lens_heads.core.library_versions`)."""
    import torch

    from lens_heads.core._libraries import library_versions

    cuda = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {
        "cpu": _cpu_model(),
        "native_bf16": cpu_native_bf16(),
        "threads": torch.get_num_threads(),
        "cores": os.cpu_count(),
        "cuda": cuda,
        "torch": torch.__version__,
        "libraries": library_versions(),
    }
