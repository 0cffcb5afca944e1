"""Causal head roles: which heads a task needs, which hurt it and which do nothing, from three
fits of sigmoid gates in the one trainer (the method of Causal Head Gating, Nam et al. 2025).

1. ``free``: gates ``sigmoid(W)``, initially uniform in (0, 1), trained on the task's answer
   tokens with no other term;
2. ``down``: from the free gates, with a pull of every gate towards 0 (``pull`` times the mean
   gate logit clamped to +-4): a head whose gate stays open is one the task cannot do without;
3. ``up``: from the free gates, with the same pull towards 1: a head whose gate still closes
   makes the task worse when present.

Per head and seed the class is **facilitating** when its ``down`` gate stays >= ``threshold``,
**interfering** when its ``up`` gate falls below it, **irrelevant** when neither, and
**inconsistent** when both (a fit that did not settle). A head's class is the one most of its
seeds give (**no majority** when classes tie), and ``agreement`` is the share of seeds that give
it.
Several seeds train together, one per-row mask each, in one batch.

>>> import lens_heads as lh
>>> from lens_heads.core._tasks import Example, Task
>>> model = lh.tiny_model(n_layers=2, n_heads=4)
>>> task = Task("upper", tuple(Example(w, w.upper()) for w in "abcdefghijklmnop"))
>>> config = RolesConfig(steps=2, pulled_steps=2, n_masks=2, batch_size=4, n_eval=4, evaluate=False)
>>> roles = head_roles(model, task, config)
>>> roles.gates.shape, set(roles.to_frame()["class"]) <= set(MAJORITY_CLASSES)
(torch.Size([3, 2, 2, 4]), True)
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import torch
from torch import Tensor

from lens_heads.core import (
    Fingerprint,
    HeadMask,
    InputError,
    Stages,
    Task,
    claim_folder,
    configure,
    get_task,
    write_atomic,
)
from lens_heads.core.internal import (
    ModelLike,
    check_numeric_fields,
    composed,
    model_name,
    own_checks,
)
from lens_heads.engine import MaskTrainingResult, TrainingConfig, evaluate, train_mask
from lens_heads.heads_up._roles_result import CLASSES, FITS, MAJORITY_CLASSES, HeadRoles

__all__ = ["CLASSES", "FITS", "MAJORITY_CLASSES", "HeadRoles", "RolesConfig", "head_roles"]


def _gate_training() -> TrainingConfig:
    """The trainer's settings of the three fits by default (Causal Head Gating 0.1.0: Adam at a
    constant learning rate 1 from uniform gates, with the short schedule's batch)."""
    return TrainingConfig(
        steps=200, batch_size=8, lr=1.0, min_lr=0.0, warmup_fraction=0.0, gates="sigmoid",
        n_masks=4, n_eval=40,
    )  # fmt: skip


#: the trainer's fields a roles fit reads (the others keep their defaults: the fits fix them)
TRAINING_FIELDS = (
    "steps", "n_masks", "lr", "batch_size", "n_eval", "seed", "precision", "shots", "answer_end",
    "ablation", "chat",
)  # fmt: skip


