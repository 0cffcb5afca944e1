"""Head-mask training (Heads up! §3.2): a 0/1 mask over all attention heads learned on
instruction-free task data with a Gumbel-sigmoid straight-through estimator, the model frozen.

>>> import lens_heads as lh
>>> from lens_heads.tasks import Example, Task
>>> model = lh.tiny_model(n_layers=2, n_heads=4)
>>> task = Task("upper", tuple(Example(w, w.upper()) for w in "abcdefghijklmnop"))
>>> config = lh.TrainingConfig(steps=3, batch_size=4, n_eval=4, dtype="float32")
>>> result = lh.train_mask(model, task, config, progress=False)
>>> tuple(result.W.shape), result.mask.shape, len(result.history)
((2, 4), (2, 4), 3)

The algorithm (``DESIGN.md`` §2): a logit ``W[l, h]`` per (layer, query head), initialised from
N(4, 0.02); at every step each example of the batch draws its own noise ``G = log(-log U)``,
``soft = sigmoid((W + G) / tau)``, ``hard = 1[soft > 0.5]`` and the forward pass uses
``hard - soft.detach() + soft`` on ``blocks.{l}.attn.hook_z`` (through
:func:`lens_heads.hooks.mask_hooks`): the forward value is binary and the gradient is the soft
one's. ``tau`` falls linearly from 4 to 0.05 over the first 40 % of the steps; AdamW (no weight
decay) with lr 1e-2, 10 % linear warm-up and a cosine decay to 1e-4; batch 16; the loss is the
cross-entropy of the answer tokens only. The final mask keeps the heads with ``sigmoid(W) >= 0.5``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import time
import warnings
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor
from tqdm.auto import tqdm

from lens_heads._checks import check_context, check_numeric_fields
from lens_heads._io import save_figures, write_atomic, write_atomic_with
from lens_heads.hooks import mask_hooks
from lens_heads.masks import HeadMask, format_head, parse_head
from lens_heads.models import ModelLike, head_shape, model_name
from lens_heads.prompts import (
    ANSWER_ENDS,
    EncodedExample,
    PromptFormat,
    answer_end_tokens,
    collate,
    encode_example,
    has_chat_template,
    pad_token_id,
    sample_shots,
)
from lens_heads.tasks import Task, get_task

__all__ = [
    "CheckpointError",
    "MaskTrainingResult",
    "TrainingConfig",
    "gumbel_noise",
    "lr_at",
    "straight_through_mask",
    "tau_at",
    "train_mask",
]

logger = logging.getLogger(__name__)

_CHECKPOINT = "checkpoint.safetensors"
_CHECKPOINT_FORMAT = "lens_heads.mask_checkpoint/1"
_RESULT_FORMAT = "lens_heads.mask_training/1"
_HISTORY_COLUMNS = ("step", "loss", "tau", "lr", "kept")
_DTYPES = {
    "auto": "auto",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float32": "float32",
    "fp32": "float32",
}


class CheckpointError(ValueError):
    """A checkpoint does not belong to this run (another model, task or config), or a fresh
    run would overwrite one."""


# -- configuration ----------------------------------------------------------------------------
@dataclass(frozen=True)
class TrainingConfig:
    """Hyper-parameters of :func:`train_mask`; the defaults are the paper's (6,250 steps).

    On a 2-core CPU use :meth:`short` (200 steps, batch 8, lr 0.1; see ``docs/training.md``).
    ``dtype="auto"`` trains under bfloat16 autocast where the device computes bf16 natively
    (:func:`native_bf16`) and in float32 elsewhere: on a CPU without ``avx512_bf16``/``amx_bf16``
    bf16 autocast is about 3.5x *slower* than fp32 (measured); the resolved dtype is recorded.

    ``answer_end`` says what closes each training target after the answer
    (:func:`lens_heads.prompts.answer_end_tokens`): ``"auto"`` (default, the faithful choice)
    trains on the chat template's end-of-turn token (``<|im_end|>`` for SmolLM2) for chat
    prompts and on EOS for base-model prompts, so the masked model answers *and stops*;
    ``"none"`` trains on the answer alone (masked outputs then run on: "Jungle. Jungle. ...").

    ``n_eval`` examples at the end of the task (after an optional shuffle with ``split_seed``,
    as :meth:`lens_heads.tasks.Task.split`) are held out and never trained on;
    :func:`lens_heads.evaluate` with the same ``n_eval``/``split_seed`` (or a smaller ``n_eval``)
    evaluates on held-out examples only. ``n_eval=0`` trains on every example.

    Experimental (Appendix C.3, off by default): ``ffn_masks`` trains one more logit per layer
    that gates the MLP output (``blocks.{l}.hook_mlp_out``) jointly with the heads;
    ``query_side`` masks inside the softmax instead of the head output: a masked head attends
    uniformly over the positions it may see (``hook_pattern``), its output is not removed.

    >>> TrainingConfig.short().steps, TrainingConfig().steps
    (200, 6250)
    >>> TrainingConfig(tau_begin=0.1, tau_end=1.0)
    Traceback (most recent call last):
    ...
    ValueError: tau_end (1.0) must not exceed tau_begin (0.1): tau anneals downwards
    """

    steps: int = 6250
    batch_size: int = 16
    lr: float = 1e-2
    min_lr: float = 1e-4
    warmup_fraction: float = 0.1
    weight_decay: float = 0.0
    tau_begin: float = 4.0
    tau_end: float = 0.05
    tau_fraction: float = 0.4
    init_mean: float = 4.0
    init_std: float = 0.02
    noise: str = "example"  # "example" (per example, the paper's) or "batch"
    sparsity: float = 0.0
    dtype: str = "auto"
    seed: int = 0
    n_eval: int = 100
    split_seed: int | None = None
    shots: int = 0
    chat: bool | None = None
    separator: str = "\n\n"
    answer_end: str = "auto"
    trajectory_every: int | None = None
    ffn_masks: bool = False
    query_side: bool = False
    soft: bool = False  # LAHIS soft mask: multipliers >= 0 from 1, no noise (issue 14)
    trainable: Sequence[str] | None = (
        None  # soft (a tuple once validated): the heads trained ("L3H7"); None = all
    )

    def __post_init__(self) -> None:
        def need(condition: bool, message: str) -> None:
            if not condition:
                raise ValueError(message)

        check_numeric_fields(self)  # 2.5 steps, lr=inf: a clear error before the ranges
        need(
            isinstance(self.steps, int) and self.steps > 0,
            f"steps must be a positive integer, got {self.steps}",
        )
        need(self.batch_size > 0, f"batch_size must be positive, got {self.batch_size}")
        need(self.lr > 0, f"lr must be positive, got {self.lr}")
        need(
            0 <= self.min_lr <= self.lr,
            f"min_lr must lie in [0, lr={self.lr}], got {self.min_lr}",
        )
        need(
            0 <= self.warmup_fraction < 1,
            f"warmup_fraction must lie in [0, 1), got {self.warmup_fraction}",
        )
        need(self.weight_decay >= 0, f"weight_decay must be >= 0, got {self.weight_decay}")
        need(
            self.tau_begin > 0 and self.tau_end > 0,
            f"temperatures must be positive, got tau_begin={self.tau_begin}, "
            f"tau_end={self.tau_end}",
        )
        need(
            self.tau_end <= self.tau_begin,
            f"tau_end ({self.tau_end}) must not exceed tau_begin ({self.tau_begin}): "
            "tau anneals downwards",
        )
        need(
            0 < self.tau_fraction <= 1,
            f"tau_fraction must lie in (0, 1], got {self.tau_fraction}",
        )
        need(self.init_std >= 0, f"init_std must be >= 0, got {self.init_std}")
        need(
            self.noise in ("example", "batch"),
            f"noise must be 'example' (per example, the paper's) or 'batch', got {self.noise!r}",
        )
        need(self.sparsity >= 0, f"sparsity must be >= 0, got {self.sparsity}")
        need(
            self.dtype in _DTYPES,
            f"dtype must be 'auto', 'bfloat16' (autocast) or 'float32', got {self.dtype!r}",
        )
        object.__setattr__(self, "dtype", _DTYPES[self.dtype])
        need(self.n_eval >= 0, f"n_eval must be >= 0, got {self.n_eval}")
        need(self.shots >= 0, f"shots must be >= 0, got {self.shots}")
        _check_soft(self)
        need(
            self.answer_end in ANSWER_ENDS,
            f"answer_end must be one of {', '.join(ANSWER_ENDS)}, got {self.answer_end!r}",
        )
        need(
            self.trajectory_every is None or self.trajectory_every > 0,
            f"trajectory_every must be positive (or None), got {self.trajectory_every}",
        )

    @classmethod
    def short(cls, **overrides: Any) -> TrainingConfig:
        """The short CPU schedule: 200 steps, batch 8, lr 0.1 (cosine to 1e-4, 10 % warm-up),
        the paper's tau schedule, init and per-example noise, ``dtype="auto"``; a few minutes
        for SmolLM2 on 2 cores (``docs/training.md``). ``overrides`` replace single fields.

        >>> TrainingConfig.short(steps=150).lr
        0.1
        """
        values: dict[str, Any] = {"steps": 200, "batch_size": 8, "lr": 0.1}
        return cls(**{**values, **overrides})

    @property
    def warmup_steps(self) -> int:
        return round(self.warmup_fraction * self.steps)

    @property
    def sample_every(self) -> int:
        """Steps between two samples of the trajectory (auto: about 500 samples per run)."""
        return self.trajectory_every or max(1, self.steps // 500)

    def resolve_dtype(self, device: str | torch.device = "cpu") -> TrainingConfig:
        """This config with ``dtype="auto"`` replaced by what ``device`` computes fast."""
        if self.dtype != "auto":
            return self
        return replace(self, dtype="bfloat16" if native_bf16(device) else "float32")

    def to_dict(self) -> dict[str, Any]:
        values = asdict(self)
        if values["trainable"] is not None:  # JSON has no tuples: keep checkpoints comparable
            values["trainable"] = list(values["trainable"])
        return values

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainingConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown TrainingConfig field(s) {unknown}")
        return cls(**values)


#: Config fields added after checkpoints existed, with the value that reproduces the behaviour
#: before them: an older checkpoint without them resumes as if it had them. (``answer_end`` is
#: not here on purpose: checkpoints from before it trained answer-only targets.)
_LATER_FIELDS: dict[str, Any] = {"soft": False, "trainable": None}


def _check_soft(config: TrainingConfig) -> None:
    """Validate (and normalise to a tuple) the soft-mask fields of ``config``."""
    if config.trainable is None:
        return
    if not config.soft:
        raise ValueError("trainable heads are for soft masks: pass soft=True with trainable")
    if isinstance(config.trainable, str):
        raise ValueError("trainable must be a list of head labels like ['L3H7'], not one string")
    labels = tuple(str(label) for label in config.trainable)
    if not labels:
        raise ValueError("trainable is empty: give at least one head (or None for all heads)")
    for label in labels:
        parse_head(label)
    object.__setattr__(config, "trainable", labels)
    if config.query_side or config.ffn_masks:
        raise ValueError("soft masks train head multipliers only: drop query_side / ffn_masks")


def native_bf16(device: str | torch.device = "cpu") -> bool:
    """Does ``device`` compute bfloat16 natively (so that bf16 autocast is faster than fp32)?

    CUDA: ``torch.cuda.is_bf16_supported()``; CPU: the ``avx512_bf16`` or ``amx_bf16`` flag in
    ``/proc/cpuinfo`` (without them bf16 matmuls are emulated, several times slower than fp32).
    """
    device = torch.device(device)
    if device.type == "cuda":
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    if device.type != "cpu":
        return False
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as file:
            for line in file:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool(flags & {"avx512_bf16", "amx_bf16"})
    except OSError:
        pass
    return False


# -- schedules and the estimator ---------------------------------------------------------------
def tau_at(step: int, config: TrainingConfig) -> float:
    """Temperature at ``step`` (0-based): linear from ``tau_begin`` to ``tau_end`` over the first
    ``tau_fraction * steps`` steps, then constant.

    >>> config = TrainingConfig(steps=100)
    >>> tau_at(0, config), tau_at(20, config), tau_at(40, config), tau_at(99, config)
    (4.0, 2.025, 0.05, 0.05)
    """
    span = config.tau_fraction * config.steps
    if step >= span:
        return config.tau_end
    progress = step / span
    return config.tau_begin + (config.tau_end - config.tau_begin) * progress


def lr_at(step: int, config: TrainingConfig) -> float:
    """Learning rate of update ``step`` (0-based): linear warm-up ``lr * (step + 1) / W`` for the
    first ``W = round(warmup_fraction * steps)`` updates, then a cosine from ``lr`` down to
    ``min_lr``: ``min_lr + (lr - min_lr) * (1 + cos(pi * (step - W) / (steps - W))) / 2``.

    >>> config = TrainingConfig(steps=100, lr=0.1, min_lr=0.0)
    >>> lr_at(0, config), lr_at(9, config), round(lr_at(55, config), 6)
    (0.01, 0.1, 0.05)
    """
    warmup = config.warmup_steps
    if step < warmup:
        return config.lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, config.steps - warmup)
    return config.min_lr + (config.lr - config.min_lr) * 0.5 * (1 + math.cos(math.pi * progress))


def gumbel_noise(shape: Sequence[int], generator: torch.Generator) -> Tensor:
    """The paper's noise ``G = log(-log U)``, ``U ~ U(0, 1)`` (clamped away from 0 and 1).

    >>> noise = gumbel_noise((3, 2), torch.Generator().manual_seed(0))
    >>> tuple(noise.shape), bool(noise.isfinite().all())
    ((3, 2), True)
    """
    uniform = torch.rand(tuple(shape), generator=generator).clamp(1e-10, 1 - 1e-7)
    return torch.log(-torch.log(uniform))


def straight_through_mask(
    weights: Float[Tensor, "..."],
    noise: Float[Tensor, "..."],
    tau: float,
) -> Float[Tensor, "..."]:
    """Gumbel-sigmoid straight-through sample: forward value ``1[sigmoid((W + G) / tau) > 0.5]``,
    gradient of ``sigmoid((W + G) / tau)``.

    >>> W = torch.tensor([[3.0, -3.0]], requires_grad=True)
    >>> mask = straight_through_mask(W, torch.zeros(1, 2), tau=1.0)
    >>> mask.tolist(), bool(torch.autograd.grad(mask.sum(), W)[0].ne(0).all())
    ([[1.0, 0.0]], True)
    """
    soft = torch.sigmoid((weights + noise) / tau)
    hard = (soft > 0.5).to(soft.dtype)
    return hard - soft.detach() + soft


# -- the result -------------------------------------------------------------------------------
def _crossings(trajectory: Tensor) -> Tensor:
    """How many times each head's sampled sigmoid(W) crosses 0.5."""
    above = trajectory >= 0.5
    return (above[1:] != above[:-1]).sum(dim=0).to(torch.int64)


