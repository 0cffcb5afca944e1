"""Every analysis module runs end to end from its command line on a tiny model, writes its
summary, figures and numbers, and reuses its finished stages on a second run. What the numbers
say is checked against independent computations in ``test_analyses_numbers.py``."""

from __future__ import annotations

import dataclasses
import importlib
import json
from pathlib import Path

import pytest

import lens_heads as lh
from analyses import __main__ as registry
from analyses import (
    figure2_sweep,
    figure3_trajectories,
    figure7_mask_weights,
    figure8_9_orders,
    table3_few_shot,
    table7_attention,
)
from analyses._common import parse

ROOT = Path(__file__).resolve().parents[3]

TINY = ["--steps", "3", "--n-eval", "4", "--no-progress"]


def _tiny_flags(config: type) -> list[str]:
    """The flags of TINY that the analysis's Config has (an analysis that trains nothing takes
    no --steps)."""
    fields = {field.name for field in dataclasses.fields(config)}
    pairs = [["--steps", "3"], ["--n-eval", "4"]]
    kept = [flag for pair in pairs if pair[0][2:].replace("-", "_") in fields for flag in pair]
    return [*kept, *(["--no-progress"] if "progress" in fields else [])]


@pytest.fixture()
def tiny_everywhere(monkeypatch, tiny):
    monkeypatch.setattr(lh, "load_model", lambda spec, **kw: tiny)
    return tiny


def _analyses():
    from analyses.__main__ import available

    return [importlib.import_module(f"analyses.{name}") for name in available()]


#: every analysis's tiny run, kept beside the analysis (its EXAMPLE: options and the figure)
CASES = [(module, *module.EXAMPLE) for module in _analyses() if hasattr(module, "EXAMPLE")]


def test_every_analysis_has_a_tiny_run_here_or_names_its_test():
    for module in _analyses():
        if hasattr(module, "EXAMPLE"):
            continue
        where = getattr(module, "TESTED_BY", None)
        assert where, f"{module.__name__}: give it an EXAMPLE (tiny-run options) or TESTED_BY"
        text = (ROOT / where).read_text(encoding="utf-8")
        assert module.__name__.split(".")[-1] in text, f"{where} does not test {module.__name__}"


@pytest.mark.parametrize("module", _analyses(), ids=lambda module: module.__name__)
def test_every_analysis_runs_as_python_dash_m(module):
    """``python -m analyses.NAME`` runs ``main`` (a module without the guard exits 0 silently:
    a re-run then stores nothing)."""
    source = Path(module.__file__).read_text(encoding="utf-8")
    assert 'if __name__ == "__main__":\n    raise SystemExit(main())' in source


@pytest.mark.parametrize(
    ("module", "options", "figure"), CASES, ids=lambda v: getattr(v, "__name__", "")
)
def test_analysis_runs_from_its_command_line_and_resumes(
    tiny_everywhere, tmp_path, capsys, module, options, figure
):
    out = tmp_path / "out"
    argv = [*_tiny_flags(module.Config), *options, "--out", str(out)]
    assert module.main(argv) == 0
    printed = capsys.readouterr().out
    summary = (out / "summary.md").read_text()
    assert summary.startswith("# ") and summary.strip() in printed
    assert (out / f"{figure}.html").stat().st_size > 1000
    assert isinstance(json.loads((out / "numbers.json").read_text()), dict)
    markers = sorted(out.rglob(".complete"))
    assert markers, "every analysis computes through resumable stages"
    stamps = {m: m.stat().st_mtime_ns for m in markers}
    assert module.main(argv) == 0
    assert {m: m.stat().st_mtime_ns for m in markers} == stamps, "finished stages are reused"


