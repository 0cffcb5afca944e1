"""Claims on result folders: at most one live process writes a folder at a time.

A claim is a small JSON file (the holder's run id, host, process id and start time) created
atomically with ``O_EXCL``. A later run is refused while the holder lives; a claim whose
process died on this host (its id is gone, or now names a process started later), or whose
file was not touched for ``stale_after`` seconds (another host's holder stopped its
heartbeat), is taken over. A grid takes one on each cell's folder; every command that writes
an ``--out`` folder holds one for its whole run through :func:`folder_lock`.

>>> import tempfile
>>> folder = Path(tempfile.mkdtemp())
>>> claim(folder, "run-a"), claim(folder, "run-b")
(True, False)
>>> release(folder, "run-a"); claim(folder, "run-b")
True
>>> with folder_lock(folder / "out"):
...     with folder_lock(folder / "out"):  # doctest: +ELLIPSIS
...         pass
Traceback (most recent call last):
...
lens_heads.core._locks.FolderBusyError: folder .../out is being written by process ...
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lens_heads.core._errors import LensHeadsError
from lens_heads.core._storage import read_json

__all__ = ["CLAIM", "FolderBusyError", "Heartbeat", "claim", "folder_lock", "holder", "release"]

#: the claim file inside a claimed folder
CLAIM = ".claim.json"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _started(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot; Linux), None where unknown: a
    claim records it, so a process id reused after the holder died is not taken for it."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as file:
            return int(file.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _stale(holder: dict[str, Any], path: Path, stale_after: float) -> bool:
    try:
        age = time.time() - path.stat().st_mtime
    except FileNotFoundError:
        return True
    if holder.get("host") == socket.gethostname():
        try:
            pid = int(holder.get("pid", -1))
        except (TypeError, ValueError):
            return True
        if not _alive(pid):
            return True
        started = holder.get("started")
        return started is not None and _started(pid) not in (None, started)
    return age > stale_after


def claim(folder: Path, run_id: str, stale_after: float = 120.0) -> bool:
    """Take the cell's claim atomically; False when another live run holds it. The caller's
    own run (a retry after its worker died) and stale claims are taken over."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / CLAIM
    mine = {
        "run": run_id,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": _started(os.getpid()),
        "time": time.time(),
    }
    for _ in range(5):
        try:
            descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
        except FileExistsError:
            holder = read_json(path)
            if holder is None:  # being written right now, or garbage
                try:
                    if time.time() - path.stat().st_mtime < 5:
                        return False
                except FileNotFoundError:
                    continue
                holder = {}
            ours = holder.get("run") == run_id and holder.get("pid") != os.getpid()
            if not (ours or _stale(holder, path, stale_after)):
                return False
            grave = path.with_name(f"{CLAIM}.stale-{uuid.uuid4().hex[:8]}")
            try:
                os.rename(path, grave)
            except FileNotFoundError:
                continue  # someone else took it over first; try again
            if read_json(grave) != (holder or None) and holder:
                # we moved a fresh claim someone made in between: put it back
                try:
                    os.link(grave, path)
                except FileExistsError:
                    pass  # a third run claimed it meanwhile; either way it is not ours
                finally:
                    grave.unlink(missing_ok=True)
                return False
            grave.unlink(missing_ok=True)
            continue
        with os.fdopen(descriptor, "w") as file:
            json.dump(mine, file)
        return True
    return False


def release(folder: Path, run_id: str) -> None:
    """Remove the cell's claim if this process holds it."""
    path = folder / CLAIM
    holder = read_json(path)
    if holder and holder.get("run") == run_id and holder.get("pid") == os.getpid():
        path.unlink(missing_ok=True)


class Heartbeat:
    """Touch the claim file every ``every`` seconds while a cell runs."""

    def __init__(self, path: Path, every: float = 5.0) -> None:
        self.path, self.every = path, every
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(self.every):
            try:
                os.utime(self.path)
            except OSError:
                return

    def __enter__(self) -> Heartbeat:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()


class FolderBusyError(LensHeadsError, RuntimeError):
    """Another live process writes the folder (its claim names it)."""


def holder(folder: str | os.PathLike[str]) -> dict[str, Any] | None:
    """Who claims ``folder`` (run, host, pid, time), or None."""
    return read_json(Path(folder) / CLAIM)


@contextmanager
def folder_lock(
    folder: str | os.PathLike[str],
    what: str = "folder",
    *,
    stale_after: float = 120.0,
    heartbeat: float = 5.0,
) -> Iterator[Path]:
    """Hold ``folder``'s claim for the ``with`` block (creating the folder): a second writer is
    refused with a :class:`FolderBusyError` naming the holder's process; a claim left by a
    killed process is taken over. The claim is released at the end, also on an error, and a
    folder the block created but left empty is removed again."""
    folder = Path(folder)
    created = not folder.exists()
    run_id = f"lock-{uuid.uuid4().hex}"
    if not claim(folder, run_id, stale_after):
        info = holder(folder) or {}
        since = info.get("time")
        when = time.strftime(" since %H:%M:%S", time.localtime(since)) if since else ""
        raise FolderBusyError(
            f"{what} {folder} is being written by process {info.get('pid', '?')} on "
            f"{info.get('host', '?')}{when}; wait for it to finish or choose another folder"
        )
    try:
        with Heartbeat(folder / CLAIM, heartbeat):
            yield folder
    finally:
        release(folder, run_id)
        if created:
            try:
                folder.rmdir()  # only when empty: a failed run before any output
            except OSError:
                pass
