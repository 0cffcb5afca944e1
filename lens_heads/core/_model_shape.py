"""A model's shape before its weights load: layers, heads, vocabulary and context -- and, where the
configuration gives them, the widths, KV heads and tied embeddings that memory and time plans
need (:func:`lens_heads.plan`) -- read from an alias's known shape, a shipped configuration
(:mod:`lens_heads.core._model_configs`) or a checkpoint's ``config.json``, so that head lists,
masks and ``top_k`` are checked before minutes of loading. :class:`ModelShape` answers
``cfg.n_layers`` (...) like a model, so the checks that take a model take it too.

>>> import tempfile, lens_heads as lh
>>> model_shape("smollm2-135m-instruct")  # doctest: +SKIP
ModelShape(name='smollm2-135m-instruct', n_layers=30, n_heads=9, d_vocab=49152, n_ctx=8192, ...)
>>> shape = model_shape("llama-3.1-8b-instruct")
>>> shape.n_layers * shape.n_heads, shape.n_kv_heads, round(shape.n_params / 1e9, 2)
(1024, 8, 8.03)
>>> folder = tempfile.mkdtemp()
>>> _ = (Path(folder) / "config.json").write_text('{"num_hidden_layers": 2, '
...     '"num_attention_heads": 4, "vocab_size": 261, "max_position_embeddings": 64}')
>>> shape = model_shape(folder)
>>> lh.HeadMask.ones(3, 4).check_model(shape)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
lens_heads.core._masks.MaskShapeError: mask has shape (3, 4) (layers, heads) but model ... has 2 ...
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lens_heads.core._model_specs import MODEL_ALIASES, spec_kind

__all__ = [
    "ALIAS_SHAPES",
    "ModelShape",
    "TokenizerOnly",
    "load_tokenizer",
    "model_shape",
    "shape_of_model",
]


@dataclass(frozen=True)
class ModelShape:
    """What the checks and the plans need of a model, known before its weights load (the widths
    are None where the source does not give them)."""

    name: str
    n_layers: int
    n_heads: int
    d_vocab: int | None = None
    n_ctx: int | None = None
    device: str = "cpu"
    d_model: int | None = None
    d_mlp: int | None = None
    n_kv_heads: int | None = None
    d_head: int | None = None
    tied: bool | None = None
    model_type: str | None = None
    qkv_bias: bool = False

    @property
    def cfg(self) -> ModelShape:  # duck-types ``model.cfg``
        return self

    @property
    def lens_heads_name(self) -> str:  # what load_model names the model
        return self.name

    @property
    def model_name(self) -> str:
        return self.name

    @property
    def complete(self) -> bool:
        """Whether every width a plan needs is known."""
        return None not in (self.d_vocab, self.d_model, self.d_mlp, self.n_kv_heads, self.d_head)

    # -- parameter counts (a gated MLP, RMS norms: every family of the papers) ----------------
    @property
    def attention_params(self) -> int:
        """Parameters of one layer's q, k, v and o projections (with Qwen's qkv bias)."""
        q, kv = self.n_heads * self._d_head, self._kv * self._d_head
        bias = q + 2 * kv if self.qkv_bias else 0
        return self._d_model * (2 * q + 2 * kv) + bias

    @property
    def mlp_params(self) -> int:
        """Parameters of one layer's gated MLP (gate, up and down projections)."""
        return 3 * self._d_model * self._known(self.d_mlp, "d_mlp")

    @property
    def norm_params(self) -> int:
        """Parameters of one layer's norms (Gemma has four per layer, the others two; Gemma 3 and
        Qwen 3 add a q and a k norm)."""
        norms = 4 if (self.model_type or "").startswith("gemma") else 2
        qk = 2 * self._d_head if self.model_type in ("gemma3_text", "gemma3", "qwen3") else 0
        return norms * self._d_model + qk

    @property
    def embedding_params(self) -> int:
        return self._known(self.d_vocab, "d_vocab") * self._d_model

    @property
    def n_params(self) -> int:
        """Every parameter: embeddings (once when tied), layers and the final norm."""
        layer = self.attention_params + self.mlp_params + self.norm_params
        unembed = 0 if self.tied else self.embedding_params
        return self.embedding_params + unembed + self.n_layers * layer + self._d_model

    @property
    def _d_model(self) -> int:
        return self._known(self.d_model, "d_model")

    @property
    def _d_head(self) -> int:
        return self._known(self.d_head, "d_head")

    @property
    def _kv(self) -> int:
        return self._known(self.n_kv_heads, "n_kv_heads")

    def _known(self, value: int | None, what: str) -> int:
        if value is None:
            from lens_heads.core._errors import InputError

            raise InputError(
                f"the shape of {self.name} gives no {what}; give a checkpoint folder with a "
                "complete config.json or a shipped configuration"
            )
        return value

    @classmethod
    def from_config(cls, name: str, config: dict[str, Any]) -> ModelShape | None:
        """The shape a ``config.json`` dict gives (its ``text_config`` for multimodal ones);
        None without layers and heads."""
        if isinstance(config.get("text_config"), dict):
            config = config["text_config"]
        n_layers = _first(config, "num_hidden_layers", "n_layer", "num_layers")
        n_heads = _first(config, "num_attention_heads", "n_head")
        if n_layers is None or n_heads is None:
            return None
        d_model = _first(config, "hidden_size", "n_embd", "d_model")
        d_head = _first(config, "head_dim")
        if d_head is None and d_model is not None:
            d_head = d_model // n_heads
        model_type = config.get("model_type")
        return cls(
            name,
            n_layers,
            n_heads,
            d_vocab=_first(config, "vocab_size"),
            n_ctx=_first(config, "max_position_embeddings", "n_positions"),
            d_model=d_model,
            d_mlp=_first(config, "intermediate_size", "n_inner"),
            n_kv_heads=_first(config, "num_key_value_heads") or n_heads,
            d_head=d_head,
            tied=bool(config.get("tie_word_embeddings", True)),
            model_type=model_type if isinstance(model_type, str) else None,
            qkv_bias=model_type == "qwen2" or bool(config.get("attention_bias", False)),
        )


