"""Shared parts of settings objects: a field that means one thing wherever it appears, declared,
documented and checked once.

A settings class takes a part as a base class, so its fields stay flat (the same attribute,
flag and stored key); its own ``__post_init__`` calls ``super().__post_init__()``, which checks
the part's fields and hands on to the next part. Parts are keyword-only, so a part's field can
sit anywhere. :mod:`lens_heads.core.settings` re-exports every name here.

>>> import dataclasses
>>> @dataclasses.dataclass(frozen=True)
... class Example(SeedSetting, ShotsSetting.with_defaults(shots=2)):
...     steps: int = 10
>>> Example(seed=3)
Example(shots=2, seed=3, steps=10)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from functools import cache
from typing import Any

from lens_heads.core.checks import check_int, check_number, check_seeds, own_checks
from lens_heads.core.errors import InputError

__all__ = [
    "ABLATIONS",
    "MAX_RESAMPLES",
    "PRECISIONS",
    "AblationsSetting",
    "BootstrapSetting",
    "ChatSetting",
    "CheckpointSetting",
    "InstructedSetting",
    "IntegratedGradientsSetting",
    "LevelSetting",
    "MasksSetting",
    "PermutationsSetting",
    "PositionSetting",
    "PrecisionSetting",
    "ProgressSetting",
    "RandomControlsSetting",
    "SeedSetting",
    "SeparatorSetting",
    "SharedPart",
    "ShotSeedSetting",
    "ShotsSetting",
    "SplitSetting",
    "TopKSetting",
]


# -- shared parts: a field that means one thing wherever it appears, declared and checked once --
# A settings class takes a part as a base class (its fields stay flat: the same attribute, flag
# and stored key); its own ``__post_init__`` calls ``super().__post_init__()``, which checks the
# part's fields and hands on to the next part. Keyword-only, so a part's field can sit anywhere.
class SharedPart:
    """The base of every shared part, and the end of the parts' ``__post_init__`` chain."""

    def __post_init__(self) -> None:
        pass

    @classmethod
    def with_defaults(cls, **defaults: Any) -> type:
        """This part with other defaults, as the base of a settings class whose work needs them:
        the fields' type, help and checks stay the part's (declared once), only the default
        differs.

        >>> @dataclasses.dataclass(frozen=True)
        ... class Example(BootstrapSetting.with_defaults(bootstrap=2000)):
        ...     pass
        >>> Example().bootstrap, BootstrapSetting().bootstrap
        (2000, 1000)
        """
        return _with_defaults(cls, tuple(sorted(defaults.items())))


@cache
def _with_defaults(part: type, defaults: tuple[tuple[str, Any], ...]) -> type:
    fields = {field.name: field for field in dataclasses.fields(part)}  # type: ignore[arg-type]
    unknown = [name for name, _ in defaults if name not in fields]
    if unknown:
        raise InputError(
            f"{part.__name__} has no field {', '.join(unknown)}; its fields are {', '.join(fields)}"
        )
    made = dataclasses.make_dataclass(
        part.__name__,
        [
            (name, fields[name].type, dataclasses.field(default=value, kw_only=True))
            for name, value in defaults
        ],
        bases=(part,),
        frozen=True,
        kw_only=True,
    )
    made.__module__, made.__qualname__, made.__doc__ = (
        part.__module__,
        part.__qualname__,
        part.__doc__,
    )
    return own_checks(made)


@own_checks
@dataclasses.dataclass(frozen=True, kw_only=True)
class ChatSetting(SharedPart):
    """The part of a settings class that builds prompts: whether they are chat messages.

    >>> ChatSetting(chat="yes")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lens_heads.core.errors.InputError: chat must be True, False or None (auto), got 'yes'
    """

    chat: bool | None = None
    """Wrap prompts in the chat template (default: when the tokenizer has one)."""

    def __post_init__(self) -> None:
        if self.chat is not None and not isinstance(self.chat, bool):
            raise InputError(f"chat must be True, False or None (auto), got {self.chat!r}")
        super().__post_init__()


@own_checks
@dataclasses.dataclass(frozen=True, kw_only=True)
class ProgressSetting(SharedPart):
    """The part of a settings class whose work takes long enough to show a progress bar.

    >>> ProgressSetting().progress
    True
    """

    progress: bool = True
    """Show progress bars."""

    def __post_init__(self) -> None:
        if not isinstance(self.progress, bool):
            raise InputError(f"progress must be True or False, got {self.progress!r}")
        super().__post_init__()


