"""What a mask-training checkpoint must share with the run that resumes it: the model (its
fingerprint once the weights are loaded; its name and shape before), the training examples and
the :class:`TrainingConfig`; anything else is a :class:`CheckpointError` naming what differs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from lens_heads.core import Fingerprint, InputError, LensHeadsError, Task, head_shape
from lens_heads.core.internal import (
    check_fingerprint,
    check_settings,
    model_fingerprint,
    model_name,
)
from lens_heads.engine._training_config import _LATER_FIELDS, TrainingConfig

__all__ = [
    "CHECKPOINT_FILE",
    "CHECKPOINT_FORMAT",
    "CheckpointError",
    "check_checkpoint",
    "checkpoint_identity",
]

CHECKPOINT_FILE = "checkpoint.safetensors"
CHECKPOINT_FORMAT = "lens_heads.mask_checkpoint/1"


class CheckpointError(LensHeadsError, ValueError):
    """A checkpoint does not belong to this run (another model, task or config), or a fresh
    run would overwrite one."""


def checkpoint_identity(model: Any, train_set: Task, task_name: str) -> dict[str, Any]:
    """What a checkpoint must share with the run resuming it: the model (its fingerprint where
    the weights are loaded; its name and shape before that) and the training examples."""
    identity = {
        "model": model_name(model),
        "shape": list(head_shape(model)),
        "task": task_name,
        "task_fingerprint": train_set.fingerprint(),
    }
    if isinstance(model, torch.nn.Module):  # not a shape read before the weights
        identity["model_fingerprint"] = model_fingerprint(model)
    return identity


def check_checkpoint(path: Path, identity: dict[str, Any], config: TrainingConfig) -> Any:
    """The header of the checkpoint at ``path`` if it belongs to this run; a
    :class:`CheckpointError` naming what differs (or that it is unreadable) otherwise."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as file:
            header = file.metadata() or {}
        if header.get("format") != CHECKPOINT_FORMAT:
            raise InputError(f"format tag {header.get('format')!r}")
        state = json.loads(header["state"])
    except Exception as error:
        raise CheckpointError(
            f"{path} is not a readable mask-training checkpoint ({type(error).__name__}: "
            f"{error}); delete it to start afresh"
        ) from error
    identity = dict(identity)
    wanted_model = identity.pop("model_fingerprint", None)
    remedy = "resume with the same model and task, or use another checkpoint directory"
    check_settings(
        {k: state.get(k) for k in identity},
        identity,
        where=path,
        what="a checkpoint of another run",
        remedy=remedy,
        error=CheckpointError,
    )
    if wanted_model is not None:
        stored = state.get("model_fingerprint")
        check_fingerprint(
            Fingerprint(model=stored),
            Fingerprint(model=wanted_model),
            where=path,
            what="a checkpoint",
            remedy=remedy,
            known=stored is not None,
            error=CheckpointError,
        )
    check_settings(
        {**_LATER_FIELDS, **TrainingConfig.current_keys(state["config"])},
        config.to_dict(),
        where=path,
        what="a checkpoint",
        remedy="resume with the same TrainingConfig, or use another checkpoint directory",
        error=CheckpointError,
    )
    return state
