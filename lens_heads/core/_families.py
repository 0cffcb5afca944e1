"""Tiny random checkpoints of the model families the papers use, built offline.

Each :class:`Family` describes one architecture as its papers' models have it -- grouped-query
attention with 4 query heads over 2 key-value heads, Qwen2's qkv bias, Phi-3's fused qkv,
Gemma 2's soft-capping and sliding window, Cohere's parallel block, mixture-of-experts routing --
and the conventions of its tokenizer (whether it adds a BOS token, its chat template, its
end-of-turn token). :func:`tiny_checkpoint` writes a random model of the family with a small
byte-level tokenizer into a folder that ``transformers`` and :func:`lens_heads.load_model` load
like any downloaded checkpoint, so the compatibility matrix (``docs/compatibility.md``) needs no
network and no GPU.

>>> import tempfile
>>> from transformers import AutoTokenizer
>>> folder = tiny_checkpoint("qwen2", tempfile.mkdtemp())
>>> tokenizer = AutoTokenizer.from_pretrained(folder)
>>> tokenizer.decode(tokenizer("hi").input_ids)  # Qwen's tokenizer adds no BOS
'hi'
>>> tokenizer = AutoTokenizer.from_pretrained(tiny_checkpoint("llama", tempfile.mkdtemp()))
>>> tokenizer.decode(tokenizer("hi").input_ids)  # Llama 3's does
'<|begin_of_text|>hi'
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from lens_heads.core._errors import UnknownNameError

__all__ = ["FAMILIES", "Family", "family", "tiny_checkpoint", "tiny_tokenizer"]

_CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_LLAMA3 = (
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>"
    "\n\n{{ m['content'] }}<|eot_id|>{% endfor %}{% if add_generation_prompt %}"
    "<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)
_MISTRAL = (
    "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}[INST] {{ m['content'] }}"
    " [/INST]{% else %}{{ m['content'] }}{{ eos_token }}{% endif %}{% endfor %}"
)
_PHI3 = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% else %}{{ eos_token }}{% endif %}"
)
_GEMMA = (
    "{{ bos_token }}{% for m in messages %}<start_of_turn>"
    "{{ 'model' if m['role'] == 'assistant' else m['role'] }}\n{{ m['content'] }}<end_of_turn>\n"
    "{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)
_COHERE = (
    "{{ bos_token }}{% for m in messages %}<|START_OF_TURN_TOKEN|>"
    "{{ '<|USER_TOKEN|>' if m['role'] == 'user' else '<|CHATBOT_TOKEN|>' }}{{ m['content'] }}"
    "<|END_OF_TURN_TOKEN|>{% endfor %}{% if add_generation_prompt %}"
    "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>{% endif %}"
)


@dataclass(frozen=True)
class Family:
    """One architecture family: its config class, the papers' models of it, what is peculiar
    about it, and its tokenizer's conventions.

    ``config`` overrides the config class's defaults (beyond the shared tiny shape); ``bos``,
    ``eos``, ``pad`` (None: the checkpoint has no pad token) and ``specials`` are the tokenizer's
    special tokens, ``adds_bos`` whether it puts BOS before every text, ``stops`` the tokens the
    checkpoint's generation config stops at (besides ``eos``).
    """

    key: str
    name: str
    config_class: str
    model_class: str
    papers: str
    peculiarity: str
    bos: str | None
    eos: str
    pad: str | None
    adds_bos: bool
    chat_template: str | None
    specials: tuple[str, ...] = ()
    stops: tuple[str, ...] = ()
    config: dict[str, Any] = field(default_factory=dict)
    attention: str = "sdpa"


FAMILIES: tuple[Family, ...] = (
    Family(
        "llama", "Llama", "LlamaConfig", "LlamaForCausalLM", "Llama 3.1/3.2",
        "grouped-query attention", "<|begin_of_text|>", "<|eot_id|>", None, True, _LLAMA3,
        ("<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>"), ("<|end_of_text|>",),
    ),
    Family(
        "qwen2", "Qwen2", "Qwen2Config", "Qwen2ForCausalLM", "Qwen2.5 0.5B-14B",
        "bias on q, k and v; no BOS token", None, "<|im_end|>", "<|endoftext|>", False, _CHATML,
        ("<|im_start|>",), ("<|endoftext|>",),
    ),
    Family(
        "qwen3", "Qwen3", "Qwen3Config", "Qwen3ForCausalLM", "Qwen3 (dense)",
        "RMS norm on each head's q and k", None, "<|im_end|>", "<|endoftext|>", False, _CHATML,
        ("<|im_start|>",), ("<|endoftext|>",),
    ),
    Family(
        "qwen3_moe", "Qwen3-MoE", "Qwen3MoeConfig", "Qwen3MoeForCausalLM", "Qwen3 MoE",
        "mixture of experts (4 experts, top 2), q/k norm", None, "<|im_end|>", "<|endoftext|>",
        False, _CHATML, ("<|im_start|>",), ("<|endoftext|>",),
        {"num_experts": 4, "num_local_experts": 4, "num_experts_per_tok": 2,
         "moe_intermediate_size": 32, "norm_topk_prob": True},
    ),
    Family(
        "mistral", "Mistral", "MistralConfig", "MistralForCausalLM", "Mistral 7B",
        "sliding-window attention (window 6)", "<s>", "</s>", None, True, _MISTRAL,
        config={"sliding_window": 6},
    ),
    Family(
        "mixtral", "Mixtral", "MixtralConfig", "MixtralForCausalLM", "Mixtral 8x7B",
        "mixture of experts (4 experts, top 2)", "<s>", "</s>", None, True, _MISTRAL,
        config={"num_local_experts": 4, "num_experts_per_tok": 2},
    ),
    Family(
        "phi3", "Phi-3", "Phi3Config", "Phi3ForCausalLM", "Phi-3.5-mini",
        "fused qkv and gate-up projections; stops at `<|end|>`", "<s>", "<|endoftext|>",
        "<|endoftext|>", False, _PHI3, ("<|user|>", "<|assistant|>", "<|end|>"),
        ("<|end|>", "<|assistant|>"),
    ),
    Family(
        "phimoe", "Phi-3.5-MoE", "PhimoeConfig", "PhimoeForCausalLM", "Phi-3.5-MoE",
        "mixture of experts (4 experts, top 2) with sparse-mixer routing", "<s>",
        "<|endoftext|>", "<|endoftext|>", False, _PHI3, ("<|user|>", "<|assistant|>", "<|end|>"),
        ("<|end|>", "<|assistant|>"), {"num_local_experts": 4, "num_experts_per_tok": 2},
    ),
    Family(
        "gemma2", "Gemma 2", "Gemma2Config", "Gemma2ForCausalLM", "Gemma 2 2B/9B",
        "attention and logit soft-capping; sliding window (6) on alternate layers", "<bos>",
        "<eos>", "<pad>", True, _GEMMA, ("<start_of_turn>", "<end_of_turn>"), ("<end_of_turn>",),
        {"attn_logit_softcapping": 2.0, "final_logit_softcapping": 3.0, "sliding_window": 6,
         "query_pre_attn_scalar": 8, "layer_types": ["sliding_attention", "full_attention"]},
        "eager",  # transformers refuses SDPA for Gemma 2 (soft-capping)
    ),
    Family(
        "gemma3", "Gemma 3", "Gemma3TextConfig", "Gemma3ForCausalLM", "Gemma 3 270M",
        "q/k norm; sliding window (6) with local rope", "<bos>", "<eos>", "<pad>", True, _GEMMA,
        ("<start_of_turn>", "<end_of_turn>"), ("<end_of_turn>",),
        {"sliding_window": 6, "query_pre_attn_scalar": 8,
         "layer_types": ["sliding_attention", "full_attention"]},
    ),
    Family(
        "cohere", "Cohere", "CohereConfig", "CohereForCausalLM", "Aya-23",
        "parallel attention and MLP; interleaved rope; logit scale", "<BOS_TOKEN>",
        "<|END_OF_TURN_TOKEN|>", "<PAD>", True, _COHERE,
        ("<|START_OF_TURN_TOKEN|>", "<|USER_TOKEN|>", "<|CHATBOT_TOKEN|>", "<EOS_TOKEN>"),
        ("<EOS_TOKEN>",),
    ),
)  # fmt: skip


def family(key: str) -> Family:
    """The family of a key (``"llama"``, ``"qwen3_moe"``, ...), or a clear error."""
    for candidate in FAMILIES:
        if candidate.key == key:
            return candidate
    known = ", ".join(f.key for f in FAMILIES)
    raise UnknownNameError(f"unknown model family {key!r}; known: {known}")


def tiny_tokenizer(spec: Family) -> Any:
    """A byte-level tokenizer (every byte a token) with the family's special tokens, BOS rule
    and chat template, built offline."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    named = [token for token in (spec.pad, spec.bos, spec.eos) if token is not None]
    specials = list(dict.fromkeys(named + list(spec.specials) + list(spec.stops)))
    vocab = {token: index for index, token in enumerate(specials)}
    for character in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[character] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    extra = [token for token in specials if token not in named]
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=spec.bos,
        eos_token=spec.eos,
        pad_token=spec.pad,
        additional_special_tokens=extra,
        add_bos_token=spec.adds_bos,
        model_max_length=256,
    )
    tokenizer.chat_template = spec.chat_template
    return tokenizer


