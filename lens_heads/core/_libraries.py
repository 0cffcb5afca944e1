"""The libraries every number depends on: their installed versions, the ranges lens_heads was
tested with, and the error raised when an installed release computes wrong numbers.

``transformers`` and TransformerLens change the internals lens_heads relies on (the KV-cache
argument, attention implementations, the bridge's adapters) between releases, so each range in
``pyproject.toml`` has a tested ceiling, and the first cached decoding and the first pattern
capture of every model are checked against an independent computation
(:mod:`lens_heads.core._guards`).

>>> sorted(library_versions())
['lens_heads', 'torch', 'transformer-lens', 'transformers']
>>> "<" in declared_range("transformers")  # a tested ceiling
True
"""

from __future__ import annotations

import importlib.metadata
import re
from functools import cache

from lens_heads.core._errors import LensHeadsError

__all__ = [
    "LIBRARIES",
    "LibraryMismatchError",
    "declared_range",
    "installed_version",
    "library_versions",
    "mismatch_message",
]

#: the distributions whose internals lens_heads touches, and lens_heads itself
LIBRARIES: tuple[str, ...] = ("torch", "transformers", "transformer-lens", "lens_heads")


class LibraryMismatchError(LensHeadsError, RuntimeError):
    """An installed library computes something differently from its independent reference (a
    KV-cached forward against a full forward, ``hook_pattern`` against eager attention): every
    number computed that way would be wrong, so lens_heads stops before computing any."""


def installed_version(distribution: str) -> str:
    """The installed version of ``distribution`` (``"not installed"`` when missing)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def library_versions() -> dict[str, str]:
    """The installed version of each of :data:`LIBRARIES` (``"not installed"`` when missing)."""
    return {name: installed_version(name) for name in LIBRARIES}


@cache
def declared_range(distribution: str) -> str:
    """The version range of ``distribution`` that the installed lens_heads declares (its tested
    bounds, from the package metadata), or ``"any"`` when it declares none."""
    try:
        requirements = importlib.metadata.requires("lens_heads") or []
    except importlib.metadata.PackageNotFoundError:
        return "any"
    wanted = distribution.lower().replace("_", "-")
    for requirement in requirements:
        if ";" in requirement and "extra ==" in requirement:
            continue
        match = re.match(r"\s*([A-Za-z0-9_.\-]+)\s*(.*)", requirement)
        if match and match.group(1).lower().replace("_", "-") == wanted:
            return match.group(2).strip() or "any"
    return "any"


def mismatch_message(what: str, model: str, difference: str) -> str:
    """The one message of a :class:`LibraryMismatchError`: what disagreed on which model, by how
    much, under which versions, and how to fix it."""
    versions = library_versions()
    installed = ", ".join(f"{name} {versions[name]}" for name in LIBRARIES[:3])
    ranges = " ".join(f"'{name}{declared_range(name)}'" for name in LIBRARIES[1:3])
    return (
        f"{what} on {model}: {difference}. Installed: {installed}. Every number computed this "
        "way would be wrong, so nothing was computed. Fix: install the releases lens_heads was "
        f"tested with (pip install {ranges}), or the repository's constraints "
        "(pip install -c constraints.txt -e .), then run `lens-heads doctor MODEL`; if these "
        "versions are inside the tested ranges, please report this error."
    )
