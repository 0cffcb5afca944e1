"""Grids of mask trainings on Ray: models × tasks × seeds × schedules, each cell trained,
evaluated (and optionally swept) in its own folder, resumable, retried, assembled into one table.

>>> import tempfile, lens_heads as lh
>>> config = lh.GridConfig.from_text('''
... models = ["tiny-2x4"]
... tasks = ["capitalize"]
... [schedules.tiny]
... steps = 2
... batch_size = 2
... n_eval = 4
... precision = "float32"
... [evaluate]
... n_eval = 2
... settings = ["original", "mask"]
... ''')
>>> result = lh.run_grid(config, tempfile.mkdtemp(), address="local", progress=False)
>>> result.to_frame()[["task", "heads", "steps"]].to_dict("records")
[{'task': 'capitalize', 'heads': 8, 'steps': 2}]

Each cell is one Ray task with the config's declared resources (``[resources] num_cpus``,
``num_gpus``). A cell writes into ``<out>/<cell path>/`` (the training result, its checkpoints,
``eval/``, ``sweep/<i>/``) and writes ``cell.json`` last, atomically: a folder with ``cell.json``
is complete and is skipped by later runs; an interrupted cell resumes from its checkpoint;
``compute.log`` has a line per attempt that computed it.
Before a cell starts it takes an atomic claim (``.claim.json``, created with ``O_EXCL``, kept
fresh by a heartbeat), so two grid runs on one folder never train the same cell at once: the
second waits for the first's cell and reuses it. A claim whose process died (same host) or whose
heartbeat stopped (``stale_after`` seconds, other hosts) is taken over. A failed cell (an error,
or its worker killed) is re-submitted up to ``retries`` times and, if it still fails, listed in
the failures table, never dropped. Each worker process keeps its model loaded across cells.
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
import uuid
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

from lens_heads.core import Fingerprint, LensHeadsError, ResultRepr, markdown_table, write_atomic
from lens_heads.core.internal import (
    CLAIM,
    Heartbeat,
    MissingFileError,
    check_fingerprint,
    check_settings,
    claim,
    read_json,
    release,
)
from lens_heads.engine import TrainingConfig
from lens_heads.scale._grid_config import _TINY, Cell, GridConfig, GridConfigError

__all__ = [
    "Cell",
    "GridConfig",
    "GridConfigError",
    "GridResult",
    "check_grid_folder",
    "run_cell",
    "run_grid",
]

DONE = "cell.json"
_METRIC_SHORT = {"accuracy": "acc", "answer CE (paper: PPL)": "CE"}
_SETTING_SHORT = {
    "Original": "orig",
    "w/ instruction": "instr",
    "w/ random M": "rand",
    "w/ M": "M",
    "w/ M + instruction": "M+instr",
}
#: Columns that measure time (they differ between runs of the same cells).
TIMING_COLUMNS = ("train s", "cell s")


class GridCellError(LensHeadsError, RuntimeError):
    """A cell cannot run as configured (e.g. its folder holds a training of another config)."""


# -- the per-process model cache ---------------------------------------------------------------
_MODEL: dict[str, Any] = {}
_LOADS: list[str] = []


def _cached_model(spec: str, device: str, dtype: str) -> Any:
    """The model of ``spec``, loaded once per process (the last one kept: a worker that switches
    models frees the previous one)."""
    import lens_heads.core as core  # looked up at each call: tests patch lens_heads.core.load_model

    key = f"{spec}|{device}|{dtype}"
    if _MODEL.get("key") != key or _MODEL.get("loader") is not core.load_model:
        _MODEL.clear()

        tiny = _TINY.match(spec)
        if tiny:
            layers, heads, seed = tiny.groups()
            model = core.tiny_model(int(layers), int(heads), seed=int(seed or 0))
        else:
            model = core.load_model(spec, device=device, dtype=dtype)
        _MODEL.update(key=key, model=model, loader=core.load_model)
        _LOADS.append(key)
    return _MODEL["model"]


# -- one cell -----------------------------------------------------------------------------------
def run_cell(
    config: GridConfig | dict[str, Any],
    cell: Cell | dict[str, Any],
    out: str | os.PathLike[str],
    run_id: str = "",
) -> dict[str, Any]:
    """Run (or reuse) one cell; returns ``{"status": "done", "row": ...}``, or ``{"status":
    "busy"}`` when another run holds the cell's claim."""
    config = config if isinstance(config, GridConfig) else GridConfig.from_dict(config)
    cell = cell if isinstance(cell, Cell) else Cell(**cell)
    folder = Path(out) / cell.path
    done = read_json(folder / DONE)
    if done is not None:
        return _reused(config, cell, folder, done)
    run_id = run_id or uuid.uuid4().hex
    if not claim(folder, run_id, float(config.resources.get("stale_after", 120))):
        return {"status": "busy"}
    try:
        with Heartbeat(folder / CLAIM):
            done = read_json(folder / DONE)  # finished by another run since we looked
            if done is not None:
                return _reused(config, cell, folder, done)
            started = time.perf_counter()
            _log(folder, run_id)
            fingerprint = _cell_fingerprint(config, cell)
            row = _compute(config, cell, folder)
            row["cell s"] = round(time.perf_counter() - started, 1)
            info = {
                "cell": cell.to_dict(),
                "row": row,
                "run": run_id,
                "worker": {
                    "host": socket.gethostname(),
                    "pid": os.getpid(),
                    "model_loads": list(_LOADS),
                },
                "fingerprint": fingerprint.record(),
            }
            write_atomic(folder / DONE, json.dumps(info, indent=1, default=str))
            return {"status": "done", "row": row, "reused": False, "worker": info["worker"]}
    finally:
        release(folder, run_id)


