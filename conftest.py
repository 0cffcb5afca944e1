"""Root pytest configuration, seen by the tests and by the doctests in ``lens_heads/``.

Unit tests and doctests run tiny random models: their matrices are so small that torch's
intra-op threads cost more than they save (a tiny forward pass: ~4 ms on one thread, ~0.3 s on
two busy ones). Integration tests (marked ``integration``) keep every thread for the real models.

With ``pytest-xdist`` (``-n 2``; CI runs the suite in one process) each worker takes its share of
the cores. So do the notebook kernels it starts.
Every test file goes to one worker whole (its module fixtures are built once); the files that
read the demo's run (fixtures ``demo_report``, ``demo_float32``, ``demo_run``, and the notebooks
that read ``LENS_HEADS_DEMO_REPORT``) share one worker, which runs the demo once, and the files
that start a Ray cluster share another, so no two clusters start at once.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Any

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


@functools.cache
def xdist_group_of(path: Path) -> str:
    """The worker group of a test file: ``demo`` (it reads the demo's run), ``ray`` (it starts a
    Ray cluster) or the file itself."""
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    if re.search(rf"\b({'|'.join(DEMO_FIXTURES)}|LENS_HEADS_DEMO_REPORT)\b", text):
        return "demo"
    if "ray.init(" in text:
        return "ray"
    return path.as_posix()


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Whole groups to a worker (:func:`xdist_group_of`), in the order of collection (xdist's own
    ``xdist_group`` marks no longer reach its scheduler under pytest 9: it rewrites a node id
    that pytest 9 no longer reads)."""
    from xdist.scheduler import LoadScopeScheduling

    root = config.rootpath

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group_of(root / nodeid.split("::", 1)[0])

    return GroupScheduling(config, log)


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
