"""The settings of :func:`lens_heads.attention_on_target` (Heads up! Table 7), apart from its
computation so that the command line reads them without importing torch.

>>> AttentionConfig().batch_size, AttentionConfig().progress
(16, True)
"""

from __future__ import annotations

from dataclasses import dataclass

from lens_heads.core.internal import BatchSetting, ChatSetting, ProgressSetting, own_checks

__all__ = ["AttentionConfig"]


@own_checks  # __post_init__ checks every field: users and the tests see the same clear errors
@dataclass(frozen=True, kw_only=True)
class AttentionConfig(ChatSetting, ProgressSetting, BatchSetting):
    """How :func:`attention_on_target` runs its prompts: in the chat template or not, how many
    together, with a progress bar or not; each field is a shared part's.

    >>> AttentionConfig(batch_size=0)
    Traceback (most recent call last):
    ...
    lens_heads.core._errors.InputError: batch_size must be at least 1, got 0
    """
