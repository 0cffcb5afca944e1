"""Issue 27: two writers never share a folder. ``folder_lock`` (one helper, used by every command
through ``lens_heads.cli._common.writing``) refuses a second writer naming the holder's process,
takes over the lock of a killed process, and lets go at the end, also on an error."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lens_heads.core._locks import CLAIM, FolderBusyError, claim, folder_lock, holder

ROOT = Path(__file__).resolve().parents[3]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}


def test_a_second_writer_is_refused_with_the_holders_process(tmp_path):
    out = tmp_path / "out"
    with folder_lock(out, "--out") as folder:
        assert folder == out and holder(out)["pid"] == os.getpid()
        with pytest.raises(FolderBusyError, match=rf"--out {out} is being written by process "
                           rf"{os.getpid()} on "):  # fmt: skip
            with folder_lock(out, "--out"):
                pass
        (folder / "result.txt").write_text("kept")
    assert not (out / CLAIM).exists(), "released at the end"
    assert (out / "result.txt").read_text() == "kept"


def test_the_lock_is_released_on_an_error_and_an_empty_new_folder_removed(tmp_path):
    out = tmp_path / "new"
    with pytest.raises(RuntimeError, match="boom"), folder_lock(out):
        assert (out / CLAIM).is_file()
        raise RuntimeError("boom")
    assert not out.exists(), "a folder the failed run created, still empty, is removed"
    out.mkdir()
    (out / "old.txt").write_text("x")
    with pytest.raises(RuntimeError), folder_lock(out):
        raise RuntimeError("boom")
    assert sorted(p.name for p in out.iterdir()) == ["old.txt"]


def test_a_lock_whose_process_id_was_reused_is_stale(tmp_path):
    out = tmp_path / "out"
    assert claim(out, "dead-run")
    info = json.loads((out / CLAIM).read_text())
    info["started"] = (info["started"] or 0) + 12345  # this pid now names a later process
    (out / CLAIM).write_text(json.dumps(info))
    with folder_lock(out):
        assert holder(out)["run"] != "dead-run"


def _wait_for(path: Path, process: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def test_two_processes_writing_one_out(tiny_dir, tmp_path):
    """Two real ``lens-heads train-mask`` processes on one --out: the second is refused while
    the first holds the folder, naming its process; after ``kill -9`` of the holder the lock is
    stale and the next run takes it over."""
    data = tmp_path / "upper.jsonl"
    words = [f"w{chr(97 + i)}{chr(97 + j)}" for i in range(5) for j in range(5)]
    data.write_text("".join(json.dumps({"input": w, "output": w.upper()}) + "\n" for w in words))
    out = tmp_path / "out"
    argv = ["train-mask", "--model", str(tiny_dir), "--task", str(data), "--holdout", "5"]
    argv += ["--n-eval", "0", "--batch-size", "4", "--precision", "fp32", "--out", str(out)]
    # the first trains long and writes no checkpoint before it is killed
    pipes = dict(cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    long = ["--steps", "100000", "--checkpoint-every", "100000"]
    first = subprocess.Popen([sys.executable, "-m", "lens_heads", *argv, *long], **pipes)
    # the second is imported already and starts the command as soon as the folder is claimed
    waiter = (
        "import sys, time, pathlib; from lens_heads.cli import main\n"
        "claim = pathlib.Path(sys.argv[1]) / '.claim.json'\n"
        "while not claim.exists(): time.sleep(0.01)\n"
        "sys.exit(main(sys.argv[2:]))"
    )
    second = subprocess.Popen(
        [sys.executable, "-c", waiter, str(out), *argv, "--steps", "2"], **pipes
    )
    try:
        _wait_for(out / CLAIM, first)
        _, err = second.communicate(timeout=180)
        assert second.returncode == 2, err
        lines = [line for line in err.splitlines() if line.strip()]
        assert lines == [
            f"lens-heads train-mask: error: --out {out} is being written by process {first.pid}"
            + lines[0].split(f"process {first.pid}", 1)[1]
        ], err
        assert first.poll() is None, "the first run is unharmed"
        assert holder(out)["pid"] == first.pid
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=60)
        second.kill()
    assert (out / CLAIM).exists(), "a killed process leaves its lock behind"
    from lens_heads.cli import main

    assert main([*argv, "--steps", "2"]) == 0  # the stale lock is taken over
    assert not (out / CLAIM).exists() and (out / "mask.safetensors").is_file()
