"""Models with random weights: the tiny Llama-style model of the unit tests (:func:`tiny_model`)
and the papers' models at their real size (:func:`random_model`), built from a shipped
configuration (:mod:`lens_heads.core._model_configs`) with their weights made directly on the
target device in the target dtype -- no download, no CPU copy, nothing at all on the meta device.

Time and memory do not depend on the weights' values, accuracy does: such a model is named
``"<alias> [random weights: time and memory only]"``, so every result that records its model says
so, carries ``model.lens_heads_random_weights = True``, and what reports accuracy refuses it
(:func:`refuse_random_weights`, a :class:`RandomWeightsError`).

>>> import lens_heads as lh
>>> model = random_model("qwen2.5-0.5b-instruct", device="meta", dtype="bfloat16")
>>> lh.head_shape(model), model.cfg.n_key_value_heads, is_random(model)
((24, 14), 2, True)
>>> model_name(model)
'qwen2.5-0.5b-instruct [random weights: time and memory only]'
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import torch

from lens_heads.core._devices import resolve_device, resolve_dtype
from lens_heads.core._errors import InputError, LensHeadsError
from lens_heads.core._families import _byte_tokenizer, _tiny_hf_model
from lens_heads.core._model_configs import CONFIG_ALIASES, hf_config
from lens_heads.core._models import _boot, _finish, _use_checkpoint_tokenizer, model_name

__all__ = [
    "RANDOM_WEIGHTS",
    "RandomWeightsError",
    "is_random",
    "random_model",
    "refuse_random_weights",
    "tiny_model",
]

#: what every result of a model with random weights says about itself
RANDOM_WEIGHTS = "random weights: time and memory only"


class RandomWeightsError(LensHeadsError, ValueError):
    """A computation that reports accuracy was given a model with random weights."""


def is_random(model: Any) -> bool:
    """Whether ``model`` was built with random weights (:func:`random_model`)."""
    return bool(getattr(model, "lens_heads_random_weights", False))


def refuse_random_weights(model: Any, what: str) -> None:
    """Stop ``what`` (something that reports accuracy) on a model with random weights."""
    if is_random(model):
        raise RandomWeightsError(
            f"{what} reports accuracy, but {model_name(model)} has {RANDOM_WEIGHTS}: its answers "
            "mean nothing. Load the real checkpoint (lh.load_model with its Hugging Face id or "
            "folder) to measure accuracy; use random weights for plans, timings and memory"
        )


def random_model(
    spec: str | os.PathLike[str] | Mapping[str, Any] | Any,
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | str = "auto",
    seed: int = 0,
    device_map: Mapping[str, str | int] | None = None,
    verify: bool | None = None,
) -> Any:
    """A ``TransformerBridge`` of a model's real shape with random weights, for time and memory.

    ``spec``: a shipped configuration's alias (``"llama-3.1-8b-instruct"``, ``"qwen2.5-7b-
    instruct"``, ... :data:`~lens_heads.core._model_configs.CONFIG_ALIASES`), a dict of
    ``config.json`` values, a ``config.json`` file or folder, or a ``transformers`` config. The
    weights are drawn (the architecture's own initialisation, seeded) where they will live:
    ``device="cuda"`` makes them on the GPU, ``"meta"`` makes none (shapes, plans, head counts);
    ``dtype`` as :func:`lens_heads.load_model` (``"auto"``: bfloat16 on a GPU that computes it).

    ``device_map`` (module name -> device, e.g. the decoder layers beyond the first 24 on
    ``"cpu"``) builds each part on its device and dispatches the model with ``accelerate``: a
    CPU entry beside a GPU keeps those layers' weights in CPU memory and moves them to the GPU
    for each forward. TransformerLens 4.3 refuses such mixed maps as not yet verified; they are
    booted anyway here, for time and memory, and checked only by ``scripts/gpu_check.sh``.

    The tokenizer is lens_heads' byte-level one (every id it makes is valid in any vocabulary);
    benchmarks that need a task's real prompt lengths give token ids of those lengths instead of
    text. ``verify`` (default: on every device but meta) runs the library guards on the model.
    """
    from transformers import AutoModelForCausalLM

    config = hf_config(os.fspath(spec) if isinstance(spec, os.PathLike) else spec)
    name = spec if isinstance(spec, str) and spec in CONFIG_ALIASES else _config_name(config)
    device = resolve_device(device)
    dtype = resolve_dtype(dtype, device if device.type != "meta" else "cpu")
    tokenizer = _byte_tokenizer()
    _use_tokenizer_ids(config, tokenizer)
    rng_devices = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=rng_devices):
        torch.manual_seed(seed)
        if device_map:
            hf_model = _build_split(config, dtype, device_map)
        else:
            with torch.device(device):
                hf_model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    hf_model.eval()
    hidden = _hide_mixed_map(hf_model)
    try:
        bridge = _boot(f"random/{name}", hf_model, tokenizer)
    except NotImplementedError as error:  # Phi-3's fused qkv is split from its values at boot
        raise InputError(
            f"TransformerLens cannot boot {name} on the meta device ({error}); use its shape "
            "(lh.plan, model_shape) or build it on a real device"
        ) from error
    finally:
        if hidden is not None:
            hf_model.hf_device_map = hidden
    _use_checkpoint_tokenizer(bridge, tokenizer)
    bridge.cfg.dtype = dtype  # made in it and where it lives: no copy through bridge.to
    model = _finish(bridge, f"{name} [{RANDOM_WEIGHTS}]", torch.float32, "cpu", True)
    if hidden is not None:
        model.cfg.n_devices = len({str(d) for d in hidden.values()})
        model.cfg.device = str(device)
    model.lens_heads_random_weights = True
    if verify if verify is not None else device.type != "meta":
        from lens_heads.core._guards import verify_model

        verify_model(model)
    return model


def _config_name(config: Any) -> str:
    architecture = (getattr(config, "architectures", None) or ["model"])[0]
    return str(getattr(config, "name_or_path", "") or f"random {architecture}")


def _use_tokenizer_ids(config: Any, tokenizer: Any) -> None:
    """Make the configuration's special ids the byte-level tokenizer's (a generation stops at its
    end-of-turn id; the checkpoint's own ids belong to a tokenizer that is not here)."""
    vocab = int(config.vocab_size)
    if vocab < len(tokenizer):
        raise InputError(
            f"the configuration's vocabulary ({vocab} tokens) is smaller than the byte-level "
            f"tokenizer's {len(tokenizer)}; give a vocab_size of at least {len(tokenizer)}"
        )
    config.bos_token_id = tokenizer.bos_token_id
    config.eos_token_id = tokenizer.eos_token_id
    config.pad_token_id = tokenizer.pad_token_id


def _build_split(config: Any, dtype: torch.dtype, device_map: Mapping[str, str | int]) -> Any:
    """The model with each part of ``device_map`` made on its device (nothing made twice), then
    dispatched with ``accelerate`` so that activations follow the layers."""
    from accelerate import dispatch_model
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        hf_model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    for module_name, target in device_map.items():
        where = torch.device(f"cuda:{target}" if isinstance(target, int) else target)
        try:
            module = hf_model.get_submodule(module_name) if module_name else hf_model
        except AttributeError as error:
            raise InputError(
                f"device_map names {module_name!r}, which the model does not have; name its "
                "modules as named_modules() gives them (model.layers.0, lm_head, ...)"
            ) from error
        module.to_empty(device=where)
    left = sorted({name.rsplit(".", 1)[0] for name, p in hf_model.named_parameters() if p.is_meta})
    if left:
        raise InputError(
            f"device_map places no device for {', '.join(left[:4])}"
            f"{' ...' if len(left) > 4 else ''}; give every module a device"
        )
    hf_model.init_weights()  # the architecture's initialisation, each tensor where it lives
    gpus = [t for t in device_map.values() if isinstance(t, int) or str(t).startswith("cuda")]
    main = gpus[0] if gpus else "cpu"
    return dispatch_model(hf_model, device_map=dict(device_map), main_device=main)


def _hide_mixed_map(hf_model: Any) -> dict[str, Any] | None:
    """TransformerLens 4.3 refuses a GPU beside CPU entries in ``hf_device_map`` (its message:
    likely fine, verified on CPU-only hardware); the map is hidden while the bridge boots."""
    found = getattr(hf_model, "hf_device_map", None)
    if not found:
        return None
    kinds = {str(v).split(":")[0] if not isinstance(v, int) else "cuda" for v in found.values()}
    if not ({"cpu", "disk"} & kinds and "cuda" in kinds):
        return None
    del hf_model.hf_device_map
    return dict(found)


def tiny_model(
    n_layers: int = 2,
    n_heads: int = 4,
    *,
    n_kv_heads: int | None = None,
    d_head: int = 16,
    d_mlp: int | None = None,
    n_ctx: int = 512,
    seed: int = 0,
) -> Any:
    """A small random-initialised Llama-style bridge with a byte-level tokenizer, built offline
    (the unit tests' model; its results are not marked: it is no paper's model).

    >>> import lens_heads as lh
    >>> model = tiny_model(n_layers=3, n_heads=2, n_kv_heads=1)
    >>> lh.head_shape(model)
    (3, 2)
    """
    from transformer_lens.model_bridge import TransformerBridge

    sizes = {"n_layers": n_layers, "n_heads": n_heads, "d_head": d_head, "n_ctx": n_ctx}
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"{name} must be a positive integer, got {value!r}")
    if n_kv_heads is not None and (
        isinstance(n_kv_heads, bool) or not isinstance(n_kv_heads, int) or n_kv_heads < 1
        or n_heads % n_kv_heads
    ):  # fmt: skip
        raise InputError(
            f"n_kv_heads={n_kv_heads!r} must be a positive divisor of n_heads={n_heads}"
        )
    hf_model, tokenizer = _tiny_hf_model(n_layers, n_heads, n_kv_heads, d_head, d_mlp, n_ctx, seed)
    bridge = TransformerBridge.boot_transformers(
        "lens-heads-tiny", hf_model=hf_model, tokenizer=tokenizer
    )
    return _finish(bridge, f"tiny-{n_layers}x{n_heads}-seed{seed}", torch.float32, "cpu", True)
