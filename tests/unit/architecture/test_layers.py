"""The package layout is the architecture: these tests read every import of ``lens_heads`` with
``ast`` (module level and inside functions) and fail on an import from a higher layer, an import
between research lines, a private name imported across subpackages, an import circle, or a
module past the size limit."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "lens_heads"

#: subpackage (or top-level module) -> layer; a module may import only its own layer and below
LAYERS = {
    "core": 0,
    "testing": 1,
    "engine": 1,
    "heads_up": 2,
    "alignment": 2,
    "lahis": 2,
    "scale": 3,
    "atlas": 3,
    "finders": 4,
    "demo": 4,
    "cli": 5,
    "__init__": 6,
    "__main__": 6,
    "_moved": 6,
}
RESEARCH_LINES = {"heads_up", "alignment", "lahis"}
MAX_LINES = 600


@dataclass(frozen=True)
class Import:
    importer: str  # dotted module name, e.g. lens_heads.heads_up._alpha
    imported: str  # dotted module name
    names: tuple[str, ...]  # names taken with ``from ... import``
    line: int


def module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_package(name: str, root: Path = PACKAGE) -> bool:
    return (root.parent / name.replace(".", "/") / "__init__.py").is_file()


def imports_of(path: Path, root: Path = PACKAGE) -> list[Import]:
    """Every import of a ``lens_heads`` module in ``path`` (relative ones resolved)."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == root.name:
                    found.append(Import(name, alias.name, (), node.lineno))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            if base.split(".")[0] != root.name:
                continue
            names = tuple(alias.name for alias in node.names)
            # ``from lens_heads.core import masks`` imports the module lens_heads.core._masks
            for alias in names:
                if (
                    is_package(base, root)
                    and (root.parent / base.replace(".", "/") / f"{alias}.py").is_file()
                ):
                    found.append(Import(name, f"{base}.{alias}", (), node.lineno))
            found.append(Import(name, base, names, node.lineno))
    return found


