"""Root pytest configuration, seen by the tests and by the doctests in ``lens_heads/``.

Unit tests and doctests run tiny random models: their matrices are so small that torch's
intra-op threads cost more than they save (a tiny forward pass: ~4 ms on one thread, ~0.3 s on
two busy ones). Integration tests (marked ``integration``) keep every thread for the real models.

The suite runs on ``pytest-xdist`` workers (``-n auto`` in ``pyproject.toml``; ``-n 0`` runs it in
one process). Each worker takes its share of the cores, and so do the notebook kernels it starts.
Every test module goes to one worker whole (its module fixtures are built once); the tests that
read the demo's run (fixtures ``demo_report``, ``demo_float32``, ``demo_run``, and the notebooks
that read ``LENS_HEADS_DEMO_REPORT``) share one worker, which runs the demo once, and the modules
that start a Ray cluster share another, so no two clusters start at once.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

#: fixtures that run the README's demo once per session
DEMO_FIXTURES = frozenset({"demo_report", "demo_float32", "demo_run"})


def pytest_configure(config: pytest.Config) -> None:
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    if workers > 1:  # a worker's share of the cores, for torch and the kernels it starts
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        threads = max(1, (cores or 1) // workers)
        torch.set_num_threads(threads)
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[name] = str(threads)


def xdist_group_of(item: pytest.Item) -> str:
    """The worker group of a test: ``demo``, ``ray`` or its own file."""
    path = Path(str(item.fspath))
    if DEMO_FIXTURES & set(getattr(item, "fixturenames", ())):
        return "demo"
    if path.suffix == ".ipynb" and "LENS_HEADS_DEMO_REPORT" in path.read_text(encoding="utf-8"):
        return "demo"
    if path.suffix == ".py" and "ray.init(" in path.read_text(encoding="utf-8"):
        return "ray"
    return path.as_posix()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.pluginmanager.hasplugin("xdist"):
        for item in items:
            item.add_marker(pytest.mark.xdist_group(xdist_group_of(item)))


@pytest.fixture(autouse=True)
def _one_thread_for_tiny_models(request: pytest.FixtureRequest):
    if request.node.get_closest_marker("integration") is not None:
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
