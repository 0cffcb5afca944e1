"""``python -m analyses``: list the analyses; ``python -m analyses NAME [options]`` runs one
(the same as ``python -m analyses.NAME``)."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Sequence
from pathlib import Path


def available() -> dict[str, str]:
    """Every analysis module and what it reproduces (its docstring up to the first colon)."""
    folder = Path(__file__).parent
    found = {}
    for info in pkgutil.iter_modules([str(folder)]):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"analyses.{info.name}")
        found[info.name] = " ".join((module.__doc__ or "").split()).split(": ")[0]
    return dict(sorted(found.items()))


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    names = available()
    if not argv or argv[0] in ("-h", "--help", "list"):
        print("analyses (python -m analyses NAME --help for options):\n")
        for name, line in names.items():
            print(f"  {name:28s} {line}")
        return 0
    name = argv[0].removeprefix("analyses.")
    if name not in names:
        print(
            f"error: no analysis named {name!r}; the analyses are: {', '.join(names)}",
            file=sys.stderr,
        )
        return 2
    return importlib.import_module(f"analyses.{name}").main(argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
