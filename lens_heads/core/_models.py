"""Loading models into TransformerLens: offline aliases, GGUF files, HF checkpoints, tiny models.

>>> import lens_heads as lh
>>> model = lh.tiny_model(n_layers=2, n_heads=4)
>>> lh.head_shape(model)
(2, 4)

Everything else in the toolkit touches only the hook surface that ``TransformerBridge`` shares
with the legacy ``HookedTransformer`` (:class:`ModelLike`), so either kind of model works.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import torch

from lens_heads.core._devices import resolve_device, resolve_dtype
from lens_heads.core._errors import ComputationError, MissingFileError
from lens_heads.core._families import _tiny_hf_model  # noqa: F401 (the tests build checkpoints with it)
from lens_heads.core._libraries import installed_version
from lens_heads.core._model_specs import (
    MODEL_ALIASES,
    ModelNotAvailableError,
    OfflineModel,
    UnsupportedModelError,
    _check_hf_dir,
    _file_sha256,
    cache_dir,
    model_name,
    spec_kind,
)

__all__ = [
    "MODEL_ALIASES",
    "ModelLike",
    "ModelNotAvailableError",
    "UnsupportedModelError",
    "cache_dir",
    "head_shape",
    "known_fingerprint",
    "load_model",
    "model_name",
    "prepare_model",
    "spec_kind",
]

logger = logging.getLogger(__name__)


@runtime_checkable
class ModelLike(Protocol):
    """The hook surface shared by ``TransformerBridge`` and the legacy ``HookedTransformer``."""

    cfg: Any
    tokenizer: Any

    def run_with_hooks(self, *args: Any, **kwargs: Any) -> Any: ...
    def run_with_cache(self, *args: Any, **kwargs: Any) -> Any: ...
    def hooks(self, *args: Any, **kwargs: Any) -> Any: ...
    def generate(self, *args: Any, **kwargs: Any) -> Any: ...
    def to_tokens(self, *args: Any, **kwargs: Any) -> Any: ...


# GGUF configs carry no `architectures`; TransformerLens needs one to pick its adapter.
_ARCHITECTURE_OF_MODEL_TYPE = {
    "llama": "LlamaForCausalLM",
    "gemma": "GemmaForCausalLM",
    "gemma2": "Gemma2ForCausalLM",
    "gemma3_text": "Gemma3ForCausalLM",
    "gemma3": "Gemma3ForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "mistral": "MistralForCausalLM",
    "phi3": "Phi3ForCausalLM",
    "gpt2": "GPT2LMHeadModel",
}


#: transformers class names that TransformerLens registers its adapter under another spelling of
#: (PhiMoE's adapter targets the native transformers class, under the hub's remote-code name)
_TRANSFORMER_LENS_NAMES = {"PhimoeForCausalLM": "PhiMoEForCausalLM"}


def head_shape(model: Any) -> tuple[int, int]:
    """``(n_layers, n_heads)`` of a model (or of a shape read before the weights); with
    grouped-query attention, heads are query heads."""
    return int(model.cfg.n_layers), int(model.cfg.n_heads)


def load_model(
    spec: str | os.PathLike[str],
    *,
    dtype: torch.dtype | str = torch.float32,
    device: str | torch.device = "cpu",
    device_map: str | dict[str, Any] | None = None,
    freeze: bool = True,
    transformer_lens_bos: bool = False,
    verify: bool = True,
) -> Any:
    """Load a model as a TransformerLens ``TransformerBridge``.

    ``spec`` is an offline alias (``"smollm2-135m-instruct"``, ``"gemma-3-270m"``), a ``.gguf``
    file, a local Hugging Face checkpoint directory or a Hugging Face model id. GGUF weights
    are dequantized once and cached as safetensors under :func:`cache_dir`.

    ``device``: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ... or ``"auto"`` (CUDA when available);
    ``dtype``: a ``torch.dtype``, its name (``"bfloat16"``) or ``"auto"`` (bfloat16 on a GPU
    that computes it natively, float32 elsewhere). ``device_map`` (``"auto"`` or a module →
    device dict; Hugging Face ids and checkpoint directories) splits a model that does not fit
    one GPU over several, through TransformerLens's own device-map support.

    ``model.tokenizer`` is the checkpoint's own tokenizer, so every text lens_heads encodes gets
    exactly the ids ``AutoTokenizer.from_pretrained(checkpoint)(text)`` gives (and its chat
    template, as ``apply_chat_template`` tokenizes it), as in the papers' reference code.
    TransformerLens instead re-loads the tokenizer with ``add_bos_token=True``, which puts a BOS
    token before every text even where the checkpoint's tokenizer adds none (Phi-3, SmolLM2);
    ``transformer_lens_bos=True`` keeps that convention. A tokenizer that adds BOS itself
    (Llama, Mistral, Gemma, Cohere) or has no BOS (Qwen) gives the same ids either way, and so
    does every chat template (it is tokenized without added special tokens).

    ``verify`` (the default) runs the guards of :mod:`lens_heads.core._guards` on the loaded
    model -- KV-cached logits against full forwards, ``hook_pattern`` against the checkpoint's
    eager attention weights, a few short forwards -- so that libraries that compute wrong
    numbers stop the load with a :class:`~lens_heads.core.LibraryMismatchError`.

    >>> model = load_model("smollm2-135m-instruct", dtype="auto")  # doctest: +SKIP
    >>> resolve_dtype("auto", "cpu"), resolve_device("cpu")
    (torch.float32, device(type='cpu'))

    >>> model = load_model("smollm2-135m-instruct")  # doctest: +SKIP
    >>> head_shape(model)  # doctest: +SKIP
    (30, 9)
    >>> load_model("no-such-model")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lens_heads.core._model_specs.ModelNotAvailableError: unknown model 'no-such-model': ...
    """
    kind = spec_kind(spec)
    spec_str = os.fspath(spec)
    if kind == "config":
        raise ModelNotAvailableError(
            f"{spec_str!r} is a shipped configuration without weights: build it with random "
            f"weights for time and memory (lh.random_model({spec_str!r}, device=..., dtype=...)), "
            "or load the real checkpoint by its Hugging Face id or a local folder"
        )
    device = resolve_device(device)
    dtype = resolve_dtype(dtype, device)
    path = Path(spec_str).expanduser()
    kept = transformer_lens_bos
    if kind == "hub":
        bridge = _boot_hub(spec_str, dtype, device, device_map)
        if not kept:
            from transformers import AutoTokenizer

            _use_checkpoint_tokenizer(bridge, AutoTokenizer.from_pretrained(spec_str))
    else:
        if kind == "alias":
            source = MODEL_ALIASES[spec_str]
            hf_model, tokenizer = _load_offline(source)
            hf_id = source.hf_id
        elif kind == "gguf":
            hf_model, tokenizer = _load_gguf_cached(_file_sha256(path), lambda: path, None)
            hf_id = path.stem
        else:
            hf_model, tokenizer = _load_hf_dir(path, device_map)
            hf_id = spec_str
        bridge = _boot(hf_id, hf_model, tokenizer)
        if not kept:
            _use_checkpoint_tokenizer(bridge, tokenizer)
    model = _finish(bridge, spec_str, dtype, device, freeze)
    if verify:
        from lens_heads.core._guards import verify_model

        verify_model(model)
    if kind == "alias" and not kept and device_map is None:
        _remember_fingerprint(spec_str, dtype, device, model)
    return model


#: the file in an alias's cache folder that remembers its loaded models' fingerprints
FINGERPRINTS = "fingerprints.json"


def known_fingerprint(
    spec: str | os.PathLike[str],
    *,
    dtype: torch.dtype | str = torch.float32,
    device: str | torch.device = "cpu",
) -> dict[str, str] | None:
    """The :func:`~lens_heads.core._fingerprints.model_fingerprint` that ``load_model(spec,
    dtype=dtype, device=device)`` gives, read without loading: an offline alias remembers it in
    its cache folder once loaded, for these library versions, this loading code and the cache's
    files as they are (any change and it is None: load the model to know). Anything but an
    offline alias: None. A finished run's folder is checked against it in a second, where
    loading the model takes tens of seconds.

    >>> known_fingerprint("no/such-model") is None
    True
    """
    spec_str = os.fspath(spec)
    if spec_str not in MODEL_ALIASES or spec_kind(spec_str) != "alias":
        return None
    device = resolve_device(device)
    dtype = resolve_dtype(dtype, device)
    directory = _cached_model_dir(MODEL_ALIASES[spec_str].sha256())
    entry = _read_fingerprints(directory).get(_load_key(spec_str, dtype, device))
    if not entry or entry.get("files") != _cache_files(directory):
        return None
    return dict(entry["fingerprint"])


def _load_key(spec: str, dtype: torch.dtype, device: Any) -> str:
    """What a loaded alias's weights and tokenizer depend on beyond its cached files."""
    from lens_heads.core._libraries import library_versions

    code = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
    return json.dumps(
        {"spec": spec, "dtype": str(dtype), "device": str(device), "code": code,
         "libraries": library_versions()},
        sort_keys=True,
    )  # fmt: skip


