"""Statistics over sets of trained head masks (Heads up! Table 5, Tables 37-38, §4).

* :func:`load_masks` -- every mask of a folder (e.g. the output of ``analyses.mask_table``).
* :func:`mask_statistics` -- Table 5: ``|M1|``, ``|M2|``, recall, Jaccard, the Jaccard two random
  masks of those sizes have on average (eq. 4) and their ratio, for chosen pairs (task against
  task, or the same task on two models of the same shape), and the Jaccard matrix.
* :func:`tasks_per_head` -- how many masks keep each head; the heads kept by all and by none.

>>> import lens_heads as lh
>>> masks = {
...     "upper": lh.HeadMask.from_heads(["L0H0", "L0H1", "L1H0"], n_layers=2, n_heads=2),
...     "lower": lh.HeadMask.from_heads(["L0H0", "L1H1"], n_layers=2, n_heads=2),
... }
>>> stats = mask_statistics(masks)
>>> stats.to_frame()[["|M1|", "|M2|", "recall", "Jaccard"]].values.tolist()
[[3.0, 2.0, 0.3333333333333333, 0.25]]
>>> per_head = tasks_per_head(masks)
>>> per_head.counts.tolist(), per_head.kept_by_all, per_head.kept_by_none
([[2, 1], [1, 1]], ['L0H0'], [])
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor

from lens_heads.core.errors import InputError, InputTypeError, MissingFileError
from lens_heads.core.masks import (
    HeadMask,
    MaskFileError,
    MaskShapeError,
    expected_random_jaccard,
    format_head,
    jaccard,
)
from lens_heads.core.storage import FolderResult, check_readable
from lens_heads.core.tables import markdown_table

__all__ = [
    "MaskStatistics",
    "TasksPerHead",
    "load_masks",
    "mask_statistics",
    "tasks_per_head",
]

logger = logging.getLogger(__name__)

MaskSet = Mapping[str, HeadMask] | str | os.PathLike[str]
_MASK_FILE = "mask.safetensors"
_MASK_FORMAT = "lens_heads.head_mask/1"
_COLUMNS = ["mask 1", "mask 2", "|M1|", "|M2|", "|M1 ∩ M2|", "recall"]
_COLUMNS += ["Jaccard", "random Jaccard", "ratio"]


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


def _mask_set(masks: MaskSet, what: str) -> dict[str, HeadMask]:
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


def _common_model(masks: Mapping[str, HeadMask]) -> str | None:
    models = {str(m.metadata["model"]) for m in masks.values() if m.metadata.get("model")}
    return models.pop() if len(models) == 1 else None


def _stack(masks: Mapping[str, HeadMask]) -> Tensor:
    return torch.stack([mask.selected.float() for mask in masks.values()])


# -- Table 5 ---------------------------------------------------------------------------------------
def pair_row(a: HeadMask, b: HeadMask) -> dict[str, int | float]:
    """The Table 5 numbers of one pair: sizes, overlap, recall ``|M1 ∩ M2| / |M1|`` (the share
    of M1's heads that M2 keeps too), Jaccard, its random expectation (eq. 4) and the ratio.

    >>> a = HeadMask.from_heads(["L0H0", "L0H1"], n_layers=2, n_heads=2)
    >>> b = HeadMask.from_heads(["L0H0", "L1H1"], n_layers=2, n_heads=2)
    >>> row = pair_row(a, b)
    >>> row["recall"], row["Jaccard"], round(row["random Jaccard"], 4), round(row["ratio"], 3)
    (0.5, 0.3333333333333333, 0.3889, 0.857)
    """
    if a.shape != b.shape:
        raise MaskShapeError(
            f"masks of different shapes compared: {a.shape[0]}x{a.shape[1]} and "
            f"{b.shape[0]}x{b.shape[1]} (layers x heads); compare masks of models with the same "
            "number of layers and heads"
        )
    overlap = (a & b).n_selected
    similarity = jaccard(a, b)
    expected = expected_random_jaccard(a, b)
    return {
        "|M1|": a.n_selected,
        "|M2|": b.n_selected,
        "|M1 ∩ M2|": overlap,
        "recall": overlap / a.n_selected if a.n_selected else math.nan,
        "Jaccard": similarity,
        "random Jaccard": expected,
        "ratio": similarity / expected if expected > 0 else math.nan,
    }


@dataclass
class MaskStatistics(FolderResult):
    """Table 5 for chosen pairs of masks, and the Jaccard matrix of all of them.

    ``values_a[i]`` is the 0/1 mask ``names_a[i]`` (``values_b``/``names_b`` the second set, for
    masks of the same tasks on another model; None when the pairs are task against task within
    one set). :meth:`to_frame` has one row per pair: ``|M1|``, ``|M2|``, ``|M1 ∩ M2|``,
    ``recall`` = ``|M1 ∩ M2| / |M1|``, ``Jaccard``, ``random Jaccard`` (eq. 4: the mean Jaccard
    of two masks of these sizes placed uniformly at random) and ``ratio`` = Jaccard / random.

    >>> masks = {n: HeadMask.from_heads(h, n_layers=1, n_heads=4)
    ...          for n, h in {"a": ["L0H0", "L0H1"], "b": ["L0H1"], "c": ["L0H3"]}.items()}
    >>> stats = mask_statistics(masks, pairs=[("a", "b")])
    >>> stats.to_frame()[["mask 1", "mask 2", "Jaccard"]].values.tolist()
    [['a', 'b', 0.5]]
    >>> float(stats.matrix().loc["a", "c"]), stats.plot().data[0].z.shape
    (0.0, (3, 3))
    """

    _format: ClassVar[str] = "lens_heads.mask_statistics/1"

    names_a: list[str]
    values_a: Float[Tensor, "n_a n_layers n_heads"]
    pairs: list[tuple[str, str]]
    names_b: list[str] | None = None
    values_b: Float[Tensor, "n_b n_layers n_heads"] | None = None
    model_a: str | None = None
    model_b: str | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return int(self.values_a.shape[1]), int(self.values_a.shape[2])

    @property
    def cross(self) -> bool:
        """Are the pairs between two sets (e.g. two models) rather than within one?"""
        return self.values_b is not None

    def masks(self, side: str = "a") -> dict[str, HeadMask]:
        """The masks of set ``"a"`` or ``"b"`` by name."""
        if side == "b" and self.cross:
            assert self.names_b is not None and self.values_b is not None
            return {n: HeadMask(v) for n, v in zip(self.names_b, self.values_b, strict=True)}
        if side not in ("a", "b"):
            raise InputError(f"side must be 'a' or 'b', got {side!r}")
        return {n: HeadMask(v) for n, v in zip(self.names_a, self.values_a, strict=True)}

    def to_frame(self) -> pd.DataFrame:
        """One row per pair: the two names and the Table 5 columns (see :func:`pair_row`)."""
        first, second = self.masks("a"), self.masks("b")
        rows = [{"mask 1": a, "mask 2": b, **pair_row(first[a], second[b])} for a, b in self.pairs]
        return pd.DataFrame(rows, columns=_COLUMNS)

    def matrix(self) -> pd.DataFrame:
        """Jaccard of every mask of set a (rows) with every mask of set b (columns; set a
        again when there is no set b)."""
        first, second = self.masks("a"), self.masks("b")
        data = [[jaccard(first[a], second[b]) for b in second] for a in first]
        return pd.DataFrame(
            data, index=pd.Index(list(first), name="M1"), columns=pd.Index(list(second), name="M2")
        )

    def _side(self, side: str) -> str:
        model = self.model_a if side == "a" else (self.model_b if self.cross else self.model_a)
        return f"M{'1' if side == 'a' else '2'}" + (f" ({model})" if model else "")

    def to_markdown(self) -> str:

        n = self.shape[0] * self.shape[1]
        lines = [
            f"Mask statistics (Heads up! Table 5): {self._side('a')} vs {self._side('b')}, "
            f"{self.shape[0]} layers x {self.shape[1]} heads = {n} heads. recall = |M1 ∩ M2| / "
            "|M1|; random Jaccard = the mean Jaccard of two random masks of these sizes (eq. 4); "
            "ratio = Jaccard / random Jaccard.",
            "",
            markdown_table(self.to_frame(), index=False, floatfmt=".3f")
            if self.pairs
            else "(no pairs)",
            "",
            "Jaccard matrix:",
            "",
            markdown_table(self.matrix(), floatfmt=".2f"),
        ]
        return "\n".join(lines) + "\n"

    def plot(self) -> Any:
        """The Jaccard matrix as a heat map (values written in the cells; the hover adds the
        random expectation of eq. 4)."""
        import plotly.graph_objects as go

        matrix = self.matrix()
        first, second = self.masks("a"), self.masks("b")
        expected = [
            [expected_random_jaccard(first[a], second[b]) for b in matrix.columns]
            for a in matrix.index
        ]
        figure = go.Figure(
            go.Heatmap(
                z=matrix.to_numpy(),
                x=list(matrix.columns),
                y=list(matrix.index),
                customdata=expected,
                text=[[f"{v:.2f}" for v in row] for row in matrix.to_numpy()],
                texttemplate="%{text}",
                zmin=0.0,
                zmax=1.0,
                colorscale="Blues",
                colorbar={"title": "Jaccard"},
                hovertemplate="%{y} vs %{x}<br>Jaccard %{z:.3f}<br>random %{customdata:.3f}"
                "<extra></extra>",
            )
        )
        figure.update_layout(
            title=f"Jaccard similarity of masks: {self._side('a')} vs {self._side('b')}",
            xaxis_title=self._side("b"),
            yaxis_title=self._side("a"),
            yaxis_autorange="reversed",
            template="plotly_white",
            height=max(360, 40 * len(matrix) + 200),
            width=max(420, 40 * len(matrix.columns) + 300),
        )
        return figure

    def save(self, directory: str | os.PathLike[str], *, png: bool = False) -> list[Path]:
        """The :class:`~lens_heads.core.storage.FolderResult` folder plus ``matrix.csv``."""
        from lens_heads.core.storage import write_atomic

        written = super().save(directory, png=png)
        return [*written, write_atomic(Path(directory) / "matrix.csv", self.matrix().to_csv())]

    @classmethod
    def _from_saved(cls, meta: dict[str, Any], tensors: dict[str, Any]) -> MaskStatistics:
        meta["pairs"] = [(str(a), str(b)) for a, b in meta["pairs"]]
        return cls(**meta, **tensors)


def _default_pairs(
    first: Mapping[str, HeadMask], second: Mapping[str, HeadMask] | None
) -> list[tuple[str, str]]:
    if second is None:
        names = list(first)
        if len(names) < 2:
            raise InputError(
                f"one mask ({names[0]}): nothing to compare; give two or more masks, or a second "
                "set masks_b (the same task on another model)"
            )
        return [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    common = [name for name in first if name in second]
    if not common:
        raise InputError(
            f"no task has a mask in both sets (a: {sorted(first)}; b: {sorted(second)}); "
            "pass pairs=[(name_a, name_b), ...]"
        )
    return [(name, name) for name in common]


def _check_pairs(
    pairs: Sequence[tuple[str, str]],
    first: Mapping[str, HeadMask],
    second: Mapping[str, HeadMask],
) -> list[tuple[str, str]]:
    checked = []
    for pair in pairs:
        if isinstance(pair, str) or len(pair) != 2:
            raise InputError(f"each pair must be (name 1, name 2), got {pair!r}")
        a, b = str(pair[0]), str(pair[1])
        for name, masks, side in ((a, first, "first"), (b, second, "second")):
            if name not in masks:
                raise InputError(
                    f"pair {pair!r}: no mask {name!r} in the {side} set; have {sorted(masks)}"
                )
        checked.append((a, b))
    return checked


def mask_statistics(
    masks_a: MaskSet,
    masks_b: MaskSet | None = None,
    pairs: Sequence[tuple[str, str]] | None = None,
) -> MaskStatistics:
    """Table 5 (and Tables 37-38) for pairs of masks: task against task within ``masks_a`` (by
    default every unordered pair), or -- with ``masks_b``, masks of another model of the same
    shape -- each task against the same task (by default every name in both sets).

    ``masks_a``/``masks_b`` are folders (:func:`load_masks`) or mappings ``name -> HeadMask``;
    ``pairs`` lists ``(name in a, name in b)``. Masks of different shapes are a
    :class:`~lens_heads.core.masks.MaskShapeError`.

    >>> import lens_heads as lh
    >>> a = {"upper": lh.HeadMask.from_heads(["L0H0", "L1H1"], n_layers=2, n_heads=2)}
    >>> b = {"upper": lh.HeadMask.from_heads(["L0H0"], n_layers=2, n_heads=2)}
    >>> mask_statistics(a, b).to_frame()[["|M1|", "|M2|", "recall", "ratio"]].values.tolist()
    [[2.0, 1.0, 0.5, 2.0]]
    """
    first = _mask_set(masks_a, "masks_a")
    second = None if masks_b is None else _mask_set(masks_b, "masks_b")
    if second is not None:
        shape_a, shape_b = next(iter(first.values())).shape, next(iter(second.values())).shape
        if shape_a != shape_b:
            raise MaskShapeError(
                f"masks of different shapes compared: masks_a are {shape_a[0]}x{shape_a[1]} and "
                f"masks_b {shape_b[0]}x{shape_b[1]} (layers x heads); compare masks of models "
                "with the same number of layers and heads"
            )
    chosen = (
        _default_pairs(first, second)
        if pairs is None
        else _check_pairs(pairs, first, second if second is not None else first)
    )
    return MaskStatistics(
        names_a=list(first),
        values_a=_stack(first),
        pairs=chosen,
        names_b=None if second is None else list(second),
        values_b=None if second is None else _stack(second),
        model_a=_common_model(first),
        model_b=None if second is None else _common_model(second),
    )


# -- tasks per head (§4) --------------------------------------------------------------------------
@dataclass
class TasksPerHead(FolderResult):
    """How many of a set of masks keep each head (Heads up! §4).

    ``values[i]`` is the 0/1 mask ``names[i]``; :attr:`counts` ``[layer, head]`` is the number of
    masks that keep the head. :attr:`kept_by_all` / :attr:`kept_by_none` label the heads every
    mask keeps / no mask keeps.

    >>> masks = {"a": HeadMask.from_heads(["L0H0"], n_layers=1, n_heads=3),
    ...          "b": HeadMask.from_heads(["L0H0", "L0H2"], n_layers=1, n_heads=3)}
    >>> per_head = tasks_per_head(masks)
    >>> per_head.counts.tolist(), per_head.mean_tasks_per_head, per_head.kept_by_none
    ([[2, 0, 1]], 1.0, ['L0H1'])
    """

    _format: ClassVar[str] = "lens_heads.tasks_per_head/1"

    names: list[str]
    values: Float[Tensor, "n_masks n_layers n_heads"]
    model: str | None = None

    @property
    def n_masks(self) -> int:
        return len(self.names)

    @property
    def counts(self) -> Int[Tensor, "n_layers n_heads"]:
        """Masks keeping each head."""
        return (self.values >= 0.5).sum(dim=0).to(torch.int64)

    @property
    def mean_tasks_per_head(self) -> float:
        """Mean over all heads of the number of masks keeping the head."""
        return float(self.counts.double().mean())

    @property
    def mean_tasks_per_used_head(self) -> float:
        """Mean over the heads kept by at least one mask (NaN if no mask keeps any head)."""
        counts = self.counts
        used = counts[counts > 0]
        return float(used.double().mean()) if used.numel() else math.nan

    def _labels_where(self, chosen: Tensor) -> list[str]:
        return [format_head(int(layer), int(head)) for layer, head in chosen.nonzero().tolist()]

    @property
    def kept_by_all(self) -> list[str]:
        return self._labels_where(self.counts == self.n_masks)

    @property
    def kept_by_none(self) -> list[str]:
        return self._labels_where(self.counts == 0)

    def to_frame(self) -> pd.DataFrame:
        """One row per head (layer-major): ``layer, head, label, tasks`` (masks keeping it) and
        ``masks`` (their names)."""
        selected = self.values >= 0.5
        rows = []
        for layer in range(selected.shape[1]):
            for head in range(selected.shape[2]):
                keeping = [
                    n for n, s in zip(self.names, selected[:, layer, head], strict=True) if s
                ]
                rows.append(
                    {
                        "layer": layer,
                        "head": head,
                        "label": format_head(layer, head),
                        "tasks": len(keeping),
                        "masks": ", ".join(keeping),
                    }
                )
        return pd.DataFrame(rows)

    def distribution(self) -> pd.DataFrame:
        """How many heads are kept by exactly k masks, for k = 0 .. n_masks."""
        counts = torch.bincount(self.counts.flatten(), minlength=self.n_masks + 1)
        return pd.DataFrame(
            {"heads": counts.tolist()}, index=pd.RangeIndex(self.n_masks + 1, name="masks keeping")
        )

    def summary(self) -> dict[str, Any]:
        """The §4 numbers as one flat dict."""
        selected = self.values >= 0.5
        return {
            "masks": self.n_masks,
            "heads": int(self.counts.numel()),
            "mean heads per mask": float(selected.sum(dim=(1, 2)).double().mean()),
            "mean tasks per head": self.mean_tasks_per_head,
            "mean tasks per used head": self.mean_tasks_per_used_head,
            "kept by all": len(self.kept_by_all),
            "kept by none": len(self.kept_by_none),
        }

    def to_markdown(self) -> str:
        summary = self.summary()
        distribution = self.distribution()["heads"].tolist()
        lines = [
            f"Tasks per head over {self.n_masks} masks ({', '.join(self.names)})"
            + (f" on {self.model}" if self.model else ""),
            "",
            *(
                f"- {key}: {value:.2f}" if isinstance(value, float) else f"- {key}: {value}"
                for key, value in summary.items()
            ),
            "",
            f"Kept by all ({len(self.kept_by_all)}): {', '.join(self.kept_by_all) or '-'}",
            "",
            f"Kept by none ({len(self.kept_by_none)}): {', '.join(self.kept_by_none) or '-'}",
            "",
            "| masks keeping a head | " + " | ".join(map(str, range(self.n_masks + 1))) + " |",
            "|---|" + "---|" * (self.n_masks + 1),
            "| heads | " + " | ".join(map(str, distribution)) + " |",
        ]
        return "\n".join(lines) + "\n"

    def plot(self) -> Any:
        """Layer x head heat map of the number of masks keeping each head."""
        import plotly.graph_objects as go

        from lens_heads.core.figures import head_grid_layout

        counts = self.counts
        n_layers, n_heads = counts.shape
        figure = go.Figure(
            go.Heatmap(
                z=counts.tolist(),
                x=[f"H{h}" for h in range(n_heads)],
                y=[f"L{layer}" for layer in range(n_layers)],
                text=counts.tolist(),
                texttemplate="%{text}",
                zmin=0,
                zmax=self.n_masks,
                colorscale="Viridis",
                colorbar={"title": "masks"},
                hovertemplate="%{y}%{x}: kept by %{z} masks<extra></extra>",
            )
        )
        figure.update_layout(
            title=f"Masks keeping each head (of {self.n_masks}; mean "
            f"{self.mean_tasks_per_head:.2f} per head)"
            + (f" on {self.model}" if self.model else ""),
            **head_grid_layout(n_layers, n_heads),
        )
        return figure


def tasks_per_head(masks: MaskSet) -> TasksPerHead:
    """Count, for each head, the masks of ``masks`` (a folder or ``name -> HeadMask``) that
    keep it (Heads up! §4).

    >>> import lens_heads as lh
    >>> masks = {"a": lh.HeadMask.ones(1, 2), "b": lh.HeadMask.zeros(1, 2)}
    >>> tasks_per_head(masks).counts.tolist()
    [[1, 1]]
    """
    chosen = _mask_set(masks, "masks")
    return TasksPerHead(names=list(chosen), values=_stack(chosen), model=_common_model(chosen))
