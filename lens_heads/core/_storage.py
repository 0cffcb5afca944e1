"""Atomic file writes and figure export, shared by every result object's ``save``.

Nothing is lost: each file is written to a temporary sibling and renamed into place, so a
reader (or a crash) sees either the old file or the whole new one.

>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> write_atomic(folder / "table.md", "| a |\\n").read_text()
'| a |\\n'
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from lens_heads.core._errors import FingerprintError, InputError, MissingFileError
from lens_heads.core._png_export import figure_png
from lens_heads.core._result_repr import ResultRepr

__all__ = [
    "PLOTLY_JS",
    "FolderResult",
    "Stages",
    "check_readable",
    "load_result_folder",
    "save_figures",
    "save_result_folder",
    "write_atomic",
    "write_atomic_with",
    "write_plotly_js",
]

logger = logging.getLogger(__name__)


def write_atomic_with(path: str | os.PathLike[str], write: Callable[[str], Any]) -> Path:
    """Call ``write(temporary_path)`` and rename the result onto ``path`` atomically (for
    writers that take a file name, like ``safetensors.torch.save_file``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(descriptor)
    try:
        write(temporary)
        os.chmod(temporary, 0o666 & ~_umask())  # mkstemp makes 0600; results are shared files
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return path


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Write text (UTF-8) or bytes to ``path`` atomically: into a temporary file beside it, then
    renamed into place, so a reader never sees half a file. Returns the path.

    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> write_atomic(folder / "numbers.json", '{"k": 1}').read_text()
    '{"k": 1}'
    """
    payload = data.encode("utf-8") if isinstance(data, str) else data
    return write_atomic_with(path, lambda temporary: Path(temporary).write_bytes(payload))


#: the file name of the plotly.js bundle that pages written with ``plotly_js="beside"`` load
PLOTLY_JS = "plotly.min.js"
#: how a page gets plotly.js: in the page, or from :data:`PLOTLY_JS` beside it
PlotlyJs = Literal["inline", "beside"]


def write_plotly_js(folder: str | os.PathLike[str]) -> Path:
    """The plotly.js bundle of the installed plotly as ``folder/plotly.min.js``, written only
    when missing or different (pages of one folder share one copy)."""
    from plotly.offline import get_plotlyjs

    path = Path(folder) / PLOTLY_JS
    bundle = get_plotlyjs()
    if path.is_file() and path.stat().st_size == len(bundle.encode("utf-8")):
        if path.read_text(encoding="utf-8") == bundle:
            return path
    return write_atomic(path, bundle)


def save_figures(
    folder: str | os.PathLike[str],
    figures: Mapping[str, Any],
    *,
    png: bool = False,
    plotly_js: PlotlyJs = "inline",
) -> list[Path]:
    """Write each plotly figure as ``<name>.html`` (opens offline) and, with ``png``, as
    ``<name>.png`` when a static exporter works (kaleido and a Chrome or Chromium: a system
    ``chromium`` is enough); a failed PNG export is logged once, never raised
    (:func:`png_advice` says what is missing). ``plotly_js``: ``"inline"`` puts plotly.js
    (about 5 MB) in each page; ``"beside"`` writes it once, as ``plotly.min.js`` in ``folder``
    (:func:`write_plotly_js`), and each page loads it from there."""
    folder = Path(folder)
    if plotly_js not in ("inline", "beside"):
        raise InputError(f"plotly_js must be 'inline' or 'beside', not {plotly_js!r}")
    include: Any = True if plotly_js == "inline" else PLOTLY_JS
    written = [
        write_atomic(folder / f"{name}.html", figure.to_html(include_plotlyjs=include))
        for name, figure in figures.items()
    ]
    if plotly_js == "beside" and figures:
        written.append(write_plotly_js(folder))
    if png and _png_failure is None:
        try:
            for name, figure in figures.items():
                written.append(write_atomic(folder / f"{name}.png", figure_png(figure)))
        except Exception as error:  # kaleido without Chrome, no kaleido, or a stalled export
            _note_png_failure(error)
    return written


_png_failure: str | None = None


def _note_png_failure(error: Exception) -> None:
    """Remember that PNG export fails here (no more attempts in this process) and say so once."""
    global _png_failure
    first_line = str(error).strip().splitlines()[0] if str(error).strip() else "no message"
    _png_failure = f"{type(error).__name__}: {first_line}"
    logger.warning(
        "PNG export skipped (%s); the .html files have the figures. %s", _png_failure, png_advice()
    )


def png_advice() -> str:
    """What PNG export needs on this machine: kaleido, then a Chrome or Chromium binary."""
    import importlib.util
    import shutil

    if importlib.util.find_spec("kaleido") is None:
        return (
            "PNG export needs the kaleido package (`pip install kaleido`) and a Chrome or "
            "Chromium: a system Chromium is enough (`apt-get install chromium`)."
        )
    names = ("chromium", "chromium-browser", "google-chrome", "chrome")
    if not any(shutil.which(name) for name in names):
        return (
            "kaleido is installed but finds no Chrome or Chromium: a system Chromium is enough "
            "(`apt-get install chromium`), or run `plotly_get_chrome` to download one."
        )
    return "kaleido and a Chromium are installed; the error above says why the export failed."


def save_result_folder(
    directory: str | os.PathLike[str],
    *,
    format_tag: str,
    meta: dict[str, Any],
    tensors: Mapping[str, Any],
    frame: Any,
    markdown: str,
    figures: Mapping[str, Any],
    png: bool = False,
    plotly_js: PlotlyJs = "inline",
) -> list[Path]:
    """The common layout of a saved result: ``table.csv`` (``frame``), ``table.md``,
    ``result.json`` (``meta`` plus the format tag), ``tensors.safetensors`` and the figures
    (:func:`save_figures`); each file atomically. :func:`load_result_folder` reads it back."""
    from safetensors.torch import save

    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    payload = {"format": format_tag, **meta}
    written = [
        write_atomic(folder / "table.csv", frame.to_csv()),
        write_atomic(folder / "table.md", markdown),
        write_atomic(folder / "result.json", json.dumps(payload, indent=1, default=str)),
        write_atomic(
            folder / "tensors.safetensors",
            save({k: v.detach().cpu().contiguous() for k, v in tensors.items()}),
        ),
    ]
    return written + save_figures(folder, figures, png=png, plotly_js=plotly_js)


def load_result_folder(
    directory: str | os.PathLike[str], format_tag: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(meta, tensors)`` of a folder written by :func:`save_result_folder` with
    ``format_tag`` (the tag itself is removed from ``meta``); a clear error otherwise."""
    from safetensors.torch import load

    folder = Path(directory)
    path = folder / "result.json"
    if not path.is_file():
        raise MissingFileError(f"{path} does not exist; is {directory} a saved result folder?")
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
        if payload.get("format") != format_tag:
            raise InputError(f"format tag {payload.get('format')!r}, expected {format_tag!r}")
        tensors = load((folder / "tensors.safetensors").read_bytes())
    except (ValueError, KeyError, OSError) as error:
        raise InputError(
            f"{folder} is not a readable {format_tag} result ({type(error).__name__}: {error}); "
            "re-create it with .save()"
        ) from error
    payload.pop("format")
    return payload, tensors


class FolderResult(ResultRepr):
    """Mixin for result dataclasses saved as one folder (:func:`save_result_folder`):
    ``table.csv`` (``to_frame()``), ``table.md`` (``to_markdown()``), ``figure.html``
    (``plot()``), ``result.json`` (the fields) and ``tensors.safetensors`` (tensor fields).

    A subclass sets ``_format`` (e.g. ``"lens_heads.logit_lens/1"``); fields that are tensors
    go to safetensors, the others must be JSON-able. ``_to_saved``/``_from_saved`` convert
    other field types.
    """

    _format: ClassVar[str]
    #: how the saved figures get plotly.js (:func:`save_figures`)
    _plotly_js: ClassVar[PlotlyJs] = "inline"

    def _to_saved(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """``(meta, tensors)`` to write: every dataclass field, split by type."""
        import dataclasses

        import torch

        meta: dict[str, Any] = {}
        tensors: dict[str, Any] = {}
        for item in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, item.name)
            (tensors if isinstance(value, torch.Tensor) else meta)[item.name] = value
        return meta, tensors

    @classmethod
    def _from_saved(cls, meta: dict[str, Any], tensors: dict[str, Any]) -> Any:
        return cls(**meta, **tensors)

    def save(self, directory: str | os.PathLike[str], *, png: bool = False) -> list[Path]:
        """Write ``table.csv``, ``table.md``, ``result.json``, ``tensors.safetensors`` and
        ``figure.html`` (and ``figure.png`` with ``png`` when kaleido can export)."""
        meta, tensors = self._to_saved()
        return save_result_folder(
            directory,
            format_tag=self._format,
            meta=meta,
            tensors=tensors,
            frame=self.to_frame(),  # type: ignore[attr-defined]
            markdown=self.to_markdown(),  # type: ignore[attr-defined]
            figures={"figure": self.plot()},  # type: ignore[attr-defined]
            png=png,
            plotly_js=self._plotly_js,
        )

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> Any:
        """Read a folder written by :meth:`save` (a clear error for anything else)."""
        meta, tensors = load_result_folder(directory, cls._format)
        return cls._from_saved(meta, tensors)


def read_json(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The JSON object in ``path``; None when it is missing, unreadable or half written."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def check_readable(path: Path, error: type[Exception] = InputError, what: str = "") -> None:
    """Refuse a file that exists but cannot be read: the libraries that read masks and model
    files (safetensors) report that as "No such file or directory"."""
    if path.is_file() and not os.access(path, os.R_OK):
        raise error(
            f"{what}{path} exists but cannot be read (permission denied); check its permissions"
        )


def check_settings(
    stored: Mapping[str, Any],
    wanted: Mapping[str, Any],
    *,
    where: str | os.PathLike[str],
    what: str = "a run",
    remedy: str,
    ignore: Sequence[str] = (),
    error: type[Exception] = InputError,
    later: Mapping[str, Any] | None = None,
) -> None:
    """The one settings guard: raise ``error`` naming each field that differs between the
    settings ``stored`` with a result (a folder, a checkpoint) and the ones ``wanted`` now, so
    that finished work is never reused for other settings. Fields in ``ignore`` are not compared;
    a field of ``later`` (added after results existed) missing from ``stored`` reads as its value
    there, the behaviour from before it.

    >>> check_settings({"steps": 3, "lr": 0.1}, {"steps": 3, "lr": 0.1}, where="runs/a", remedy="")
    >>> try:
    ...     check_settings({"steps": 3}, {"steps": 4}, where="runs/a", remedy="use another folder")
    ... except ValueError as error:
    ...     print(error)
    runs/a holds a run with other settings (steps: saved 3, this run 4); use another folder
    """
    stored = json.loads(json.dumps({**(later or {}), **dict(stored)}, default=str))
    wanted = json.loads(json.dumps(dict(wanted), default=str))
    fields = sorted((set(stored) | set(wanted)) - set(ignore))
    changed = [k for k in fields if stored.get(k) != wanted.get(k)]
    if changed:
        details = "; ".join(
            f"{k}: saved {stored.get(k)!r}, this run {wanted.get(k)!r}" for k in changed
        )
        raise error(f"{os.fspath(where)} holds {what} with other settings ({details}); {remedy}")


class Stages:
    """The named stages of a result folder, each computed once by this code.

    ``stages(name, compute, load)`` returns ``load(folder / name)`` when that stage finished
    before with the same code (its ``.complete`` marker records the code version, the machine
    and the compute time), else it clears the stage's folder, calls ``compute(folder / name)``
    and writes the marker. A stage finished by other code (another lens_heads version or an
    edited source) or by a run that recorded no version is computed again, so a result folder
    never mixes the output of two builds. ``stages.seconds`` holds every stage's time;
    ``stages.provenance(name)`` what its marker recorded. An interrupted stage has no marker and
    runs again (training resumes from its checkpoint inside ``compute``). With ``fingerprint``
    (the :class:`~lens_heads.core.Fingerprint` the folder was claimed with:
    :func:`~lens_heads.core.claim_folder`), each marker records its digest too, and
    a stage finished for another one is refused, never reused.

    >>> import tempfile
    >>> stages = Stages(tempfile.mkdtemp())
    >>> stages("answer", lambda where: 42, lambda where: -1)
    42
    >>> stages("answer", lambda where: 42, lambda where: -1)  # reloaded, not recomputed
    -1
    >>> sorted(stages.provenance("answer"))
    ['code', 'machine', 'seconds']
    """

    def __init__(self, folder: str | os.PathLike[str], fingerprint: Any = None) -> None:
        from lens_heads.core._provenance import code_version

        self.folder = Path(folder)
        self.seconds: dict[str, float] = {}
        # the code as the run starts: a source edited while a stage computes must not be
        # recorded as the code that computed it
        self.code = code_version()
        #: the digest of the run's :class:`~lens_heads.core.Fingerprint` (the
        #: folder's record was claimed with it): a stage of another one is never reused
        self.fingerprint = None if fingerprint is None else fingerprint.digest()

    def provenance(self, name: str) -> dict[str, Any]:
        """What the stage's marker recorded (empty when it has none)."""
        return read_json(self.folder / name / ".complete") or {}

    def done(self, name: str) -> bool:
        """Whether the stage finished, computed by this code."""
        return self.provenance(name).get("code") == self.code

    def __call__(
        self, name: str, compute: Callable[[Path], Any], load: Callable[[Path], Any]
    ) -> Any:
        from lens_heads.core._provenance import machine

        where = self.folder / name
        marker = where / ".complete"
        recorded = self.provenance(name)
        stamped = recorded.get("fingerprint")
        if (
            marker.is_file()
            and None not in (stamped, self.fingerprint)
            and (stamped != self.fingerprint)
        ):
            raise FingerprintError(
                f"{where} was computed for another fingerprint (model, data or settings: "
                f"{stamped}, this run {self.fingerprint}) than its folder's record says; delete "
                f"the stage folder {where} to compute it again"
            )
        if marker.is_file() and recorded.get("code") == self.code:
            self.seconds[name] = float(recorded.get("seconds", math.nan))
            return load(where)
        if marker.is_file():
            logger.info(
                "recomputing %s: computed by other code (%s, now %s)",
                where,
                recorded.get("code"),
                self.code,
            )
            shutil.rmtree(where)
        start = time.perf_counter()
        result = compute(where)
        self.seconds[name] = round(time.perf_counter() - start, 1)
        stamp = {"seconds": self.seconds[name], "code": self.code, "machine": machine()}
        if self.fingerprint is not None:
            stamp["fingerprint"] = self.fingerprint
        write_atomic(marker, json.dumps(stamp, indent=1))
        return result
