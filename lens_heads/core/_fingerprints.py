"""What a stored result was computed from, and the one check that resumes a folder only for the
same inputs.

A :class:`Fingerprint` has three parts: the **model** (its name, dtype, a hash of its
configuration, of its weights and of its tokenizer with the chat template), the **data** (a
content hash of every task, input file and input folder) and the **settings**. A resumable folder
records it on its first run (:func:`claim_folder`); a later run whose fingerprint differs is
refused before anything is computed, with a message naming each part that differs and the fix.
Every resumable thing -- stages (:class:`~lens_heads.core.Stages`), mask trainings and
their checkpoints, grid cells, the demo, the LAHIS and alignment experiments -- goes through it.

>>> import tempfile, lens_heads as lh
>>> model_a, model_b = lh.tiny_model(seed=0), lh.tiny_model(seed=1)  # one shape, other weights
>>> folder = tempfile.mkdtemp()
>>> claim_folder(folder, Fingerprint.of(model_a, {"k": 3}), what="a test")
>>> claim_folder(folder, Fingerprint.of(model_a, {"k": 3}), what="a test")  # the same: resumes
>>> try:
...     claim_folder(folder, Fingerprint.of(model_b, {"k": 4}), what="a test")
... except FingerprintError as error:
...     print(str(error).split(" holds ")[1])  # doctest: +ELLIPSIS +NORMALIZE_WHITESPACE
a test of another model (tiny-2x4-seed0 ..., this run tiny-2x4-seed1 ...: other weights)
and other settings (k: saved 3, this run 4); ...
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import warnings
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lens_heads.core._errors import FingerprintError, InputError, InputTypeError

__all__ = [
    "FINGERPRINT_KEY",
    "Fingerprint",
    "FingerprintError",
    "FingerprintWarning",
    "check_fingerprint",
    "claim_folder",
    "content_hash",
    "model_fingerprint",
]

logger = logging.getLogger(__name__)

#: the key under which a record file (a folder's ``config.json``, ``demo.json``, ...) holds the
#: model and data parts; the settings are the record's other keys, as before fingerprints
FINGERPRINT_KEY = "fingerprint"

#: the model parts, in the order a message names them
_MODEL_PARTS = {
    "weights": "other weights",
    "config": "another configuration",
    "tokenizer": "another tokenizer or chat template",
    "dtype": "another dtype",
}

#: files of a result folder that are views of its data, not data (left out of its hash)
_VIEW_SUFFIXES = (".html", ".png", ".md", ".log", ".tmp")
_VIEW_NAMES = (".complete", ".claim", "claim.json", "compute.log")


class FingerprintWarning(UserWarning):
    """A folder written before fingerprints: its model and data cannot be checked."""


# -- the parts ---------------------------------------------------------------------------------
def _hasher() -> Any:
    import xxhash

    return xxhash.xxh3_128()


def _tensor_bytes(tensor: Any) -> memoryview:
    """The raw bytes of a tensor (copied to the CPU when it lives elsewhere)."""
    import torch

    data = tensor.detach()
    if data.device.type != "cpu":
        data = data.to("cpu")
    data = data.contiguous().reshape(-1)
    return memoryview(data.view(torch.uint8).numpy())


def _weights_hash(tensors: list[Any]) -> str:
    digest = _hasher()
    for tensor in tensors:
        digest.update(f"{tuple(tensor.shape)}{tensor.dtype}".encode())
        if tensor.device.type == "meta":  # a shape without values (plans, random builds)
            digest.update(b"meta")
        elif tensor.numel():
            digest.update(_tensor_bytes(tensor))
    return digest.hexdigest()[:16]


#: configuration keys that say how a model runs here, not what it computes
_RUNTIME_KEYS = {
    "transformers_version", "dtype", "torch_dtype", "use_cache", "return_dict",
    "output_attentions", "output_hidden_states", "device", "n_devices", "device_map",
    "attn_implementation", "name_or_path", "model_name", "tokenizer_name",
}  # fmt: skip


def _config_hash(model: Any) -> str:
    hf_model = getattr(model, "original_model", None)
    config = getattr(hf_model, "config", None)
    if config is not None and hasattr(config, "to_dict"):
        values = config.to_dict()
    else:  # a legacy HookedTransformer: its own config
        cfg = model.cfg
        values = cfg.to_dict() if hasattr(cfg, "to_dict") else dict(vars(cfg))
    kept = {
        key: value
        for key, value in values.items()
        if not str(key).startswith("_") and key not in _RUNTIME_KEYS
    }
    digest = _hasher()
    digest.update(json.dumps(kept, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:16]


def _tokenizer_hash(tokenizer: Any) -> str:
    """The vocabulary and merges, the special tokens, the chat template and whether a BOS is
    put first: everything that decides the ids a text gets."""
    digest = _hasher()
    if tokenizer is None:
        return "none"
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and hasattr(backend, "to_str"):
        digest.update(backend.to_str().encode())
    elif hasattr(tokenizer, "get_vocab"):
        digest.update(json.dumps(sorted(tokenizer.get_vocab().items())).encode())
    special = [getattr(tokenizer, name, None) for name in ("bos_token", "eos_token", "pad_token")]
    digest.update(json.dumps([str(s) for s in special]).encode())
    digest.update(str(getattr(tokenizer, "chat_template", None)).encode())
    try:
        digest.update(json.dumps(list(tokenizer("a b").input_ids)).encode())
    except Exception:  # a tokenizer that cannot encode plain text: its vocabulary says enough
        pass
    return digest.hexdigest()[:16]


_MODELS: weakref.WeakKeyDictionary[Any, tuple[Any, dict[str, str]]] = weakref.WeakKeyDictionary()


def model_fingerprint(model: Any) -> dict[str, str]:
    """``{"name", "dtype", "config", "weights", "tokenizer"}`` of a loaded model: its name, the
    dtype of its weights and short hashes of its configuration, its weights (every parameter and
    buffer, by value) and its tokenizer with the chat template. Computed once per model and
    remembered until a weight changes (in place or replaced).

    >>> import lens_heads as lh
    >>> a, b = model_fingerprint(lh.tiny_model(seed=0)), model_fingerprint(lh.tiny_model(seed=1))
    >>> a["config"] == b["config"], a["weights"] == b["weights"], sorted(a)
    (True, False, ['config', 'dtype', 'name', 'tokenizer', 'weights'])
    """
    import torch

    if not isinstance(model, torch.nn.Module) or not hasattr(model, "cfg"):
        raise InputTypeError(
            f"model must be a loaded model (lh.load_model, a TransformerBridge or a "
            f"HookedTransformer), got {type(model).__name__}"
        )
    from lens_heads.core._model_specs import model_name

    tensors = [*model.parameters(), *model.buffers()]
    tokenizer = getattr(model, "tokenizer", None)
    key = (id(tokenizer), tuple((t.data_ptr(), t._version, str(t.device)) for t in tensors))
    cached = _MODELS.get(model)
    if cached is not None and cached[0] == key:
        return dict(cached[1])
    dtypes = sorted({str(t.dtype).removeprefix("torch.") for t in model.parameters()})
    found = {
        "name": model_name(model),
        "dtype": "+".join(dtypes),
        "config": _config_hash(model),
        "weights": _weights_hash(tensors),
        "tokenizer": _tokenizer_hash(tokenizer),
    }
    _MODELS[model] = (key, found)
    return dict(found)


def content_hash(value: Any) -> str:
    """A short hash of what ``value`` holds: a :class:`~lens_heads.core.Task` (its
    examples, instruction and rule), a path (a string or a ``Path``) to a file (its bytes) or a
    folder (the relative names and bytes of its data files: figures, markdown views, logs and
    stage markers are left out), a head mask or tensor (its values), bytes, or a list of these.

    >>> from lens_heads.core._tasks import Example, Task
    >>> a = Task("t", (Example("a", "A"),))
    >>> content_hash(a) == content_hash(Task("t", (Example("a", "B"),)))
    False
    """
    import torch

    from lens_heads.core._tasks import Task

    digest = _hasher()
    if isinstance(value, (list, tuple)):
        for item in value:
            digest.update(content_hash(item).encode())
    elif hasattr(value, "values") and isinstance(getattr(value, "values", None), torch.Tensor):
        digest.update(_weights_hash([value.values]).encode())  # a HeadMask or HeadScale
        digest.update(str(getattr(value, "alpha", "")).encode())
    elif isinstance(value, torch.Tensor):
        digest.update(_weights_hash([value]).encode())
    elif isinstance(value, Task):
        digest.update(value.fingerprint().encode())
        rule = [value.instruction, value.match, value.kind, value.source_lang, value.target_lang]
        # a counterfactual's answer joins the rule only where set: older hashes stay as they were
        rule += [
            [e.match, e.source, e.counterfactual]
            + ([] if e.counterfactual_output is None else [e.counterfactual_output])
            for e in value.examples
        ]
        digest.update(json.dumps(rule).encode())
    elif isinstance(value, bytes):
        digest.update(value)
    elif isinstance(value, (str, os.PathLike)):
        path = Path(value)
        if path.is_file():
            _update_file(digest, path)
        elif path.is_dir():
            for item in sorted(path.rglob("*")):
                if item.is_file() and not _is_view(item):
                    digest.update(item.relative_to(path).as_posix().encode() + b"\x00")
                    _update_file(digest, item)
        else:
            raise InputError(f"{path} does not exist, so its content cannot be fingerprinted")
    else:
        raise InputTypeError(
            f"content_hash takes a Task, a path, a mask, a tensor or bytes, not "
            f"{type(value).__name__}"
        )
    return digest.hexdigest()[:16]


def _is_view(path: Path) -> bool:
    return path.name in _VIEW_NAMES or path.suffix in _VIEW_SUFFIXES


def _update_file(digest: Any, path: Path) -> None:
    from lens_heads.core._storage import check_readable

    check_readable(path, InputError)
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 24), b""):
            digest.update(block)
    digest.update(b"\x01")


# -- the fingerprint ---------------------------------------------------------------------------
def _plain(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` as JSON would give them back (tuples as lists, paths as strings)."""
    return json.loads(json.dumps(dict(values), default=str))


