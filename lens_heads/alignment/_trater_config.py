"""The settings of :func:`lens_heads.trater_scores` (TRater), apart from its computation so that
the command line reads them without importing torch.

>>> TRaterConfig().batch_size, TRaterConfig().progress
(16, True)
"""

from __future__ import annotations

from dataclasses import dataclass

from lens_heads.core.internal import BatchSetting, ProgressSetting, own_checks

__all__ = ["TRaterConfig"]


@own_checks  # __post_init__ checks every field: users and the tests see the same clear errors
@dataclass(frozen=True, kw_only=True)
class TRaterConfig(ProgressSetting, BatchSetting):
    """How :func:`trater_scores` runs its texts: how many together (right-padded, so the scores
    do not depend on it) and with a progress bar or not; each field is a shared part's.

    >>> TRaterConfig(batch_size=0)
    Traceback (most recent call last):
    ...
    lens_heads.core._errors.InputError: batch_size must be at least 1, got 0
    """
