"""Shared parts of settings objects: a field that means one thing wherever it appears, declared,
documented and checked once.

A settings class takes a part as a base class, so its fields stay flat (the same attribute,
flag and stored key); its own ``__post_init__`` calls ``super().__post_init__()``, which checks
the part's fields and hands on to the next part. Parts are keyword-only, so a part's field can
sit anywhere. :mod:`lens_heads.core._settings` re-exports every name here.

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
from typing import Any, ClassVar

from lens_heads.core._checks import check_int, own_checks
from lens_heads.core._errors import InputError

__all__ = [
    "ABLATIONS",
    "FIXED",
    "PRECISIONS",
    "AblationSetting",
    "AblationsSetting",
    "BatchSetting",
    "ChatSetting",
    "CheckpointSetting",
    "HeldOutSetting",
    "InstructedSetting",
    "IntegratedGradientsSetting",
    "MasksSetting",
    "NewTokensSetting",
    "PositionSetting",
    "PrecisionSetting",
    "ProgressSetting",
    "SeedSetting",
    "SeparatorSetting",
    "SharedPart",
    "ShotSeedSetting",
    "ShotsSetting",
    "SplitSetting",
    "check_ablation",
]


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
        ... class Example(BatchSetting.with_defaults(batch_size=8)):
        ...     pass
        >>> Example().batch_size, BatchSetting().batch_size
        (8, 16)
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
    lens_heads.core._errors.InputError: chat must be True, False or None (auto), got 'yes'
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


#: every ablation type (what a removed head outputs; :mod:`lens_heads.core._ablation` builds them)
ABLATIONS = ("zero", "mean", "resample")
#: the types with one baseline vector per head, usable at any position and length
FIXED = ("zero", "mean")

#: accepted spellings of a precision and the name each stands for
PRECISIONS = {
    "auto": "auto",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float32": "float32",
    "fp32": "float32",
}


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
class BatchSetting(SharedPart):
    """The part of a settings class that runs several inputs through the model together. None
    is accepted where it is the class's default: that class sizes its batches itself (its
    docstring says how). ``MIN_BATCH`` is the smallest size a class accepts.

    >>> BatchSetting(batch_size=0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lens_heads.core._errors.InputError: batch_size must be at least 1, got 0
    >>> BatchSetting.with_defaults(batch_size=None)().batch_size is None
    True
    """

    batch_size: int | None = 16
    """Inputs run through the model together (prompts, sequences, documents or rows): memory
    and speed depend on it, results do not, except in mask training, where it is a step's
    examples. None, where it is the default: sized automatically."""

    MIN_BATCH: ClassVar[int] = 1

    def __post_init__(self) -> None:
        _check_count(self, "batch_size", self.MIN_BATCH)
        super().__post_init__()


def _check_count(settings: Any, name: str, minimum: int) -> None:
    """Check the count ``name`` of ``settings``: an integer of at least ``minimum``, or None
    where None is the class's default (the class then chooses the count itself)."""
    value = getattr(settings, name)
    if value is not None:
        check_int(name, value, minimum=minimum)
        return
    default = {field.name: field.default for field in dataclasses.fields(settings)}[name]
    if default is not None:
        raise InputError(
            f"{name} must be an integer here (None is accepted only where it is the default), "
            f"got None; pass {name}={default}"
        )


@own_checks
@dataclasses.dataclass(frozen=True, kw_only=True)
class NewTokensSetting(SharedPart):
    """The part of a settings class that generates text greedily. ``MIN_NEW_TOKENS`` is the
    fewest a class accepts (0 where its work can also run without continuations).

    >>> NewTokensSetting(max_new_tokens=0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lens_heads.core._errors.InputError: max_new_tokens must be at least 1, got 0
    """

    max_new_tokens: int | None = None
    """Greedy tokens generated per output (0, where a class allows it: no continuations).
    None, where it is the default: the task's (10 for words, 50 for sentences) or the job's."""

    MIN_NEW_TOKENS: ClassVar[int] = 1

    def __post_init__(self) -> None:
        _check_count(self, "max_new_tokens", self.MIN_NEW_TOKENS)
        super().__post_init__()


@own_checks
@dataclasses.dataclass(frozen=True, kw_only=True)
class HeldOutSetting(SharedPart):
    """The part of a settings class that evaluates a task's held-out examples. ``MIN_EVAL`` is
    the fewest a class accepts (0 where its work can also use every example).

    >>> HeldOutSetting(n_eval=0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lens_heads.core._errors.InputError: n_eval must be at least 1, got 0
    """

    n_eval: int | None = 100
    """Examples evaluated: a task's or corpus's last ones, held out of any training (translation
    scores, which train nothing, take the corpus's first). None, where it is the default: all."""

    MIN_EVAL: ClassVar[int] = 1

    def __post_init__(self) -> None:
        _check_count(self, "n_eval", self.MIN_EVAL)
        super().__post_init__()


@own_checks
@dataclasses.dataclass(frozen=True, kw_only=True)
class SeedSetting(SharedPart):
    """The part of a settings class whose work draws random numbers (its docstring says which).

    >>> SeedSetting(seed=1.5)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lens_heads.core._errors.InputError: seed must be an integer, got 1.5
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
    lens_heads.core._errors.InputError: separator must be a string, got 2
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
    lens_heads.core._errors.InputError: shots must be at least 0, got -1
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
class MasksSetting(SharedPart):
    """The part of a settings class that trains several masks, one per seed.

    >>> MasksSetting(n_masks=0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lens_heads.core._errors.InputError: n_masks must be at least 1, got 0
    """

    n_masks: int = 1
    """Masks trained, one per seed (with sigmoid gates together in one batch, each from its own
    initial gates: the weights then have shape [seeds, n_layers, n_heads])."""

    def __post_init__(self) -> None:
        check_int("n_masks", self.n_masks, minimum=1)
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
    lens_heads.core._errors.InputError: ig_steps must be at least 1, got 0
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


def check_ablation(value: object, *, allowed: Sequence[str] = ABLATIONS, where: str) -> str:
    """``value`` if it is one of ``allowed``, else an :class:`InputError` naming the choices
    (and, for ``resample`` where it cannot apply, why and where it can).

    >>> check_ablation("median", allowed=FIXED, where="evaluation")
    Traceback (most recent call last):
    ...
    lens_heads.core._errors.InputError: evaluation takes ablation 'zero' or 'mean', got 'median'
    """
    if value in allowed:
        return str(value)
    choices = " or ".join(repr(a) for a in allowed)
    if value == "resample":
        raise InputError(
            f"{where} takes ablation {choices}, not 'resample': a resampled head needs a donor "
            "prompt of the same token length at every position, and this analysis generates or "
            "batches prompts of different lengths; resample ablation is in the atlas's "
            "single-head effects, removal sweeps without continuations and estimate_errors"
        )
    raise InputError(f"{where} takes ablation {choices}, got {value!r}")


@own_checks
@dataclasses.dataclass(frozen=True, kw_only=True)
class AblationSetting(SharedPart):
    """The part of a settings class that removes heads: what a removed head outputs. A class
    lists the ablations its work can apply in ``ALLOWED_ABLATIONS`` (default: zero and mean)
    and names its work in the error with ``ABLATION_WHERE``.

    >>> AblationSetting(ablation="resample")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lens_heads.core._errors.InputError: this analysis takes ablation 'zero' or 'mean', not ...
    """

    ablation: str = "zero"
    """What a removed head outputs: zero; mean (its mean output over reference prompts, the
    task's first 64 training examples); resample (its output on a reference prompt of the same
    length); counterfactual (its output on the example's counterfactual prompt, as MIB patches).
    Each analysis takes the ones it can apply (the flag's choices)."""

    ALLOWED_ABLATIONS: ClassVar[tuple[str, ...]] = FIXED
    ABLATION_WHERE: ClassVar[str] = "this analysis"
    #: each choice's meaning, for a command's help: it describes the choices it offers only
    CHOICE_HELP: ClassVar[dict[str, tuple[str, dict[str, str]]]] = {
        "ablation": (
            "What a removed head outputs",
            {
                "zero": "",
                "mean": "its mean output over reference prompts, the task's first 64 "
                "training examples",
                "resample": "its output on a reference prompt of the same length",
                "counterfactual": "its output on the example's counterfactual prompt, as MIB "
                "patches",
            },
        )
    }

    def __post_init__(self) -> None:
        check_ablation(self.ablation, allowed=self.ALLOWED_ABLATIONS, where=self.ABLATION_WHERE)
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
    lens_heads.core._errors.InputError: ablations must be some of ('zero', 'mean', 'resample'), ...
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
