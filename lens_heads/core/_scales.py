"""Head scales: per-head multipliers that may exceed 1 (LAHIS attention transfer: x3, x5, x0).

:class:`HeadScale` is a :class:`~lens_heads.core.HeadMask` whose values are any finite
non-negative factors instead of values in [0, 1]. It goes through the same ``hook_z`` hook
(:func:`lens_heads.mask_hooks`, ``apply_mask``, ``generate(mask=...)``) and is saved the same
way; :class:`HeadMask` itself keeps its [0, 1] check, and ``HeadMask.load`` refuses a scale file.

>>> import lens_heads as lh
>>> model = lh.tiny_model(n_layers=2, n_heads=4)
>>> scale = HeadScale.ones(model).scaled(["L0H1"], 3.0).scaled(["L1H2"], 0.0)
>>> scale.changed, scale.values[0, 1].item()
(['L0H1', 'L1H2'], 3.0)
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from lens_heads.core._errors import InputError, LensHeadsError
from lens_heads.core._masks import HeadMask, MaskFileError, MaskShapeError, format_head, parse_head

__all__ = ["HeadScale", "ScaleValueError"]


class ScaleValueError(LensHeadsError, ValueError):
    """A scale factor is negative, NaN or infinite."""


def _check_factor(factor: float) -> float:
    factor = float(factor)
    if not math.isfinite(factor) or factor < 0:
        raise ScaleValueError(
            f"a head scale factor must be a finite number >= 0 (e.g. 3.0 to strengthen, 0.0 to "
            f"remove), got {factor}"
        )
    return factor


class HeadScale(HeadMask):
    """Per-head multipliers ``values[l, h] >= 0`` on ``blocks.{l}.attn.hook_z`` (1 = unchanged).

    ``alpha`` must stay 0: the multiplier is ``values`` itself. ``selected`` (and ``labels``,
    the set algebra) read a scale as a mask of the heads kept at half strength or more;
    :attr:`changed` lists the heads whose factor is not 1.

    >>> HeadScale(torch.tensor([[1.0, 5.0]])).multiplier().tolist()
    [[1.0, 5.0]]
    >>> HeadScale(torch.tensor([[1.0, -1.0]]))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lens_heads.core._scales.ScaleValueError: head scale factors must be finite and >= 0, ...
    """

    def __post_init__(self) -> None:
        values = torch.as_tensor(self.values).detach()
        if values.ndim != 2:
            raise MaskShapeError(
                f"a HeadScale needs values of shape [n_layers, n_heads], got {tuple(values.shape)}"
            )
        values = values.to(torch.float32).cpu()
        finite = bool(torch.isfinite(values).all())
        if values.numel() and (not finite or values.nan_to_num(0.0).min() < 0):
            low = values.nan_to_num(0.0, neginf=-math.inf).min()
            raise ScaleValueError(
                f"head scale factors must be finite and >= 0, got min {float(low):.3g} and max "
                f"{float(values.nan_to_num(0.0).max()):.3g} (nan/inf: {not finite})"
            )
        if self.alpha != 0:
            raise ScaleValueError(
                f"a HeadScale has no alpha (got {self.alpha}); set the factors of the other "
                "heads directly with .scaled(heads, factor)"
            )
        object.__setattr__(self, "values", values)

    # -- constructors --------------------------------------------------------------------------
    @classmethod
    def from_heads(  # type: ignore[override]
        cls,
        heads: Iterable[str | tuple[int, int]],
        *,
        n_layers: int,
        n_heads: int,
        factor: float = 1.0,
        rest: float = 1.0,
    ) -> HeadScale:
        """``factor`` on the named heads and ``rest`` on every other head.

        >>> HeadScale.from_heads(["L0H0"], n_layers=1, n_heads=2, factor=5.0).values.tolist()
        [[5.0, 1.0]]
        """
        values = torch.full((n_layers, n_heads), _check_factor(rest))
        for head in heads:
            layer, index = _index(head, n_layers, n_heads)
            values[layer, index] = _check_factor(factor)
        return cls(values)

    @classmethod
    def from_mask(cls, mask: HeadMask) -> HeadScale:
        """The multipliers a :class:`HeadMask` applies (its ``alpha`` included)."""
        return cls(mask.multiplier())

    def scaled(self, heads: Iterable[str | tuple[int, int]] | HeadMask, factor: float) -> HeadScale:
        """A copy with ``factor`` on ``heads`` (labels, tuples, or a mask's selected heads)."""
        if isinstance(heads, HeadMask):
            if heads.shape != self.shape:
                raise MaskShapeError(
                    f"a mask of shape {heads.shape} cannot scale a HeadScale of shape "
                    f"{self.shape}; both must be made for the same model"
                )
            heads = heads.heads
        values = self.values.clone()
        factor = _check_factor(factor)
        for head in heads:
            layer, index = _index(head, *self.shape)
            values[layer, index] = factor
        return replace(self, values=values)

    # -- views ---------------------------------------------------------------------------------
    def multiplier(self) -> Float[Tensor, "n_layers n_heads"]:
        return self.values

    def with_alpha(self, alpha: float) -> HeadMask:
        raise ScaleValueError("a HeadScale has no alpha; use .scaled(heads, factor)")

    @property
    def changed(self) -> list[str]:
        """Labels of the heads whose factor is not 1."""
        return [
            format_head(int(layer), int(h)) for layer, h in (self.values != 1).nonzero().tolist()
        ]

    def __mul__(self, other: HeadMask) -> HeadScale:
        """Elementwise product of two scales (or a scale and a mask's multipliers)."""
        if not isinstance(other, HeadMask):
            return NotImplemented
        if other.shape != self.shape:
            raise MaskShapeError(
                f"head scales of shapes {self.shape} and {other.shape} do not combine; they were "
                "made for different models"
            )
        return HeadScale(self.values * other.multiplier())

    def __repr__(self) -> str:
        return (
            f"HeadScale({self.shape[0]}x{self.shape[1]}, {len(self.changed)} changed, "
            f"range [{float(self.values.min()):.3g}, {float(self.values.max()):.3g}])"
        )

    # -- io ------------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str], **metadata: Any) -> Path:
        """As :meth:`HeadMask.save`, with ``kind="scale"`` in the metadata."""
        return super().save(path, **{**metadata, "kind": "scale"})

    @classmethod
    def load(cls, path: str | os.PathLike[str], model: Any | None = None) -> HeadScale:
        """Read a scale (or a plain mask's multipliers) written by ``save``."""
        from safetensors import safe_open

        path = Path(path)
        if not path.is_file():
            raise MaskFileError(f"scale file {path} does not exist")
        try:
            with safe_open(str(path), framework="pt") as file:
                header = file.metadata() or {}
                values = file.get_tensor("values")
            alpha = float(header.get("alpha", "0.0"))
        except Exception as error:
            raise MaskFileError(
                f"{path} is not a readable head-scale file ({type(error).__name__}: {error}); "
                "re-create it with HeadScale.save()"
            ) from error
        if alpha:
            values = values + alpha * (1 - values)
        import json

        metadata = json.loads(header.get("metadata", "{}"))
        scale = cls(values, metadata=metadata)
        if model is not None:
            scale.check_model(model)
        return scale


def _index(head: str | tuple[int, int], n_layers: int, n_heads: int) -> tuple[int, int]:
    if isinstance(head, str):
        return parse_head(head, n_layers, n_heads)
    layer, index = int(head[0]), int(head[1])
    if not (0 <= layer < n_layers and 0 <= index < n_heads):
        raise InputError(
            f"head {format_head(layer, index)} is out of range for {n_layers} layers x "
            f"{n_heads} heads"
        )
    return layer, index