@dataclass
class MaskTrainingResult:
    """What :func:`train_mask` learned and how.

    ``W`` are the trained logits, ``trajectory[i]`` is ``sigmoid(W)`` after
    ``trajectory_steps[i]`` updates (sampled every ``config.sample_every`` steps, Figure 3),
    ``history`` has one row per step (``step, loss, tau, lr, kept``: the answer CE of the batch,
    the temperature, the learning rate and the heads with ``sigmoid(W) >= 0.5`` after the
    update). ``timing`` holds the wall time (``seconds``, summed over resumed sessions),
    ``seconds_per_step`` and ``steps_this_session``.

    >>> result = MaskTrainingResult.example()
    >>> result.mask.labels, result.crossings.tolist()
    (['L0H0', 'L1H1'], [[0, 3], [1, 0]])
    """

    W: Float[Tensor, "n_layers n_heads"]
    trajectory: Float[Tensor, "n_samples n_layers n_heads"]
    trajectory_steps: list[int]
    history: pd.DataFrame
    config: TrainingConfig
    model: str
    task: str
    timing: dict[str, float] = field(default_factory=dict)
    ffn_W: Float[Tensor, " n_layers"] | None = None

    @classmethod
    def example(cls) -> MaskTrainingResult:
        """A small hand-made result (for documentation and tests)."""
        trajectory = torch.tensor(
            [
                [[0.9, 0.9], [0.9, 0.9]],
                [[0.8, 0.4], [0.4, 0.9]],
                [[0.9, 0.6], [0.3, 0.9]],
                [[0.95, 0.3], [0.2, 0.95]],
            ]
        )
        history = pd.DataFrame(
            {
                "step": [1, 2, 3],
                "loss": [2.0, 1.5, 1.0],
                "tau": [4.0, 2.0, 0.05],
                "lr": [0.1, 0.05, 0.0],
                "kept": [2, 3, 2],
            }
        )
        return cls(
            W=torch.logit(trajectory[-1]),
            trajectory=trajectory,
            trajectory_steps=[0, 1, 2, 3],
            history=history,
            config=TrainingConfig(steps=3, batch_size=1),
            model="tiny",
            task="upper",
        )

    @property
    def probabilities(self) -> Float[Tensor, "n_layers n_heads"]:
        """``sigmoid(W)``: the keep probability of each head (Figure 7); for a soft mask
        (``config.soft``) the trained multipliers themselves."""
        return self.W.clamp_min(0) if self.config.soft else torch.sigmoid(self.W)

    @property
    def mask(self) -> HeadMask:
        """The final binary mask: heads with ``sigmoid(W) >= 0.5`` (no noise); for a soft mask
        a :class:`lens_heads.scales.HeadScale` of the trained multipliers."""
        if self.config.soft:
            from lens_heads.scales import HeadScale

            meta = {"model": self.model, "task": self.task, "trained_with": "soft"}
            return HeadScale(self.W.detach().clamp_min(0), metadata=meta)
        metadata = {
            "model": self.model,
            "task": self.task,
            "steps": int(self.history["step"].max()) if len(self.history) else 0,
            "trained_with": "lens_heads.train_mask",
        }
        return HeadMask(HeadMask.from_weights(self.W).values, metadata=metadata)

    @property
    def crossings(self) -> Int[Tensor, "n_layers n_heads"]:
        """How many times each head's sampled trajectory crosses 0.5."""
        return _crossings(self.trajectory)

    @property
    def ffn_mask(self) -> Bool[Tensor, " n_layers"] | None:
        """Experimental: the MLP layers kept (``sigmoid(ffn_W) >= 0.5``), when trained."""
        return None if self.ffn_W is None else torch.sigmoid(self.ffn_W) >= 0.5

    @property
    def final_loss(self) -> float:
        return float(self.history["loss"].iloc[-1]) if len(self.history) else math.nan

    def hooks(self, model: ModelLike | None = None) -> list[tuple[str, Callable[..., Any]]]:
        """Forward hooks applying the trained masks as trained: the head mask on ``hook_z`` (or,
        with ``query_side``, inside the softmax) plus the experimental MLP mask.

        >>> hooks = MaskTrainingResult.example().hooks()
        >>> [name for name, _ in hooks]
        ['blocks.0.attn.hook_z', 'blocks.1.attn.hook_z']
        """
        values = self.mask.values
        hooks = _query_side_hooks(values) if self.config.query_side else mask_hooks(values, model)
        if self.ffn_W is not None:
            hooks += _ffn_hooks((torch.sigmoid(self.ffn_W) >= 0.5).float())
        return hooks

    # -- views ---------------------------------------------------------------------------------
    def to_frame(self) -> pd.DataFrame:
        """One row per head: ``layer, head, label, W, p`` (= sigmoid(W)), ``kept`` and
        ``crossings`` (of 0.5 along the sampled trajectory), sorted by ``p``."""
        n_layers, n_heads = self.W.shape
        crossings = self.crossings
        rows = [
            {
                "layer": layer,
                "head": head,
                "label": format_head(layer, head),
                "W": float(self.W[layer, head]),
                "p": float(self.probabilities[layer, head]),
                "kept": bool(self.probabilities[layer, head] >= 0.5),
                "crossings": int(crossings[layer, head]),
            }
            for layer in range(n_layers)
            for head in range(n_heads)
        ]
        return pd.DataFrame(rows).sort_values("p", kind="stable").reset_index(drop=True)

    def summary(self) -> dict[str, Any]:
        """Heads kept, final loss, steps and wall time, as one flat dict."""
        return {
            "model": self.model,
            "task": self.task,
            "heads_kept": self.mask.n_selected,
            "heads_total": int(self.W.numel()),
            "final_loss": self.final_loss,
            "steps": int(self.history["step"].max()) if len(self.history) else 0,
            "seconds": float(self.timing.get("seconds", math.nan)),
            "dtype": self.config.dtype,
            "lr": self.config.lr,
            "batch_size": self.config.batch_size,
        }

    def plot_trajectories(self) -> Any:
        """Figure 3: sigmoid(W) of every head over training; kept heads blue, removed red,
        heads that cross 0.5 more than once drawn bold."""
        from lens_heads.plotting import mask_trajectory_figure

        return mask_trajectory_figure(
            self.trajectory,
            self.trajectory_steps,
            title=f"Mask weights during training: {self.task} on {self.model}",
        )

    def plot_heatmap(self) -> Any:
        """Figure 7: sigmoid(W) per layer x head."""
        from lens_heads.plotting import mask_heatmap_figure

        return mask_heatmap_figure(
            self.probabilities,
            title=f"sigmoid(W): {self.task} on {self.model} ({self.mask.n_selected} kept)",
        )

    def plot_loss(self) -> Any:
        """The training loss, temperature and heads kept per step."""
        from lens_heads.plotting import training_curve_figure

        return training_curve_figure(self.history, title=f"{self.task} on {self.model}")

    def plot(self) -> Any:
        """Same as :meth:`plot_trajectories`."""
        return self.plot_trajectories()

    # -- io -------------------------------------------------------------------------------------
    def save(self, directory: str | os.PathLike[str]) -> list[Path]:
        """Write ``mask.safetensors`` (the final :class:`HeadMask`), ``training.safetensors``
        (W, trajectory), ``training.json`` (config, model, task, timing, trajectory steps),
        ``history.csv`` and ``heads.csv``; each atomically."""
        from safetensors.torch import save_file

        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        tensors = {"W": self.W.detach().float().contiguous(), "trajectory": self.trajectory}
        if self.ffn_W is not None:
            tensors["ffn_W"] = self.ffn_W.detach().float().contiguous()
        tensors_path = folder / "training.safetensors"
        write_atomic_with(tensors_path, lambda tmp: save_file(tensors, tmp))
        info = {
            "format": _RESULT_FORMAT,
            "model": self.model,
            "task": self.task,
            "config": self.config.to_dict(),
            "timing": self.timing,
            "trajectory_steps": list(self.trajectory_steps),
            "summary": self.summary(),
        }
        return [
            self.mask.save(folder / "mask.safetensors"),
            tensors_path,
            write_atomic(folder / "training.json", json.dumps(info, indent=2, default=str)),
            write_atomic(folder / "history.csv", self.history.to_csv(index=False)),
            write_atomic(folder / "heads.csv", self.to_frame().to_csv(index=False)),
        ]

    def save_figures(self, directory: str | os.PathLike[str], *, png: bool = False) -> list[Path]:
        """Write ``trajectories.html``, ``heatmap.html`` and ``loss.html`` (and ``.png`` files
        when ``png`` and kaleido can export: it needs a Chrome binary; a failure is logged)."""
        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        figures = {
            "trajectories": self.plot_trajectories(),
            "heatmap": self.plot_heatmap(),
            "loss": self.plot_loss(),
        }
        return save_figures(folder, figures, png=png)

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> MaskTrainingResult:
        """Read a result written by :meth:`save`."""
        from safetensors.torch import load_file

        folder = Path(directory)
        paths = [folder / name for name in ("training.json", "training.safetensors", "history.csv")]
        missing = [p.name for p in paths if not p.is_file()]
        if missing:
            raise FileNotFoundError(
                f"{folder} holds no saved training result (missing {', '.join(missing)}); "
                "write one with MaskTrainingResult.save()"
            )
        info = json.loads(paths[0].read_text(encoding="utf-8"))
        if info.get("format") != _RESULT_FORMAT:
            raise ValueError(f"{paths[0]} is not a training result ({info.get('format')!r})")
        tensors = load_file(str(paths[1]))
        history = pd.read_csv(paths[2])
        return cls(
            W=tensors["W"],
            trajectory=tensors["trajectory"],
            trajectory_steps=[int(s) for s in info["trajectory_steps"]],
            history=history,
            config=TrainingConfig.from_dict(info["config"]),
            model=info["model"],
            task=info["task"],
            timing={k: float(v) for k, v in info.get("timing", {}).items()},
            ffn_W=tensors.get("ffn_W"),
        )


