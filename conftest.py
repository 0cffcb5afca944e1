"""Root pytest configuration, seen by the tests and by the doctests in ``lens_heads/``.

Unit tests and doctests run tiny random models: their matrices are so small that torch's
intra-op threads cost more than they save (a tiny forward pass: ~4 ms on one thread, ~0.3 s on
two busy ones), so they run on one thread. Integration tests (marked ``integration``: the real
models) and the notebooks get their share of the cores (below).

With ``pytest-xdist`` every file goes whole to one worker: the files that read the demo's run
(fixtures ``demo_report``, ``demo_float32``, ``demo_run``, and the notebooks that read
``LENS_HEADS_DEMO_REPORT``) form one group, run in the order collected (the demo runs once,
before its readers); the files that start a Ray cluster form another, so no two clusters start at
once; every other file is a group of its own. Every test of a file that loads a real model (an
integration test, a notebook, a reader of the demo) is marked ``models``, and the suite runs in
two passes (README, ``.ci/run``): ``-n auto -m "not models"``, then ``-n 2 -m models`` (two
workers, not one per core: each loads its own models). A
real model's test takes its share of the cores (:data:`MODEL_THREADS`; notebook kernels through
``OMP_NUM_THREADS``): two workers with one thread each do more than one worker with two, since
a small model's forward gains little from a second thread (SmolLM2, 8 x 48 tokens: 1.37x). Two
lanes at once -- the real models on every core beside a unit worker -- were no faster than one
process (2,252 s either way): their threads fought for the same cores. Each test sets its
process's threads before its fixtures are built (a session fixture such as the demo gets the
threads of the test that first needs it).
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


#: the cores this process may use
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
#: the pytest-xdist workers sharing them (1 without xdist)
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
#: the threads of a test on a real model: the cores, shared among the workers
MODEL_THREADS = max(1, CORES // WORKERS)
if WORKERS > 1:  # a notebook's kernel (a process of its own) takes its share too
    os.environ["OMP_NUM_THREADS"] = str(MODEL_THREADS)


def _heavy(item: pytest.Item) -> bool:
    """A test on a real model (integration) or a notebook: it gets its share of the cores."""
    return item.get_closest_marker("integration") is not None or item.path.suffix == ".ipynb"


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    torch.set_num_threads(MODEL_THREADS if _heavy(item) else 1)


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.is_file() else ""


@functools.cache
def reads_the_demo(path: Path) -> bool:
    """The file uses the demo's run (a fixture of :data:`DEMO_FIXTURES`, or the notebooks'
    ``LENS_HEADS_DEMO_REPORT``)."""
    pattern = rf"\b({'|'.join(DEMO_FIXTURES)}|LENS_HEADS_DEMO_REPORT)\b"
    return re.search(pattern, _text(path)) is not None


@functools.cache
def loads_a_model(path: Path) -> bool:
    """The file loads a real model: an integration test, a notebook or a reader of the demo."""
    return path.suffix == ".ipynb" or "integration" in path.parts or reads_the_demo(path)


@functools.cache
def xdist_group_of(path: Path) -> str:
    """The worker group of a test file: ``demo`` (it reads the demo's run, which runs once per
    worker that needs it: so one worker runs them all, the demo first), ``ray`` (it starts a Ray
    cluster: no two at once) or the file itself."""
    if reads_the_demo(path):
        return "demo"
    if "ray.init(" in _text(path):
        return "ray"
    return path.as_posix()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test of a file that loads a real model (:func:`loads_a_model`) ``models``, so
    the suite runs in two passes (README, ``.ci/run``): ``-m "not models"`` (the unit files, one
    thread each) then ``-m models`` (the real models, each worker with its share of the cores)."""
    for item in items:
        if loads_a_model(item.path):
            item.add_marker(pytest.mark.models)


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
