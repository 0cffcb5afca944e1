"""Atomic writes and figure export (lens_heads.core._storage), shared by every result's save()."""

from __future__ import annotations

import os
import stat

import plotly.graph_objects as go
import pytest

from lens_heads.core._storage import (
    load_result_folder,
    save_figures,
    write_atomic,
    write_atomic_with,
)


def test_write_atomic_writes_text_and_bytes_readable_by_others(tmp_path):
    text = write_atomic(tmp_path / "sub" / "a.md", "héllo\n")
    assert text.read_text(encoding="utf-8") == "héllo\n"
    assert write_atomic(tmp_path / "b.bin", b"\x00\x01").read_bytes() == b"\x00\x01"
    old = os.umask(0o022)
    try:
        mode = stat.S_IMODE(os.stat(write_atomic(tmp_path / "c.txt", "x")).st_mode)
    finally:
        os.umask(old)
    assert mode == 0o644, "results are shared files, not private temporaries (mkstemp's 0600)"


def test_a_failing_writer_leaves_the_old_file_and_no_temporary(tmp_path):
    path = write_atomic(tmp_path / "result.json", "old")

    def broken(temporary: str) -> None:
        with open(temporary, "w") as file:
            file.write("half of the new")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomic_with(path, broken)
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json"]


def test_png_failure_is_reported_once_and_not_retried(tmp_path, monkeypatch, caplog):
    calls = []

    def broken(figure, **kwargs):
        calls.append(1)
        raise RuntimeError("Kaleido requires Google Chrome to be installed.")

    monkeypatch.setattr("lens_heads.core._storage.figure_png", broken)
    monkeypatch.setattr("lens_heads.core._storage._png_failure", None)
    figures = {"a": go.Figure(), "b": go.Figure()}
    with caplog.at_level("WARNING", logger="lens_heads.core._storage"):
        first = save_figures(tmp_path, figures, png=True)
        second = save_figures(tmp_path, figures, png=True)
    assert [p.name for p in first] == [p.name for p in second] == ["a.html", "b.html"]
    assert len(calls) == 1 and caplog.text.count("PNG export skipped") == 1


def test_load_result_folder_errors_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="saved result folder"):
        load_result_folder(tmp_path, "lens_heads.x/1")
    write_atomic(tmp_path / "result.json", '{"format": "other/1"}')
    with pytest.raises(ValueError, match=r"expected 'lens_heads\.x/1'"):
        load_result_folder(tmp_path, "lens_heads.x/1")


def test_a_stage_from_other_code_is_recomputed(tmp_path, monkeypatch):
    """Issue 23: a finished stage is reused only by the code that computed it."""
    import json

    from lens_heads.core import _provenance as provenance
    from lens_heads.core._storage import Stages

    def compute(value):
        def run(where):
            fresh = not where.exists()
            where.mkdir(parents=True, exist_ok=True)
            (where / "output.txt").write_text(str(value))
            return (value, fresh)

        return run

    def load(where):
        return ("loaded", (where / "output.txt").read_text())

    assert Stages(tmp_path)("stage", compute(1), load) == (1, True)
    assert Stages(tmp_path)("stage", compute(2), load) == ("loaded", "1"), "same code: reused"
    other = {"package": "0.1.0", "source": "another-build"}
    monkeypatch.setattr(provenance, "code_version", lambda: other)
    stages = Stages(tmp_path)
    assert stages("stage", compute(3), load) == (3, True), "other code: cleared and recomputed"
    marker = json.loads((tmp_path / "stage" / ".complete").read_text())
    assert marker["code"] == other and marker["machine"]["cpu"]
    assert stages.provenance("stage")["code"] == other and stages.done("stage")
    (tmp_path / "stage" / ".complete").write_text(json.dumps({"seconds": 1.0}))  # older lens_heads
    assert Stages(tmp_path)("stage", compute(4), load) == (4, True), "no version: recomputed"


