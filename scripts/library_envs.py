"""lens_heads' equivalence checks in fresh environments with other releases of the libraries
whose internals it touches (transformers, TransformerLens).

    python scripts/library_envs.py matrix   # the compatibility matrix at the lowest and the
                                            # newest transformers the tested range allows;
                                            # stores results/compatibility/transformers-*/
    python scripts/library_envs.py newest   # the newest releases, ceilings ignored: the matrix
                                            # and a tiny end-to-end run; says whether the
                                            # ceilings in pyproject.toml can move

Each environment is a new virtual environment (``--workdir``, default a temporary folder) into
which this checkout is installed with pip, as a user would, with the chosen releases of
``transformers`` and ``transformer-lens``; torch stays the CPU build of ``constraints.txt``
unless ``--torch VERSION`` names another (the newest torch on PyPI is a CUDA build of several
GB, which runs on the CPU too), and pip resolves everything else
afresh. Run ``newest`` before raising a ceiling (CONTRIBUTING.md); it takes a few minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Sequence
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
CONSTRAINTS = ROOT / "constraints.txt"
#: the libraries whose internals lens_heads touches: each has a tested range in pyproject.toml
MOVING = ("transformers", "transformer-lens")


def declared_ranges() -> dict[str, SpecifierSet]:
    """The ranges ``pyproject.toml`` declares for :data:`MOVING`."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    ranges = {}
    for requirement in project["dependencies"]:
        match = re.match(r"([A-Za-z0-9_.\-]+)\s*(.*)", requirement)
        if match and match.group(1) in MOVING:
            ranges[match.group(1)] = SpecifierSet(match.group(2))
    return ranges


def releases(name: str) -> list[Version]:
    """Every final release of ``name`` on the package index, oldest first."""
    output = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", name],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    listed = re.search(r"Available versions:\s*(.*)", output)
    if listed is None:
        raise RuntimeError(f"pip index versions {name} listed no versions:\n{output}")
    versions = [Version(v.strip()) for v in listed.group(1).split(",")]
    return sorted(v for v in versions if not v.is_prerelease and not v.is_devrelease)


def pick(name: str, which: str, ranges: dict[str, SpecifierSet]) -> str:
    """The ``lowest`` or ``newest`` release of ``name`` inside its range, or the ``latest``
    release of all (the ceiling ignored)."""
    available = releases(name)
    if which == "latest":
        return str(available[-1])
    inside = [v for v in available if v in ranges[name]]
    if not inside:
        raise RuntimeError(f"no release of {name} satisfies {ranges[name]}")
    return str(inside[0] if which == "lowest" else inside[-1])


def torch_pin() -> str:
    """The torch line of ``constraints.txt`` (the CPU build)."""
    for line in CONSTRAINTS.read_text(encoding="utf-8").splitlines():
        if line.startswith("torch=="):
            return line.strip()
    raise RuntimeError("constraints.txt pins no torch")