def _cell_fingerprint(config: GridConfig, cell: Cell) -> Fingerprint:
    """What a cell computes from: its model (loaded in this worker), its task's examples and
    the settings of its training, evaluation and sweeps."""
    from lens_heads.core import get_task

    model = _cached_model(cell.model, config.device, config.dtype)
    task = get_task(config.task_spec(cell.task))
    settings = {
        "cell": cell.to_dict(),
        "training": config.training_config(cell).to_dict(),
        "evaluate": config.to_dict()["evaluate"],
        "sweep": config.to_dict()["sweep"],
    }
    return Fingerprint.of(model, settings, {"task": task})


def _reused(config: GridConfig, cell: Cell, folder: Path, done: dict[str, Any]) -> dict[str, Any]:
    """A complete cell's row, once its fingerprint is this grid's: a cell of another model,
    other task examples or other settings is refused, naming what differs."""
    stored, known = Fingerprint.from_record(done.get("fingerprint") or {})
    wanted = _cell_fingerprint(config, cell)
    if not known:  # a cell of lens_heads 0.2: grid.json holds its settings (check_grid_folder)
        stored = Fingerprint(wanted.settings)
    check_fingerprint(
        stored,
        wanted,
        where=folder,
        what="a grid cell",
        remedy="give the grid another --out, or delete the cell's folder to compute it again",
        known=known,
        error=GridCellError,
    )
    return {"status": "done", "row": done["row"], "reused": True}


def _log(folder: Path, run_id: str) -> None:
    """Append who computes the cell to ``compute.log`` (one line per attempt that ran)."""
    line = json.dumps({"run": run_id, "host": socket.gethostname(), "pid": os.getpid()})
    with open(folder / "compute.log", "a", encoding="utf-8") as file:
        file.write(f"{line}\n")


def _compute(config: GridConfig, cell: Cell, folder: Path) -> dict[str, Any]:
    from lens_heads.core import get_task
    from lens_heads.engine import EvaluationResult, evaluate, train_or_resume

    model = _cached_model(cell.model, config.device, config.dtype)
    task = get_task(config.task_spec(cell.task))
    wanted = config.training_config(cell)
    training = train_or_resume(
        model,
        task,
        wanted,
        folder,
        progress=False,
        checkpoint_every=config.checkpoint_every,
        figures=True,
        remedy="delete the folder to retrain it, or give the grid another --out",
        error=GridCellError,
    )
    evaluation = None
    if config.evaluate is not None:
        if (folder / "eval" / "result.json").is_file():
            evaluation = EvaluationResult.load(folder / "eval")
        else:
            started = time.perf_counter()
            evaluation = evaluate(
                model,
                task,
                config.evaluate.settings,
                mask=training.mask,
                config=config.evaluate.evaluation(split_seed=wanted.split_seed),
            )
            evaluation.config["seconds"] = round(time.perf_counter() - started, 1)
            evaluation.save(folder / "eval")
    switches = _sweeps(model, task, training, config, folder) if config.sweep else None
    return _row(cell, training, evaluation, switches)