def test_a_stage_records_the_code_its_run_started_with(tmp_path, monkeypatch):
    """A source edited while a long stage computes is not the code that computed it: the
    marker records the code as the run started, so the edited code recomputes the stage."""
    import json

    from lens_heads.core import _provenance as provenance
    from lens_heads.core._storage import Stages

    source = {"hash": "before-the-edit"}  # what hashing the source files would give now
    monkeypatch.setattr(provenance, "source_hash", lambda: source["hash"])
    stages = Stages(tmp_path)

    def compute(where):
        source["hash"] = "after-the-edit"  # a file edited while the stage runs
        where.mkdir(parents=True)
        return "computed"

    assert stages("stage", compute, lambda where: "loaded") == "computed"
    marker = json.loads((tmp_path / "stage" / ".complete").read_text())
    assert marker["code"]["source"] == "before-the-edit"
    assert Stages(tmp_path)("stage", compute, lambda where: "loaded") == "computed"


def _export_in_child(folder: str, queue) -> None:
    from lens_heads.core import _png_export as png_export

    written = save_figures(folder, {"child": go.Figure(go.Bar(y=[1, 2]))}, png=True)
    queue.put(([p.name for p in written], png_export._exporter.pid == os.getpid()))


def test_png_exports_after_the_first_share_one_chromium_and_a_fork_starts_its_own(tmp_path):
    """After the first export, one Chromium stays open for the rest of the process (about
    0.2 s an image instead of 3); a forked child must not wait on its parent's export thread,
    which does not exist in the child."""
    import multiprocessing

    from lens_heads.core import _png_export as png_export

    figure = go.Figure(go.Heatmap(z=[[1, 2], [3, 4]]))
    first = save_figures(tmp_path / "one", {"a": figure}, png=True)
    exporter = png_export._exporter
    second = save_figures(tmp_path / "two", {"a": figure, "b": figure}, png=True)
    assert [p.name for p in first] == ["a.html", "a.png"]
    assert [p.name for p in second] == ["a.html", "b.html", "a.png", "b.png"]
    assert png_export._exporter is exporter and exporter.pid == os.getpid(), "one Chromium"
    assert (tmp_path / "one" / "a.png").read_bytes() == figure.to_image(format="png")
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_export_in_child, args=(str(tmp_path / "child"), queue))
    child.start()
    child.join(timeout=120)
    alive = child.is_alive()
    if alive:
        child.kill()
    assert not alive, "the forked child hung on its parent's PNG export thread"
    assert queue.get(timeout=5) == (["child.html", "child.png"], True)


_STALLED_EXPORT = """
import asyncio, logging, sys, time
import kaleido, plotly.graph_objects as go
from lens_heads.core import _png_export as png_export, _storage as storage

async def never(self, *args, **kwargs):  # a render that does not come back (plotly/Kaleido#441)
    await asyncio.sleep(3600)

kaleido.Kaleido.calc_fig = never
png_export.PNG_TIMEOUT_S = float(sys.argv[2])
logging.basicConfig(level=logging.WARNING)
start = time.perf_counter()
written = storage.save_figures(sys.argv[1], {"a": go.Figure(go.Bar(y=[1]))}, png=True)
print([p.name for p in written], round(time.perf_counter() - start))
"""


def test_a_stalled_png_export_gives_up_in_time_and_the_process_still_exits(tmp_path):
    """kaleido's sync server waited for a stalled render without a limit, in the export and
    again at exit: one stall held a CI run past its deadline. The export now gives up after
    its timeout, keeps the .html, says why, and the process exits."""
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-c", _STALLED_EXPORT, str(tmp_path), "3"],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert run.returncode == 0, run.stderr
    names, seconds = run.stdout.rsplit("]", 1)
    assert names + "]" == "['a.html']" and 3 <= int(seconds) < 30
    assert (
        "PNG export skipped (ExportTimeoutError: a PNG export did not finish in 3 s" in run.stderr
    )