@dataclass(frozen=True)
class Fingerprint:
    """What a result was computed from: ``model`` (:func:`model_fingerprint`; None where no
    model is involved), ``data`` (input name -> content hash) and ``settings``."""

    settings: Mapping[str, Any] = field(default_factory=dict)
    model: Mapping[str, str] | None = None
    data: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        model: Any = None,
        settings: Mapping[str, Any] | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> Fingerprint:
        """The fingerprint of a run of ``model`` with ``settings`` on ``data`` (name -> anything
        :func:`content_hash` takes; None values are left out)."""
        hashes = {str(name): content_hash(v) for name, v in (data or {}).items() if v is not None}
        return cls(
            settings=_plain(settings or {}),
            model=None if model is None else model_fingerprint(model),
            data=hashes,
        )

    def record(self) -> dict[str, Any]:
        """The fingerprint as a record file holds it: the settings as its keys, the model and
        data parts under :data:`FINGERPRINT_KEY`."""
        return {**self.settings, FINGERPRINT_KEY: {"model": self.model, "data": dict(self.data)}}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> tuple[Fingerprint, bool]:
        """``(fingerprint, known)`` of a record file; ``known`` is False for a record written
        before fingerprints (its settings only)."""
        settings = {k: v for k, v in record.items() if k != FINGERPRINT_KEY}
        parts = record.get(FINGERPRINT_KEY)
        if not isinstance(parts, Mapping):
            return cls(settings=settings), False
        return cls(settings, parts.get("model"), dict(parts.get("data") or {})), True

    def digest(self) -> str:
        """A short hash of the whole fingerprint (what a stage's marker records)."""
        digest = _hasher()
        digest.update(json.dumps(self.record(), sort_keys=True, default=str).encode())
        return digest.hexdigest()[:16]

    def differences(
        self, stored: Fingerprint, *, later: Mapping[str, Any] | None = None
    ) -> list[str]:
        """What differs between ``stored`` and this fingerprint, as phrases for a message:
        the model, each data input, each setting (a setting of ``later`` missing from
        ``stored`` reads as its value there)."""
        found = []
        if self.model is not None and stored.model is not None:
            changed = [
                part for part in _MODEL_PARTS if stored.model.get(part) != self.model.get(part)
            ]
            if changed:
                parts = ", ".join(_MODEL_PARTS[part] for part in changed)
                label = f"{_model_label(stored.model)}, this run {_model_label(self.model)}"
                found.append(f"another model ({label}: {parts})")
        data = []
        for name in sorted(set(self.data) | set(stored.data)):
            old, new = stored.data.get(name), self.data.get(name)
            if old != new:
                saved = "none" if old is None else old[:8]
                data.append(f"{name}: saved {saved}, this run {'none' if new is None else new[:8]}")
        if data:
            found.append(f"other data ({'; '.join(data)})")
        wanted = _plain(self.settings)
        kept = _plain({**(later or {}), **stored.settings})
        settings = [
            f"{key}: saved {kept.get(key)!r}, this run {wanted.get(key)!r}"
            for key in sorted(set(kept) | set(wanted))
            if kept.get(key) != wanted.get(key)
        ]
        if settings:
            found.append(f"other settings ({'; '.join(settings)})")
        return found