def _sweeps(model: Any, task: Any, training: Any, config: GridConfig, folder: Path) -> list[float]:
    """Removal sweeps (ascending mask weight) on the first held-out examples; switch steps."""
    from lens_heads.heads_up import SweepResult, removal_sweep

    assert config.sweep is not None
    n_eval = training.config.n_eval or len(task)
    _, held_out = task.split(n_eval, training.config.split_seed)
    switches = []
    for index, example in enumerate(held_out.examples[: config.sweep.examples]):
        target = folder / "sweep" / str(index)
        if (target / "result.json").is_file():
            sweep = SweepResult.load(target)
        else:
            sweep = removal_sweep(
                model, example.input, training.W, target=example.output, config=config.sweep.sweep()
            )
            sweep.save(target)
        switch = sweep.switch_step(3)
        switches.append(math.nan if switch is None else float(switch))
    return switches


def _row(
    cell: Cell, training: Any, evaluation: Any, switches: list[float] | None
) -> dict[str, Any]:
    """The cell's table row; evaluation columns are ``<metric> <setting>`` for every metric
    and setting of the evaluation's frame (short names for the paper's two: acc, CE)."""
    row: dict[str, Any] = {
        "model": cell.model,
        "schedule": cell.schedule,
        "seed": cell.seed,
        "task": training.task,
    }
    if evaluation is not None:
        row["match"] = evaluation.config.get("match")
        row["n_eval"] = evaluation.config.get("n_eval")
    row["heads kept"] = training.mask.n_selected
    row["heads"] = int(training.W.numel())
    if evaluation is not None:
        frame = evaluation.to_frame()
        for label, values in frame.iterrows():
            for column in frame.columns:
                if column in ("heads", "seeds") or column.endswith(" std"):
                    continue
                name = f"{_METRIC_SHORT.get(column, column)} {_SETTING_SHORT.get(label, label)}"
                row[name] = float(values[column])
    if switches is not None:
        row["switch step"] = float(pd.Series(switches).mean())
    row["train s"] = round(float(training.timing.get("seconds", math.nan)))
    row["steps"] = int(training.config.steps)
    row["precision"] = training.config.precision
    row["cell"] = cell.path
    return row


# -- executors ---------------------------------------------------------------------------------
class _LocalExecutor:
    """Runs each cell in this process, one after another (``address="local"``)."""

    def submit(self, config: dict[str, Any], cell: Cell, out: str, run_id: str) -> Future:
        future: Future = Future()
        try:
            future.set_result(run_cell(config, cell, out, run_id))
        except Exception as error:
            future.set_exception(error)
        return future

    def wait(self, pending: list[Any], timeout: float) -> list[Any]:
        return list(pending)

    def result(self, handle: Any) -> dict[str, Any]:
        return handle.result()

    def close(self) -> None:
        _MODEL.clear()  # this process is the caller's: free the model after the grid


def _ray_cell(config: dict[str, Any], cell: dict[str, Any], out: str, run_id: str) -> Any:
    """The body of the Ray task (a module-level function: workers import it by name)."""
    return run_cell(config, cell, out, run_id)


class _RayExecutor:
    """Submits each cell as a Ray task with the config's resources."""

    def __init__(self, address: str | None, resources: dict[str, Any]) -> None:
        try:
            import ray
        except ImportError as error:
            raise GridConfigError(
                "Ray is not installed; `pip install 'lens_heads[grid]'` (or `pip install ray`), "
                "or run the grid in this process with address='local' (--address local)"
            ) from error
        self.ray = ray
        self.started = False
        if not ray.is_initialized():
            root = str(Path(__file__).resolve().parents[1])
            path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
            options: dict[str, Any] = {"runtime_env": {"env_vars": {"PYTHONPATH": path}}}
            if address is None:  # a new local instance: no dashboard, quiet workers
                options.update(include_dashboard=False, log_to_driver=False)
            ray.init(address=address, **options)
            self.started = True
        options: dict[str, Any] = {
            "num_cpus": resources.get("num_cpus", 1),
            "num_gpus": resources.get("num_gpus", 0),
            "max_retries": 0,  # retries are the driver's, counted per cell
        }
        # max_calls=0: GPU workers stay alive too (Ray's default for them is 1), so their
        # model stays loaded across cells.
        self.remote = ray.remote(max_calls=0)(_ray_cell).options(**options)

    def submit(self, config: dict[str, Any], cell: Cell, out: str, run_id: str) -> Any:
        return self.remote.remote(config, cell.to_dict(), out, run_id)

    def wait(self, pending: list[Any], timeout: float) -> list[Any]:
        ready, _ = self.ray.wait(pending, num_returns=1, timeout=timeout)
        return ready

    def result(self, handle: Any) -> dict[str, Any]:
        return self.ray.get(handle)

    def close(self) -> None:
        if self.started:
            self.ray.shutdown()


