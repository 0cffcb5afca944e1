"""Head masks: one value in [0, 1] per (layer, query head), with labels like ``"L3H7"``.

>>> from lens_heads import HeadMask, jaccard
>>> a = HeadMask.from_heads(["L0H1", "L1H0"], n_layers=2, n_heads=2)
>>> b = HeadMask.from_heads(["L0H1"], n_layers=2, n_heads=2)
>>> a.labels, (a & b).labels, jaccard(a, b)
(['L0H1', 'L1H0'], ['L0H1'], 0.5)
"""

from __future__ import annotations

import json
import math
import operator
import os
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import torch
from jaxtyping import Float
from torch import Tensor

from lens_heads.core._errors import InputError, InputTypeError, LensHeadsError
from lens_heads.core._storage import check_readable, write_atomic_with

__all__ = [
    "HeadMask",
    "MaskFileError",
    "MaskShapeError",
    "MaskSource",
    "TrainedMask",
    "expected_random_jaccard",
    "format_head",
    "jaccard",
    "mask_file",
    "parse_head",
]

_LABEL = re.compile(r"^L(\d+)H(\d+)$")
_FORMAT = "lens_heads.head_mask/1"


class MaskShapeError(LensHeadsError, ValueError):
    """A mask does not fit the model (or the other mask) it is used with."""


class MaskFileError(LensHeadsError, ValueError):
    """A mask file is missing, truncated or not a head-mask file."""


def format_head(layer: int, head: int) -> str:
    """``format_head(3, 7) == "L3H7"``."""
    return f"L{layer}H{head}"


def parse_head(
    label: str, n_layers: int | None = None, n_heads: int | None = None
) -> tuple[int, int]:
    """Parse ``"L3H7"`` into ``(3, 7)``, checking the range when the shape is given.

    >>> parse_head("L3H7")
    (3, 7)
    """
    match = _LABEL.match(label.strip())
    if match is None:
        raise InputError(f"head label {label!r} is not of the form 'L<layer>H<head>', e.g. 'L3H7'")
    layer, head = int(match.group(1)), int(match.group(2))
    if n_layers is not None and n_heads is not None and (layer >= n_layers or head >= n_heads):
        raise InputError(
            f"head {label} is out of range for a model with {n_layers} layers x {n_heads} heads "
            f"(valid labels: L0H0 .. L{n_layers - 1}H{n_heads - 1})"
        )
    return layer, head


def _pair(head: Any) -> tuple[int, int]:
    """A ``(layer, head)`` pair of ints, or a ValueError naming the item."""
    try:
        layer, index = head
        if not isinstance(layer, bool) and not isinstance(index, bool):
            return operator.index(layer), operator.index(index)
    except (TypeError, ValueError):
        pass
    raise InputError(
        f"head {head!r} is neither a label like 'L3H7' nor a (layer, head) pair of ints"
    ) from None


def _shape_of(model_or_layers: Any, n_heads: int | None) -> tuple[int, int]:
    if isinstance(model_or_layers, int):
        if n_heads is None:
            raise InputTypeError("give n_heads with n_layers, or pass a model")
        return model_or_layers, n_heads
    cfg = model_or_layers.cfg
    return int(cfg.n_layers), int(cfg.n_heads)


