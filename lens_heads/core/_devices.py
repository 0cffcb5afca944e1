"""Where a model runs and in which precision: the device and dtype a user names ("auto" picks
the GPU when there is one), and whether a device computes bfloat16 natively.

>>> resolve_device("cpu").type
'cpu'"""

from __future__ import annotations

import torch

from lens_heads.core._errors import InputError
from lens_heads.core._provenance import cpu_native_bf16

__all__ = ["native_bf16", "resolve_device", "resolve_dtype"]


def resolve_device(device: str | torch.device) -> torch.device:
    """``"auto"``: CUDA when available, else the CPU; anything else as ``torch.device``."""
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def resolve_dtype(dtype: torch.dtype | str, device: str | torch.device = "cpu") -> torch.dtype:
    """A ``torch.dtype`` from a dtype or its name; ``"auto"`` is bfloat16 on a CUDA device
    with native bf16 and float32 elsewhere (on CPUs training uses bf16 *autocast* instead:
    ``TrainingConfig(precision="auto")``)."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype == "auto":
        device = torch.device(device)
        cuda_bf16 = device.type == "cuda" and torch.cuda.is_available()
        return torch.bfloat16 if cuda_bf16 and torch.cuda.is_bf16_supported() else torch.float32
    value = getattr(torch, str(dtype), None)
    if not isinstance(value, torch.dtype) or not value.is_floating_point:
        raise InputError(
            f"unknown dtype {dtype!r}; use 'auto', 'float32', 'bfloat16', 'float16' or a "
            "torch.dtype"
        )
    return value


def native_bf16(device: str | torch.device = "cpu") -> bool:
    """Does ``device`` compute bfloat16 natively (so that bf16 autocast is faster than fp32)?

    CUDA: ``torch.cuda.is_bf16_supported()``; CPU: the ``avx512_bf16`` or ``amx_bf16`` flag in
    ``/proc/cpuinfo`` (without them bf16 matmuls are emulated, several times slower than fp32).
    """
    device = torch.device(device)
    if device.type == "cuda":
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    return device.type == "cpu" and cpu_native_bf16()