#: every ablation type (what a removed head outputs; :mod:`lens_heads.core.ablation` builds them)
ABLATIONS = ("zero", "mean", "resample")

#: accepted spellings of a precision and the name each stands for
PRECISIONS = {
    "auto": "auto",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float32": "float32",
    "fp32": "float32",
}

#: the most resamples (bootstrap, permutations) a settings object asks for: each costs time, and
#: 2,000 already resolve a p-value to 1/2,001
MAX_RESAMPLES = 100_000
_RESAMPLES_WHY = "each resample costs time, and 2,000 already resolve p-values to 1/2,001"


@own_checks
@dataclasses.dataclass(frozen=True, kw_only=True)
class PrecisionSetting(SharedPart):
    """The part of a settings class that runs the model under a chosen precision; ``bf16`` and
    ``fp32`` are read as ``bfloat16`` and ``float32``.

    >>> PrecisionSetting(precision="bf16").precision
    'bfloat16'
    """

    precision: str = "auto"
    """Precision of the forwards and backwards: auto (bf16 autocast where the device computes it
    natively, else float32), bfloat16 (bf16) or float32 (fp32)."""

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise InputError(
                f"precision must be 'auto', 'bfloat16' (autocast) or 'float32', got "
                f"{self.precision!r}"
            )
        object.__setattr__(self, "precision", PRECISIONS[self.precision])
        super().__post_init__()


@own_checks
@dataclasses.dataclass(frozen=True, kw_only=True)
class SeedSetting(SharedPart):
    """The part of a settings class whose work draws random numbers (its docstring says which).

    >>> SeedSetting(seed=1.5)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lens_heads.core.errors.InputError: seed must be an integer, got 1.5
    """

    seed: int = 0
    """Seed of every random draw of the computation: the same seed, the same result."""

    def __post_init__(self) -> None:
        check_int("seed", self.seed)
        super().__post_init__()


@own_checks
@dataclasses.dataclass(frozen=True, kw_only=True)
class SplitSetting(SharedPart):
    """The part of a settings class that splits a task into training and held-out examples.

    >>> SplitSetting().split_seed is None
    True
    """

    split_seed: int | None = None
    """Shuffle the task with this seed before splitting (default: the file's order)."""

    def __post_init__(self) -> None:
        if self.split_seed is not None:
            check_int("split_seed", self.split_seed)
        super().__post_init__()


@own_checks
@dataclasses.dataclass(frozen=True, kw_only=True)
class SeparatorSetting(SharedPart):
    """The part of a settings class that writes plain-text prompts (no chat template).

    >>> SeparatorSetting(separator=2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lens_heads.core.errors.InputError: separator must be a string, got 2
    """

    separator: str = "\n\n"
    """What follows the input (and each demonstration) without a chat template."""

    def __post_init__(self) -> None:
        if not isinstance(self.separator, str):
            raise InputError(f"separator must be a string, got {self.separator!r}")
        super().__post_init__()


@own_checks
@dataclasses.dataclass(frozen=True, kw_only=True)
class ShotsSetting(SharedPart):
    """The part of a settings class that can put demonstrations before each prompt.

    >>> ShotsSetting(shots=-1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lens_heads.core.errors.InputError: shots must be at least 0, got -1
    """

    shots: int = 0
    """Demonstrations before each prompt (from the task's training split, or other pairs of
    the corpus)."""

    def __post_init__(self) -> None:
        check_int("shots", self.shots, minimum=0)
        super().__post_init__()


@own_checks
@dataclasses.dataclass(frozen=True, kw_only=True)
class InstructedSetting(SharedPart):
    """The part of a settings class that may give a task's instruction in its prompts.

    >>> InstructedSetting().instructed
    False
    """

    instructed: bool = False
    """Give the task's instruction in every prompt (Heads up! trains without it; IOI prompts are
    plain text either way)."""

    def __post_init__(self) -> None:
        if not isinstance(self.instructed, bool):
            raise InputError(f"instructed must be True or False, got {self.instructed!r}")
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