def test_reusing_a_trained_mask_skips_training(tiny_everywhere, tmp_path):
    first = tmp_path / "first"
    assert figure3_trajectories.main([*TINY, "--out", str(first)]) == 0
    second = tmp_path / "second"
    argv = [*TINY, "--mask", str(first / "training"), "--out", str(second)]
    assert figure7_mask_weights.main(argv) == 0
    assert not (second / "training").exists()
    numbers = json.loads((second / "numbers.json").read_text())
    trained = json.loads((first / "numbers.json").read_text())
    assert numbers["heads kept"] == trained["heads_kept"]
    # the run records the mask folder it read by its content, and its seed (issue 70)
    from lens_heads.core import data_hashes

    provenance = numbers["provenance"]
    mask = str(first / "training")
    assert provenance["data"][mask] == data_hashes([mask])[mask]
    assert provenance["seeds"] == {"seed": 0} and provenance["date"].endswith("+00:00")


def test_figure9_reuses_a_given_negative_init_mask(tiny_everywhere, tmp_path):
    first = tmp_path / "first"
    argv = [*TINY, "--every", "8", "--max-new-tokens", "0", "--negative-steps", "3"]
    assert figure8_9_orders.main([*argv, "--negative-init", "-1", "--out", str(first)]) == 0
    second = tmp_path / "second"
    given = ["--negative-mask", str(first / "training_negative"), "--out", str(second)]
    assert figure8_9_orders.main([*argv, *given]) == 0
    assert not (second / "training_negative").exists(), "the given mask is not trained again"
    # the figure names the init the given mask was trained from, not --negative-init's default
    labels = [row["order"] for row in json.loads((second / "numbers.json").read_text())["rows"]]
    assert "mask from init -1" in labels


def test_a_mask_folder_that_is_not_a_training_folder_is_refused(tiny_everywhere, tmp_path):
    with pytest.raises(FileNotFoundError, match="not a training folder"):
        figure7_mask_weights.main([*TINY, "--mask", str(tmp_path), "--out", str(tmp_path / "o")])


def test_table3_needs_a_family_of_tasks():
    with pytest.raises(ValueError, match="at least two tasks"):
        parse(table3_few_shot.Config, ["--tasks", "capitalize"])


def test_table7_needs_a_task_whose_answer_is_in_the_input(tiny_everywhere, tmp_path):
    with pytest.raises(ValueError, match="chooses one of the given words"):
        table7_attention.main([*TINY, "--task", "capitalize", "--out", str(tmp_path)])


def test_the_registry_lists_every_analysis_and_names_them_on_a_typo(capsys):
    assert registry.main([]) == 0
    listed = capsys.readouterr().out
    for name in ["figure2_sweep", "figure7_mask_weights", "mask_table", "table7_attention"]:
        assert name in listed
    assert registry.main(["figure99"]) == 2
    error = capsys.readouterr().err
    assert "no analysis named 'figure99'" in error and "figure2_sweep" in error


def test_config_options_come_from_the_dataclass():
    config = parse(figure2_sweep.Config, ["--task", "antonym", "--every", "3", "--no-progress"])
    assert (config.task, config.every, config.progress, config.out) == (
        "antonym",
        3,
        False,
        "runs/figure2",
    )
    with pytest.raises(SystemExit):
        parse(figure2_sweep.Config, ["--every", "three"])


def test_a_folder_refuses_a_run_with_other_settings(tiny_everywhere, tmp_path):
    out = tmp_path / "out"
    argv = [*TINY, "--task", "capitalize", "--every", "8", "--max-new-tokens", "0"]
    assert figure2_sweep.main([*argv, "--out", str(out)]) == 0
    stored = json.loads((out / "config.json").read_text())
    assert stored["every"] == 8 and "out" not in stored and "progress" not in stored
    # its finished sweep would otherwise be reused as if it had been computed every 4 steps
    with pytest.raises(ValueError, match=r"other settings \(every: saved"):
        figure2_sweep.main([*argv[:-4], "--every", "4", "--max-new-tokens", "0", "--out", str(out)])
    assert figure2_sweep.main([*argv, "--progress", "--out", str(out)]) == 0, "not a setting"
