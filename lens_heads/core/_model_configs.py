"""The papers' models without their weights: each one's public configuration (layers, heads, KV
heads, widths, vocabulary, RoPE and norm settings), shipped as a small JSON file under
``lens_heads/data/model_configs/``. Its aliases (``llama-3.1-8b-instruct``, ``qwen2.5-7b-instruct``,
...) give a model's shape before anything loads (:func:`lens_heads.core._model_shape.model_shape`),
the memory and time plans of :func:`lens_heads.plan`, and models with random weights
(:func:`lens_heads.random_model`) whose time and memory are those of the real model.

>>> "llama-3.1-8b-instruct" in CONFIG_ALIASES
True
>>> record = model_config("qwen2.5-7b-instruct")
>>> record["config"]["num_hidden_layers"], record["config"]["num_key_value_heads"]
(28, 4)
>>> model_config("gpt-5")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
lens_heads.core._errors.UnknownNameError: "no shipped configuration 'gpt-5'; known: gemma-2-9b, ...
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

from lens_heads.core._errors import InputError, UnknownNameError

__all__ = ["CONFIG_ALIASES", "CONFIG_DIR", "hf_config", "model_config"]

#: where the configurations are shipped (package data)
CONFIG_DIR = Path(__file__).resolve().parents[1] / "data" / "model_configs"


def _aliases() -> tuple[str, ...]:
    return tuple(sorted(path.stem for path in CONFIG_DIR.glob("*.json")))


#: the aliases of the shipped configurations (models without weights here)
CONFIG_ALIASES: tuple[str, ...] = _aliases()


@cache
def _read(alias: str) -> dict[str, Any]:
    return json.loads((CONFIG_DIR / f"{alias}.json").read_text(encoding="utf-8"))


def model_config(alias: str) -> dict[str, Any]:
    """The shipped record of ``alias``: ``name``, ``hf_id``, ``papers``, ``source`` (where its
    values were checked and which were left out) and ``config`` (the ``config.json`` values)."""
    if alias not in CONFIG_ALIASES:
        raise UnknownNameError(
            f"no shipped configuration {alias!r}; known: {', '.join(CONFIG_ALIASES)}"
        )
    return copy.deepcopy(_read(alias))


def hf_config(spec: str | dict[str, Any] | Any) -> Any:
    """A ``transformers`` configuration from a shipped alias, a dict of ``config.json`` values
    (with ``model_type``), a folder or file holding a ``config.json``, or a configuration object
    (returned as a copy). Eager attention is set: the bridge computes attention itself."""
    from transformers import AutoConfig, PretrainedConfig

    if isinstance(spec, PretrainedConfig):
        config = copy.deepcopy(spec)
    else:
        if isinstance(spec, str) and spec in CONFIG_ALIASES:
            values = model_config(spec)["config"]
        elif isinstance(spec, dict):
            values = copy.deepcopy(spec)
        elif isinstance(spec, (str, Path)) and Path(spec).exists():
            path = Path(spec)
            path = path / "config.json" if path.is_dir() else path
            values = json.loads(path.read_text(encoding="utf-8"))
        else:
            raise UnknownNameError(
                f"{spec!r} is neither a shipped configuration ({', '.join(CONFIG_ALIASES)}), "
                "a dict of config.json values nor a config.json file or folder"
            )
        model_type = values.pop("model_type", None)
        if not model_type:
            raise InputError("a configuration needs its model_type (e.g. 'llama', 'qwen2')")
        config = AutoConfig.for_model(model_type, **values)
        if not getattr(config, "architectures", None):
            raise InputError(
                f"the {model_type} configuration names no architectures (e.g. "
                "['LlamaForCausalLM']); TransformerLens picks its adapter by that name"
            )
    config._attn_implementation = "eager"
    return config