def make_env(
    where: Path, pins: dict[str, str], torch: str | None = None, ranges: dict | None = None
) -> Path:
    """A new virtual environment at ``where`` with this checkout installed and ``pins``; torch
    is ``constraints.txt``'s CPU build unless ``torch`` names another release. A pin outside its
    declared range (``ranges``) cannot go in with the checkout (pip holds it to the ceiling), so
    it is installed after it, over the ceiling, with pip's conflict warning kept in the log."""
    shutil.rmtree(where, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    python = where / "bin" / "python"
    outside = {n: v for n, v in pins.items() if ranges and Version(v) not in ranges[n]}
    constraints = where / "constraints.txt"
    torch_line = torch_pin() if torch is None else f"torch=={torch}"
    inside = [f"{name}=={version}" for name, version in pins.items() if name not in outside]
    constraints.write_text("\n".join([torch_line, *inside]) + "\n", encoding="utf-8")
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    steps = [[*pip, "-c", str(constraints), "-e", str(ROOT)]]
    if outside:
        pinned = where / "torch.txt"
        pinned.write_text(torch_line + "\n", encoding="utf-8")
        steps.append([*pip, "-c", str(pinned), *(f"{n}=={v}" for n, v in outside.items())])
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode != 0:  # pip's own report, without its index warnings
            lines = [line for line in done.stderr.splitlines() if "is ignored" not in line]
            raise RuntimeError("pip install failed:\n" + "\n".join(lines[-30:]))
        if "incompatible" in done.stderr:
            print("   " + done.stderr.strip().splitlines()[-1], flush=True)
    return python


def installed(python: Path) -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json; print(json.dumps({n: m.version(n) for n in "
        "('torch', 'transformers', 'transformer-lens', 'tokenizers')}))"
    )
    return json.loads(subprocess.run([str(python), "-c", code], capture_output=True,
                                     text=True, check=True).stdout)  # fmt: skip


def run_matrix(python: Path, store: bool) -> int:
    command = [str(python), str(ROOT / "scripts" / "compatibility_matrix.py")]
    if not store:
        command.append("--no-store")
    return subprocess.run(command, cwd=ROOT).returncode


SMOKE = """
import lens_heads as lh, torch
torch.manual_seed(0)
model = lh.tiny_model(n_layers=2, n_heads=4, n_kv_heads=2, seed=0)
print("guards", lh.verify_model(model))
result = lh.train_mask(model, "capitalize", lh.TrainingConfig.short(steps=3, n_eval=4),
                       progress=False)
table = lh.evaluate(model, "capitalize", mask=result.mask, n_eval=4, progress=False)
sweep = lh.removal_sweep(model, "apple", result.W, max_new_tokens=3, progress=False)
scores = lh.translation_scores(model, "en-fr", n_eval=2, shots=1)
importance = lh.head_importance(model, ["the cat sat on the mat"] * 2)
print("end-to-end: train, evaluate, sweep, translation scores, importance: ok",
      len(table.to_frame()), len(sweep.n_removed), tuple(scores.sentence_hits.shape))
"""


def smoke(python: Path) -> int:
    return subprocess.run([str(python), "-c", SMOKE], cwd=ROOT).returncode


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["matrix", "newest"])
    parser.add_argument("--workdir", help="where the environments go (default: a temp folder)")
    parser.add_argument(
        "--torch",
        help="a torch release instead of constraints.txt's CPU build (a CUDA build from the "
        "package index runs on the CPU too; several GB)",
    )
    args = parser.parse_args(argv)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="lens-heads-envs-"))
    ranges = declared_ranges()
    plans = (
        {"lowest": "lowest", "newest": "newest"} if args.mode == "matrix" else {"latest": "latest"}
    )
    failed = 0
    for label, which in plans.items():
        pins = {name: pick(name, which, ranges) for name in MOVING}
        print(f"== {label}: " + ", ".join(f"{n} {v}" for n, v in pins.items()), flush=True)
        started = time.perf_counter()
        python = make_env(workdir / label, pins, torch=args.torch, ranges=ranges)
        print(f"   installed in {time.perf_counter() - started:.0f} s: {installed(python)}")
        code = run_matrix(python, store=args.mode == "matrix")
        if args.mode == "newest":
            code = code or smoke(python)
        failed += code != 0
        inside = all(Version(v) in ranges[n] for n, v in pins.items())
        verdict = "passes" if code == 0 else "FAILS"
        print(f"   {label}: {verdict}" + ("" if inside else " (outside the declared ranges)"))
        if args.mode == "newest" and code == 0 and not inside:
            ceilings = ", ".join(
                f"{n}<{Version(v).major}.{Version(v).minor + 1}" for n, v in pins.items()
            )
            print(f"   the ceilings can move to {ceilings}: run `matrix` and store it first")
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"library_envs {args.mode}: {'all pass' if not failed else f'{failed} failed'}")
    return 1 if failed else 0


if __name__ == "__main__":
    os.environ.setdefault("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    sys.exit(main())
