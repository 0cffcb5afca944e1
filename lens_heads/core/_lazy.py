"""Package attributes imported on first use (PEP 562), so ``import lens_heads`` and the
``lens-heads`` command start without torch until a name that needs it is touched.

A package lists its public names as ordinary imports under ``if TYPE_CHECKING:`` (what type
checkers and readers see) and calls :func:`lazy_exports` with its own file: the names are read
from that block and each is imported from its module the first time it is asked for.

>>> import lens_heads
>>> "HeadMask" in dir(lens_heads), lens_heads.HeadMask.__module__
(True, 'lens_heads.core._masks')
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lens_heads.core._errors import ComputationError

__all__ = ["exported_names", "lazy_exports"]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def exported_names(path: str | Path) -> dict[str, str]:
    """``{name: module}`` for every ``from module import name`` under ``if TYPE_CHECKING:`` in
    the file at ``path`` (absolute imports only)."""
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    table: dict[str, str] = {}
    for node in tree.body:
        if not (isinstance(node, ast.If) and _is_type_checking(node.test)):
            continue
        for statement in node.body:
            if isinstance(statement, ast.ImportFrom):
                if statement.level or statement.module is None:
                    raise ComputationError(f"{path}: a lazy export needs an absolute import")
                for alias in statement.names:
                    table[alias.asname or alias.name] = statement.module
    return table


def lazy_exports(
    package: str, path: str | Path
) -> tuple[dict[str, str], Callable[[str], Any], Callable[[], list[str]]]:
    """``(table, __getattr__, __dir__)`` for the package ``package`` whose ``__init__`` is at
    ``path``: ``__getattr__`` imports a listed name on first use and keeps it on the package."""
    table = exported_names(path)

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(table))

    return table, __getattr__, __dir__