@dataclass(frozen=True, eq=False)
class HeadMask:
    """A mask over attention heads, applied to ``blocks.{l}.attn.hook_z``.

    ``values[l, h]`` multiplies the output of query head ``h`` of layer ``l``. ``alpha`` scales
    the unselected part (paper §5): the effective multiplier is ``values + alpha * (1 - values)``,
    so a binary mask keeps its heads at x1 and the others at x``alpha``.

    >>> mask = HeadMask.ones(2, 3)
    >>> mask.n_selected, mask.shape
    (6, (2, 3))
    """

    values: Tensor  # [n_layers, n_heads]; validated (with a clear error) in __post_init__
    alpha: float = 0.0
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        values = torch.as_tensor(self.values).detach()
        if values.ndim != 2:
            raise MaskShapeError(
                f"a HeadMask needs values of shape [n_layers, n_heads], got {tuple(values.shape)}"
            )
        if values.numel() == 0:
            raise MaskShapeError(
                f"a HeadMask needs at least one layer and one head, got shape "
                f"{tuple(values.shape)}; build it for a model: HeadMask.ones(model)"
            )
        values = values.to(torch.float32).cpu()
        if not torch.isfinite(values).all():
            raise InputError("mask values contain NaN or inf; masks hold values in [0, 1]")
        if values.numel() and (values.min() < 0 or values.max() > 1):
            raise InputError(
                f"mask values must lie in [0, 1], got min {values.min():.3g} and max "
                f"{values.max():.3g}; for trained weights use HeadMask.from_weights(W)"
            )
        if not math.isfinite(self.alpha) or not 0 <= self.alpha <= 1:
            raise InputError(f"alpha must lie in [0, 1], got {self.alpha}")
        object.__setattr__(self, "values", values)

    # -- constructors -------------------------------------------------------------------------
    @classmethod
    def ones(cls, n_layers: int | Any, n_heads: int | None = None) -> HeadMask:
        """All heads kept: ``HeadMask.ones(model)`` or ``HeadMask.ones(30, 9)``."""
        return cls(torch.ones(_shape_of(n_layers, n_heads)))

    @classmethod
    def zeros(cls, n_layers: int | Any, n_heads: int | None = None) -> HeadMask:
        """All heads removed."""
        return cls(torch.zeros(_shape_of(n_layers, n_heads)))

    @classmethod
    def from_weights(
        cls, weights: Float[Tensor, "n_layers n_heads"], threshold: float = 0.5
    ) -> HeadMask:
        """Binary mask of trained logits: a head is kept where ``sigmoid(W) >= threshold``."""
        weights = torch.as_tensor(weights).detach().float()
        if not torch.isfinite(weights).all():
            bad = (~torch.isfinite(weights)).nonzero().tolist()[:3]
            raise InputError(
                f"trained weights W hold NaN or inf (at [layer, head] {bad}); the training "
                "diverged or the file is corrupted: retrain, or resume from an earlier checkpoint"
            )
        return cls((torch.sigmoid(weights) >= threshold).float())

    @classmethod
    def from_heads(
        cls, heads: Iterable[str | tuple[int, ...]], *, n_layers: int, n_heads: int
    ) -> HeadMask:
        """Binary mask keeping exactly the named heads (labels ``"L3H7"`` or tuples)."""
        if isinstance(heads, str):
            raise InputError(
                f"heads must be a list of labels, got the string {heads!r}: write "
                f"from_heads([{heads!r}], ...)"
            )
        values = torch.zeros(n_layers, n_heads)
        for head in heads:
            layer, index = (
                parse_head(head, n_layers, n_heads) if isinstance(head, str) else _pair(head)
            )
            if not (0 <= layer < n_layers and 0 <= index < n_heads):
                raise InputError(
                    f"head {format_head(layer, index)} is out of range for {n_layers}x{n_heads}"
                )
            values[layer, index] = 1.0
        return cls(values)

    @classmethod
    def random_like(cls, mask: HeadMask, seed: int = 0) -> HeadMask:
        """A binary mask with the same number of selected heads at random positions."""
        generator = torch.Generator().manual_seed(seed)
        order = torch.randperm(mask.values.numel(), generator=generator)
        values = torch.zeros(mask.values.numel())
        values[order[: mask.n_selected]] = 1.0
        return cls(values.view(mask.shape), alpha=mask.alpha, metadata={"random_seed": seed})

    # -- properties ----------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        return int(self.values.shape[0]), int(self.values.shape[1])

    @property
    def selected(self) -> torch.Tensor:
        """Boolean ``[n_layers, n_heads]``: heads whose value is at least 0.5."""
        return self.values >= 0.5

    @property
    def n_selected(self) -> int:
        return int(self.selected.sum())

    @property
    def is_binary(self) -> bool:
        return bool(((self.values == 0) | (self.values == 1)).all())

    @property
    def heads(self) -> list[tuple[int, int]]:
        """Selected heads as ``(layer, head)`` tuples, in layer-major order."""
        return [(int(layer), int(head)) for layer, head in self.selected.nonzero().tolist()]

    @property
    def labels(self) -> list[str]:
        """Selected heads as labels ``["L0H1", ...]``."""
        return [format_head(layer, head) for layer, head in self.heads]

    def multiplier(self) -> Float[Tensor, "n_layers n_heads"]:
        """The factor applied to each head's output: ``values + alpha * (1 - values)``."""
        return self.values + self.alpha * (1.0 - self.values)

    def with_alpha(self, alpha: float) -> HeadMask:
        """The same mask with unselected heads scaled by ``alpha`` instead of removed."""
        return replace(self, alpha=alpha)

    def check_model(self, model: Any) -> None:
        """Raise :class:`MaskShapeError` if the mask does not fit ``model``."""
        expected = _shape_of(model, None)
        if self.shape != expected:
            name = getattr(model, "lens_heads_name", None) or model.cfg.model_name
            raise MaskShapeError(
                f"mask has shape {self.shape} (layers, heads) but model {name} has {expected[0]} "
                f"layers x {expected[1]} heads; use a mask made for this model"
            )

    # -- algebra -------------------------------------------------------------------------------
    def _other(self, other: HeadMask) -> torch.Tensor:
        if not isinstance(other, HeadMask):
            return NotImplemented
        if other.shape != self.shape:
            raise MaskShapeError(f"masks of shapes {self.shape} and {other.shape} do not combine")
        return other.selected

    def intersection(self, other: HeadMask) -> HeadMask:
        return HeadMask((self.selected & self._other(other)).float())

    def union(self, other: HeadMask) -> HeadMask:
        return HeadMask((self.selected | self._other(other)).float())

    def difference(self, other: HeadMask) -> HeadMask:
        """Heads selected here and not in ``other``."""
        return HeadMask((self.selected & ~self._other(other)).float())

    def complement(self) -> HeadMask:
        return HeadMask((~self.selected).float())

    __and__ = intersection
    __or__ = union
    __sub__ = difference
    __invert__ = complement

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, HeadMask)
            and other.shape == self.shape
            and bool(torch.equal(self.values, other.values))
            and self.alpha == other.alpha
        )

    def __repr__(self) -> str:
        kind = "binary" if self.is_binary else "soft"
        alpha = f", alpha={self.alpha}" if self.alpha else ""
        return (
            f"HeadMask({self.shape[0]}x{self.shape[1]}, {kind}, "
            f"{self.n_selected}/{self.values.numel()} selected{alpha})"
        )

    # -- io ------------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str], **metadata: Any) -> Path:
        """Write the mask as safetensors with JSON metadata, atomically.

        Keyword arguments (``model=``, ``task=``, ...) are stored with the mask's own metadata.
        """
        from safetensors.torch import save_file

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        info = {**self.metadata, **metadata}
        header = {
            "format": _FORMAT,
            "n_layers": str(self.shape[0]),
            "n_heads": str(self.shape[1]),
            "alpha": repr(float(self.alpha)),
            "created": info.pop("created", time.strftime("%Y-%m-%dT%H:%M:%S%z")),
            "metadata": json.dumps(info, default=str),
        }
        write_atomic_with(
            path, lambda tmp: save_file({"values": self.values.contiguous()}, tmp, metadata=header)
        )
        return path

    @classmethod
    def load(cls, path: str | os.PathLike[str], model: Any | None = None) -> HeadMask:
        """Read a mask written by :meth:`save` -- the file, or a ``train-mask`` output folder
        (its ``mask.safetensors``; its ``training.safetensors`` names the same folder); with
        ``model``, check that it fits."""
        from safetensors import safe_open

        path = mask_file(path)
        check_readable(path, MaskFileError, "mask file ")
        try:
            with safe_open(str(path), framework="pt") as file:
                header = file.metadata() or {}
                values = file.get_tensor("values")
            if header.get("format") != _FORMAT:
                raise InputError(f"format tag {header.get('format')!r}, expected {_FORMAT!r}")
            metadata = json.loads(header.get("metadata", "{}"))
            metadata["created"] = header.get("created")
            alpha = float(header.get("alpha", "0.0"))
            if tuple(values.shape) != (int(header["n_layers"]), int(header["n_heads"])):
                raise InputError("stored shape disagrees with the tensor")
        except Exception as error:
            raise MaskFileError(
                f"{path} is not a readable head-mask file ({type(error).__name__}: {error}); "
                "it may "
                "be truncated or corrupted: re-create it with HeadMask.save()"
            ) from error
        mask = cls(values, alpha=alpha, metadata=metadata)
        if model is not None:
            mask.check_model(model)
        return mask


