"""The settings of greedy generation (:func:`lens_heads.greedy_generate` on token ids,
:func:`lens_heads.generate` on text), apart from the decoder so that the command line reads
them without importing torch.

>>> DecodingConfig().max_new_tokens, GenerationConfig(max_new_tokens=3).chat
(10, False)
"""

from __future__ import annotations

from dataclasses import dataclass

from lens_heads.core._checks import own_checks
from lens_heads.core._settings import BatchSetting, ChatSetting, NewTokensSetting, ProgressSetting

__all__ = ["DecodingConfig", "GenerationConfig"]


@own_checks  # __post_init__ checks every field: users and the tests see the same clear errors
@dataclass(frozen=True, kw_only=True)
class DecodingConfig(
    NewTokensSetting.with_defaults(max_new_tokens=10),
    ProgressSetting.with_defaults(progress=False),
    BatchSetting,
):
    """How greedy decoding runs: how many new tokens at most, how many prompts together (the
    tokens do not depend on it), with a progress bar or not; each field is a shared part's.

    >>> DecodingConfig(max_new_tokens=0)
    Traceback (most recent call last):
    ...
    lens_heads.core._errors.InputError: max_new_tokens must be at least 1, got 0
    """


@own_checks
@dataclass(frozen=True, kw_only=True)
class GenerationConfig(ChatSetting.with_defaults(chat=False), DecodingConfig):
    """:class:`DecodingConfig` for text prompts, with whether they are wrapped in the chat
    template (default: not; None: when the tokenizer has one)."""