#: the offline aliases' shapes (their config.json): layers, heads, vocabulary, context, width,
#: MLP width, KV heads, head width, tied embeddings, model type
ALIAS_SHAPES = {
    "smollm2-135m-instruct": (30, 9, 49152, 8192, 576, 1536, 3, 64, True, "llama"),
    "gemma-3-270m": (18, 4, 262144, 32768, 640, 2048, 1, 256, True, "gemma3_text"),
}


def _first(config: dict[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def model_shape(spec: str | os.PathLike[str]) -> ModelShape | None:
    """The shape of the model ``spec`` names, without loading it: an alias's known shape, a
    shipped configuration's, a checkpoint directory's ``config.json``; None where only loading
    tells (a .gguf file, a hub id). A spec that names nothing loadable is an error here already
    (:func:`spec_kind`)."""
    kind = spec_kind(spec)
    name = os.fspath(spec)
    if kind == "alias":
        values = ALIAS_SHAPES[name]
        d_vocab, n_ctx, d_model, d_mlp, n_kv, d_head, tied, model_type = values[2:]
        return ModelShape(
            name, values[0], values[1], d_vocab, n_ctx, d_model=d_model, d_mlp=d_mlp,
            n_kv_heads=n_kv, d_head=d_head, tied=tied, model_type=model_type,
        )  # fmt: skip
    if kind == "config":
        from lens_heads.core._model_configs import model_config

        return ModelShape.from_config(name, model_config(name)["config"])
    if kind != "directory":
        return None
    try:
        config = json.loads((Path(name).expanduser() / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # loading says what is wrong with it
    if not isinstance(config, dict):
        return None
    return ModelShape.from_config(name, config)


def shape_of_model(model: Any) -> ModelShape:
    """The shape of a loaded model (a ``TransformerBridge`` or ``HookedTransformer``), read from
    its ``cfg`` and, where it has one, its Hugging Face configuration."""
    hf_config = getattr(getattr(model, "original_model", None), "config", None)
    if hf_config is not None:
        found = ModelShape.from_config(
            str(getattr(model, "lens_heads_name", None) or model.cfg.model_name),
            hf_config.to_dict(),
        )
        if found is not None:
            return found
    cfg = model.cfg
    return ModelShape(
        str(getattr(model, "lens_heads_name", None) or cfg.model_name),
        int(cfg.n_layers),
        int(cfg.n_heads),
        d_vocab=int(cfg.d_vocab),
        n_ctx=int(cfg.n_ctx),
        d_model=int(cfg.d_model),
        d_mlp=int(cfg.d_mlp),
        n_kv_heads=int(getattr(cfg, "n_key_value_heads", None) or cfg.n_heads),
        d_head=int(cfg.d_head),
        tied=None,
    )


def load_tokenizer(spec: str | os.PathLike[str]) -> Any:
    """The tokenizer :func:`~lens_heads.core.load_model` gives the model of ``spec`` (the
    checkpoint's own, its pad token filled in), without loading any weights: an alias reads its
    cached checkpoint's tokenizer files, or its GGUF's metadata before its first load.

    >>> load_tokenizer("smollm2-135m-instruct")("apple").input_ids  # doctest: +SKIP
    [22154]
    """
    from transformers import AutoTokenizer

    from lens_heads.core._models import _cached_model_dir

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
    where only prompts are encoded (:func:`lens_heads.core._capture.encode_prompt`), e.g. to count
    tokens before loading; anything that would run the model is an error."""

    tokenizer: Any
    cfg: Any = None

    def _runs(self, *args: Any, **kwargs: Any) -> Any:
        from lens_heads.core._errors import ComputationError

        raise ComputationError("a TokenizerOnly stand-in has no weights: load the model to run it")

    run_with_hooks = run_with_cache = hooks = generate = to_tokens = _runs
