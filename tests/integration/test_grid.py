"""Integration: a two-task grid on SmolLM2 through `lens-heads grid` on a local Ray instance."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from lens_heads.cli import main

pytestmark = pytest.mark.integration

CONFIG = """\
name = "smollm2-ci"
models = ["smollm2-135m-instruct"]
tasks = ["capitalize", "country-capital"]

[schedules.ci]
steps = 6
batch_size = 4
lr = 0.2
n_eval = 8

[evaluate]
n_eval = 4
settings = ["original", "mask"]

[resources]
num_cpus = 2  # one worker at a time on a 2-core runner: the model loads once for both cells
"""


def test_a_two_task_grid_on_smollm2_through_the_cli(tmp_path, capsys):
    path = tmp_path / "grid.toml"
    path.write_text(CONFIG)
    out = tmp_path / "out"
    assert main(["grid", str(path), "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "# Grid smollm2-ci: 2 of 2 cells complete" in printed
    table = pd.read_csv(out / "table.csv")
    assert table["task"].tolist() == ["capitalize", "country-capital"]
    assert (table["heads"] == 270).all() and (table["steps"] == 6).all()
    assert table[["acc orig", "acc M", "CE orig", "CE M"]].notna().all().all()
    workers = [json.loads((out / t / "cell.json").read_text())["worker"] for t in table["task"]]
    assert workers[0]["pid"] == workers[1]["pid"], "both cells ran in one Ray worker"
    assert workers[1]["model_loads"] == ["smollm2-135m-instruct|cpu|float32"], "loaded once"