# -- the grid -----------------------------------------------------------------------------------
@dataclass(repr=False)
class GridResult(ResultRepr):
    """The assembled table (one row per complete cell) and the failed cells.

    ``table`` holds ``model, schedule, seed, task``, the evaluation columns (``acc M``, ``CE
    orig``, ...), ``train s``, ``steps``, the training's ``precision`` and ``cell`` (its
    folder); ``failures`` one row per failed cell (``cell, attempts, error``)."""

    name: str
    table: pd.DataFrame
    failures: pd.DataFrame
    cells: int
    out: str = ""
    seconds: float = math.nan
    workers: dict[str, list[str]] = field(default_factory=dict)

    def to_frame(self) -> pd.DataFrame:
        return self.table

    def to_markdown(self, digits: int = 2) -> str:
        lines = [f"# Grid {self.name}: {len(self.table)} of {self.cells} cells complete", ""]
        lines.append(markdown_table(self.table, floatfmt=f".{digits}f", index=False))
        if len(self.failures):
            lines += ["", f"## Failed cells ({len(self.failures)})", ""]
            lines.append(markdown_table(self.failures, floatfmt=f".{digits}f", index=False))
        return "\n".join(lines) + "\n"

    def plot(self) -> Any:
        """A heat map of the first evaluation column (default ``acc M``): task × the cells'
        other dimensions."""
        import plotly.graph_objects as go

        columns = [c for c in self.table.columns if c.startswith("acc ")]
        value = "acc M" if "acc M" in columns else (columns[0] if columns else "heads kept")
        if not len(self.table):
            return go.Figure()
        frame = self.table.assign(
            run=self.table["model"]
            + " "
            + self.table["schedule"]
            + " s"
            + self.table["seed"].astype(str)
        ).pivot_table(index="run", columns="task", values=value)
        figure = go.Figure(go.Heatmap(z=frame.values, x=list(frame.columns), y=list(frame.index)))
        return figure.update_layout(title=f"{value} per cell of grid {self.name}")

    def save(self, directory: str | os.PathLike[str]) -> list[Path]:
        """Write ``table.csv``, ``table.md``, ``failures.csv`` and ``grid_result.json``."""
        folder = Path(directory)
        meta = {"name": self.name, "cells": self.cells, "seconds": self.seconds}
        return [
            write_atomic(folder / "table.csv", self.table.to_csv(index=False)),
            write_atomic(folder / "table.md", self.to_markdown()),
            write_atomic(folder / "failures.csv", self.failures.to_csv(index=False)),
            write_atomic(folder / "grid_result.json", json.dumps(meta, indent=1)),
        ]

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> GridResult:
        folder = Path(directory)
        meta = read_json(folder / "grid_result.json")
        if meta is None:
            raise MissingFileError(f"{folder} has no grid_result.json; is it a grid output?")
        failures = (
            pd.read_csv(folder / "failures.csv")
            if (folder / "failures.csv").stat().st_size > 1
            else pd.DataFrame()
        )
        return cls(
            name=meta["name"],
            table=pd.read_csv(folder / "table.csv"),
            failures=failures,
            cells=meta["cells"],
            out=str(folder),
            seconds=meta["seconds"],
        )


def assemble(config: GridConfig, out: str | os.PathLike[str]) -> pd.DataFrame:
    """The table of every complete cell of ``config`` under ``out``, in config order."""
    rows = []
    for cell in config.cells:
        done = read_json(Path(out) / cell.path / DONE)
        if done is not None:
            rows.append(done["row"])
    return pd.DataFrame(rows)


def _cell_settings(values: dict[str, Any], names: set[str], files: set[str]) -> dict[str, Any]:
    """What a cell's results depend on: the analyses, device and dtype, the schedules and task
    files both configs name (other models, tasks, seeds or schedules are other cells)."""
    settings = {key: values.get(key) for key in ("evaluate", "sweep", "device", "dtype")}
    settings |= {f"schedules.{n}": values["schedules"][n] for n in sorted(names)}
    return settings | {f"task_files.{n}": values["task_files"][n] for n in sorted(files)}