@composed
@own_checks
@dataclass(frozen=True, kw_only=True)
class RolesConfig:
    """Settings of :func:`head_roles`: the trainer's settings of the fits (``training``, a
    :class:`TrainingConfig` with sigmoid gates; its ``steps`` are the free fit's) and what the
    roles add. The defaults follow Causal Head Gating 0.1.0 (Adam at a constant learning rate 1,
    pull weight 0.1, clamp 4) with the short schedule's batch. The trainer's fields are also
    keywords of their own (``RolesConfig(n_masks=2)``).

    >>> RolesConfig(n_masks=2).training.n_masks
    2
    >>> RolesConfig(n_masks=0)
    Traceback (most recent call last):
    ...
    lens_heads.core._errors.InputError: n_masks must be at least 1, got 0
    """

    training: TrainingConfig = field(default_factory=_gate_training)
    """The trainer's settings of the fits: masks per fit (``n_masks``, one per seed, trained
    together in one batch), the free fit's ``steps``, the constant ``lr``, ``batch_size`` (each
    seed sees every example), the held-out ``n_eval`` (evaluated with the sets found), ``seed``,
    ``precision``, ``shots``, ``answer_end``, ``chat`` and ``ablation`` (what a closed gate's head
    outputs: zero, or its mean output over the training prompts, in the fits and the
    evaluation)."""
    pulled_steps: int = 200
    """Updates of each pulled fit (down, up)."""
    pull: float = 0.1
    """Weight of the pull on the mean clamped gate logit in the down and up fits."""
    threshold: float = 0.5
    """A gate at or above it is open."""
    evaluate: bool = True
    """Evaluate the sets found (generation on the held-out examples)."""

    #: the trainer's fields the command line shows (the fits fix the others)
    SHOWN: ClassVar[dict[str, tuple[str, ...]]] = {"training": TRAINING_FIELDS}

    def __post_init__(self) -> None:
        check_numeric_fields(self)
        if not isinstance(self.training, TrainingConfig) or self.training.gates != "sigmoid":
            raise InputError(
                "training must be a TrainingConfig with gates='sigmoid' (the fits train gates)"
            )
        if self.pulled_steps < 1:
            raise InputError(f"pulled_steps must be a positive integer, got {self.pulled_steps}")
        if self.pull <= 0:
            raise InputError(f"pull must be positive (its sign is the fit's), got {self.pull}")
        if not 0 < self.threshold < 1:
            raise InputError(f"threshold must lie in (0, 1), got {self.threshold}")
        self.training_of("up")  # the trainer's own checks, before any model loads

    def training_of(self, fit: str) -> TrainingConfig:
        """The trainer's settings of one fit (``free``, ``down`` or ``up``): ``training`` at a
        constant learning rate, with the fit's steps and pull."""
        if fit not in FITS:
            raise InputError(f"fit must be one of {', '.join(FITS)}, got {fit!r}")
        pull = {"free": 0.0, "down": self.pull, "up": -self.pull}[fit]
        steps = self.training.steps if fit == "free" else self.pulled_steps
        return replace(self.training, steps=steps, min_lr=self.training.lr, gate_pull=pull)

    def flat(self) -> dict[str, Any]:
        """The settings as one flat record (as stored results and folders name them)."""
        values = {name: getattr(self.training, name) for name in TRAINING_FIELDS}
        values.update(pulled_steps=self.pulled_steps, pull=self.pull, threshold=self.threshold,
                      evaluate=self.evaluate)  # fmt: skip
        return values


def _fit(
    model: ModelLike,
    task: Task,
    config: TrainingConfig,
    stages: Stages | None,
    name: str,
    initial: Tensor | None,
    progress: bool,
) -> MaskTrainingResult:
    def compute(where: Path | None) -> MaskTrainingResult:
        result = train_mask(
            model,
            task,
            config,
            checkpoint_dir=where,
            resume=True,
            progress=progress,
            initial=initial,
        )
        if where is not None:
            result.save(where)
        return result

    if stages is None:
        return compute(None)
    return stages(name, compute, MaskTrainingResult.load)


def _gates(result: MaskTrainingResult) -> Tensor:
    gates = torch.sigmoid(result.W.detach().float())
    return gates if gates.ndim == 3 else gates[None]


