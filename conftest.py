"""Root pytest configuration, seen by the tests and by the doctests in ``lens_heads/``.

Unit tests and doctests run tiny random models: their matrices are so small that torch's
intra-op threads cost more than they save (a tiny forward pass: ~4 ms on one thread, ~0.3 s on
two busy ones), so they run on one thread. Integration tests (marked ``integration``: the real
models) and the notebooks keep every core.

With ``pytest-xdist`` (``-n 2``: the unit tier's quick loop) the files that load a real model --
the integration tests, the notebooks, the files that read the demo's run (fixtures
``demo_report``, ``demo_float32``, ``demo_run``, and the notebooks that read
``LENS_HEADS_DEMO_REPORT``) -- are one group, run by one worker in the order collected (the demo
runs once, before its readers); a unit file goes whole to whichever worker is free. The files
that start a Ray cluster share a group of their own, so no two clusters start at once. CI runs
the whole suite in one process: on two cores the real models already use both, and a second
lane beside them made the run no shorter (2,252 s either way, the two-lane run measured with
``-n 2 --durations=0``). Each test sets its process's threads before its fixtures are built (a
session fixture such as the demo gets the cores of the test that first needs it).
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


def _heavy(item: pytest.Item) -> bool:
    """A test on a real model (integration) or a notebook: it gets every core."""
    return item.get_closest_marker("integration") is not None or item.path.suffix == ".ipynb"


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    torch.set_num_threads(CORES if _heavy(item) else 1)


@functools.cache
def xdist_group_of(path: Path) -> str:
    """The worker group of a test file: ``models`` (it loads a real model: an integration test,
    a notebook, a reader of the demo's run), ``ray`` (it starts a Ray cluster) or the file
    itself."""
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    if (
        path.suffix == ".ipynb"
        or "integration" in path.parts
        or re.search(
            rf"\b({'|'.join(DEMO_FIXTURES)}|LENS_HEADS_DEMO_REPORT)\b",
            text,
        )
    ):
        return "models"
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
