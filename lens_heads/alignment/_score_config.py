"""The settings of translation scores (:func:`lens_heads.translation_scores`): the four open
choices of the method, the prompts and the batching -- one object, validated once.

>>> ScoreConfig(query="predicting", n_eval=8).query
'predicting'
>>> ScoreConfig(average="mean")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
lens_heads.core._errors.InputError: average must be one of per_sentence, pooled, got 'mean'
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from lens_heads.core import InputError
from lens_heads.core.internal import (
    BatchSetting,
    ChatSetting,
    HeldOutSetting,
    NewTokensSetting,
    ProgressSetting,
    ShotSeedSetting,
    ShotsSetting,
    own_checks,
)

__all__ = ["CHOICES", "ScoreConfig"]

#: the open choices of the translation score, each with its values (the first is the default)
CHOICES: dict[str, tuple[str, ...]] = {
    "decoding": ("teacher_forced", "greedy"),
    "query": ("token", "predicting"),
    "argmax_over": ("sequence", "source"),
    "average": ("per_sentence", "pooled"),
}


@own_checks  # __post_init__ checks every field: users and the tests see the same clear errors
@dataclass(frozen=True, kw_only=True)
class ScoreConfig(
    ChatSetting,
    ProgressSetting,
    ShotSeedSetting,
    ShotsSetting.with_defaults(shots=2),
    BatchSetting.with_defaults(batch_size=None),
    HeldOutSetting.with_defaults(n_eval=None),
    NewTokensSetting.with_defaults(max_new_tokens=64),
):
    """How translation scores are computed (``batch_size``: sentences scored together, None:
    16; the scores do not depend on it)."""

    decoding: str = "teacher_forced"
    """teacher_forced (the reference translation) or greedy (the model's own output)."""
    query: str = "token"
    """The query position: the target token itself (token) or the position predicting it."""
    argmax_over: str = "sequence"
    """Where the attention argmax is taken: the whole sequence or the source span only."""
    average: str = "per_sentence"
    """per_sentence (each sentence's score, then their mean) or pooled (over all queries)."""

    RENAMED: ClassVar[dict[str, str]] = {"n": "n_eval"}

    def __post_init__(self) -> None:
        super().__post_init__()  # the shared parts' checks
        for name, allowed in CHOICES.items():
            if getattr(self, name) not in allowed:
                raise InputError(
                    f"{name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}"
                )

    def stored(self) -> dict[str, Any]:
        values = asdict(self)
        for name in ("progress", "batch_size", "max_new_tokens", "n_eval"):
            values.pop(name)
        return values