def _evaluate_sets(
    model: ModelLike, task: Task, roles: HeadRoles, config: RolesConfig, progress: bool
) -> pd.DataFrame:
    """Accuracy and answer CE of the held-out examples: the model without and with the
    instruction, the heads the down fit keeps (a set that suffices), and the model without its
    interfering heads, without and with the instruction (does removing them help?)."""
    kept_down = roles.majority_open("down")
    not_interfering = roles.classes != MAJORITY_CLASSES.index("interfering")
    plans: list[tuple[str, HeadMask | None, list[str]]] = [
        ("all heads", None, ["original"] + (["instruction"] if task.instruction else [])),
        ("heads the down fit keeps", HeadMask(kept_down), ["mask"]),
        (
            "without interfering heads",
            HeadMask(not_interfering),
            ["mask"] + (["mask+instruction"] if task.instruction else []),
        ),
    ]
    rows = []
    for name, mask, settings in plans:
        if mask is not None and mask.n_selected == 0:
            continue  # nothing to run: a mask without heads
        result = evaluate(
            model,
            task,
            settings,
            mask=mask,
            n_eval=config.training.n_eval,
            shots=config.training.shots,
            ablation=config.training.ablation,
            chat=config.training.chat,
            progress=progress,
        )
        for _, run in result.runs.iterrows():
            rows.append(
                {
                    "heads": name,
                    "instructed": "instruction" in run["setting"],
                    "n heads": int(run["heads"]),
                    **{key: float(run[key]) for key in result.metrics},
                }
            )
    return pd.DataFrame(rows)


def head_roles(
    model: ModelLike,
    task: Task | str | os.PathLike[str],
    config: RolesConfig | None = None,
    *,
    out: str | os.PathLike[str] | None = None,
    progress: bool = True,
    overwrite: bool = False,
    **overrides: Any,
) -> HeadRoles:
    """Fit the three gate sets of ``task`` on ``model`` and class every head (see the module);
    ``config`` is a :class:`RolesConfig` (its fields also as keywords: ``n_masks=2``).

    With ``out`` each fit is a stage of that folder (checkpointed while it trains): a killed run
    resumes, a finished one reloads. The result is saved in ``out/roles``. The folder is resumed
    only by the same model (weights, tokenizer), task examples and settings: another one is
    refused naming what differs, unless ``overwrite`` (then every fit runs again).
    """
    config = configure(RolesConfig, config, overrides, "head_roles")
    task = task if isinstance(task, Task) else get_task(task)
    folder = Path(out) if out is not None else None
    fingerprint = Fingerprint.of(
        model, {**config.flat(), "task": task.name, "model": model_name(model)}, {"task": task}
    )
    stages = Stages(folder, fingerprint) if folder is not None else None
    if folder is not None:
        claim_folder(
            folder,
            fingerprint,
            what="head roles",
            overwrite=overwrite,
            stages=(*FITS, "evaluation", "roles"),
            remedy="choose another out folder (--out), or pass overwrite=True (--overwrite) to "
            "fit them again",
            later={"ablation": "zero", "chat": None},  # what folders from before them ran
        )
    free = _fit(model, task, config.training_of("free"), stages, "free", None, progress)
    start = free.W.detach().clone()
    down = _fit(model, task, config.training_of("down"), stages, "down", start, progress)
    up = _fit(model, task, config.training_of("up"), stages, "up", start, progress)
    gates = torch.stack([_gates(free), _gates(down), _gates(up)])
    losses = {
        name: float(fit.history["loss"].iloc[-1])
        for name, fit in zip(FITS, (free, down, up), strict=True)
    }
    roles = HeadRoles(
        model=model_name(model),
        task=task.name,
        gates=gates,
        threshold=config.threshold,
        settings={**config.flat(), "final loss": losses},
        seconds={
            name: float(fit.timing.get("seconds", float("nan")))
            for name, fit in zip(FITS, (free, down, up), strict=True)
        },
    )
    if config.evaluate:
        if stages is None:
            evaluation = _evaluate_sets(model, task, roles, config, progress)
        else:
            evaluation = stages(
                "evaluation",
                lambda where: _save_frame(
                    where, _evaluate_sets(model, task, roles, config, progress)
                ),
                lambda where: pd.read_csv(where / "evaluation.csv"),
            )
        roles = replace(roles, evaluation=evaluation)
    if folder is not None:
        roles.save(folder / "roles")
    return roles


def _save_frame(where: Path, frame: pd.DataFrame) -> pd.DataFrame:
    where.mkdir(parents=True, exist_ok=True)
    write_atomic(where / "evaluation.csv", frame.to_csv(index=False))
    return frame