# -- hooks of the experimental variants ----------------------------------------------------------
def _ffn_hooks(values: Tensor) -> list[tuple[str, Callable[..., Any]]]:
    """Multiply ``blocks.{l}.hook_mlp_out`` by ``values[..., l]`` (``[n_layers]`` or
    ``[batch, n_layers]``)."""
    per_example = values.ndim == 2

    def make(layer: int) -> Callable[..., Tensor]:
        def hook(out: Float[Tensor, "batch pos d_model"], hook: Any) -> Tensor:
            scale = (values[:, layer] if per_example else values[layer]).to(out.dtype)
            return out * (scale[:, None, None] if per_example else scale)

        return hook

    return [(f"blocks.{layer}.hook_mlp_out", make(layer)) for layer in range(values.shape[-1])]


def _query_side_hooks(values: Tensor) -> list[tuple[str, Callable[..., Any]]]:
    """Masking inside the softmax (C.3.2): the pattern of a head with mask value ``m`` becomes
    ``m * pattern + (1 - m) * uniform``, uniform over the causally visible positions (right-
    padded or unpadded batches; left padding's masked pads are not excluded)."""
    per_example = values.ndim == 3

    def make(layer: int) -> Callable[..., Tensor]:
        def hook(pattern: Float[Tensor, "batch head q k"], hook: Any) -> Tensor:
            n_query, n_key = pattern.shape[-2], pattern.shape[-1]
            rows = torch.arange(n_query, device=pattern.device)[:, None] + (n_key - n_query)
            visible = torch.arange(n_key, device=pattern.device)[None, :] <= rows
            uniform = visible.to(pattern.dtype) / visible.sum(-1, keepdim=True).to(pattern.dtype)
            scale = (values[:, layer] if per_example else values[layer][None]).to(pattern.dtype)
            scale = scale[:, :, None, None]
            return scale * pattern + (1 - scale) * uniform

        return hook

    return [(f"blocks.{layer}.attn.hook_pattern", make(layer)) for layer in range(values.shape[-2])]