@runtime_checkable
class TrainedMask(Protocol):
    """A training result that holds a mask (:class:`~lens_heads.MaskTrainingResult`): its
    trained weights ``W`` and its binary ``mask``."""

    @property
    def W(self) -> Tensor: ...

    @property
    def mask(self) -> HeadMask: ...


#: a mask as every function and command takes it: a HeadMask, a mask file, a ``train-mask``
#: output folder (or its ``training.safetensors``) or a training result
#: (:func:`lens_heads.core.resolve_mask` reads each)
MaskSource = HeadMask | str | os.PathLike[str] | TrainedMask


def mask_file(path: str | os.PathLike[str]) -> Path:
    """The mask file behind ``path``: the file itself, or the ``mask.safetensors`` of a
    ``train-mask`` output folder (``training.safetensors`` names the same folder)."""
    path = Path(path)
    if path.name == "training.safetensors":
        path = path.parent
    if path.is_dir():
        inside = path / "mask.safetensors"
        if not inside.is_file():
            raise MaskFileError(
                f"folder {path} holds no mask.safetensors: pass a mask file or the output "
                "folder of `lens-heads train-mask` (lh.train_mask(...).save(folder))"
            )
        return inside
    if not path.is_file():
        raise MaskFileError(f"mask file {path} does not exist")
    return path


