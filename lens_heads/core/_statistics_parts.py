"""Shared parts of the settings of statistical analyses: resamples, permutations, the
family-wise level, top-k sets and random controls (see :mod:`lens_heads.core._setting_parts`;
:mod:`lens_heads.core._settings` re-exports every name here).

>>> import dataclasses
>>> @dataclasses.dataclass(frozen=True)
... class Example(BootstrapSetting.with_defaults(bootstrap=2000), LevelSetting):
...     pass
>>> Example()
Example(level=0.01, bootstrap=2000)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from lens_heads.core._checks import check_int, check_number, check_seeds, own_checks
from lens_heads.core._errors import InputError
from lens_heads.core._setting_parts import SharedPart

__all__ = [
    "MAX_RESAMPLES",
    "BootstrapSetting",
    "LevelSetting",
    "PermutationsSetting",
    "RandomControlsSetting",
    "TopKSetting",
]

#: the most resamples (bootstrap, permutations) a settings object asks for: each costs time, and
#: 2,000 already resolve a p-value to 1/2,001
MAX_RESAMPLES = 100_000
_RESAMPLES_WHY = "each resample costs time, and 2,000 already resolve p-values to 1/2,001"


@own_checks
@dataclasses.dataclass(frozen=True, kw_only=True)
class BootstrapSetting(SharedPart):
    """The part of a settings class that gives intervals by resampling (a percentile bootstrap).

    >>> BootstrapSetting(bootstrap=5)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lens_heads.core._errors.InputError: bootstrap must be at least 10, got 5
    """

    bootstrap: int = 1000
    """Bootstrap resamples behind each 95 % interval."""

    def __post_init__(self) -> None:
        check_int(
            "bootstrap", self.bootstrap, minimum=10, maximum=MAX_RESAMPLES, why=_RESAMPLES_WHY
        )
        super().__post_init__()


@own_checks
@dataclasses.dataclass(frozen=True, kw_only=True)
class PermutationsSetting(SharedPart):
    """The part of a settings class that tests by permutation.

    >>> PermutationsSetting().permutations
    2000
    """

    permutations: int = 2000
    """Permutations behind each p-value (a table of ``m`` tests needs at least ``2 m / level``
    for its smallest p-value to pass Holm)."""

    def __post_init__(self) -> None:
        check_int(
            "permutations",
            self.permutations,
            minimum=10,
            maximum=MAX_RESAMPLES,
            why=_RESAMPLES_WHY,
        )
        super().__post_init__()


@own_checks
@dataclasses.dataclass(frozen=True, kw_only=True)
class LevelSetting(SharedPart):
    """The part of a settings class that decides several tests together (Holm's method).

    >>> LevelSetting(level=1.5)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lens_heads.core._errors.InputError: level must lie in (0, 1), got 1.5
    """

    level: float = 0.01
    """Family-wise level of the tests, after Holm's correction."""

    def __post_init__(self) -> None:
        check_number("level", self.level)
        if not 0 < self.level < 1:
            raise InputError(f"level must lie in (0, 1), got {self.level}")
        super().__post_init__()


@own_checks
@dataclasses.dataclass(frozen=True, kw_only=True)
class TopKSetting(SharedPart):
    """The part of a settings class that compares the top sets of two head scores.

    >>> TopKSetting(k=0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lens_heads.core._errors.InputError: k must be at least 1, got 0
    """

    k: int = 10
    """Size of the top sets compared (at most half of the heads: larger sets overlap whatever
    they measure)."""

    def __post_init__(self) -> None:
        check_int("k", self.k, minimum=1)
        super().__post_init__()


@own_checks
@dataclasses.dataclass(frozen=True, kw_only=True)
class RandomControlsSetting(SharedPart):
    """The part of a settings class that compares heads with random heads of the same number.

    >>> RandomControlsSetting(random_seeds=[3, 4]).random_seeds
    (3, 4)
    """

    random_seeds: Sequence[int] = (0, 1, 2)
    """Seeds of the random controls (as many random heads as those tested): one run per seed."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "random_seeds", check_seeds("random_seeds", self.random_seeds))
        super().__post_init__()
