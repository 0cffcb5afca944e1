"""Attention-pattern detectors on generated inputs: previous-token, duplicate-token, induction
and first-token-sink heads, each with the score a head gets by chance.

Inputs are ``n_sequences`` sequences of a BOS token followed by a block ``R`` of ``length``
random non-special tokens and the same block again (``BOS R R``). For one sequence the score of
a head against a 0/1 detection pattern ``P`` (query × key, lower triangular) is the share of its
attention that falls on ``P``: ``sum(A * P) / sum(A)`` -- TransformerLens' ``detect_head`` with
``error_measure="mul"``, so that on one sequence the two agree exactly. The atlas reports the
mean over sequences.

* **previous token**: ``P[i, i-1] = 1``.
* **duplicate token**: ``P[i, j] = 1`` when ``j < i`` holds the same token as ``i``.
* **induction**: ``P[i, j] = 1`` when ``j - 1 < i - 1`` holds the same token as ``i`` (attend to
  the token after the earlier occurrence).
* **first-token sink**: the share of attention on position 0 (``P[i, 0] = 1``).

The **chance** score of a detector is that of a head attending uniformly to every position it
can see (``A[i, j] = 1 / (i + 1)``), on the same sequences.

>>> import lens_heads as lh
>>> model = lh.tiny_model(n_layers=2, n_heads=4)
>>> found = detect_patterns(model, DetectorConfig(n_sequences=4, length=6))
>>> sorted(found), tuple(found["induction"].shape)
(['duplicate token', 'first-token sink', 'induction', 'previous token'], (2, 4))
>>> 0 < chance_scores(model, DetectorConfig(n_sequences=4, length=6))["previous token"] < 1
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from lens_heads.core import InputError, configure, head_shape
from lens_heads.core.internal import (
    BatchSetting,
    ModelLike,
    SeedSetting,
    SharedPart,
    capture,
    check_int,
    own_checks,
)

__all__ = [
    "DETECTORS",
    "DetectorConfig",
    "RandomBlockSetting",
    "chance_scores",
    "detect_patterns",
    "detection_patterns",
    "repeated_half_loss",
    "repeated_random_tokens",
]

DETECTORS = ("previous token", "duplicate token", "induction", "first-token sink")


@own_checks
@dataclass(frozen=True, kw_only=True)
class RandomBlockSetting(SharedPart):
    """The part of a settings class that generates the detectors' inputs: ``n_sequences``
    sequences ``BOS R R``, ``R`` a block of ``length`` random ordinary tokens.

    >>> RandomBlockSetting(length=1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lens_heads.core._errors.InputError: length must be at least 2, got 1
    """

    n_sequences: int = 32
    """Generated sequences ``BOS R R`` of the pattern detectors."""
    length: int = 24
    """Random tokens in the block ``R`` (each sequence repeats it once)."""

    def __post_init__(self) -> None:
        why = "each is a forward pass over the generated sequences"
        check_int("n_sequences", self.n_sequences, minimum=1, maximum=10_000, why=why)
        check_int("length", self.length, minimum=2)
        super().__post_init__()


@own_checks
@dataclass(frozen=True, kw_only=True)
class DetectorConfig(RandomBlockSetting, SeedSetting, BatchSetting):
    """The generated inputs of the detectors: ``n_sequences`` sequences ``BOS R R`` with ``R`` a
    block of ``length`` random non-special tokens (seeded by ``seed``), run ``batch_size`` at a
    time."""


def _ordinary_token_ids(model: ModelLike) -> Tensor:
    tokenizer = model.tokenizer
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    vocab = int(model.cfg.d_vocab)
    ids = torch.tensor([i for i in range(vocab) if i not in special], dtype=torch.long)
    if len(ids) < 2:
        raise InputError(f"the tokenizer has {len(ids)} ordinary tokens; the detectors need two")
    return ids


def _bos_id(model: ModelLike) -> int:
    tokenizer = model.tokenizer
    found = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    if found is None:
        raise InputError("the tokenizer has neither a BOS nor an EOS token to start the sequences")
    return int(found)


def repeated_random_tokens(model: ModelLike, config: DetectorConfig) -> Tensor:
    """``[n_sequences, 1 + 2 * length]`` token ids: BOS, a random block, the same block."""
    check_context = int(model.cfg.n_ctx)
    if 1 + 2 * config.length > check_context:
        raise InputError(
            f"sequences of 1 + 2 x {config.length} tokens exceed the model's context of "
            f"{check_context}; use a smaller length"
        )
    ids = _ordinary_token_ids(model)
    generator = torch.Generator().manual_seed(config.seed)
    block = ids[torch.randint(len(ids), (config.n_sequences, config.length), generator=generator)]
    bos = torch.full((config.n_sequences, 1), _bos_id(model), dtype=torch.long)
    return torch.cat([bos, block, block], dim=1)


def detection_patterns(tokens: Tensor) -> dict[str, Float[Tensor, "batch query key"]]:
    """Each detector's 0/1 pattern for every sequence of ``tokens`` ``[batch, pos]``."""
    batch, length = tokens.shape
    below = torch.ones(length, length).tril(-1).bool()
    previous = torch.zeros(length, length)
    previous[1:, :-1] = torch.eye(length - 1)
    same = (tokens[:, :, None] == tokens[:, None, :]) & below
    induction = torch.zeros(batch, length, length, dtype=torch.bool)
    induction[:, :, 1:] = same[:, :, :-1]  # the token after an earlier occurrence
    induction &= below
    sink = torch.zeros(length, length)
    sink[1:, 0] = 1.0
    return {
        "previous token": previous.expand(batch, -1, -1),
        "duplicate token": same.float(),
        "induction": induction.float(),
        "first-token sink": sink.expand(batch, -1, -1),
    }


def _score(pattern: Tensor, attention: Tensor) -> Tensor:
    """``sum(A * P) / sum(A)`` per sequence and head: attention ``[batch, head, q, k]``."""
    return (attention * pattern[:, None]).sum(dim=(-1, -2)) / attention.sum(dim=(-1, -2))


def detect_patterns(
    model: ModelLike, config: DetectorConfig | None = None, **overrides: Any
) -> dict[str, Float[Tensor, "n_layers n_heads"]]:
    """Each detector's score for every query head: the mean over the generated sequences
    (``config``'s fields also as keywords, ``n_sequences=8``)."""
    config = configure(DetectorConfig, config, overrides, "detect_patterns")
    tokens = repeated_random_tokens(model, config)
    patterns = detection_patterns(tokens)
    n_layers, _ = head_shape(model)

    def reducer(layer: int) -> Callable[..., Tensor]:
        def reduce(attention: Tensor, rows: Tensor, cols: Tensor, indices: Sequence[int]) -> Tensor:
            found = [_score(patterns[name][indices], attention.float()) for name in DETECTORS]
            return torch.stack(found, dim=1)  # [batch, detector, head]

        return reduce

    reducers = {f"blocks.{layer}.attn.hook_pattern": reducer(layer) for layer in range(n_layers)}
    found = capture(
        model,
        tokens.tolist(),
        [tokens.shape[1] - 1] * len(tokens),
        reducers,
        batch_size=config.batch_size,
    )
    stacked = torch.stack([found[name].mean(dim=0) for name in reducers])  # [layer, det, head]
    return {name: stacked[:, d] for d, name in enumerate(DETECTORS)}


def chance_scores(
    model: ModelLike, config: DetectorConfig | None = None, **overrides: Any
) -> dict[str, float]:
    """Each detector's score for a head that attends uniformly to what it can see."""
    config = configure(DetectorConfig, config, overrides, "chance_scores")
    tokens = repeated_random_tokens(model, config)
    length = tokens.shape[1]
    uniform = torch.ones(length, length).tril() / torch.arange(1, length + 1)[:, None]
    uniform = uniform.expand(len(tokens), 1, length, length)
    return {
        name: float(_score(pattern, uniform).mean())
        for name, pattern in detection_patterns(tokens).items()
    }


def repeated_half_loss(
    model: ModelLike, config: DetectorConfig | None = None, mask: Any = None, **overrides: Any
) -> Float[Tensor, " n_sequences"]:
    """Each sequence's mean next-token loss over its repeated half (predicting the second ``R``
    from the first), under ``mask`` (a :class:`~lens_heads.HeadMask` or tensor) when given:
    what induction heads lower, so removing them should raise it."""
    from lens_heads.core.internal import maybe_mask

    config = configure(DetectorConfig, config, overrides, "repeated_half_loss")
    tokens = repeated_random_tokens(model, config)
    start = 1 + config.length  # the first position of the repeated block
    losses = []
    with torch.no_grad(), maybe_mask(model, mask):
        for first in range(0, len(tokens), config.batch_size):
            batch = tokens[first : first + config.batch_size].to(model.cfg.device)
            logits = model(batch).float()
            # position t predicts token t + 1: the repeated block's tokens from start on
            predicted = logits[:, start - 1 : -1].log_softmax(dim=-1)
            target = batch[:, start:]
            loss = -predicted.gather(-1, target[..., None])[..., 0].mean(dim=-1)
            losses.append(loss.cpu())
    return torch.cat(losses)
