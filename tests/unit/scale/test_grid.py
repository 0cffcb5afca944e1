"""Grid configs (validated before any cell starts) and the grid runner in this process
(``address="local"``): outputs, reuse, failures table, CLI. Ray itself: test_grid_ray.py."""

from __future__ import annotations

import json
import textwrap

import pandas as pd
import pytest

import lens_heads as lh
from lens_heads.cli import main
from lens_heads.core._locks import CLAIM, claim, release
from lens_heads.scale import GridEvaluationConfig
from lens_heads.scale._grid import DONE, GridConfigError, run_cell, run_grid

GOOD = """\
name = "t"
models = ["tiny-2x4"]
tasks = ["capitalize", "antonym"]
seeds = [0]

[schedules.tiny]
steps = 4
batch_size = 4
n_eval = 8
precision = "float32"

[evaluate]
n_eval = 4
settings = ["original", "mask"]
random_seeds = [0]
"""


def _config(text: str = GOOD, format: str = "toml") -> lh.GridConfig:
    return lh.GridConfig.from_text(textwrap.dedent(text), format=format, source="grid.toml")


def test_a_good_config_lists_its_cells_with_compact_folders():
    config = _config(GOOD.replace("seeds = [0]", "seeds = [0, 3]"))
    assert [c.path for c in config.cells] == [
        "seed0/capitalize",
        "seed0/antonym",
        "seed3/capitalize",
        "seed3/antonym",
    ]
    assert config.training_config(config.cells[2]).seed == 3
    assert config.training_config(config.cells[0]).steps == 4
    assert lh.GridConfig.from_dict(config.to_dict()).cells == config.cells


def test_yaml_is_the_same_config():
    yaml_text = """\
    name: t
    models: [tiny-2x4]
    tasks: [capitalize, antonym]
    seeds: [0]
    schedules:
      tiny: {steps: 4, batch_size: 4, n_eval: 8, dtype: float32}
    evaluate: {n_eval: 4, settings: [original, mask], random_seeds: [0]}
    """
    assert _config(yaml_text, "yaml").to_dict() == _config().to_dict()


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('"antonym"]', '"antonymm"]', "line 3: unknown task 'antonymm' (did you mean 'antonym'?)"),
        (
            '["tiny-2x4"]',
            '["smollm2-135m-instruc"]',
            "line 2: unknown model alias 'smollm2-135m-instruc' (did you mean "
            "'smollm2-135m-instruct'?)",
        ),
        ("steps = 4", "steps = -4", "line 7: schedule 'tiny': steps = -4 must be a positive"),
        ('"antonym"]', '"antonym", "capitalize"]', "line 3: duplicate cells: tasks lists"),
        ("seeds = [0]", "seeds = [0, 0]", "line 4: duplicate cells: seeds lists 0 twice"),
        ("seeds = [0]", "seedz = [0]", "line 4: unknown key 'seedz' (did you mean 'seeds'?)"),
        ("n_eval = 4", "n_eval = 40", "evaluate.n_eval = 40 exceeds the 8 examples"),
        ("batch_size = 4", "batch_sise = 4", "unknown TrainingConfig field(s) ['batch_sise']"),
        ('"mask"]', '"masked"]', "line 14: evaluate: unknown evaluation setting 'masked'"),
        ("[schedules.tiny]", "[schedules.tiny]\nseed = 1", "sets 'seed'; list seeds"),
        ("n_eval = 4", "n_eval = 4\nsplit_seed = 2", "line 14: evaluate.split_seed cannot be"),
        ("n_eval = 4", "n_eval = 4\nshots = -1", "line 14: evaluate: shots must be at least"),
        ("n_eval = 4", "n_eval = 4\nshotz = 1", "line 14: unknown key 'shotz' in [evaluate]"),
        ("random_seeds = [0]", "random_seeds = [0]\n[sweep]\nevery = 0", "line 17: sweep: every"),
    ],
)
def test_bad_configs_fail_with_the_line_and_the_fix(old, new, message):
    assert old in GOOD
    with pytest.raises(GridConfigError, match=r"^grid\.toml") as caught:
        _config(GOOD.replace(old, new))
    assert message in str(caught.value)