def _model_label(model: Mapping[str, str]) -> str:
    return f"{model.get('name')} {str(model.get('weights'))[:8]}"


def _joined(phrases: list[str]) -> str:
    return phrases[0] if len(phrases) == 1 else ", ".join(phrases[:-1]) + " and " + phrases[-1]


# -- the checks --------------------------------------------------------------------------------
def check_fingerprint(
    stored: Fingerprint,
    wanted: Fingerprint,
    *,
    where: str | os.PathLike[str],
    what: str,
    remedy: str,
    known: bool = True,
    later: Mapping[str, Any] | None = None,
    error: type[Exception] = FingerprintError,
) -> None:
    """Refuse (``error``, naming each part that differs and ``remedy``) to reuse what ``where``
    holds -- ``what``, computed with ``stored`` -- for a run of ``wanted``. ``known=False``: the
    stored record predates fingerprints; its settings are still compared, and reusing it warns
    (:class:`FingerprintWarning`) that its model and data cannot be checked."""
    if not known:  # a record of settings only: the model and data are unknown, not different
        wanted = Fingerprint(wanted.settings)
    differences = wanted.differences(stored, later=later)
    if differences:
        raise error(f"{os.fspath(where)} holds {what} of {_joined(differences)}; {remedy}")
    if not known:
        warnings.warn(
            f"{os.fspath(where)} holds {what} written before lens_heads recorded fingerprints: "
            "its model and data cannot be checked, so it is reused as this run's (delete it, or "
            "pass --overwrite where the command has it, to compute it again)",
            FingerprintWarning,
            stacklevel=3,
        )