def _config(spec: Family, tokenizer: Any, n_layers: int) -> Any:
    import transformers

    vocab = tokenizer.get_vocab()
    stops = [vocab[token] for token in (spec.eos, *spec.stops)]
    values: dict[str, Any] = dict(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=n_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=256,
        initializer_range=0.2,
        bos_token_id=None if spec.bos is None else vocab[spec.bos],
        eos_token_id=stops if len(stops) > 1 else stops[0],
        pad_token_id=None if spec.pad is None else vocab[spec.pad],
    )
    if spec.key == "qwen3_moe":
        values["mlp_only_layers"] = []
    values.update(spec.config)
    config = getattr(transformers, spec.config_class)(**values)
    config.architectures = [spec.model_class]
    return config


def tiny_checkpoint(
    key: str,
    folder: str | os.PathLike[str],
    *,
    n_layers: int = 2,
    seed: int = 0,
    attn_implementation: str | None = None,
) -> Path:
    """Write a tiny random checkpoint of family ``key`` (model, generation config, tokenizer
    with its chat template) into ``folder`` and return the folder.

    ``attn_implementation`` is what the checkpoint's ``config.json`` asks for (default: the
    family's -- ``"sdpa"``, the default of ``transformers``, except Gemma 2, which only runs
    eager; ``"flash_attention_2"`` makes a checkpoint that ``transformers`` cannot load as it
    asks on a machine without flash-attn); the loader must give attention patterns either way.
    """
    import transformers

    spec = family(key)
    tokenizer = tiny_tokenizer(spec)
    config = _config(spec, tokenizer, n_layers)
    config._attn_implementation = "eager"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = getattr(transformers, spec.model_class)(config)
    folder = Path(folder)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    saved = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    saved["attn_implementation"] = attn_implementation or spec.attention
    (folder / "config.json").write_text(json.dumps(saved, indent=2), encoding="utf-8")
    return folder


