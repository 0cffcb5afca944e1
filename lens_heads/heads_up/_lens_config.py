"""The settings of the logit lens (:func:`lens_heads.logit_lens`) and of the top tokens
(:func:`lens_heads.top_tokens`), apart from their computation so that the command line reads
them without importing torch.

>>> LensConfig(top_k=3).final_norm
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from lens_heads.core import InputError
from lens_heads.core.internal import ChatSetting, PositionSetting, SharedPart, check_int, own_checks

__all__ = ["LensConfig", "TopTokensConfig", "TopTokensSetting"]


@own_checks
@dataclass(frozen=True, kw_only=True)
class TopTokensSetting(SharedPart):
    """The part of a settings class that keeps the top tokens of a prediction.

    >>> TopTokensSetting.with_defaults(top_k=5)().top_k
    5
    """

    top_k: int = 10
    """Top tokens kept per prediction (per layer in the logit lens; at most the vocabulary)."""

    def __post_init__(self) -> None:
        check_int("top_k", self.top_k, minimum=1)
        super().__post_init__()


@own_checks  # __post_init__ checks every field: users and the tests see the same clear errors
@dataclass(frozen=True, kw_only=True)
class LensConfig(ChatSetting, PositionSetting, TopTokensSetting.with_defaults(top_k=5)):
    """How :func:`logit_lens` reads the residual stream.

    >>> LensConfig(top_k=0)
    Traceback (most recent call last):
    ...
    lens_heads.core._errors.InputError: top_k must be at least 1, got 0
    """

    final_norm: bool = True
    """Apply the model's final norm before unembedding, so the last layer is the model's own
    prediction (no: the Heads up! reference code's lens, which skipped it)."""

    RENAMED: ClassVar[dict[str, str]] = {"apply_final_norm": "final_norm"}

    def __post_init__(self) -> None:
        super().__post_init__()  # the shared parts' checks
        if not isinstance(self.final_norm, bool):
            raise InputError(f"final_norm must be True or False, got {self.final_norm!r}")


@own_checks
@dataclass(frozen=True, kw_only=True)
class TopTokensConfig(ChatSetting, PositionSetting, TopTokensSetting):
    """Where :func:`top_tokens` reads the model's prediction and how many tokens it keeps; each
    field is a shared part's.

    >>> TopTokensConfig().top_k, LensConfig().top_k
    (10, 5)
    """
