"""Weights-only readouts: what a head's OV circuit writes about a token, without a forward pass.

For query head ``h`` of layer ``l`` (key-value group ``g``) and a source token ``s``, the readout
is the vector ``e_s W_V[l, g] W_O[l, h]`` (``e_s`` the token's embedding row) passed through the
model's final norm and unembedding, restricted to the relation's candidate target tokens. A
relation is a list of (source, target) token pairs; a head's **relation score** is the share of
pairs whose target scores highest among the relation's distinct targets (**chance**: one over
the number of distinct targets). This is the MAPS idea (Elhelo & Geva, 2024: read a head's
function from ``E W_VO U``) with two choices written down: the final norm is applied to the OV
output (its per-row scale does not change a ranking; its weight does), and targets are ranked
among the relation's targets, not the whole vocabulary. No layer norm before the head is applied
(the head reads the residual stream through its own input norm, which a readout cannot know).

Built-in relations (:func:`builtin_relations`) come from the package's word tasks and ordinal
lists, each word with a leading space; a pair is kept only when both words are single tokens of
the model's tokenizer, and each relation reports how many pairs it kept.

>>> import lens_heads as lh
>>> model = lh.tiny_model(n_layers=2, n_heads=4)
>>> scores = relation_scores(model, {"copy": [(10, 10), (11, 11), (12, 12)]})
>>> tuple(scores["copy"].shape)
(2, 4)
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from itertools import pairwise

import torch
from jaxtyping import Float, Int
from torch import Tensor

from lens_heads.core import InputError, get_task, head_shape
from lens_heads.core.internal import ModelLike

__all__ = [
    "ORDINALS",
    "RELATION_TASKS",
    "Relation",
    "builtin_relations",
    "ov_readout",
    "relation_chance",
    "relation_scores",
    "single_token_pairs",
    "top_ov_tokens",
]

#: (source token id, target token id) pairs
Relation = Sequence[tuple[int, int]]

#: ordinal sequences whose successor relation the atlas reads (Gould et al., 2023)
ORDINALS: dict[str, list[str]] = {
    "numbers": [str(n) for n in range(1, 31)],
    "days": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"],
    "months": [
        "January", "February", "March", "April", "May", "June", "July", "August", "September",
        "October", "November", "December",
    ],
    "letters": list(string.ascii_uppercase),
}  # fmt: skip

#: relation -> the built-in word task whose (input, output) pairs it reads
RELATION_TASKS = {
    "capitalisation": "capitalize",
    "en→fr word": "english-french",
    "country→capital": "country-capital",
}


def single_token_pairs(model: ModelLike, pairs: Sequence[tuple[str, str]]) -> list[tuple[int, int]]:
    """The pairs whose source and target are each one token (written with a leading space)."""
    tokenizer = model.tokenizer
    kept = []
    for source, target in pairs:
        ids = [tokenizer.encode(" " + word, add_special_tokens=False) for word in (source, target)]
        if all(len(found) == 1 for found in ids):
            kept.append((ids[0][0], ids[1][0]))
    return kept


def builtin_relations(model: ModelLike) -> dict[str, list[tuple[int, int]]]:
    """Copying, successor, capitalisation, en→fr words and country→capital, as single-token
    pairs of ``model``'s tokenizer (a relation may keep no pair: its column is then empty)."""
    relations: dict[str, list[tuple[int, int]]] = {}
    words = get_task("capitalize").inputs
    relations["copying"] = single_token_pairs(model, [(w, w) for w in words])
    successor = [(a, b) for seq in ORDINALS.values() for a, b in pairwise(seq)]
    relations["successor"] = single_token_pairs(model, successor)
    for relation, task_name in RELATION_TASKS.items():
        task = get_task(task_name)
        relations[relation] = single_token_pairs(
            model, list(zip(task.inputs, task.outputs, strict=True))
        )
    return relations


def _query_to_group(model: ModelLike) -> list[int]:
    n_heads = int(model.cfg.n_heads)
    n_kv = int(getattr(model.cfg, "n_key_value_heads", None) or n_heads)
    return [h // (n_heads // n_kv) for h in range(n_heads)]


def _normed_ov(model: ModelLike, sources: Sequence[int], layer: int) -> Tensor:
    """``[n_heads, n_sources, d_model]``: each head's OV output of each source token's
    embedding, through the final norm."""
    embedded = model.W_E[torch.tensor(list(sources))].float()  # [source, d_model]
    values = torch.einsum("sd,gdk->gsk", embedded, model.W_V[layer].float())
    written = torch.einsum("hsk,hkd->hsd", values[_query_to_group(model)], model.W_O[layer].float())
    return model.ln_final(written.to(model.W_E.dtype)).float()


def _unembed(model: ModelLike, normed: Tensor, targets: Sequence[int] | None) -> Tensor:
    columns = torch.tensor(list(targets)) if targets is not None else slice(None)
    bias = getattr(model, "b_U", None)
    return normed @ model.W_U[:, columns].float() + (
        bias[columns].float() if bias is not None else 0.0
    )


def ov_readout(
    model: ModelLike, sources: Sequence[int], targets: Sequence[int]
) -> Float[Tensor, "n_layers n_heads n_sources n_targets"]:
    """Every head's OV readout of each source token, as logits of the ``targets``."""
    if not sources or not targets:
        raise InputError("a readout needs at least one source and one target token")
    n_layers, n_heads = head_shape(model)
    out = torch.empty(n_layers, n_heads, len(sources), len(targets))
    with torch.no_grad():
        for layer in range(n_layers):
            out[layer] = _unembed(model, _normed_ov(model, sources, layer), targets)
    return out


def top_ov_tokens(
    model: ModelLike, sources: Sequence[int], top: int = 8
) -> Int[Tensor, "n_layers n_heads top"]:
    """The vocabulary tokens each head's OV circuit promotes most, on average over the
    ``sources`` (the mean of the normed OV outputs, unembedded: linear after the norm)."""
    if not sources:
        raise InputError("top OV tokens need at least one source token")
    n_layers, n_heads = head_shape(model)
    found = torch.empty(n_layers, n_heads, min(top, int(model.cfg.d_vocab)), dtype=torch.long)
    with torch.no_grad():
        for layer in range(n_layers):
            mean = _normed_ov(model, sources, layer).mean(dim=1)  # [head, d_model]
            found[layer] = _unembed(model, mean, None).topk(found.shape[-1], dim=-1).indices
    return found


def relation_scores(
    model: ModelLike, relations: Mapping[str, Relation]
) -> dict[str, Float[Tensor, "n_layers n_heads"]]:
    """Each relation's score for every head: the share of its pairs whose target is the top
    readout among the relation's distinct targets (NaN for a relation without pairs)."""
    n_layers, n_heads = head_shape(model)
    found = {}
    for name, pairs in relations.items():
        if not pairs:
            found[name] = torch.full((n_layers, n_heads), float("nan"))
            continue
        sources = [s for s, _ in pairs]
        targets = sorted({t for _, t in pairs})
        column = torch.tensor([targets.index(t) for _, t in pairs])
        logits = ov_readout(model, sources, targets)  # [L, H, pair, target]
        top = logits.argmax(dim=-1)  # [L, H, pair]
        found[name] = (top == column).float().mean(dim=-1)
    return found


def relation_chance(relations: Mapping[str, Relation]) -> dict[str, float]:
    """A relation's chance score: one over its number of distinct targets."""
    return {
        name: 1.0 / len({t for _, t in pairs}) if pairs else float("nan")
        for name, pairs in relations.items()
    }
