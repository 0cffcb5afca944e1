"""The evaluation settings: how :func:`lens_heads.evaluate` (and every analysis that evaluates)
splits a task, builds its prompts, decodes and scores them -- one object, validated once, passed
whole from the command line through the engine.

>>> config = EvaluationConfig(n_eval=40, random_seeds=(0, 1))
>>> config.n_eval, config.random_seeds
(40, (0, 1))
>>> EvaluationConfig(n_eval=0)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
lens_heads.core._errors.InputError: n_eval must be at least 1, got 0
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from lens_heads.core import InputError, Task
from lens_heads.core.internal import (
    AblationSetting,
    BatchSetting,
    ChatSetting,
    HeldOutSetting,
    NewTokensSetting,
    ProgressSetting,
    RandomControlsSetting,
    SeparatorSetting,
    ShotSeedSetting,
    ShotsSetting,
    SplitSetting,
    own_checks,
)
from lens_heads.engine._evaluation_result import SETTINGS

__all__ = ["INSTRUCTED", "MASK_SETTINGS", "EvaluationConfig"]

#: the settings that need the trained mask M, and those that prompt with the instruction
MASK_SETTINGS = ("random", "mask", "mask+instruction")
INSTRUCTED = ("instruction", "mask+instruction")


@own_checks  # __post_init__ checks every field: users and the tests see the same clear errors
@dataclass(frozen=True, kw_only=True)
class EvaluationConfig(
    ChatSetting,
    ProgressSetting,
    SplitSetting,
    SeparatorSetting,
    ShotSeedSetting,
    ShotsSetting,
    RandomControlsSetting,
    AblationSetting,
    BatchSetting,
    HeldOutSetting,
    NewTokensSetting,
):
    """How a task is evaluated: which examples, which prompts, how decoding runs. A removed
    head outputs zero or its mean (``ablation``; the mean over the bare prompts of the first 64
    training examples, the held-out ones when the split has none)."""

    ABLATION_WHERE = "evaluation"

    first_line: bool = True
    """Score the output's first line and stop decoding at a newline."""
    stack_masks: bool = False
    """Decode the runs that share a prompt set in one pass, one mask per row."""

    def __post_init__(self) -> None:
        super().__post_init__()  # the shared parts' checks
        for name in ("first_line", "stack_masks"):
            if not isinstance(getattr(self, name), bool):
                raise InputError(f"{name} must be True or False, got {getattr(self, name)!r}")

    def check(
        self,
        task: Task,
        settings: Sequence[str] | str | None,
        *,
        mask_given: bool,
        other_given: bool = False,
        unseen: bool = False,
    ) -> list[str]:
        """The settings to run on ``task``, checked without a model: known, not repeated, each
        with what it needs; ``n_eval`` and ``shots`` against the task's split (``unseen``: the
        mask was trained on another task, so every example may evaluate). By default every
        setting the given masks and the task's instruction allow. The command line calls it
        before the model loads."""
        if isinstance(settings, str):
            settings = [s.strip() for s in settings.split(",") if s.strip()]
        if settings is None:
            chosen = ["original"] + (["instruction"] if task.instruction else [])
            if mask_given:
                chosen += ["random", "mask"] + (["mask+instruction"] if task.instruction else [])
            chosen += ["other_mask"] if other_given else []
        else:
            chosen = list(settings)
        if not chosen:
            raise InputError(f"no settings to evaluate; choose from {', '.join(SETTINGS)}")
        if len(set(chosen)) != len(chosen):
            raise InputError(f"settings repeat: {chosen}")
        for setting in chosen:
            _check_setting(setting, task, mask_given, other_given, self.random_seeds)
        train, _ = task.split(n_eval=self.n_eval, seed=self.split_seed, unseen=unseen)
        left = 0 if train is None else len(train)
        if self.shots > left:
            raise InputError(
                f"shots={self.shots} demonstrations, but only {left} examples are left for "
                f"them after holding out n_eval; use at most {left} shots"
            )
        return chosen

    @staticmethod
    def unseen(task: Task, *masks: Any) -> bool:
        """Whether every given mask records that it was trained on another task than ``task``
        (then none of its examples needs holding out)."""
        trained = [getattr(mask, "metadata", {}).get("task") for mask in masks if mask is not None]
        return bool(trained) and all(name not in (None, task.name) for name in trained)

    def stored(self) -> dict[str, Any]:
        """The fields as stored with a result (a JSON-ready dict)."""
        values = asdict(self)
        values["random_seeds"] = list(self.random_seeds)
        values.pop("progress")
        return values


def _check_setting(
    setting: str, task: Task, mask_given: bool, other_given: bool, seeds: Sequence[int]
) -> None:
    if setting not in SETTINGS:
        raise InputError(
            f"unknown setting {setting!r}; choose from {', '.join(SETTINGS)} (comma-separated on "
            "the command line)"
        )
    if setting in INSTRUCTED and not task.instruction:
        raise InputError(
            f"setting {setting!r} needs an instruction but task {task.name!r} has none; pass "
            "instruction=... (--instruction on the command line)"
        )
    if setting in MASK_SETTINGS and not mask_given:
        raise InputError(
            f"setting {setting!r} needs the trained mask M: pass mask=HeadMask or a mask file "
            "(--mask FILE on the command line)"
        )
    if setting == "other_mask" and not other_given:
        raise InputError(
            "setting 'other_mask' needs a mask trained on another model of the same shape: pass "
            "other_mask= (--other-mask FILE on the command line)"
        )
    if setting == "random" and not seeds:
        raise InputError("setting 'random' needs at least one seed in random_seeds")