# -- the forward pass: logits only where the loss needs them -----------------------------------
class _StopForward(Exception):
    """Raised by a hook once the final residual stream is captured."""


def _answer_logits(
    model: ModelLike,
    tokens: Int[Tensor, "batch pos"],
    answer_mask: Bool[Tensor, "batch pos"],
    fwd_hooks: list[tuple[str, Callable[..., Any]]],
    *,
    partial: bool,
) -> Float[Tensor, "n_answer d_vocab"]:
    """Logits predicting each answer token (row-major order). With ``partial`` the forward
    pass stops after the last block (its ``hook_resid_post`` is captured) and only the
    predicting positions go through ``ln_final`` and the unembedding."""
    rows, cols = answer_mask.nonzero(as_tuple=True)
    if not partial:
        logits = model.run_with_hooks(tokens, fwd_hooks=fwd_hooks)
        return logits[rows, cols - 1]
    captured: dict[str, Tensor] = {}

    def capture(resid: Tensor, hook: Any) -> None:
        captured["resid"] = resid
        raise _StopForward

    last = f"blocks.{int(model.cfg.n_layers) - 1}.hook_resid_post"
    try:
        with model.hooks(fwd_hooks=[*fwd_hooks, (last, capture)]):
            model(tokens)
    except _StopForward:
        pass
    if "resid" not in captured:
        raise RuntimeError(f"the hook {last} never fired; this model does not expose it")
    selected = captured["resid"][rows, cols - 1]
    logits = model.unembed(model.ln_final(selected))
    cap = float(getattr(model.cfg, "output_logits_soft_cap", -1.0) or -1.0)
    if cap > 0:
        logits = cap * torch.tanh(logits / cap)
    return logits


