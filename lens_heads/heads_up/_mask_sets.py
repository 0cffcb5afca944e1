"""Sets of trained head masks, as the mask statistics read them: every mask of a folder
(:func:`load_masks`), a mapping checked to hold masks of one kind (:func:`mask_set`), their
common model and their stacked 0/1 values.

>>> import lens_heads as lh
>>> chosen = mask_set({"a": lh.HeadMask.ones(1, 2), "b": lh.HeadMask.zeros(1, 2)}, "masks")
>>> stack_masks(chosen).tolist()
[[[1.0, 1.0]], [[0.0, 0.0]]]
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import Tensor

from lens_heads.core import HeadMask, InputError
from lens_heads.core.internal import (
    InputTypeError,
    MaskFileError,
    MaskShapeError,
    MissingFileError,
    check_readable,
)

__all__ = ["MaskSet", "common_model", "load_masks", "mask_set", "stack_masks"]

logger = logging.getLogger(__name__)

#: a set of masks: ``name -> HeadMask``, or a folder of training results
MaskSet = Mapping[str, HeadMask] | str | os.PathLike[str]
_MASK_FILE = "mask.safetensors"
_MASK_FORMAT = "lens_heads.head_mask/1"


# -- loading ---------------------------------------------------------------------------------------
def _is_mask_file(path: Path) -> bool:
    """Is ``path`` a safetensors file written by :meth:`HeadMask.save` (its format tag)? A
    safetensors file of another kind is not; a file that cannot be read is an error (it may be
    a mask), never skipped."""
    from safetensors import safe_open

    check_readable(path, MaskFileError, "mask folder file ")
    try:
        with safe_open(str(path), framework="pt") as file:
            return (file.metadata() or {}).get("format") == _MASK_FORMAT
    except Exception as error:
        raise MaskFileError(
            f"{path} is not a readable safetensors file ({type(error).__name__}: {error}); it "
            "may be a truncated mask: re-create it, or move it out of the mask folder"
        ) from error


def _mask_files(folder: Path) -> dict[str, Path]:
    """Name -> file: every ``<name>/mask.safetensors`` below ``folder`` (training results; the
    name is the folder's relative path) and every head-mask ``<name>.safetensors`` in it."""
    found: dict[str, Path] = {}
    for path in sorted(folder.rglob(_MASK_FILE)):
        relative = path.parent.relative_to(folder).as_posix()
        found[relative] = path
    for path in sorted(folder.glob("*.safetensors")):
        if path.name == _MASK_FILE or not _is_mask_file(path):
            continue
        if path.stem in found:
            raise InputError(
                f"two masks are called {path.stem!r} in {folder}: {path.name} and "
                f"{path.stem}/{_MASK_FILE}; rename or move one of them"
            )
        found[path.stem] = path
    return found


def _check_same_kind(masks: Mapping[str, HeadMask], where: str) -> None:
    """One shape and (where the metadata says) one model, or an error naming the groups."""
    shapes: dict[tuple[int, int], list[str]] = {}
    models: dict[str, list[str]] = {}
    for name, mask in masks.items():
        shapes.setdefault(mask.shape, []).append(name)
        if mask.metadata.get("model"):
            models.setdefault(str(mask.metadata["model"]), []).append(name)
    if len(shapes) > 1:
        groups = "; ".join(f"{a}x{b}: {', '.join(names)}" for (a, b), names in shapes.items())
        raise MaskShapeError(
            f"masks of different shapes (layers x heads) {where}: {groups}; keep the masks of "
            "one model (or of models of one shape) per folder"
        )
    if len(models) > 1:
        groups = "; ".join(f"{model}: {', '.join(names)}" for model, names in models.items())
        raise InputError(
            f"masks of different models {where}: {groups}; keep one model's masks per folder "
            "and compare two models with mask_statistics(masks_a, masks_b)"
        )


def load_masks(folder: str | os.PathLike[str]) -> dict[str, HeadMask]:
    """Every head mask of ``folder``, by name, checked to be of one model and one shape.

    Looks for ``<name>/mask.safetensors`` at any depth -- the training results that
    :func:`lens_heads.train_mask` ``.save(folder)``, ``analyses.mask_table`` and
    :func:`lens_heads.run_grid` write (the name is the relative folder, ``"capitalize"`` or
    ``"seed1/capitalize"``) -- and for mask files ``<name>.safetensors`` written by
    :meth:`HeadMask.save` in the folder itself. Unfinished tasks (a folder with checkpoints
    only) are skipped. A folder that is itself a training result gives its one mask, named by
    its task.

    >>> import tempfile, lens_heads as lh
    >>> folder = tempfile.mkdtemp()
    >>> _ = lh.HeadMask.from_heads(["L0H1"], n_layers=2, n_heads=2).save(f"{folder}/a.safetensors")
    >>> {name: mask.labels for name, mask in load_masks(folder).items()}
    {'a': ['L0H1']}
    """
    root = Path(folder)
    if not root.is_dir():
        raise MissingFileError(
            f"mask folder {root} does not exist; give the output folder of analyses.mask_table "
            "(e.g. runs/mask-table/smollm2) or a folder of mask files"
        )
    files = _mask_files(root)
    if not files:
        raise MissingFileError(
            f"no masks in {root}: looked for <task>/{_MASK_FILE} (training results, e.g. the "
            "output of analyses.mask_table or lh.train_mask(...).save(folder)) and for "
            "<name>.safetensors mask files (HeadMask.save); train the masks first"
        )
    masks = {}
    for name, path in files.items():
        mask = HeadMask.load(path)
        if name == ".":
            name = str(mask.metadata.get("task") or root.name)
        masks[name] = mask
    _check_same_kind(masks, f"in {root}")
    return masks


def mask_set(masks: MaskSet, what: str) -> dict[str, HeadMask]:
    """``masks`` as ``name -> HeadMask`` (a folder is loaded), refused with a clear error when it
    is empty, holds something else or mixes kinds of mask; ``what`` names it in errors."""
    if isinstance(masks, (str, os.PathLike)):
        return load_masks(masks)
    if not isinstance(masks, Mapping):
        raise InputTypeError(
            f"{what} must be a folder or a mapping of name -> HeadMask, got {type(masks).__name__}"
        )
    if not masks:
        raise InputError(f"{what} is empty; give at least one mask")
    bad = [name for name, mask in masks.items() if not isinstance(mask, HeadMask)]
    if bad:
        raise InputTypeError(f"{what}: {bad} are not HeadMask objects")
    chosen = {str(name): mask for name, mask in masks.items()}
    _check_same_kind(chosen, f"in {what}")
    return chosen


def common_model(masks: Mapping[str, HeadMask]) -> str | None:
    """The model every mask that names one was trained on, or None when they name several."""
    models = {str(m.metadata["model"]) for m in masks.values() if m.metadata.get("model")}
    return models.pop() if len(models) == 1 else None


def stack_masks(masks: Mapping[str, HeadMask]) -> Tensor:
    """The masks' 0/1 values stacked ``[mask, layer, head]``, as floats."""
    return torch.stack([mask.selected.float() for mask in masks.values()])
