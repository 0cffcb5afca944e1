"""Issue 71: every error lens_heads raises on purpose is a :class:`lens_heads.LensHeadsError`
(whose subclasses also derive from the builtin they refine), so ``except lh.LensHeadsError``
catches them all. The test walks the source of the package for a ``raise`` of a builtin error."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import lens_heads

#: builtin exception names (``ValueError``, ``KeyError``, ...)
BUILTIN_ERRORS = {
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
} - {"SystemExit"}  # ``raise SystemExit(main())``: the command's exit status, not an error


def builtin_raises(source: str) -> list[str]:
    """``line: name`` of each ``raise`` of a builtin error in ``source``; a module's
    ``__getattr__`` raising ``AttributeError`` is Python's protocol and is allowed."""
    found = []
    tree = ast.parse(source)
    allowed: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            allowed |= {id(n) for n in ast.walk(node)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Raise) or node.exc is None or id(node) in allowed:
            continue
        raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        if isinstance(raised, ast.Name) and raised.id in BUILTIN_ERRORS:
            found.append(f"{node.lineno}: {raised.id}")
    return found


def test_no_function_of_the_package_raises_a_builtin_error():
    root = Path(lens_heads.__file__).parent
    found = {
        str(path.relative_to(root)): hits
        for path in sorted(root.rglob("*.py"))
        if (hits := builtin_raises(path.read_text()))
    }
    assert not found, f"raise a LensHeadsError subclass instead: {found}"


def test_the_walk_sees_a_builtin_raise():
    planted = "def f(x):\n    if x:\n        raise ValueError('bad')\n"
    assert builtin_raises(planted) == ["3: ValueError"]
    protocol = "def __getattr__(name):\n    raise AttributeError(name)\n"
    assert builtin_raises(protocol) == []