# -- the tiny Llama-style model of lh.tiny_model ---------------------------------------------------
def _byte_tokenizer() -> Any:
    """A byte-level tokenizer built offline, with a ChatML chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
    vocab = {token: index for index, token in enumerate(specials)}
    for character in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[character] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<s>",
        eos_token="<|im_end|>",
        pad_token="<pad>",
        additional_special_tokens=["</s>", "<|im_start|>"],
    )
    tokenizer.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    tokenizer.init_kwargs["name_or_path"] = "lens-heads-tiny"
    tokenizer.init_kwargs["add_bos_token"] = True
    return tokenizer


def _tiny_hf_model(
    n_layers: int,
    n_heads: int,
    n_kv_heads: int | None,
    d_head: int,
    d_mlp: int | None,
    n_ctx: int,
    seed: int,
) -> tuple[Any, Any]:
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = _byte_tokenizer()
    d_model = n_heads * d_head
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=d_model,
        intermediate_size=d_mlp or 2 * d_model,
        num_hidden_layers=n_layers,
        num_attention_heads=n_heads,
        num_key_value_heads=n_kv_heads or n_heads,
        head_dim=d_head,
        max_position_embeddings=n_ctx,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
    )
    config.architectures = ["LlamaForCausalLM"]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        hf_model = LlamaForCausalLM(config)
    return hf_model.eval(), tokenizer