def claim_folder(
    folder: str | os.PathLike[str],
    fingerprint: Fingerprint,
    *,
    record: str = "config.json",
    what: str = "results",
    remedy: str = "choose another output folder (--out), or pass overwrite=True (--overwrite) "
    "to replace them",
    overwrite: bool = False,
    stages: Iterable[str] = (),
    later: Mapping[str, Any] | None = None,
    error: type[Exception] = FingerprintError,
) -> None:
    """Record ``fingerprint`` in ``folder/record`` on a folder's first run; on a later run,
    refuse (:func:`check_fingerprint`) a fingerprint other than the one recorded, so that no
    finished stage of another model, other data or other settings is ever reused as this run's.

    ``overwrite`` replaces a folder whose fingerprint differs (or is unknown): the record, the
    stages named in ``stages`` and every subfolder that a stage or a training wrote are deleted
    first (nothing else of the folder is touched). A record written before fingerprints
    (settings only) is checked for its settings and adopted with a :class:`FingerprintWarning`.
    ``later``: settings added after results existed, with the value an older record means by
    leaving them out.
    """
    from lens_heads.core._storage import read_json, write_atomic

    folder = Path(folder)
    path = folder / record
    if path.is_file():
        stored_record = read_json(path)
        if not isinstance(stored_record, dict):
            raise error(
                f"{path} is not a readable record of {what} (half written or edited); {remedy}"
            )
        stored, known = Fingerprint.from_record(stored_record)
        compared = fingerprint if known else Fingerprint(fingerprint.settings)
        if overwrite and (not known or compared.differences(stored, later=later)):
            logger.info("overwriting %s", folder)
            _clear(folder, path, stages)
        else:
            check_fingerprint(
                stored,
                fingerprint,
                where=folder,
                what=what,
                remedy=remedy,
                known=known,
                later=later,
                error=error,
            )
            if known and (stored.model is not None or fingerprint.model is None):
                return  # the same fingerprint, recorded already
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(fingerprint.record(), indent=1, default=str))


def _clear(folder: Path, record: Path, stages: Iterable[str]) -> None:
    """Delete what a run of lens_heads wrote into ``folder``: its record, the named stages and
    every subfolder holding (at any depth) a stage marker or a training."""
    record.unlink(missing_ok=True)
    names = set(stages)
    for child in folder.iterdir() if folder.is_dir() else []:
        ours = child.name in names or (
            child.is_dir()
            and any(next(child.rglob(name), None) for name in (".complete", "training.json"))
        )
        if child.is_dir() and ours:
            shutil.rmtree(child)