def jaccard(a: HeadMask, b: HeadMask) -> float:
    """Jaccard similarity ``|A & B| / |A | B|`` of the selected heads (1.0 for two empty masks)."""
    union = (a | b).n_selected
    return 1.0 if union == 0 else (a & b).n_selected / union


def expected_random_jaccard(
    a: HeadMask | int, b: HeadMask | int, n_heads: int | None = None
) -> float:
    """Expected Jaccard similarity of two random masks with the sizes of ``a`` and ``b``.

    With ``N`` heads and masks of ``k1`` and ``k2`` heads placed uniformly at random, the overlap
    ``I`` is hypergeometric and ``E[J] = sum_i P(I = i) * i / (k1 + k2 - i)`` — the baseline
    against which the paper's Table 5 reads mask similarity (its eq. 4).

    >>> round(expected_random_jaccard(2, 2, n_heads=4), 4)
    0.3889
    """
    if isinstance(a, HeadMask) and isinstance(b, HeadMask):
        if a.shape != b.shape:
            raise MaskShapeError(f"masks of shapes {a.shape} and {b.shape} do not compare")
        n_heads = a.values.numel()
    if n_heads is None:
        raise InputTypeError("give n_heads when passing mask sizes instead of masks")
    k1 = a.n_selected if isinstance(a, HeadMask) else int(a)
    k2 = b.n_selected if isinstance(b, HeadMask) else int(b)
    if not (0 <= k1 <= n_heads and 0 <= k2 <= n_heads):
        raise InputError(f"mask sizes {k1}, {k2} must lie in [0, {n_heads}]")
    if k1 + k2 == 0:
        return 1.0
    total = math.comb(n_heads, k2)
    expectation = 0.0
    for overlap in range(max(0, k1 + k2 - n_heads), min(k1, k2) + 1):
        probability = math.comb(k1, overlap) * math.comb(n_heads - k1, k2 - overlap) / total
        expectation += probability * overlap / (k1 + k2 - overlap)
    return expectation


def stack_masks(masks: Sequence[HeadMask]) -> Float[Tensor, "batch n_layers n_heads"]:
    """Per-example multipliers ``[batch, n_layers, n_heads]`` for :func:`lens_heads.mask_hooks`."""
    if not masks:
        raise InputError("need at least one mask")
    shapes = {mask.shape for mask in masks}
    if len(shapes) != 1:
        raise MaskShapeError(f"masks of different shapes cannot be stacked: {sorted(shapes)}")
    return torch.stack([mask.multiplier() for mask in masks])