def check_grid_folder(config: GridConfig, out: str | os.PathLike[str]) -> None:
    """Refuse to run ``config`` into a folder a grid with other settings wrote (its grid.json):
    the finished cells would be reported as if they had this config's settings."""
    stored = read_json(Path(out) / "grid.json")
    if not isinstance(stored, dict) or "schedules" not in stored:
        return
    wanted = config.to_dict()
    names = set(stored["schedules"]) & set(wanted["schedules"])
    files = set(stored.get("task_files", {})) & set(wanted["task_files"])
    stored.setdefault("task_files", {})
    stored["schedules"] = {  # a grid stored before a schedule field's rename
        name: TrainingConfig.current_keys(values) for name, values in stored["schedules"].items()
    }
    check_settings(
        _cell_settings(stored, names, files),
        _cell_settings(wanted, names, files),
        where=out,
        what="a grid",
        remedy="give the grid another --out, or delete the folder to recompute it",
        error=GridConfigError,
    )


def run_grid(
    config: GridConfig | str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    address: str | None = None,
    progress: bool = True,
    run_id: str | None = None,
    poll: float = 1.0,
) -> GridResult:
    """Run every cell of ``config`` (a :class:`GridConfig` or a .toml/.yaml file) into ``out``
    and assemble ``out/table.csv`` and ``out/table.md``.

    ``address``: None starts a local Ray instance sized to this machine (or uses the one this
    process already started), ``"auto"`` joins the running cluster (``ray start --head``),
    ``"ray://host:10001"`` connects a Ray client, ``"local"`` runs the cells in this process
    without Ray. Complete cells are skipped; cells another run holds are waited for.
    """
    config = config if isinstance(config, GridConfig) else GridConfig.load(config)
    check_grid_folder(config, out)
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(out_dir / "grid.json", json.dumps(config.to_dict(), indent=1, default=str))
    run_id = run_id or uuid.uuid4().hex
    payload = config.to_dict()
    cells = config.cells
    executor: Any = (
        _LocalExecutor() if address == "local" else _RayExecutor(address, config.resources)
    )
    started = time.perf_counter()
    failures: list[dict[str, Any]] = []
    workers: dict[str, list[str]] = {}
    pending: dict[Any, tuple[Cell, int]] = {}
    waiting: list[tuple[float, Cell, int]] = []
    bar = tqdm(total=len(cells), desc=f"grid {config.name}", unit="cell", disable=not progress)
    try:
        for cell in cells:
            pending[executor.submit(payload, cell, str(out_dir), run_id)] = (cell, 1)
        while pending or waiting:
            now = time.monotonic()
            for item in [w for w in waiting if w[0] <= now]:
                waiting.remove(item)
                _, cell, attempt = item
                pending[executor.submit(payload, cell, str(out_dir), run_id)] = (cell, attempt)
            if not pending:
                time.sleep(min(poll, max(0.0, min(w[0] for w in waiting) - now)))
                continue
            for handle in executor.wait(list(pending), poll):
                cell, attempt = pending.pop(handle)
                try:
                    outcome = executor.result(handle)
                except Exception as error:
                    if attempt <= config.retries:
                        again = executor.submit(payload, cell, str(out_dir), run_id)
                        pending[again] = (cell, attempt + 1)
                        bar.set_postfix(retrying=cell.key)
                        continue
                    failures.append(
                        {"cell": cell.key, "attempts": attempt, "error": _summary(error)}
                    )
                    bar.update(1)
                    continue
                if outcome["status"] == "busy":
                    waiting.append((time.monotonic() + poll, cell, attempt))
                    continue
                if "worker" in outcome:
                    worker = outcome["worker"]
                    workers[f"{worker['host']}:{worker['pid']}"] = worker["model_loads"]
                bar.update(1)
    finally:
        bar.close()
        executor.close()
    result = GridResult(
        name=config.name,
        table=assemble(config, out_dir),
        failures=pd.DataFrame(failures, columns=["cell", "attempts", "error"]),
        cells=len(cells),
        out=str(out_dir),
        seconds=round(time.perf_counter() - started, 2),
        workers=workers,
    )
    result.save(out_dir)
    return result


def _summary(error: BaseException) -> str:
    """The last line of an error (Ray wraps a cell's exception with its remote traceback)."""
    text = str(error).strip() or type(error).__name__
    lines = [line for line in text.splitlines() if line.strip()]
    last = lines[-1] if lines else text
    if "Traceback" in text and len(lines) > 1:
        return last.strip()[:300]
    return f"{type(error).__name__}: {last.strip()}"[:300] if last == text else last[:300]