def test_the_evaluate_and_sweep_tables_are_settings_groups_stored_as_before():
    """Issue 45: ``[evaluate]`` is an ``EvaluationConfig`` and ``[sweep]`` a ``SweepConfig``
    (each with the field the grid adds), so they take every field of those settings; a grid
    that sets only the keys of lens_heads 0.2 stores (and fingerprints) exactly what it did."""
    config = _config(GOOD + "\n[sweep]\nevery = 4\n")
    assert config.to_dict()["evaluate"] == {
        "settings": ["original", "mask"],
        "n_eval": 4,
        "random_seeds": [0],
    }
    assert config.to_dict()["sweep"] == {"examples": 1, "every": 4, "max_new_tokens": 0}
    assert lh.GridConfig.from_dict(config.to_dict()) == config
    richer = _config(GOOD.replace("n_eval = 4", "n_eval = 4\nshots = 1\nablation = 'mean'"))
    evaluation = richer.evaluate.evaluation(split_seed=7)
    assert type(evaluation) is lh.EvaluationConfig
    assert (evaluation.shots, evaluation.ablation, evaluation.split_seed) == (1, "mean", 7)
    assert not evaluation.progress
    assert richer.to_dict()["evaluate"]["shots"] == 1
    with pytest.raises(lh.LensHeadsError, match="split_seed cannot be set: the held-out split"):
        GridEvaluationConfig(split_seed=3)  # set, it would go unused: the schedule's is
    with pytest.warns(DeprecationWarning, match="sweep.generate_tokens is now max_new_tokens"):
        old = _config(GOOD + "\n[sweep]\ngenerate_tokens = 2\n")
    assert old.sweep.sweep().max_new_tokens == 2


def test_a_schedules_old_precision_key_still_works_with_a_warning():
    """Issue 45: a schedule's ``dtype`` (the training precision's name before 0.2.0) is read as
    ``precision`` with a DeprecationWarning."""
    with pytest.warns(DeprecationWarning, match="schedule 'tiny': dtype is now precision"):
        config = _config(GOOD.replace('precision = "float32"', 'dtype = "float32"'))
    assert config.schedules["tiny"] == _config().schedules["tiny"]
    assert config.schedules["tiny"].precision == "float32"


def test_two_identical_schedules_are_duplicate_cells():
    text = GOOD + "\n[schedules.same]\nsteps = 4\nbatch_size = 4\nn_eval = 8\ndtype = 'float32'\n"
    with pytest.raises(GridConfigError, match="duplicate cells: schedules 'tiny' and 'same'"):
        _config(text)


def test_syntax_errors_and_unknown_formats_are_clear(tmp_path):
    with pytest.raises(GridConfigError, match="not valid TOML"):
        _config("models = [")
    path = tmp_path / "grid.json"
    path.write_text("{}")
    with pytest.raises(GridConfigError, match=r"write the grid as \.toml or \.yaml"):
        lh.GridConfig.load(path)


def test_a_bad_config_fails_before_any_cell_starts(tmp_path, capsys):
    path = tmp_path / "grid.toml"
    path.write_text(GOOD.replace('"antonym"]', '"antonymm"]'))
    out = tmp_path / "out"
    assert main(["grid", str(path), "--out", str(out), "--address", "local"]) == 2
    assert "line 3: unknown task 'antonymm'" in capsys.readouterr().err
    assert not out.exists()


def test_claims_are_exclusive_and_taken_over_when_stale(tmp_path):
    folder = tmp_path / "cell"
    assert claim(folder, "run-a")
    assert not claim(folder, "run-b"), "a live claim of another run is respected"
    holder = json.loads((folder / CLAIM).read_text())
    holder["pid"] = 2**22 + 12345  # a process that does not exist on this host
    (folder / CLAIM).write_text(json.dumps(holder))
    assert claim(folder, "run-b"), "the claim of a dead process is taken over"
    assert json.loads((folder / CLAIM).read_text())["run"] == "run-b"
    release(folder, "run-a")
    assert (folder / CLAIM).exists(), "only the holder releases"
    release(folder, "run-b")
    assert not (folder / CLAIM).exists()


