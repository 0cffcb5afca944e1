"""What is known of a model before its weights load: its shape (layers, heads, vocabulary and
context, read from an alias's known shape or a checkpoint's ``config.json``) and its tokenizer,
so that head lists, masks, ``top_k`` and token counts are checked before minutes of loading.
:class:`ModelShape` answers ``cfg.n_layers`` (...) like a model, so the checks that take a model
take it too.

>>> import tempfile, lens_heads as lh
>>> model_shape("smollm2-135m-instruct")  # doctest: +SKIP
ModelShape(name='smollm2-135m-instruct', n_layers=30, n_heads=9, d_vocab=49152, n_ctx=8192)
>>> folder = tempfile.mkdtemp()
>>> _ = (Path(folder) / "config.json").write_text('{"num_hidden_layers": 2, '
...     '"num_attention_heads": 4, "vocab_size": 261, "max_position_embeddings": 64}')
>>> shape = model_shape(folder)
>>> lh.HeadMask.ones(3, 4).check_model(shape)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
lens_heads.core.masks.MaskShapeError: mask has shape (3, 4) (layers, heads) but model ... has 2 ...
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lens_heads.core.models import MODEL_ALIASES, spec_kind

__all__ = ["ALIAS_SHAPES", "ModelShape", "TokenizerOnly", "load_tokenizer", "model_shape"]


@dataclass(frozen=True)
class ModelShape:
    """What the checks need of a model, known before its weights load."""

    name: str
    n_layers: int
    n_heads: int
    d_vocab: int | None = None
    n_ctx: int | None = None
    device: str = "cpu"

    @property
    def cfg(self) -> ModelShape:  # duck-types ``model.cfg``
        return self

    @property
    def lens_heads_name(self) -> str:  # what load_model names the model
        return self.name

    @property
    def model_name(self) -> str:
        return self.name


#: the offline aliases' shapes (their config.json; a unit test keeps the keys in step)
ALIAS_SHAPES = {
    "smollm2-135m-instruct": (30, 9, 49152, 8192),
    "gemma-3-270m": (18, 4, 262144, 32768),
}


def _first(config: dict[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def model_shape(spec: str | os.PathLike[str]) -> ModelShape | None:
    """The shape of the model ``spec`` names, without loading it: an alias's known shape, a
    checkpoint directory's ``config.json``; None where only loading tells (a .gguf file, a hub
    id). A spec that names nothing loadable is an error here already (:func:`spec_kind`)."""
    kind = spec_kind(spec)
    name = os.fspath(spec)
    if kind == "alias":
        n_layers, n_heads, d_vocab, n_ctx = ALIAS_SHAPES[name]
        return ModelShape(name, n_layers, n_heads, d_vocab, n_ctx)
    if kind != "directory":
        return None
    try:
        config = json.loads((Path(name).expanduser() / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # loading says what is wrong with it
    if not isinstance(config, dict):
        return None
    config = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    n_layers = _first(config, "num_hidden_layers", "n_layer", "num_layers")
    n_heads = _first(config, "num_attention_heads", "n_head")
    if n_layers is None or n_heads is None:
        return None
    d_vocab = _first(config, "vocab_size")
    n_ctx = _first(config, "max_position_embeddings", "n_positions")
    return ModelShape(name, n_layers, n_heads, d_vocab, n_ctx)


def load_tokenizer(spec: str | os.PathLike[str]) -> Any:
    """The tokenizer :func:`~lens_heads.core.models.load_model` gives the model of ``spec`` (the
    checkpoint's own, its pad token filled in), without loading any weights: an alias reads its
    cached checkpoint's tokenizer files, or its GGUF's metadata before its first load.

    >>> load_tokenizer("smollm2-135m-instruct")("apple").input_ids  # doctest: +SKIP
    [22154]
    """
    from transformers import AutoTokenizer

    from lens_heads.core.models import _cached_model_dir

    kind = spec_kind(spec)
    name = os.fspath(spec)
    gguf = Path(name).expanduser() if kind == "gguf" else None
    if kind == "alias":
        source = MODEL_ALIASES[name]
        cached = _cached_model_dir(source.sha256())
        gguf = None if (cached / "lens_heads.json").is_file() else source.locate()
        name = str(cached)
    if gguf is not None:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    else:
        tokenizer = AutoTokenizer.from_pretrained(name)
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


@dataclass(frozen=True)
class TokenizerOnly:
    """A model's tokenizer (and shape, ``cfg``) without its weights: it stands in for the model
    where only prompts are encoded (:func:`lens_heads.core.capture.encode_prompt`), e.g. to count
    tokens before loading; anything that would run the model is an error."""

    tokenizer: Any
    cfg: Any = None

    def _runs(self, *args: Any, **kwargs: Any) -> Any:
        from lens_heads.core.errors import ComputationError

        raise ComputationError("a TokenizerOnly stand-in has no weights: load the model to run it")

    run_with_hooks = run_with_cache = hooks = generate = to_tokens = _runs