def _partial_unembed_works(model: ModelLike, tokens: Tensor, answer_mask: Tensor) -> bool:
    """Check once that the partial unembedding equals the model's own logits."""
    try:
        with torch.no_grad():
            full = _answer_logits(model, tokens, answer_mask, [], partial=False).float()
            part = _answer_logits(model, tokens, answer_mask, [], partial=True).float()
    except Exception as error:  # any surface mismatch: fall back to full logits
        logger.warning("partial unembedding unavailable (%s); using full logits", error)
        return False
    scale = float(full.abs().max().clamp_min(1.0))
    ok = part.shape == full.shape and bool((part - full).abs().max() <= 1e-4 * scale)
    if not ok:
        warnings.warn(
            "the partial unembedding (final residual -> ln_final -> unembed) does not reproduce "
            "this model's logits; training computes the full logits instead (slower)",
            stacklevel=3,
        )
    return ok


# -- data --------------------------------------------------------------------------------------
def _training_split(task: Task, config: TrainingConfig) -> Task:
    if config.n_eval == 0:
        return task
    if len(task) <= config.n_eval:
        raise ValueError(
            f"task {task.name!r} has {len(task)} examples, not more than the n_eval="
            f"{config.n_eval} held out of training (--holdout): pass a smaller n_eval, or "
            "n_eval=0 (--holdout 0 --n-eval 0) to train on every example"
        )
    train, _ = task.split(n_eval=config.n_eval, seed=config.split_seed)
    return train


