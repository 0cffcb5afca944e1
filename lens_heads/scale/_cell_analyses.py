"""What a grid cell runs after its training: the ``[evaluate]`` and ``[sweep]`` tables of a grid
file, each an :class:`~lens_heads.engine.EvaluationConfig` or
:class:`~lens_heads.heads_up.SweepConfig` with the one field the grid adds (which settings to
evaluate; how many held-out examples to sweep) and the grid's own defaults.

>>> GridEvaluationConfig().n_eval, GridEvaluationConfig(shots=2).evaluation().shots
(40, 2)
>>> GridSweepConfig(examples=2).to_dict()
{'examples': 2, 'every': 1, 'max_new_tokens': 0}
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from lens_heads.core import InputError
from lens_heads.core.internal import check_int, own_checks
from lens_heads.engine import SETTINGS, EvaluationConfig
from lens_heads.heads_up import SweepConfig

__all__ = ["GridEvaluationConfig", "GridSweepConfig"]


def _stored(config: Any, always: Sequence[str], skip: Sequence[str]) -> dict[str, Any]:
    """The fields a grid file stores: those in ``always``, and any other that differs from its
    default (so a grid stored before a field was allowed keeps its form and fingerprint)."""
    default = type(config)()
    values: dict[str, Any] = {}
    for name in dict.fromkeys([*always, *(f.name for f in fields(config))]):  # always first
        value = getattr(config, name)
        if name in skip or (name not in always and value == getattr(default, name)):
            continue
        values[name] = list(value) if isinstance(value, tuple) else value
    return values


@own_checks  # __post_init__ checks every field: users and the tests see the same clear errors
@dataclass(frozen=True, kw_only=True)
class GridEvaluationConfig(EvaluationConfig.with_defaults(n_eval=40, random_seeds=(0, 1))):
    """A cell's evaluation: an :class:`EvaluationConfig` (its split is the cell's schedule's,
    so ``split_seed`` is not set here) and the settings to evaluate."""

    MIN_EVAL: ClassVar[int] = 1
    #: the fields a grid file cannot set here, and why
    NOT_HERE: ClassVar[dict[str, str]] = {
        "split_seed": "the held-out split is the schedule's: set split_seed in the schedule",
        "progress": "a cell runs without progress bars",
    }
    #: the fields every stored grid holds (those of lens_heads 0.2)
    STORED: ClassVar[tuple[str, ...]] = ("settings", "n_eval", "random_seeds")

    settings: Sequence[str] = ("original", "instruction", "random", "mask")
    """The settings evaluated after each training (``other_mask`` needs a second model's mask,
    which a grid cell has not)."""

    def __post_init__(self) -> None:
        super().__post_init__()  # the evaluation's checks
        if self.split_seed is not None:  # else it would be set and silently not used
            raise InputError(f"split_seed cannot be set: {self.NOT_HERE['split_seed']}")
        if isinstance(self.settings, str) or not isinstance(self.settings, Sequence):
            raise InputError(f"settings must be a list of settings, got {self.settings!r}")
        allowed = [s for s in SETTINGS if s != "other_mask"]
        for setting in self.settings:
            if setting not in allowed:
                raise InputError(
                    f"unknown evaluation setting {setting!r}; use {', '.join(allowed)}"
                )
        object.__setattr__(self, "settings", tuple(self.settings))

    def evaluation(self, **changes: Any) -> EvaluationConfig:
        """The :class:`EvaluationConfig` a cell evaluates with (``changes``: its split seed)."""
        values = {f.name: getattr(self, f.name) for f in fields(EvaluationConfig)}
        return EvaluationConfig(**(values | {"progress": False} | changes))

    def to_dict(self) -> dict[str, Any]:
        """As the grid stores it: the settings, ``n_eval``, ``random_seeds`` and what else
        differs from the defaults."""
        return _stored(self, self.STORED, tuple(self.NOT_HERE))


@own_checks  # __post_init__ checks every field: users and the tests see the same clear errors
@dataclass(frozen=True, kw_only=True)
class GridSweepConfig(SweepConfig.with_defaults(max_new_tokens=0)):
    """A cell's removal sweeps: a :class:`SweepConfig` (no continuations by default) run on the
    first ``examples`` held-out examples, heads removed in ascending mask weight."""

    NOT_HERE: ClassVar[dict[str, str]] = {"progress": "a cell runs without progress bars"}
    STORED: ClassVar[tuple[str, ...]] = ("examples", "every", "max_new_tokens")

    examples: int = 1
    """How many held-out examples to sweep (the first ones), one sweep each."""

    def __post_init__(self) -> None:
        super().__post_init__()  # the sweep's checks
        check_int("examples", self.examples, minimum=1)

    def sweep(self) -> SweepConfig:
        """The :class:`SweepConfig` of each of the cell's sweeps."""
        values = {f.name: getattr(self, f.name) for f in fields(SweepConfig)}
        return SweepConfig(**(values | {"progress": False}))

    def to_dict(self) -> dict[str, Any]:
        """As the grid stores it: ``examples``, ``every``, ``max_new_tokens`` and what else
        differs from the defaults."""
        return _stored(self, self.STORED, tuple(self.NOT_HERE))
