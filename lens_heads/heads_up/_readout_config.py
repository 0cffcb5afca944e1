"""The settings of the readouts that compare hidden states layer by layer:
:class:`HiddenStatesConfig` (:func:`lens_heads.layer_similarity`) and :class:`ReadoutConfig`
(Heads up! Figure 4, :func:`lens_heads.figure4_similarity` and :func:`lens_heads.figure4_stats`).

>>> HiddenStatesConfig().hooks
('hook_resid_post', 'hook_attn_out')
>>> ReadoutConfig(hooks=("hook_attn_out",))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
lens_heads.core._errors.InputError: the paired test uses hook_resid_post ...
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lens_heads.core import InputError
from lens_heads.core.internal import (
    DEFAULT_HOOKS,
    BatchSetting,
    ChatSetting,
    PositionSetting,
    ProgressSetting,
    own_checks,
)

__all__ = ["HiddenStatesConfig", "ReadoutConfig"]


@own_checks  # __post_init__ checks every field: users and the tests see the same clear errors
@dataclass(frozen=True, kw_only=True)
class HiddenStatesConfig(ChatSetting, ProgressSetting, PositionSetting):
    """Which hidden states are read (the hooks, at one position) and how the runs go (chat
    template, progress bar)."""

    hooks: Sequence[str] = DEFAULT_HOOKS
    """The hooks read in every layer (``hook_resid_post``: decoder outputs; ``hook_attn_out``:
    attention outputs)."""

    def __post_init__(self) -> None:
        super().__post_init__()  # the shared parts' checks
        if isinstance(self.hooks, str) or not self.hooks:
            raise InputError("no hooks given; e.g. hooks=('hook_resid_post', 'hook_attn_out')")
        object.__setattr__(self, "hooks", tuple(self.hooks))


@own_checks
@dataclass(frozen=True, kw_only=True)
class ReadoutConfig(HiddenStatesConfig, BatchSetting):
    """Where Figure 4 reads hidden states and how its prompts run, many prompts batched
    together; the paired test over many prompts needs ``hook_resid_post`` among the hooks."""

    def __post_init__(self) -> None:
        super().__post_init__()  # the hidden states' and the batch's checks
        if "hook_resid_post" not in self.hooks:
            raise InputError("the paired test uses hook_resid_post (decoder outputs): include it")
