"""The settings of a plan (:class:`PlanConfig`): which job, on which device, in which precision,
how large its batches are -- and the devices a plan knows without one at hand (:data:`GPUS`).

>>> PlanConfig(job="train-mask", batch_size=16, device="cuda").resolved_dtype()
'bfloat16'
>>> PlanConfig(job="sweeep")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
lens_heads.core._errors.InputError: unknown job 'sweeep'; the jobs are train-mask, roles, sweep, ...
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from lens_heads.core import InputError
from lens_heads.core.internal import (
    AblationsSetting,
    BatchSetting,
    CheckpointSetting,
    HeldOutSetting,
    LoadingSetting,
    MasksSetting,
    NewTokensSetting,
    PrecisionSetting,
    check_int,
    own_checks,
)

__all__ = ["GPUS", "JOBS", "GpuSpec", "PlanConfig"]

#: what a plan can describe: the commands that load a model and compute with it
JOBS = ("train-mask", "roles", "sweep", "atlas", "eval", "generate")


@dataclass(frozen=True)
class GpuSpec:
    """A GPU as a plan sees it: its memory as ``torch`` reports it and its dense throughput from
    the vendor's datasheet (no sparsity)."""

    name: str
    memory_gib: float
    bf16_tflops: float
    fp32_tflops: float


#: GPUs a plan can assume when none is visible (NVIDIA datasheets: H100 SXM5 989 TFLOP/s dense
#: bf16 and 67 TFLOP/s fp32, H200 the same compute with 141 GB, A100 80 GB 312 and 19.5, L4 121
#: and 30; memory as torch reports the card, about 1.5 % below the decimal gigabytes sold)
GPUS = {
    "h100": GpuSpec("NVIDIA H100 80GB HBM3", 79.2, 989.0, 67.0),
    "h200": GpuSpec("NVIDIA H200", 139.8, 989.0, 67.0),
    "a100": GpuSpec("NVIDIA A100-SXM4-80GB", 79.2, 312.0, 19.5),
    "l4": GpuSpec("NVIDIA L4", 22.0, 121.0, 30.3),
}

#: each job's typical rows, tokens per row, answer tokens and generated tokens when not given:
#: translation-length prompts for training (the built-in en-fr task in SmolLM2's chat template
#: is 41-53 tokens with its answer, 10 answer tokens on average), word prompts elsewhere
DEFAULTS: dict[str, dict[str, int]] = {
    "train-mask": {"batch_size": 16, "seq_len": 53, "answer_tokens": 10, "max_new_tokens": 0},
    "roles": {"batch_size": 8, "seq_len": 53, "answer_tokens": 10, "max_new_tokens": 0},
    "sweep": {"batch_size": 0, "seq_len": 37, "answer_tokens": 0, "max_new_tokens": 20},
    "atlas": {"batch_size": 8, "seq_len": 37, "answer_tokens": 1, "max_new_tokens": 0},
    "eval": {"batch_size": 16, "seq_len": 43, "answer_tokens": 10, "max_new_tokens": 50},
    "generate": {"batch_size": 1, "seq_len": 37, "answer_tokens": 0, "max_new_tokens": 30},
}


@own_checks  # __post_init__ checks every field: users and the tests see the same clear errors
@dataclass(frozen=True, kw_only=True)
class PlanConfig(
    LoadingSetting.with_defaults(dtype="auto"),
    PrecisionSetting,
    CheckpointSetting,
    AblationsSetting,
    MasksSetting.with_defaults(n_masks=4),
    BatchSetting.with_defaults(batch_size=None),
    HeldOutSetting.with_defaults(n_eval=40),
    NewTokensSetting,
):
    """What a plan describes (:func:`lens_heads.plan`, ``lens-heads plan``). A field left at
    None takes the job's typical value (:data:`DEFAULTS`). ``batch_size`` is the rows of a
    forward: a training step's examples (roles: per seed), a sweep chunk's steps (0: as the
    sweep chooses), an atlas forward's prompts or an evaluation batch."""

    MIN_BATCH = 0
    MIN_NEW_TOKENS = 0  # jobs that generate nothing
    ALLOWED_DEVICES = ("cpu", "cuda")  # the GPUs a plan knows are CUDA ones

    job: str = "train-mask"
    """The job: train-mask, roles (three gate fits), sweep (a removal sweep), atlas (every
    single-head effect), eval (an evaluation table) or generate."""
    seq_len: int | None = None
    """Tokens per row: prompt and answer for training, the prompt elsewhere (default: the job's
    typical length; translation prompts for training)."""
    answer_tokens: int | None = None
    """Answer tokens per row whose loss training computes."""
    prefix_len: int = 0
    """Atlas: first tokens every prompt shares (run once per head when that pays)."""
    gpu: str = "auto"
    """Which GPU a cuda plan assumes: auto (the visible one, else an H100), h100, h200, a100, l4."""
    offload_layers: int = 0
    """Decoder layers whose weights stay in CPU memory and move to the GPU for each forward."""

    def __post_init__(self) -> None:
        super().__post_init__()  # the shared parts' checks
        if self.job not in JOBS:
            raise InputError(f"unknown job {self.job!r}; the jobs are {', '.join(JOBS)}")
        for name in ("seq_len", "answer_tokens"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), minimum=0 if name != "seq_len" else 1)
        check_int("prefix_len", self.prefix_len, minimum=0)
        check_int("offload_layers", self.offload_layers, minimum=0)
        if self.gpu != "auto" and self.gpu not in GPUS:
            raise InputError(f"gpu must be auto or one of {', '.join(GPUS)}, got {self.gpu!r}")
        if self.offload_layers and self.device == "cpu":
            raise InputError("offload_layers moves layers off a GPU: plan with device='cuda'")
        if self.batch_size == 0 and self.job != "sweep":
            raise InputError("batch_size must be at least 1 (0 is the sweep's own choice)")

    @property
    def training(self) -> bool:
        return self.job in ("train-mask", "roles")

    @property
    def on_gpu(self) -> bool:
        return self.device != "cpu"

    def value(self, name: str) -> int:
        """A row-size field, or the job's typical value when it is None."""
        given = getattr(self, name)
        return DEFAULTS[self.job][name] if given is None else int(given)

    def resolved_dtype(self) -> str:
        """The weights dtype (``auto``: bfloat16 on a GPU, float32 on a CPU)."""
        if self.dtype != "auto":
            return self.dtype
        return "bfloat16" if self.on_gpu else "float32"

    def autocast(self) -> bool:
        """Whether training runs under bf16 autocast (``auto``: where the device computes bf16
        natively, as :meth:`lens_heads.TrainingConfig.resolve_precision` decides)."""
        if not self.training or self.precision == "float32":
            return False
        if self.precision == "bfloat16":
            return True
        if self.on_gpu:
            return True
        from lens_heads.core.internal import cpu_native_bf16

        return cpu_native_bf16()

    def with_(self, **changes: Any) -> PlanConfig:
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        values = asdict(self)
        values["ablations"] = list(self.ablations)
        return values
