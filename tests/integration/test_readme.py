"""The README's ``lens-heads ...`` example commands, each run as written through the CLI
(issue 17), in a scratch folder so their relative paths (``runs/cap``, ``demo-report``) resolve.

Commands are read from README.md's ``bash`` blocks (continued lines joined, ``# comments`` and
``[optional]`` parts dropped), so a changed README is tested as it reads. Commands that take
longer than CI allows are listed in :data:`TOO_SLOW` with the reason (set
``LENS_HEADS_README_ALL=1`` to run them too). A ``train-mask`` output folder that later
commands name (``--mask runs/...``) is then a stand-in of the same model and task: the demo's
mask for ``capitalize`` (the CI schedule), a 10-step ``train-mask`` run for any other task.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import time
from pathlib import Path

import pytest

from lens_heads.cli import build_parser, main

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[2] / "README.md"

#: substring of a command -> why it does not run in CI (measured on the 2-core CI machine)
TOO_SLOW = {
    "lens-heads train-mask": "200 training steps on SmolLM2 and a 100-example evaluation: "
    "about 5 minutes; the demo (run once per session) trains the same mask on the CI schedule",
    "lens-heads eval": "7 settings x 89 held-out country-capital examples (the README's default "
    "--n-eval 100, halved by the split): about 90 s; the --mask folder form it uses is tested "
    "through the CLI on the tiny model (tests/unit/cli/test_rough_edges.py)",
    "lens-heads grid": "four 200-step SmolLM2 trainings with evaluations: about 10 minutes; "
    "tests/integration/test_grid.py runs a two-task grid through the same command on small "
    "settings, and tests/unit/scale/test_grid.py validates the documented configs",
    "lens-heads sweep": "a 270-step removal sweep with 20-token continuations: about 70 s "
    "(bench_sweep); tests/integration/test_sweep.py runs it with --every 2",
}
RUN_ALL = os.environ.get("LENS_HEADS_README_ALL") == "1"


def readme_commands(text: str | None = None) -> list[str]:
    """Each ``lens-heads ...`` command of the README's bash blocks, as one line."""
    text = README.read_text(encoding="utf-8") if text is None else text
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            for part in line.split("&&"):
                part = re.sub(r"\s+#.*$", "", part).strip()
                if part.startswith("lens-heads "):
                    part = re.sub(r"\s*\[[^\]]*\]", "", part)  # [--mask FILE]: optional
                    commands.append(" ".join(part.split()))
    return commands


def test_the_readme_parser_reads_continuations_comments_and_options():
    sample = (
        "```bash\npip install x && lens-heads demo --out d   # first\n"
        'lens-heads generate --prompt "a b" [--mask m] \\\n    --chat\n```\n'
    )
    assert readme_commands(sample) == [
        "lens-heads demo --out d",
        'lens-heads generate --prompt "a b" --chat',
    ]
    assert len(readme_commands()) >= 10


COMMANDS = readme_commands()
if RUN_ALL:  # train-mask first: later commands name its output folder
    COMMANDS.sort(key=lambda command: not command.startswith("lens-heads train-mask"))
TRAINED = {m for c in COMMANDS if RUN_ALL for m in re.findall(r"train-mask .*--out (\S+)", c)}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("readme")


def _needs_demo(command: str) -> bool:
    return "lens-heads demo" in command or bool(re.search(r"--mask (runs/\S+)", command))


def _trained_task(folder: str) -> tuple[str, str]:
    """The model and task of the README's ``train-mask`` command that writes ``folder``."""
    for command in COMMANDS:
        argv = shlex.split(command)
        if argv[1] == "train-mask" and argv[argv.index("--out") + 1] == folder:
            args = build_parser("train-mask").parse_args(argv[1:])  # the model: first or --model
            return args.model, args.task
    raise AssertionError(f"no README train-mask command writes {folder}")


def _provide(workdir: Path, demo_report: Path) -> None:
    """What earlier README commands write: the demo folder (its finished stages are reused, as
    the demo documents) and, unless train-mask runs, a stand-in of the same model and task at
    every ``--mask runs/...`` folder the README names."""
    if not (workdir / "demo-report").exists():
        shutil.copytree(demo_report, workdir / "demo-report")
    for command in COMMANDS:
        for name in re.findall(r"--mask (runs/\S+)", command):
            if name in TRAINED or (workdir / name).exists():
                continue
            model, task = _trained_task(name)
            if (model, task) == ("smollm2-135m-instruct", "capitalize"):
                shutil.copytree(demo_report / "training", workdir / name)
                continue
            argv = ["train-mask", "--model", model, "--task", task, "--steps", "10"]
            assert main([*argv, "--n-eval", "0", "--out", str(workdir / name)]) == 0


def _params() -> list:
    params = []
    for command in COMMANDS:
        marks = []
        for key, reason in TOO_SLOW.items():
            if key in command and not RUN_ALL:
                marks.append(pytest.mark.skip(reason=f"too slow for CI: {reason}"))
        params.append(pytest.param(command, marks=marks, id=command.split()[1]))
    return params


@pytest.mark.parametrize("command", _params())
def test_readme_command_runs_with_same_task_masks(command, workdir, request, monkeypatch, capsys):
    if _needs_demo(command):  # the session's demo run (SmolLM2), only when a command needs it
        _provide(workdir, request.getfixturevalue("demo_report"))
    monkeypatch.chdir(workdir)
    argv = shlex.split(command)[1:]
    started = time.perf_counter()
    code = main(argv)
    captured = capsys.readouterr()
    print(f"{command}: exit {code} in {time.perf_counter() - started:.1f} s")
    assert code == 0, captured.err
    out = argv[argv.index("--out") + 1] if "--out" in argv else None
    if out is not None:
        assert any((workdir / out).iterdir()), f"{command} wrote nothing to {out}"
