"""What :func:`lens_heads.train_mask` returns: :class:`MaskTrainingResult` (the learned W,
the trajectory and history, views, plots, save/load) and the hooks that apply a trained mask;
re-exported by :mod:`lens_heads.engine._training`."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from lens_heads.core import (
    HeadMask,
    InputError,
    ResultRepr,
    format_head,
    mask_hooks,
    save_figures,
    write_atomic,
)
from lens_heads.core.internal import (
    MissingFileError,
    ModelLike,
    check_pattern_capture,
    current_baseline,
    write_atomic_with,
)
from lens_heads.engine._training_config import TrainingConfig

_RESULT_FORMAT = "lens_heads.mask_training/1"
_HISTORY_COLUMNS = ("step", "loss", "tau", "lr", "kept")


# -- the result -------------------------------------------------------------------------------
def _crossings(trajectory: Tensor) -> Tensor:
    """How many times each head's sampled sigmoid(W) crosses 0.5."""
    above = trajectory >= 0.5
    return (above[1:] != above[:-1]).sum(dim=0).to(torch.int64)


@dataclass(repr=False)
class MaskTrainingResult(ResultRepr):
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

    W: Float[Tensor, "*seeds n_layers n_heads"]
    trajectory: Float[Tensor, "n_samples *seeds n_layers n_heads"]
    trajectory_steps: list[int]
    history: pd.DataFrame
    config: TrainingConfig
    model: str
    task: str
    timing: dict[str, float] = field(default_factory=dict)
    ffn_W: Float[Tensor, " n_layers"] | None = None
    fingerprint: dict[str, Any] = field(default_factory=dict)
    """What it was trained from: ``{"model": ..., "data": {"task": ...}}``
    (:mod:`lens_heads.core._fingerprints`; empty for results of lens_heads 0.2)."""

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
    def probabilities(self) -> Float[Tensor, "*seeds n_layers n_heads"]:
        """``sigmoid(W)``: the keep probability of each head (Figure 7); for a soft mask
        (``config.soft``) the trained multipliers themselves."""
        return self.W.clamp_min(0) if self.config.soft else torch.sigmoid(self.W)

    @property
    def n_masks(self) -> int:
        """Masks trained together (sigmoid gates with ``config.n_masks``); W is ``[seeds, L, H]``
        when there are several."""
        return int(self.W.shape[0]) if self.W.ndim == 3 else 1

    def single(self, index: int) -> MaskTrainingResult:
        """The run of one of several seeds trained together, as a one-mask result.

        >>> result = MaskTrainingResult.example()
        >>> result.single(0) is result
        True
        """
        if self.n_masks == 1:
            if index != 0:
                raise InputError(f"this result trained one mask; there is no seed {index}")
            return self
        if not 0 <= index < self.n_masks:
            raise InputError(f"seed {index} is not one of the {self.n_masks} trained together")
        from dataclasses import replace

        return replace(
            self,
            W=self.W[index].clone(),
            trajectory=self.trajectory[:, index].clone(),
            config=replace(self.config, n_masks=1),
        )

    @property
    def mask(self) -> HeadMask:
        """The final binary mask: heads with ``sigmoid(W) >= 0.5`` (no noise), or with a
        ``budget`` the top ``budget`` heads of W; for a soft mask a
        :class:`lens_heads.core.HeadScale` of the trained multipliers."""
        if self.n_masks > 1:
            raise InputError(
                f"this result trained {self.n_masks} masks together (one per seed): take one "
                "with result.single(i)"
            )
        if self.config.soft:
            from lens_heads.core import HeadScale

            meta = {"model": self.model, "task": self.task, "trained_with": "soft"}
            return HeadScale(self.W.detach().clamp_min(0), metadata=meta)
        metadata = {
            "model": self.model,
            "task": self.task,
            "steps": int(self.history["step"].max()) if len(self.history) else 0,
            "trained_with": "lens_heads.train_mask",
        }
        if self.config.ablation != "zero":
            metadata["ablation"] = self.config.ablation
        if self.config.budget is not None:  # a circuit of that many heads: the top of W
            flat = self.W.detach().float().flatten()
            keep = torch.zeros_like(flat)
            keep[torch.argsort(-flat, stable=True)[: self.config.budget]] = 1.0
            metadata["budget"] = self.config.budget
            return HeadMask(keep.view_as(self.W) > 0, metadata=metadata)
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
        if self.config.ablation != "zero" and (model is None or current_baseline(model) is None):
            raise InputError(
                f"this mask was trained with {self.config.ablation} ablation: apply it inside "
                "lens_heads.ablated(model, baseline) with the baseline it was trained with"
            )
        if self.config.query_side and model is not None:
            check_pattern_capture(model)  # the mask acts on hook_pattern: check it once
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
            "heads_kept": self.mask.n_selected
            if self.n_masks == 1
            else [int(k) for k in (self.probabilities >= 0.5).flatten(1).sum(dim=1)],
            "heads_total": int(self.W.numel()),
            "final_loss": self.final_loss,
            "steps": int(self.history["step"].max()) if len(self.history) else 0,
            "seconds": float(self.timing.get("seconds", math.nan)),
            "precision": self.config.precision,
            "lr": self.config.lr,
            "batch_size": self.config.batch_size,
        }

    def plot_trajectories(self) -> Any:
        """Figure 3: sigmoid(W) of every head over training; kept heads blue, removed red,
        heads that cross 0.5 more than once drawn bold."""
        from lens_heads.engine._figures import mask_trajectory_figure

        return mask_trajectory_figure(
            self.trajectory,
            self.trajectory_steps,
            title=f"Mask weights during training: {self.task} on {self.model}",
        )

    def plot_heatmap(self) -> Any:
        """Figure 7: sigmoid(W) per layer x head."""
        from lens_heads.engine._figures import mask_heatmap_figure

        return mask_heatmap_figure(
            self.probabilities,
            title=f"sigmoid(W): {self.task} on {self.model} ({self.mask.n_selected} kept)",
        )

    def plot_loss(self) -> Any:
        """The training loss, temperature and heads kept per step."""
        from lens_heads.engine._figures import training_curve_figure

        return training_curve_figure(self.history, title=f"{self.task} on {self.model}")

    def plot(self) -> Any:
        """Same as :meth:`plot_trajectories`."""
        return self.plot_trajectories()

    # -- io -------------------------------------------------------------------------------------
    def save(self, directory: str | os.PathLike[str]) -> list[Path]:
        """Write ``mask.safetensors`` (the final :class:`HeadMask`), ``training.safetensors``
        (W, trajectory), ``training.json`` (config, model, task, timing, trajectory steps),
        ``history.csv`` and ``heads.csv``; each atomically (several seeds: no mask or heads)."""
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
            "fingerprint": self.fingerprint,
        }
        written = [
            tensors_path,
            write_atomic(folder / "training.json", json.dumps(info, indent=2, default=str)),
            write_atomic(folder / "history.csv", self.history.to_csv(index=False)),
        ]
        if self.n_masks > 1:  # one mask per seed: ``single(i)`` gives each
            return written
        return [
            self.mask.save(folder / "mask.safetensors"),
            *written,
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
            raise MissingFileError(
                f"{folder} holds no saved training result (missing {', '.join(missing)}); "
                "write one with MaskTrainingResult.save()"
            )
        info = json.loads(paths[0].read_text(encoding="utf-8"))
        if info.get("format") != _RESULT_FORMAT:
            raise InputError(f"{paths[0]} is not a training result ({info.get('format')!r})")
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
            fingerprint=dict(info.get("fingerprint") or {}),
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
