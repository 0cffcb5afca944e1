"""Where a result came from: the code that computed it and the machine it ran on.

Every stored result and benchmark records both, so that a number can be traced and a stage
computed by other code is never reused as if it were this code's.

>>> version = code_version()
>>> version["package"] == __import__("lens_heads").__version__, len(version["source"])
(True, 16)
>>> sorted(machine())
['cores', 'cpu', 'cuda', 'libraries', 'native_bf16', 'threads', 'torch']
>>> sorted(machine()["libraries"])
['lens_heads', 'torch', 'transformer-lens', 'transformers']
"""

from __future__ import annotations

import hashlib
import os
import platform
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["code_version", "cpu_native_bf16", "hash_sources", "machine", "source_hash"]

_PACKAGE = Path(__file__).resolve().parents[1]


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
    digest = hashlib.sha256()
    for name, contents in files:
        digest.update(name.encode() + b"\x00" + contents + b"\x01")
    return digest.hexdigest()[:16]


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