def _encode_training(model: ModelLike, train: Task, config: TrainingConfig) -> list[EncodedExample]:
    tokenizer = model.tokenizer
    chat = has_chat_template(tokenizer) if config.chat is None else config.chat
    end = answer_end_tokens(
        tokenizer, chat=chat, answer_end=config.answer_end, separator=config.separator
    )
    encoded = []
    for index, example in enumerate(train.examples):
        demos: tuple[tuple[str, str], ...] = ()
        if config.shots:
            demos = sample_shots(
                train, config.shots, seed=config.seed * 100_003 + index, exclude=example.input
            )
        fmt = PromptFormat(chat=chat, instruction=None, shots=demos, separator=config.separator)
        prompt = fmt.render(example.input, tokenizer)
        encoded.append(encode_example(tokenizer, prompt, example.output, chat=chat, end_tokens=end))
        check_context(
            model,
            len(encoded[-1].tokens),
            what=f"training example {index} ({example.input[:40]!r})",
        )
    return encoded


def _trainable_heads(labels: Sequence[str] | None, n_layers: int, n_heads: int) -> Tensor:
    """Boolean ``[n_layers, n_heads]`` of the soft mask's trainable heads (all when None)."""
    if labels is None:
        return torch.ones(n_layers, n_heads, dtype=torch.bool)
    chosen = torch.zeros(n_layers, n_heads, dtype=torch.bool)
    for label in labels:
        layer, head = parse_head(label, n_layers, n_heads)
        chosen[layer, head] = True
    return chosen


def _batch_indices(step: int, n: int, batch_size: int, seed: int) -> list[int]:
    """Examples of batch ``step``: epochs of seeded permutations, the last partial batch of an
    epoch dropped. A pure function of its arguments, so a resumed run sees the same batches."""
    per_epoch = n // batch_size
    epoch, offset = divmod(step, per_epoch)
    generator = torch.Generator().manual_seed((seed * 1_000_003 + epoch + 1) % 2**63)
    order = torch.randperm(n, generator=generator)
    return order[offset * batch_size : (offset + 1) * batch_size].tolist()


def _task_fingerprint(train: Task) -> str:
    digest = hashlib.sha256()
    for example in train.examples:
        digest.update(example.input.encode() + b"\x00" + example.output.encode() + b"\x01")
    return digest.hexdigest()[:16]


