"""Shared parts of settings that name what a run loads: its task, and where and in which dtype
its model runs (the meanings of :func:`lens_heads.get_task` and :func:`lens_heads.load_model`;
see :mod:`lens_heads.core._setting_parts`; :mod:`lens_heads.core._settings` re-exports every name
here).

>>> TaskSetting(task="antonym").task
'antonym'

>>> LoadingSetting(device="cuda:1", dtype="bfloat16").device
'cuda:1'
>>> LoadingSetting(device="gpu")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
lens_heads.core._errors.InputError: device must be cpu, cuda, cuda:N, mps or auto, got 'gpu'
"""

from __future__ import annotations

import dataclasses
import re
from typing import ClassVar

from lens_heads.core._checks import own_checks
from lens_heads.core._errors import InputError, InputTypeError
from lens_heads.core._setting_parts import SharedPart
from lens_heads.core._tasks import Task

__all__ = ["DEVICES", "DTYPES", "LoadingSetting", "TaskSetting"]

#: the devices a model loads on (``cuda`` also as ``cuda:N``; ``auto``: CUDA when available)
DEVICES = ("cpu", "cuda", "mps", "auto")
#: the weights' dtypes (``auto``: bfloat16 on a GPU that computes it natively, else float32)
DTYPES = ("auto", "float32", "bfloat16", "float16")


@own_checks
@dataclasses.dataclass(frozen=True, kw_only=True)
class LoadingSetting(SharedPart):
    """The part of a settings class that loads (or plans) a model on a device in a dtype. A
    class whose work runs on fewer devices sets ``ALLOWED_DEVICES``."""

    ALLOWED_DEVICES: ClassVar[tuple[str, ...]] = DEVICES

    device: str = "cpu"
    """Where the model runs: cpu, cuda, cuda:N, mps or auto (CUDA when available)."""
    dtype: str = "float32"
    """The weights' dtype: auto (bfloat16 on a GPU that computes it natively, else float32),
    float32, bfloat16 or float16."""

    def __post_init__(self) -> None:
        allowed = self.ALLOWED_DEVICES
        kind = (
            re.fullmatch(r"(cuda)(:\d+)?|([a-z]+)", self.device)
            if isinstance(self.device, str)
            else None
        )
        if kind is None or (kind.group(1) or kind.group(3)) not in allowed:
            names = [name for d in allowed for name in ([d, "cuda:N"] if d == "cuda" else [d])]
            listed = ", ".join(names[:-1]) + f" or {names[-1]}"
            raise InputError(f"device must be {listed}, got {self.device!r}")
        if self.dtype not in DTYPES:
            raise InputError(f"dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        super().__post_init__()


@own_checks
@dataclasses.dataclass(frozen=True, kw_only=True)
class TaskSetting(SharedPart):
    """The part of a settings class that runs on one task. A class that keeps only names (to
    fingerprint them) sets ``TASK_OBJECTS = False``; one that can run without a task sets
    ``TASK_OPTIONAL = True``."""

    TASK_OBJECTS: ClassVar[bool] = True
    TASK_OPTIONAL: ClassVar[bool] = False

    task: str | Task | None = "capitalize"
    """The task: a built-in task's name or a task file (a loaded Task too where the class takes
    one; None where it can run without a task)."""

    def __post_init__(self) -> None:
        if self.task is None and not self.TASK_OPTIONAL:
            raise InputError("task is missing: give a built-in task's name or a task file")
        if self.task is not None and not (
            isinstance(self.task, str) or (self.TASK_OBJECTS and isinstance(self.task, Task))
        ):
            kinds = "a task name or file" + (", a Task" if self.TASK_OBJECTS else "")
            kinds += " or None" if self.TASK_OPTIONAL else ""
            raise InputTypeError(f"task must be {kinds}, got {type(self.task).__name__}")
        super().__post_init__()
