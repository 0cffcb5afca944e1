"""The settings of a removal sweep (:func:`lens_heads.removal_sweep`): what is tracked at each
step, how the steps are generated and batched -- one object, validated once -- and
:func:`sweep_example`, the held-out example a sweep tracks unless told.

>>> SweepConfig(every=2, max_new_tokens=0).every
2
>>> SweepConfig(engine="fast")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
lens_heads.core._errors.InputError: engine must be 'batched' or 'naive', got 'fast'
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from lens_heads.core import Example, InputError, PromptFormat, Task, encode_example
from lens_heads.core.internal import (
    ABLATIONS,
    AblationSetting,
    BatchSetting,
    ChatSetting,
    NewTokensSetting,
    ProgressSetting,
    check_int,
    own_checks,
)

__all__ = ["ENGINES", "SweepConfig", "sweep_example"]

#: how steps are evaluated: batched (default) or the naive reference loop (same results)
ENGINES = ("batched", "naive")


@own_checks  # __post_init__ checks every field: users and the tests see the same clear errors
@dataclass(frozen=True, kw_only=True)
class SweepConfig(
    ChatSetting,
    ProgressSetting,
    AblationSetting,
    BatchSetting.with_defaults(batch_size=None),
    NewTokensSetting.with_defaults(max_new_tokens=20),
):
    """How a removal sweep runs (``ablation``: zero, mean or resample; resample needs no
    continuations; ``batch_size``: steps evaluated together, None: as many as fit)."""

    MIN_NEW_TOKENS = 0  # no continuations

    ALLOWED_ABLATIONS = ABLATIONS
    ABLATION_WHERE = "removal_sweep"

    track_top_k: int = 5
    """How many of the full model's most likely next tokens to track besides the target."""
    every: int = 1
    """Evaluate every k-th step only (plus the last)."""
    influential_k: int | None = None
    """Re-order the first k heads by the gain in the target's rank each causes alone."""
    engine: str = "batched"
    """batched (default) or naive: the reference loop, one step at a time (for checking)."""

    RENAMED: ClassVar[dict[str, str]] = {"generate_tokens": "max_new_tokens"}

    def __post_init__(self) -> None:
        super().__post_init__()  # the shared parts' checks
        if self.engine not in ENGINES:
            raise InputError(f"engine must be 'batched' or 'naive', got {self.engine!r}")
        if self.ablation == "resample" and self.max_new_tokens:
            raise InputError(
                "resample ablation has no donor for generated tokens: pass max_new_tokens=0"
            )
        check_int("every", self.every, minimum=1)
        check_int("track_top_k", self.track_top_k, minimum=0)
        if self.influential_k is not None:
            check_int("influential_k", self.influential_k, minimum=1)

    def stored(self) -> dict[str, Any]:
        """The fields as stored with a result."""
        values = asdict(self)
        values.pop("progress")
        return values


def sweep_example(model: Any, held_out: Task, chat: bool) -> Example:
    """The first held-out example whose answer is one token (so the tracked target is the whole
    answer), else the first one."""
    for example in held_out.examples:
        prompt = PromptFormat(chat=chat).render(example.input, model.tokenizer)
        encoded = encode_example(model.tokenizer, prompt, example.output, chat=chat)
        if len(encoded.answer_tokens) == 1:
            return example
    return held_out.examples[0]
