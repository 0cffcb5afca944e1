"""README, ``.ci/run``, ``pyproject.toml`` and ``constraints.txt`` agree (issue 32): CI installs
exactly as the README's second command says, through the constraints file; the constraints pin
one release of every dependency inside the ranges pyproject declares; the libraries whose
internals lens_heads touches have tested ceilings, and torch is not pinned in the library."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[3]


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not an exact pin"
            pins[name.lower().replace("_", "-")] = version
    return pins


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = text.split("## Set-up: two commands", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.*?)\n```", setup, flags=re.S)


def test_the_readme_sets_up_in_two_commands_through_the_constraints():
    demo, tests = _readme_commands()
    assert "pip install -c constraints.txt -e ." in demo and "lens-heads demo" in demo
    assert 'pip install -c constraints.txt -e ".[test]"' in tests and "python -m pytest" in tests
    two_passes = '-m "not models" && python -m pytest -n 2 -m models'
    assert tests.strip().endswith(two_passes), "the unit pass, then the models pass"


def test_ci_runs_the_readme_test_command():
    _, tests = _readme_commands()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert tests.strip() in ci


def test_every_dependency_is_pinned_inside_its_declared_range():
    pins = _pins()
    project = _project()
    requirements = project["dependencies"] + project["optional-dependencies"]["test"]
    for text in requirements:
        requirement = Requirement(text)
        name = requirement.name.lower().replace("_", "-")
        assert name in pins, f"constraints.txt pins no release of {name}"
        version = Version(pins[name])
        assert requirement.specifier.contains(version, prereleases=True), (
            f"constraints.txt pins {name}=={version}, outside pyproject's {requirement.specifier}"
        )


def test_the_moving_libraries_have_ceilings_and_torch_is_not_pinned():
    declared = {Requirement(text).name: Requirement(text) for text in _project()["dependencies"]}
    for name in ("transformers", "transformer-lens"):
        assert any(spec.operator in ("<", "<=") for spec in declared[name].specifier), name
        assert any(spec.operator == ">=" for spec in declared[name].specifier), name
    assert all(spec.operator not in ("==", "===") for spec in declared["torch"].specifier)
    assert _pins()["torch"].endswith("+cpu"), "CI installs torch's CPU build"


def test_the_package_has_a_version_that_old_paths_can_name():
    import lens_heads as lh
    from lens_heads import _moved

    assert _project()["version"] == lh.__version__ == "0.2.0"
    assert Version(_moved.REMOVED_IN) > Version(lh.__version__)


def test_every_file_that_loads_a_real_model_runs_in_the_models_pass():
    """The integration tests are marked ``integration`` (a model's threads) and every file that
    loads a real model runs in the ``models`` pass; the demo's readers share one worker group
    (the demo runs once), every other file is a group of its own."""
    import conftest

    root = Path(__file__).resolve().parents[3]
    for path in sorted((root / "tests" / "integration").glob("test_*.py")):
        assert "pytest.mark.integration" in path.read_text(encoding="utf-8"), path.name
        assert conftest.loads_a_model(path), path.name
    notebook = root / "notebooks" / "figure2_removal_sweep.ipynb"
    assert conftest.loads_a_model(notebook) and conftest.xdist_group_of(notebook) == "demo"
    readme = root / "tests" / "integration" / "test_readme.py"
    assert conftest.xdist_group_of(readme) == "demo"
    unit = root / "tests" / "unit" / "core" / "test_ablation.py"
    assert conftest.xdist_group_of(unit) == unit.as_posix() and not conftest.loads_a_model(unit)


def test_the_two_passes_split_the_suite_by_the_models_mark():
    """``-m "not models"`` leaves out every test of a file that loads a real model (conftest
    marks them), ``-m models`` takes them and no unit test: together they run the suite once."""
    import subprocess
    import sys

    def collected(mark: str, *paths: str) -> list[str]:
        found = subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly",
             "-m", mark, *paths],
            cwd=ROOT, capture_output=True, text=True, check=False,
        )  # fmt: skip
        return [line for line in found.stdout.splitlines() if "::" in line]

    files = ("tests/integration/test_lens.py", "tests/unit/core/test_ablation.py")
    models, rest = collected("models", *files), collected("not models", *files)
    assert models and all(item.startswith("tests/integration/") for item in models)
    assert rest and all(item.startswith("tests/unit/") for item in rest)
