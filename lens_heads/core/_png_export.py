"""PNG export of plotly figures with a bound on every wait.

kaleido renders through a Chromium. Starting one costs about 3 s, so a process keeps one open
and reuses it (about 0.2 s an image). kaleido's own sync server waits without a limit for each
result and, at exit, for its thread; a render that never finishes (plotly/Kaleido#441: rare, not
yet fixed) then hangs the caller and the process's exit. Here the Chromium is driven from a
daemon thread's event loop and each export waits at most ``timeout`` seconds: a stuck export
raises :class:`ExportTimeoutError` (a :class:`TimeoutError`) and the process still exits (the
daemon thread goes with it, and Chromium ends when its pipe closes).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import os
import threading
from typing import Any

from lens_heads.core._errors import LensHeadsError


class ExportTimeoutError(LensHeadsError, TimeoutError):
    """A PNG export that did not finish in its time (kaleido stalls now and then)."""


__all__ = ["PNG_TIMEOUT_S", "ExportTimeoutError", "figure_png"]

#: the longest one export may take, a first one's Chromium start included
PNG_TIMEOUT_S = 120.0


class _Exporter:
    """One Chromium for this process, opened on the first export."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self.kaleido: Any = None
        threading.Thread(target=self.loop.run_forever, name="png-export", daemon=True).start()

    def run(self, coroutine: Any, timeout: float) -> Any:
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ExportTimeoutError(
                f"a PNG export did not finish in {timeout:g} s (kaleido stalls now and then: "
                "plotly/Kaleido#441)"
            ) from None

    async def png(self, figure: Any) -> bytes:
        if self.kaleido is None:
            import kaleido

            browser = kaleido.Kaleido()
            await browser.open()
            self.kaleido = browser
        return bytes(await self.kaleido.calc_fig(figure, opts={"format": "png"}))

    async def close(self) -> None:
        if self.kaleido is not None:
            await self.kaleido.close()


_exporter: _Exporter | None = None


def figure_png(figure: Any, *, timeout: float | None = None) -> bytes:
    """The plotly ``figure`` as PNG bytes, from this process's Chromium (started on the first
    call). Raises :class:`TimeoutError` when the export takes longer than ``timeout`` seconds
    (:data:`PNG_TIMEOUT_S` unless given), and kaleido's errors (no Chrome, for one) as they are.

    >>> import plotly.graph_objects as go
    >>> figure_png(go.Figure(go.Bar(y=[1, 2])))[:4]
    b'\\x89PNG'
    """
    global _exporter
    if _exporter is None or _exporter.pid != os.getpid():  # a forked child has no loop thread
        _exporter = _Exporter()
    return _exporter.run(_exporter.png(figure), PNG_TIMEOUT_S if timeout is None else timeout)


@atexit.register
def _close_at_exit() -> None:
    """Close the Chromium if it answers within 5 s; never wait longer at exit."""
    if _exporter is not None and _exporter.pid == os.getpid():
        try:
            _exporter.run(_exporter.close(), 5.0)
        except Exception:  # a stuck or dead browser must not hold the exit
            pass