def room(module: str) -> str:
    """The subpackage or top-level module a dotted name belongs to (``lens_heads`` itself is
    ``__init__``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def all_imports(root: Path = PACKAGE) -> list[Import]:
    return [i for path in sorted(root.rglob("*.py")) for i in imports_of(path, root)]


def layer_violations(imports: list[Import]) -> list[str]:
    problems = []
    for i in imports:
        source, target = room(i.importer), room(i.imported)
        if source not in LAYERS or target not in LAYERS:
            problems.append(f"{i.importer}:{i.line}: {source or target!r} has no layer")
        elif LAYERS[target] > LAYERS[source]:
            problems.append(f"{i.importer}:{i.line} imports {i.imported} from a higher layer")
        elif source != target and {source, target} <= RESEARCH_LINES:
            problems.append(f"{i.importer}:{i.line} imports {i.imported} across research lines")
    return problems


def private_violations(imports: list[Import]) -> list[str]:
    problems = []
    for i in imports:
        if room(i.importer) == room(i.imported):
            continue
        if "." not in i.importer and i.imported.count(".") == 1:
            continue  # the package root and its own top-level modules (lens_heads._moved)
        private_module = any(part.startswith("_") for part in i.imported.split(".")[1:])
        private_names = [n for n in i.names if n.startswith("_")]
        if private_module:
            problems.append(f"{i.importer}:{i.line} imports the private module {i.imported}")
        if private_names:
            problems.append(f"{i.importer}:{i.line} imports {private_names} from {i.imported}")
    return problems


def circles(imports: list[Import]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), i.e. import circles."""
    graph: dict[str, set[str]] = {}
    for i in imports:
        if i.imported != i.importer:
            graph.setdefault(i.importer, set()).add(i.imported)
            graph.setdefault(i.imported, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def package_circles(imports: list[Import]) -> list[list[str]]:
    """Circles among modules, ignoring the edges from a package's ``__init__`` to its own
    modules (re-exports): ``a/__init__ -> a.x -> a`` is how re-exports look, not a circle."""
    kept = [
        i
        for i in imports
        if not (is_package(i.importer) and i.imported.startswith(i.importer + "."))
    ]
    return circles(kept)


def long_modules(root: Path = PACKAGE, limit: int = MAX_LINES) -> list[str]:
    lengths = {p: len(p.read_text(encoding="utf-8").splitlines()) for p in root.rglob("*.py")}
    too_long = [(path, n) for path, n in sorted(lengths.items()) if n > limit]
    return [f"{path.relative_to(root.parent)}: {n} lines" for path, n in too_long]


# -- the package ---------------------------------------------------------------------------------
def test_every_room_has_a_layer():
    rooms = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    rooms |= {p.stem for p in PACKAGE.glob("*.py")}
    assert rooms <= set(LAYERS), sorted(rooms - set(LAYERS))


def test_no_import_from_a_higher_layer_or_across_research_lines():
    assert layer_violations(all_imports()) == []


def test_no_private_name_crosses_a_subpackage():
    assert private_violations(all_imports()) == []


def test_each_internal_module_lists_what_the_other_subpackages_take_from_it():
    """``<subpackage>.internal`` re-exports exactly the names other subpackages import from it:
    a name nobody takes any more is dropped, so the list says what the layers share."""
    taken: dict[str, set[str]] = {}
    for i in all_imports():
        if i.imported.endswith(".internal") and room(i.importer) != room(i.imported):
            taken.setdefault(i.imported, set()).update(i.names)
    listed = {
        module_name(path): set(ast.literal_eval(_assigned(path, "__all__")))
        for path in sorted(PACKAGE.glob("*/internal.py"))
    }
    assert listed == taken


def _assigned(path: Path, name: str) -> ast.expr:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return node.value
    raise AssertionError(f"{path} assigns no {name}")


def test_no_import_circle():
    assert package_circles(all_imports()) == []


def test_no_module_past_the_size_limit():
    assert long_modules() == []


# -- the checks catch what they are for (a planted package in a temporary folder) -----------------
@pytest.fixture
def planted(tmp_path: Path) -> Path:
    root = tmp_path / "lens_heads"
    for sub in ["core", "engine", "heads_up", "lahis", "cli"]:
        (root / sub).mkdir(parents=True)
        (root / sub / "__init__.py").write_text("")
    (root / "__init__.py").write_text("from lens_heads.cli import main\n")
    (root / "core" / "_masks.py").write_text("from lens_heads.engine._training import train\n")
    (root / "engine" / "_training.py").write_text(
        "def train():\n    from lens_heads.core._masks import _private\n"
    )
    (root / "heads_up" / "_sweep.py").write_text("from ..lahis import _importance\n")
    (root / "lahis" / "_importance.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (root / "cli" / "_app.py").write_text("from lens_heads.cli import _common\n")
    (root / "cli" / "_common.py").write_text("import lens_heads.cli._app\n")
    return root


def test_planted_defects_are_caught(planted: Path):
    imports = all_imports(planted)
    assert layer_violations(imports) == [
        "lens_heads.core._masks:1 imports lens_heads.engine._training from a higher layer",
        "lens_heads.heads_up._sweep:1 imports lens_heads.lahis._importance across research lines",
        "lens_heads.heads_up._sweep:1 imports lens_heads.lahis across research lines",
    ]
    assert private_violations(imports) == [
        "lens_heads.core._masks:1 imports the private module lens_heads.engine._training",
        "lens_heads.engine._training:2 imports the private module lens_heads.core._masks",
        "lens_heads.engine._training:2 imports ['_private'] from lens_heads.core._masks",
        "lens_heads.heads_up._sweep:1 imports the private module lens_heads.lahis._importance",
        "lens_heads.heads_up._sweep:1 imports ['_importance'] from lens_heads.lahis",
    ]
    assert ["lens_heads.cli._app", "lens_heads.cli._common"] in circles(imports)
    assert long_modules(planted) == [f"lens_heads/lahis/_importance.py: {MAX_LINES + 1} lines"]