def test_a_local_grid_writes_cells_table_and_reuses_complete_cells(tmp_path):
    config = _config()
    out = tmp_path / "out"
    result = run_grid(config, out, address="local", progress=False)
    frame = result.to_frame()
    assert list(frame["task"]) == ["capitalize", "antonym"]
    assert {"acc orig", "CE orig", "acc M", "CE M", "perplexity M"} <= set(frame.columns)
    assert not len(result.failures)
    for name in ["training.json", "mask.safetensors", "eval/result.json", DONE, "compute.log"]:
        assert (out / "capitalize" / name).is_file(), name
    assert not (out / "capitalize" / CLAIM).exists(), "the claim is released"
    assert pd.read_csv(out / "table.csv")["task"].tolist() == ["capitalize", "antonym"]
    assert "# Grid t: 2 of 2 cells complete" in (out / "table.md").read_text()
    stamp = (out / "antonym" / DONE).stat().st_mtime_ns
    again = run_grid(config, out, address="local", progress=False)
    assert (out / "antonym" / DONE).stat().st_mtime_ns == stamp
    assert again.to_frame().equals(frame)
    assert lh.GridResult.load(out).to_frame()["task"].tolist() == ["capitalize", "antonym"]
    assert len((out / "antonym" / "compute.log").read_text().splitlines()) == 1
    heatmap = result.plot().data[0]
    assert list(heatmap.x) == ["antonym", "capitalize"] and heatmap.z.shape == (1, 2)


def test_a_failing_cell_is_retried_then_reported_and_the_others_finish(tmp_path):
    data = tmp_path / "few.json"
    data.write_text(json.dumps([{"input": w, "output": w.upper()} for w in "abcdefghij"]))
    text = GOOD.replace('"antonym"]', f'"{data}"]') + "\n[resources]\nretries = 1\n"
    text = text.replace("n_eval = 8", "n_eval = 4")  # hold out 4 of the file's 10 examples
    text = text.replace("batch_size = 4", "batch_size = 7")  # the 6 left cannot fill a batch
    out = tmp_path / "out"
    result = run_grid(_config(text), out, address="local", progress=False)
    assert result.to_frame()["task"].tolist() == ["capitalize"]
    failure = result.failures.iloc[0]
    assert failure["cell"] == "tiny-2x4/tiny/seed0/few" and failure["attempts"] == 2
    assert "batch_size 7 is larger than the 6 training examples" in failure["error"]
    assert "## Failed cells (1)" in (out / "table.md").read_text()
    assert len((out / "few" / "compute.log").read_text().splitlines()) == 2


def test_a_cell_folder_with_another_training_config_is_refused(tmp_path):
    config = _config()
    out = tmp_path / "out"
    run_cell(config, config.cells[0], out)
    (out / "capitalize" / DONE).unlink()
    other = _config(GOOD.replace("steps = 4", "steps = 5"))
    with pytest.raises(RuntimeError, match="holds a training of other settings"):
        run_cell(other, other.cells[0], out)


def test_the_cli_runs_a_grid_and_checks_a_config(tmp_path, capsys):
    path = tmp_path / "grid.toml"
    path.write_text(GOOD)
    out = tmp_path / "out"
    assert main(["grid", str(path), "--out", str(out), "--check"]) == 0
    assert "2 cells; config OK" in capsys.readouterr().out
    assert main(["grid", str(path), "--out", str(out), "--address", "local", "--quiet"]) == 0
    assert "| tiny-2x4 | tiny | 0 | capitalize |" in capsys.readouterr().out
    assert (out / "table.csv").is_file()


def test_a_sweep_after_training_adds_its_folder_and_column(tmp_path):
    config = _config(GOOD.replace('"antonym"]', "]") + "\n[sweep]\nexamples = 1\nevery = 4\n")
    out = tmp_path / "out"
    result = run_grid(config, out, address="local", progress=False)
    assert "switch step" in result.to_frame().columns
    sweep = lh.SweepResult.load(out / "capitalize" / "sweep" / "0")
    assert sweep.n_removed[0] == 0 and sweep.n_removed[-1] == 8


@pytest.mark.parametrize("name", ["laptop.toml", "heads_up_llama8b.toml"])
def test_the_documented_grids_are_valid(name):
    from pathlib import Path

    config = lh.GridConfig.load(Path(__file__).resolve().parents[3] / "docs" / "grids" / name)
    assert config.cells and all(c.path.endswith(c.task) for c in config.cells)