# -- the trainer -------------------------------------------------------------------------------
class MaskTrainer:
    """The state of one training run (used by :func:`train_mask` and the benchmarks).

    ``step()`` performs one update; ``save_checkpoint``/``load_checkpoint`` persist everything a
    resumed run needs (W, AdamW state, the noise generator's state, the history so far).
    """

    def __init__(self, model: ModelLike, task: Task, config: TrainingConfig) -> None:
        self.model = model
        self.task = task
        self.device = torch.device(str(getattr(model.cfg, "device", "cpu") or "cpu"))
        config = config.resolve_dtype(self.device)
        self.config = config
        self.train_set = _training_split(task, config)
        if config.batch_size > len(self.train_set):
            held_out = f" after holding out n_eval={config.n_eval}" if config.n_eval else ""
            raise ValueError(
                f"batch_size {config.batch_size} is larger than the {len(self.train_set)} "
                f"training examples of task {task.name!r}{held_out}; use a smaller batch_size "
                "(or a smaller n_eval, or more examples)"
            )
        self.encoded = _encode_training(model, self.train_set, config)
        self.pad_id = pad_token_id(model.tokenizer)
        self.shape = head_shape(model)
        self.generator = torch.Generator().manual_seed(config.seed % 2**63)
        n_layers, n_heads = self.shape
        init = torch.empty(n_layers, n_heads).normal_(
            config.init_mean, config.init_std, generator=self.generator
        )
        self.trainable: Tensor | None = None
        if config.soft:
            init = torch.ones(n_layers, n_heads)
            self.trainable = _trainable_heads(config.trainable, n_layers, n_heads).to(self.device)
        self.W = init.to(self.device).requires_grad_(True)
        self.ffn_W: Tensor | None = None
        parameters = [self.W]
        if config.ffn_masks:
            ffn = torch.empty(n_layers).normal_(
                config.init_mean, config.init_std, generator=self.generator
            )
            self.ffn_W = ffn.to(self.device).requires_grad_(True)
            parameters.append(self.ffn_W)
        self.optimizer = torch.optim.AdamW(
            parameters, lr=lr_at(0, config), weight_decay=config.weight_decay
        )
        self.step_index = 0
        self.history: list[tuple[int, float, float, float, int]] = []
        self.trajectory: list[Tensor] = [self._probabilities()]
        self.trajectory_steps: list[int] = [0]
        self.elapsed = 0.0
        self.partial = True
        self.fingerprint = _task_fingerprint(self.train_set)
        self._checked = False

    # -- one update --------------------------------------------------------------------------
    def _autocast(self) -> Any:
        if self.config.dtype == "bfloat16":
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return nullcontext()

    def _sample(self, weights: Tensor, batch: int) -> Tensor:
        shape = (batch, *weights.shape) if self.config.noise == "example" else tuple(weights.shape)
        noise = gumbel_noise(shape, self.generator).to(weights.device)
        return straight_through_mask(weights, noise, tau_at(self.step_index, self.config))

    def _soft_values(self) -> Tensor:
        """Soft mask: the multipliers, >= 0, exactly 1 on the heads not trained."""
        assert self.trainable is not None
        return torch.where(self.trainable, self.W.clamp_min(0), torch.ones_like(self.W))

    def _probabilities(self) -> Tensor:
        values = self._soft_values() if self.config.soft else torch.sigmoid(self.W)
        return values.detach().float().cpu()

    def batch(self, step: int) -> tuple[Tensor, Tensor]:
        """``(tokens, answer_mask)`` of batch ``step`` (right-padded)."""
        indices = _batch_indices(step, len(self.encoded), self.config.batch_size, self.config.seed)
        tokens, answer_mask, _ = collate([self.encoded[i] for i in indices], self.pad_id)
        return tokens.to(self.device), answer_mask.to(self.device)

    def step(self) -> float:
        """One update; returns the batch's answer-token CE (before the update)."""
        config, step = self.config, self.step_index
        tokens, answer_mask = self.batch(step)
        if not self._checked:
            self.partial = _partial_unembed_works(self.model, tokens[:2], answer_mask[:2])
            self._checked = True
        lr = lr_at(step, config)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        mask = self._soft_values() if config.soft else self._sample(self.W, tokens.shape[0])
        hooks = _query_side_hooks(mask) if config.query_side else mask_hooks(mask, self.model)
        if self.ffn_W is not None:
            hooks += _ffn_hooks(self._sample(self.ffn_W, tokens.shape[0]))
        with torch.enable_grad(), self._autocast():
            logits = _answer_logits(
                self.model, tokens, answer_mask, hooks, partial=self.partial
            ).float()
        targets = tokens[answer_mask]
        loss = torch.nn.functional.cross_entropy(logits, targets)
        if not bool(torch.isfinite(loss)):
            raise FloatingPointError(
                f"the training loss is not finite at step {step} (dtype {config.dtype}); "
                "train with dtype='float32', and check that the task's answers are non-empty"
            )
        total = loss
        if config.sparsity:
            total = total + config.sparsity * torch.sigmoid(self.W).mean()
        self.optimizer.zero_grad(set_to_none=True)
        total.backward()
        self.optimizer.step()
        if config.soft:
            with torch.no_grad():
                self.W.copy_(self._soft_values())
        self.step_index += 1
        probabilities = self._probabilities()
        kept = int((probabilities >= 0.5).sum())
        value = float(loss.detach())
        self.history.append((self.step_index, value, tau_at(step, config), lr, kept))
        if self.step_index % config.sample_every == 0 or self.step_index == config.steps:
            self.trajectory.append(probabilities)
            self.trajectory_steps.append(self.step_index)
        return value

    # -- checkpoints ---------------------------------------------------------------------------
    def _identity(self) -> dict[str, Any]:
        return {
            "model": model_name(self.model),
            "shape": list(self.shape),
            "task": self.task.name,
            "task_fingerprint": self.fingerprint,
        }

    def save_checkpoint(self, directory: Path) -> Path:
        """Write ``checkpoint.safetensors`` atomically (tensors plus a JSON header)."""
        from safetensors.torch import save_file

        directory.mkdir(parents=True, exist_ok=True)
        tensors: dict[str, Tensor] = {
            "W": self.W.detach().cpu().contiguous(),
            "generator": self.generator.get_state(),
            "trajectory": torch.stack(self.trajectory),
            "history": torch.tensor(self.history, dtype=torch.float64).reshape(-1, 5),
        }
        if self.ffn_W is not None:
            tensors["ffn_W"] = self.ffn_W.detach().cpu().contiguous()
        state = self.optimizer.state_dict()["state"]
        for index, values in state.items():
            for key, value in values.items():
                tensors[f"adam.{index}.{key}"] = value.detach().cpu().reshape(value.shape or (1,))
        header = {
            "format": _CHECKPOINT_FORMAT,
            "state": json.dumps(
                {
                    **self._identity(),
                    "config": self.config.to_dict(),
                    "step": self.step_index,
                    "elapsed": self.elapsed,
                    "trajectory_steps": self.trajectory_steps,
                    "partial": self.partial,
                    "checked": self._checked,
                }
            ),
        }
        return write_atomic_with(
            directory / _CHECKPOINT, lambda tmp: save_file(tensors, tmp, header)
        )

    def load_checkpoint(self, path: Path) -> None:
        """Restore a checkpoint written by :meth:`save_checkpoint` for this model, task and
        config; anything else is a :class:`CheckpointError`."""
        from safetensors import safe_open

        try:
            with safe_open(str(path), framework="pt") as file:
                header = file.metadata() or {}
                tensors = {key: file.get_tensor(key) for key in file.keys()}
            if header.get("format") != _CHECKPOINT_FORMAT:
                raise ValueError(f"format tag {header.get('format')!r}")
            state = json.loads(header["state"])
        except Exception as error:
            raise CheckpointError(
                f"{path} is not a readable mask-training checkpoint ({type(error).__name__}: "
                f"{error}); delete it to start afresh"
            ) from error
        mine, theirs = self._identity(), {k: state.get(k) for k in self._identity()}
        if mine != theirs:
            differ = ", ".join(
                f"{k}: {theirs[k]!r} (this run: {mine[k]!r})" for k in mine if mine[k] != theirs[k]
            )
            raise CheckpointError(
                f"checkpoint {path} belongs to another run ({differ}); resume with the same "
                "model and task, or use another checkpoint directory"
            )
        config = self.config.to_dict()
        stored = {**_LATER_FIELDS, **state["config"]}
        if stored != config:
            differ = ", ".join(
                f"{k}={stored.get(k)!r} (this run: {v!r})"
                for k, v in config.items()
                if stored.get(k) != v
            )
            raise CheckpointError(
                f"checkpoint {path} was written with another config ({differ}); resume with "
                "the same TrainingConfig, or use another checkpoint directory"
            )
        with torch.no_grad():
            self.W.copy_(tensors["W"].to(self.device))
            if self.ffn_W is not None:
                self.ffn_W.copy_(tensors["ffn_W"].to(self.device))
        self.generator.set_state(tensors["generator"])
        optimizer_state = self.optimizer.state_dict()
        restored: dict[int, dict[str, Tensor]] = {}
        for key, value in tensors.items():
            if key.startswith("adam."):
                _, index, name = key.split(".", 2)
                value = value.reshape(()) if name == "step" else value.to(self.device)
                restored.setdefault(int(index), {})[name] = value
        optimizer_state["state"] = restored
        self.optimizer.load_state_dict(optimizer_state)
        self.step_index = int(state["step"])
        self.elapsed = float(state["elapsed"])
        self.trajectory = list(tensors["trajectory"].unbind(0))
        self.trajectory_steps = [int(s) for s in state["trajectory_steps"]]
        self.history = [
            (int(r[0]), float(r[1]), float(r[2]), float(r[3]), int(r[4]))
            for r in tensors["history"].tolist()
        ]
        self.partial = bool(state["partial"])
        self._checked = bool(state["checked"])

    # -- the result ----------------------------------------------------------------------------
    def result(self, steps_this_session: int, session_seconds: float) -> MaskTrainingResult:
        history = pd.DataFrame(self.history, columns=list(_HISTORY_COLUMNS))
        history["step"] = history["step"].astype(int)
        history["kept"] = history["kept"].astype(int)
        per_step = session_seconds / steps_this_session if steps_this_session else math.nan
        return MaskTrainingResult(
            W=self.W.detach().float().cpu().clone(),
            trajectory=torch.stack(self.trajectory),
            trajectory_steps=list(self.trajectory_steps),
            history=history,
            config=self.config,
            model=model_name(self.model),
            task=self.task.name,
            timing={
                "seconds": self.elapsed,
                "seconds_per_step": per_step,
                "steps_this_session": float(steps_this_session),
            },
            ffn_W=None if self.ffn_W is None else self.ffn_W.detach().float().cpu().clone(),
        )


