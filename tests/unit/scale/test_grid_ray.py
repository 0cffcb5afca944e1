"""The grid runner on a real local Ray cluster (no mocks): cells as Ray tasks, resume after a
partial run, retry after a killed worker, two runs on one folder, the assembled table."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import ray

import lens_heads as lh
from lens_heads.core._locks import CLAIM
from lens_heads.scale._grid import DONE, TIMING_COLUMNS, run_cell, run_grid

ROOT = Path(__file__).resolve().parents[3]
CONFIG = """\
name = "ray-test"
models = ["tiny-2x4"]
tasks = ["capitalize", "antonym"]
checkpoint_every = 5

[schedules.tiny]
steps = 40
batch_size = 4
n_eval = 8
precision = "float32"

[evaluate]
n_eval = 4
settings = ["original", "random", "mask"]
random_seeds = [0]

[resources]
num_cpus = 1
retries = 2
"""


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def config() -> lh.GridConfig:
    return lh.GridConfig.from_text(CONFIG)


@pytest.fixture(scope="module")
def reference(config, tmp_path_factory) -> pd.DataFrame:
    """The table of an uninterrupted run in this process (no Ray)."""
    out = tmp_path_factory.mktemp("reference")
    return _table(run_grid(config, out, address="local", progress=False).to_frame())


def _table(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.drop(columns=list(TIMING_COLUMNS)).reset_index(drop=True)


def _log(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "compute.log").read_text().splitlines()]


def test_resume_after_a_partial_run_on_ray(cluster, config, reference, tmp_path):
    out = tmp_path / "grid"
    run_cell(config, config.cells[0], out, "earlier-run")  # a complete cell ...
    stamp = (out / "capitalize" / DONE).stat().st_mtime_ns

    def stop(step: int, loss: float) -> None:
        if step == 20:
            raise KeyboardInterrupt

    cell = config.cells[1]
    with pytest.raises(KeyboardInterrupt):  # ... and one interrupted at step 20 of 40
        lh.train_mask(
            lh.tiny_model(2, 4),
            "antonym",
            config.training_config(cell),
            checkpoint_dir=out / "antonym" / "checkpoints",
            checkpoint_every=5,
            progress=False,
            callback=stop,
        )
    result = run_grid(config, out, progress=False)
    assert not len(result.failures)
    assert (out / "capitalize" / DONE).stat().st_mtime_ns == stamp, "complete cells are skipped"
    training = lh.MaskTrainingResult.load(out / "antonym")
    assert training.timing["steps_this_session"] == 20, "the cell resumed at its checkpoint"
    (worker,) = _log(out / "antonym")
    assert worker["pid"] != os.getpid(), "the cell ran in a Ray worker"
    pd.testing.assert_frame_equal(_table(result.to_frame()), reference)
    assert pd.read_csv(out / "table.csv")["task"].tolist() == ["capitalize", "antonym"]
    assert all(len(loads) == 1 for loads in result.workers.values()), "one load per worker"


def test_a_killed_worker_is_retried_and_resumes_from_its_checkpoint(
    cluster, config, reference, tmp_path
):
    out = tmp_path / "grid"
    results: list = []
    runner = threading.Thread(
        target=lambda: results.append(run_grid(config, out, progress=False, poll=0.2))
    )
    runner.start()
    killed = None
    deadline = time.monotonic() + 90
    while killed is None and time.monotonic() < deadline and runner.is_alive():
        for task in ("capitalize", "antonym"):
            folder = out / task
            if (folder / "checkpoints" / "checkpoint.safetensors").is_file():
                holder = json.loads((folder / CLAIM).read_text())
                os.kill(int(holder["pid"]), signal.SIGKILL)
                killed = folder
                break
        time.sleep(0.02)
    runner.join(timeout=120)
    assert killed is not None, "no cell reached its first checkpoint in time"
    (result,) = results
    assert not len(result.failures)
    first, second = _log(killed)
    assert first["run"] == second["run"] and first["pid"] != second["pid"], "retried elsewhere"
    training = lh.MaskTrainingResult.load(killed)
    assert training.timing["steps_this_session"] < 40, "the retry resumed from the checkpoint"
    pd.testing.assert_frame_equal(_table(result.to_frame()), reference)


def test_two_runs_on_one_folder_compute_each_cell_once(cluster, config, reference, tmp_path):
    out = tmp_path / "grid"
    path = tmp_path / "grid.toml"
    path.write_text(CONFIG)
    script = (
        "import sys; from lens_heads.scale._grid import run_grid; "
        "r = run_grid(sys.argv[1], sys.argv[2], address='local', progress=False); "
        "sys.exit(len(r.failures))"
    )
    other = subprocess.Popen([sys.executable, "-c", script, str(path), str(out)], cwd=ROOT)
    deadline = time.monotonic() + 60
    while not (out / "capitalize" / CLAIM).exists() and time.monotonic() < deadline:
        time.sleep(0.02)  # start while the other run holds its first cell
    result = run_grid(config, out, progress=False, poll=0.2)
    assert other.wait(timeout=120) == 0
    for cell in config.cells:
        assert len(_log(out / cell.path)) == 1, f"{cell.key} was computed by one run only"
    assert _log(out / "capitalize")[0]["pid"] == other.pid, "the other run kept its claimed cell"
    pd.testing.assert_frame_equal(_table(result.to_frame()), reference)
    pd.testing.assert_frame_equal(_table(pd.read_csv(out / "table.csv")), reference)