def _cache_files(directory: Path) -> dict[str, list[int]]:
    """Size and modification time of each file of a cache folder (but the fingerprints')."""
    if not directory.is_dir():
        return {}
    return {
        f.name: [f.stat().st_size, f.stat().st_mtime_ns]
        for f in sorted(directory.iterdir())
        if f.is_file() and f.name != FINGERPRINTS
    }


def _read_fingerprints(directory: Path) -> dict[str, Any]:
    try:
        found = json.loads((directory / FINGERPRINTS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _remember_fingerprint(spec: str, dtype: torch.dtype, device: Any, model: Any) -> None:
    """Keep the fingerprint of an alias just loaded (:func:`known_fingerprint` reads it)."""
    from lens_heads.core._fingerprints import model_fingerprint
    from lens_heads.core._storage import write_atomic

    directory = _cached_model_dir(MODEL_ALIASES[spec].sha256())
    key = _load_key(spec, dtype, device)
    records = _read_fingerprints(directory)
    entry = {"files": _cache_files(directory), "fingerprint": model_fingerprint(model)}
    if not entry["files"] or records.get(key) == entry:
        return
    records[key] = entry
    try:
        write_atomic(directory / FINGERPRINTS, json.dumps(records, indent=1))
    except OSError as error:  # a read-only cache: the next run loads the model to know
        logger.info("could not remember the fingerprint in %s: %s", directory, error)


def _boot(hf_id: str, hf_model: Any, tokenizer: Any) -> Any:
    """Boot a bridge around a loaded model (TransformerLens gets its own copy of the tokenizer,
    which it changes); an architecture without an adapter is an :class:`UnsupportedModelError`."""
    from transformer_lens.model_bridge import TransformerBridge

    config = hf_model.config
    names = list(getattr(config, "architectures", None) or [])
    if names and names[0] in _TRANSFORMER_LENS_NAMES:  # its adapter is registered under another
        config.architectures = [_TRANSFORMER_LENS_NAMES[names[0]], *names[1:]]
    try:
        return TransformerBridge.boot_transformers(
            hf_id, hf_model=hf_model, tokenizer=copy.deepcopy(tokenizer)
        )
    except ValueError as error:
        if "supported architecture" not in str(error):
            raise
        architecture = (getattr(config, "architectures", None) or [type(hf_model).__name__])[0]
        raise UnsupportedModelError(
            f"{hf_id}: TransformerLens {installed_version('transformer-lens')} has no "
            f"TransformerBridge adapter for {architecture} (model type "
            f"{getattr(config, 'model_type', '?')!r}), "
            "so its attention heads cannot be hooked (blocks.{l}.attn.hook_z) and lens_heads "
            "cannot use it; see docs/compatibility.md for the families checked here"
        ) from error


def _use_checkpoint_tokenizer(bridge: Any, tokenizer: Any) -> None:
    """Give the bridge the checkpoint's own tokenizer in place of TransformerLens's copy.

    TransformerLens re-loads the tokenizer with ``add_bos_token=True``, so a checkpoint whose
    tokenizer adds no BOS (Phi-3, SmolLM2) would get one before every text that ``transformers``
    and the papers' code do not give it. Only the pad token is filled in (with EOS) where the
    checkpoint has none, as TransformerLens does: it pads batches and never changes a text's ids.

    The offline models: Gemma 3 270M's tokenizer adds ``<bos>`` itself, so every id is the same
    as with TransformerLens's copy. SmolLM2's chat template starts with ``<|im_start|>`` (its BOS)
    and chat prompts are tokenized without added special tokens (``encode_text``), so chat ids
    are the same too; its *plain-text* prompts lose the ``<|im_start|>`` TransformerLens put
    first, as its ``transformers`` tokenizer and its GGUF (``add_bos_token = false``) give them.
    The bridge's setter would re-run TransformerLens's tokenizer set-up, so the attribute is set
    directly, and ``cfg.tokenizer_prepends_bos`` is made to describe this tokenizer.
    """
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    bridge._tokenizer = tokenizer
    if getattr(bridge, "_driver", None) is not None and hasattr(bridge._driver, "tokenizer"):
        bridge._driver.tokenizer = tokenizer
    if bridge.tokenizer is not tokenizer:  # a TransformerLens whose bridge stores it elsewhere
        raise ComputationError(
            "could not give the TransformerBridge the checkpoint's tokenizer (this TransformerLens "
            "stores it elsewhere); load with transformer_lens_bos=True to keep its own"
        )
    ids = tokenizer("a").input_ids
    bos = tokenizer.bos_token_id
    bridge.cfg.tokenizer_prepends_bos = bool(len(ids) > 1 and bos is not None and ids[0] == bos)


def _finish(bridge: Any, name: str, dtype: torch.dtype, device: Any, freeze: bool) -> Any:
    split = getattr(bridge.cfg, "n_devices", 1) > 1  # a device_map placed it already
    if dtype != torch.float32 and not split:
        bridge.to(dtype)
    if str(device) != "cpu" and not split:
        bridge.to(device)
    if not split:  # TransformerLens names CUDA whenever a GPU is visible, even for CPU weights
        bridge.cfg.device = str(next(bridge.parameters()).device)
    bridge.eval()
    if freeze:
        for parameter in bridge.parameters():
            parameter.requires_grad_(False)
    bridge.lens_heads_name = name
    return bridge


def _boot_hub(model_id: str, dtype: torch.dtype, device: Any, device_map: Any = None) -> Any:
    from transformer_lens.model_bridge import TransformerBridge

    try:
        if device_map is not None:
            return TransformerBridge.boot_transformers(model_id, dtype=dtype, device_map=device_map)
        return TransformerBridge.boot_transformers(model_id, dtype=dtype, device=device)
    except OSError as error:
        known = ", ".join(sorted(MODEL_ALIASES))
        raise ModelNotAvailableError(
            f"could not load {model_id!r} from the Hugging Face hub ({error}). Without network, "
            f"use an offline alias ({known}), a .gguf file or a local checkpoint directory."
        ) from error


def _load_hf_dir(path: Path, device_map: Any = None) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _check_hf_dir(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    extra = {} if device_map is None else {"device_map": device_map}
    # Eager attention whatever the checkpoint asks for: the bridge computes attention itself
    # (hook_pattern), and an implementation missing here (flash_attention_2 on a CPU) or one
    # that returns no weights (sdpa) must neither fail the load nor hide patterns.
    try:
        hf_model = AutoModelForCausalLM.from_pretrained(
            path, dtype=torch.float32, attn_implementation="eager", **extra
        )
    except ValueError as error:
        if "does not recognize this architecture" not in str(error) and (
            "Unrecognized configuration class" not in str(error)
        ):
            raise
        raise UnsupportedModelError(
            f"{path}: transformers {installed_version('transformers')} cannot load this "
            f"checkpoint as a causal language model ({str(error).splitlines()[0]}); lens_heads "
            "needs AutoModelForCausalLM to load it"
        ) from error
    return hf_model, tokenizer


def _load_offline(source: OfflineModel) -> tuple[Any, Any]:
    # The key is known without assembling a chunked GGUF, so a cache hit costs no assembly.
    return _load_gguf_cached(source.sha256(), source.locate, source.architecture)


def _cached_model_dir(sha256: str) -> Path:
    return cache_dir() / "models" / sha256[:24]


def _try_load_cache(directory: Path) -> tuple[Any, Any] | None:
    """Load a cached checkpoint, or delete it and return None when it is unreadable."""
    try:
        if not (directory / "lens_heads.json").is_file():
            raise MissingFileError("missing lens_heads.json (incomplete cache entry)")
        return _load_hf_dir(directory)
    except Exception as error:
        warnings.warn(
            f"model cache {directory} is unreadable ({type(error).__name__}: {error}); "
            "re-creating it from the GGUF file",
            stacklevel=3,
        )
        shutil.rmtree(directory, ignore_errors=True)
        return None


def _load_gguf_cached(
    sha256: str, locate: Callable[[], Path], architecture: str | None
) -> tuple[Any, Any]:
    """Load the dequantized checkpoint of a GGUF from the cache, creating it when needed."""
    directory = _cached_model_dir(sha256)
    if directory.is_dir():
        loaded = _try_load_cache(directory)
        if loaded is not None:
            return loaded
    path = locate()
    hf_model, tokenizer = _dequantize_gguf(path, architecture)
    try:
        _write_cache(directory, hf_model, tokenizer, source=path, sha256=sha256)
    except OSError as error:
        warnings.warn(
            f"could not cache the dequantized model in {directory}: {error}", stacklevel=2
        )
    return hf_model, tokenizer


def _dequantize_gguf(path: Path, architecture: str | None) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    logger.info("dequantizing %s (once; later loads use the cache)", path)
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    hf_model = AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32
    )
    model_type = getattr(hf_model.config, "model_type", "")
    hf_model.config.architectures = [
        architecture or _ARCHITECTURE_OF_MODEL_TYPE.get(model_type, type(hf_model).__name__)
    ]
    # The dequantized weights are ordinary fp32 tensors; drop the GGUF quantizer so they save.
    hf_model.hf_quantizer = None
    hf_model.is_quantized = False
    if hasattr(hf_model.config, "quantization_config"):
        del hf_model.config.quantization_config
    return hf_model, tokenizer


def _write_cache(
    directory: Path, hf_model: Any, tokenizer: Any, *, source: Path, sha256: str
) -> None:
    """Write the checkpoint into a temporary sibling, then rename it into place atomically."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=directory.name + ".tmp-", dir=directory.parent))
    try:
        hf_model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        info = {"source": str(source), "sha256": sha256, "created": time.time()}
        (staging / "lens_heads.json").write_text(json.dumps(info, indent=2))
        try:
            os.replace(staging, directory)
        except OSError:  # another process won the race; keep its copy
            if not (directory / "lens_heads.json").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def prepare_model(alias: str) -> Path:
    """Dequantize and cache an offline alias now; returns the cache directory."""
    if alias not in MODEL_ALIASES:
        raise ModelNotAvailableError(
            f"unknown alias {alias!r}; known aliases: {', '.join(sorted(MODEL_ALIASES))}"
        )
    source = MODEL_ALIASES[alias]
    source.require_installed()
    _load_offline(source)
    return _cached_model_dir(source.sha256())


def cached_aliases() -> dict[str, bool]:
    """For each alias: is its dequantized checkpoint in the cache?"""
    status = {}
    for alias, source in MODEL_ALIASES.items():
        if not source.installed():
            status[alias] = False
            continue
        status[alias] = (_cached_model_dir(source.sha256()) / "lens_heads.json").is_file()
    return status