def train_mask(
    model: ModelLike,
    task: Task | str | os.PathLike[str],
    config: TrainingConfig | None = None,
    *,
    checkpoint_dir: str | os.PathLike[str] | None = None,
    checkpoint_every: int = 50,
    resume: bool = False,
    progress: bool = True,
    callback: Callable[[int, float], None] | None = None,
) -> MaskTrainingResult:
    """Train a head mask on ``task`` (instruction-free ``input -> output`` pairs) for ``model``.

    The model is frozen while training (no weight gradients; ``requires_grad`` is restored
    afterwards). Prompts are the bare input in the chat template when the tokenizer has one,
    else ``{input}\\n\\n`` (``config.chat``, ``config.separator``); ``config.shots``
    demonstrations from the training split may precede it, and a hybrid multi-task set is
    simply a task (:func:`lens_heads.prompts.hybrid_few_shot` with ``split="train"``).

    With ``checkpoint_dir`` a checkpoint is written atomically every ``checkpoint_every`` steps
    and at the end; ``resume=True`` continues from it and ends with the same W as an
    uninterrupted run. A fresh run refuses to overwrite an existing checkpoint, and a
    checkpoint of another model, task or config is a :class:`CheckpointError`. ``callback(step,
    loss)`` runs after every step (after its checkpoint).

    >>> import lens_heads as lh
    >>> model = lh.load_model("smollm2-135m-instruct")  # doctest: +SKIP
    >>> result = lh.train_mask(model, "capitalize", lh.TrainingConfig.short())  # doctest: +SKIP
    >>> lh.evaluate(model, "capitalize", mask=result.mask, n_eval=40)  # doctest: +SKIP
    """
    config = config or TrainingConfig()
    task = task if isinstance(task, Task) else get_task(task)
    if checkpoint_every < 1:
        raise ValueError(f"checkpoint_every must be positive, got {checkpoint_every}")
    trainer = MaskTrainer(model, task, config)
    folder = None if checkpoint_dir is None else Path(checkpoint_dir)
    if folder is not None and (folder / _CHECKPOINT).is_file():
        if not resume:
            raise CheckpointError(
                f"{folder / _CHECKPOINT} exists; pass resume=True (--resume) to continue it, "
                "or delete it / choose another checkpoint directory to start afresh"
            )
        trainer.load_checkpoint(folder / _CHECKPOINT)
        logger.info("resuming %s at step %d", folder, trainer.step_index)
    elif resume:
        logger.info("no checkpoint to resume in %s; starting afresh", folder)

    frozen = [p for p in _parameters(model) if p.requires_grad]
    for parameter in frozen:
        parameter.requires_grad_(False)
    start_step = trainer.step_index
    started = time.perf_counter()
    bar = tqdm(
        total=config.steps,
        initial=start_step,
        desc=f"training mask: {task.name}",
        disable=not progress,
    )
    try:
        while trainer.step_index < config.steps:
            tick = time.perf_counter()
            loss = trainer.step()
            trainer.elapsed += time.perf_counter() - tick
            _, _, tau, lr, kept = trainer.history[-1]
            bar.update(1)
            bar.set_postfix(
                loss=f"{loss:.3f}",
                tau=f"{tau:.2f}",
                lr=f"{lr:.2g}",
                kept=f"{kept}/{trainer.W.numel()}",
            )
            done = trainer.step_index
            if folder is not None and (done % checkpoint_every == 0 or done == config.steps):
                trainer.save_checkpoint(folder)
            if callback is not None:
                callback(done, loss)
    finally:
        bar.close()
        for parameter in frozen:
            parameter.requires_grad_(True)
    steps_run = trainer.step_index - start_step
    return trainer.result(steps_run, time.perf_counter() - started)


def _parameters(model: Any) -> list[Tensor]:
    parameters = getattr(model, "parameters", None)
    return list(parameters()) if callable(parameters) else []


def with_overrides(config: TrainingConfig, **overrides: Any) -> TrainingConfig:
    """``config`` with the given fields replaced (``None`` values are ignored)."""
    return replace(config, **{k: v for k, v in overrides.items() if v is not None})