@own_checks
@dataclasses.dataclass(frozen=True, kw_only=True)
class MasksSetting(SharedPart):
    """The part of a settings class that trains several masks, one per seed.

    >>> MasksSetting(n_masks=0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lens_heads.core.errors.InputError: n_masks must be at least 1, got 0
    """

    n_masks: int = 1
    """Masks trained, one per seed (with sigmoid gates together in one batch, each from its own
    initial gates: the weights then have shape [seeds, n_layers, n_heads])."""

    def __post_init__(self) -> None:
        check_int("n_masks", self.n_masks, minimum=1)
        super().__post_init__()


@own_checks
@dataclasses.dataclass(frozen=True, kw_only=True)
class TopKSetting(SharedPart):
    """The part of a settings class that compares the top sets of two head scores.

    >>> TopKSetting(k=0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lens_heads.core.errors.InputError: k must be at least 1, got 0
    """

    k: int = 10
    """Size of the top sets compared (at most half of the heads: larger sets overlap whatever
    they measure)."""

    def __post_init__(self) -> None:
        check_int("k", self.k, minimum=1)
        super().__post_init__()


@own_checks
@dataclasses.dataclass(frozen=True, kw_only=True)
class ShotSeedSetting(SharedPart):
    """The part of a settings class that draws demonstrations for its prompts.

    >>> ShotSeedSetting().shot_seed
    0
    """

    shot_seed: int = 0
    """Seed of the demonstrations drawn for each prompt."""

    def __post_init__(self) -> None:
        check_int("shot_seed", self.shot_seed)
        super().__post_init__()


@own_checks
@dataclasses.dataclass(frozen=True, kw_only=True)
class BootstrapSetting(SharedPart):
    """The part of a settings class that gives intervals by resampling (a percentile bootstrap).

    >>> BootstrapSetting(bootstrap=5)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lens_heads.core.errors.InputError: bootstrap must be at least 10, got 5
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
    lens_heads.core.errors.InputError: level must lie in (0, 1), got 1.5
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
class CheckpointSetting(SharedPart):
    """The part of a settings class that trains through the model's blocks.

    >>> CheckpointSetting().checkpoint_activations
    False
    """

    checkpoint_activations: bool = False
    """Keep each block's input instead of its activations and recompute the block in the
    backward pass (the same gradients, less memory, about one more forward of time)."""

    def __post_init__(self) -> None:
        if not isinstance(self.checkpoint_activations, bool):
            raise InputError(
                f"checkpoint_activations must be True or False, got {self.checkpoint_activations!r}"
            )
        super().__post_init__()


@own_checks
@dataclasses.dataclass(frozen=True, kw_only=True)
class IntegratedGradientsSetting(SharedPart):
    """The part of a settings class that integrates gradients along a path (midpoint rule).

    >>> IntegratedGradientsSetting(ig_steps=0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lens_heads.core.errors.InputError: ig_steps must be at least 1, got 0
    """

    ig_steps: int = 16
    """Midpoints of the integrated-gradient path (the rows of its one batched backward)."""

    def __post_init__(self) -> None:
        why = "each midpoint is a row of the batched backward"
        check_int("ig_steps", self.ig_steps, minimum=1, maximum=1024, why=why)
        super().__post_init__()


@own_checks
@dataclasses.dataclass(frozen=True, kw_only=True)
class PositionSetting(SharedPart):
    """The part of a settings class that reads the residual stream at one token position.

    >>> PositionSetting().position
    -1
    """

    position: int = -1
    """Token position read (-1: the last, the one that predicts the answer)."""

    def __post_init__(self) -> None:
        check_int("position", self.position)
        super().__post_init__()


@own_checks
@dataclasses.dataclass(frozen=True, kw_only=True)
class AblationsSetting(SharedPart):
    """The part of a settings class that measures each head under several ablations.

    >>> AblationsSetting(ablations=["mean"]).ablations
    ('mean',)
    >>> AblationsSetting(ablations=("noise",))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lens_heads.core.errors.InputError: ablations must be some of ('zero', 'mean', 'resample'), ...
    """

    ablations: tuple[str, ...] = ("zero", "mean")
    """The ablations each head's single-head effect is measured under: zero, mean, resample."""

    def __post_init__(self) -> None:
        names = self.ablations
        if isinstance(names, str) or not isinstance(names, Sequence):
            raise InputError(f"ablations must be a sequence of names, got {names!r}")
        unknown = [a for a in names if a not in ABLATIONS]
        if unknown or not names:
            raise InputError(f"ablations must be some of {ABLATIONS}, got {tuple(names)}")
        object.__setattr__(self, "ablations", tuple(names))
        super().__post_init__()
