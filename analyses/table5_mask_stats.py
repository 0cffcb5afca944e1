"""Heads up! Table 5 (Tables 37-38) and §4 "tasks per head": how similar trained masks are.

Reads a folder of trained masks -- by default the output of ``analyses.mask_table`` for the
model, ``runs/mask-table/<model>`` -- and writes, under ``--out``:

* ``tasks/``: task against task (every pair, or ``--pairs a:b,c:d``): ``|M1|``, ``|M2|``,
  ``|M1 ∩ M2|``, recall ``|M1 ∩ M2| / |M1|``, Jaccard, the random expectation of eq. 4 and their
  ratio (``table.csv``/``table.md``), the Jaccard matrix (``matrix.csv``, ``figure.html``);
* ``models/`` (with ``--other DIR``, masks of the same tasks on another model of the same shape):
  the same columns for each task against itself across the two models -- the paper's Table 5;
* ``tasks-per-head/``: how many masks keep each head, the mean, the heads kept by all and by
  none, and the layer x head heat map;
* ``table.md`` (all of it on one page), ``summary.json`` and ``numbers.json`` (the stored
  result: its numbers and the command's provenance).

    python -m analyses.table5_mask_stats --model smollm2-135m-instruct --out runs/table5/smollm2
    python -m analyses.table5_mask_stats --masks runs/mask-table/smollm2 \\
        --other runs/mask-table/smollm2-base --out runs/table5/instruct-vs-base

Nothing is trained or evaluated here (no model is loaded): the command takes seconds and is
simply re-run when more masks have been trained.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lens_heads as lh
from analyses._common import parse
from lens_heads.core import InputError, write_atomic

#: The folders ``analyses.mask_table``'s documented commands write for the offline models.
MASK_TABLE_FOLDERS = {
    "smollm2-135m-instruct": "runs/mask-table/smollm2",
    "gemma-3-270m": "runs/mask-table/gemma",
}


def short_name(model: str) -> str:
    """The folder name of a model: ``smollm2``/``gemma`` for the offline aliases, else the last
    path component of the spec."""
    if model in MASK_TABLE_FOLDERS:
        return Path(MASK_TABLE_FOLDERS[model]).name
    return Path(model.rstrip("/")).name.removesuffix(".gguf").replace("/", "--") or "model"


@dataclass(frozen=True)
class Config:
    """What :func:`run` reads and writes; ``masks``/``out`` default from ``model``."""

    model: str = "smollm2-135m-instruct"
    """The model whose masks are read; it names the default folders."""
    masks: str | None = None
    """Folder of masks (default: runs/mask-table/<model>)."""
    other: str | None = None
    """Masks of the same tasks on another model of the same shape (Table 5)."""
    pairs: str | None = None
    """Comma-separated task1:task2 pairs to compare (default: all)."""
    out: str | None = None
    """Output folder (default: runs/table5/<model>)."""

    def __post_init__(self) -> None:
        _pairs(self.pairs)  # a malformed pair is an error before any mask is read

    def implied_settings(self) -> dict[str, Any]:
        """The masks folder a default resolves to (what the provenance hashes)."""
        return {"masks": str(self.masks_folder)}

    @property
    def masks_folder(self) -> Path:
        if self.masks is not None:
            return Path(self.masks)
        return Path(MASK_TABLE_FOLDERS.get(self.model, f"runs/mask-table/{short_name(self.model)}"))

    @property
    def out_folder(self) -> Path:
        return (
            Path(self.out) if self.out is not None else Path("runs/table5") / short_name(self.model)
        )


@dataclass
class Table5:
    """The three results of :func:`run`."""

    tasks: lh.MaskStatistics | None
    tasks_per_head: lh.TasksPerHead
    models: lh.MaskStatistics | None = None

    def to_markdown(self) -> str:
        parts = ["# Mask statistics (Heads up! Table 5, Tables 37-38, §4)", ""]
        if self.models is not None:
            parts += ["## The same task on two models (Table 5)", "", self.models.to_markdown()]
        if self.tasks is not None:
            parts += ["## Task against task", "", self.tasks.to_markdown()]
        parts += ["## Tasks per head (§4)", "", self.tasks_per_head.to_markdown()]
        return "\n".join(parts)


#: the command that writes a stored result, before its arguments
_COMMAND = ["python", "-m", "analyses.table5_mask_stats"]


def run(config: Config) -> Table5:
    """Compute the statistics of ``config.masks_folder`` and write them to ``config.out_folder``."""
    from analyses._common import note_mask_precision

    masks = lh.load_masks(config.masks_folder)
    for folder in sorted(config.masks_folder.iterdir()):  # the masks' training precision
        if folder.is_dir():
            note_mask_precision(folder)
    other = None if config.other is None else lh.load_masks(config.other)
    chosen = _pairs(config.pairs)
    pairs = list(chosen) if chosen is not None else None
    result = Table5(
        tasks=(
            lh.mask_statistics(masks, pairs=None if other is not None else pairs)
            if len(masks) > 1
            else None
        ),
        tasks_per_head=lh.tasks_per_head(masks),
        models=None if other is None else lh.mask_statistics(masks, other, pairs=pairs),
    )
    out = config.out_folder
    if result.tasks is not None:
        result.tasks.save(out / "tasks")
    if result.models is not None:
        result.models.save(out / "models")
    result.tasks_per_head.save(out / "tasks-per-head")
    summary = {
        "masks": str(config.masks_folder),
        "other": config.other,
        "tasks_per_head": result.tasks_per_head.summary(),
        "kept_by_all": result.tasks_per_head.kept_by_all,
    }
    if result.tasks is not None:
        frame = result.tasks.to_frame()
        summary["mean_jaccard"] = float(frame["Jaccard"].mean())
        summary["mean_ratio"] = float(frame["ratio"].mean())
    if result.models is not None:
        summary["models"] = result.models.to_frame().to_dict(orient="records")
    write_atomic(out / "summary.json", json.dumps(summary, indent=1, default=str))
    write_atomic(out / "table.md", result.to_markdown())
    numbers = numbers_of(result, masks, config)
    write_atomic(out / "numbers.json", json.dumps(numbers, indent=2, default=str))
    return result


def numbers_of(
    result: Table5, masks: dict[str, lh.HeadMask], config: Config | None = None
) -> dict[str, Any]:
    """The stored numbers (``results/table5/...``): task against task and tasks per head, with
    the provenance of the command (and of the masks' training precision)."""
    from analyses._common import provenance_of

    per_head = result.tasks_per_head.summary()
    metadata = [mask.metadata for mask in masks.values()]
    numbers: dict[str, Any] = {
        "model": next((m["model"] for m in metadata if m.get("model")), None),
        "masks": per_head["masks"],
        "heads": per_head["heads"],
        "masks per head (mean)": round(per_head["mean tasks per head"], 1),
        "heads kept by all masks": per_head["kept by all"],
    }
    if result.tasks is not None:
        frame = result.tasks.to_frame()
        numbers |= {
            "task pairs": len(frame),
            "mean Jaccard": round(float(frame["Jaccard"].mean()), 3),
            "mean random Jaccard (eq. 4)": round(float(frame["random Jaccard"].mean()), 3),
            "pairs above random": int((frame["Jaccard"] > frame["random Jaccard"]).sum()),
        }
    return numbers | {"provenance": provenance_of(_COMMAND + sys.argv[1:], config=config)}


def _pairs(text: str | None) -> tuple[tuple[str, str], ...] | None:
    if not text:
        return None
    pairs = []
    for item in text.split(","):
        names = [name.strip() for name in item.split(":")]
        if len(names) != 2 or not all(names):
            raise InputError(f"--pairs: {item!r} is not of the form task1:task2")
        pairs.append((names[0], names[1]))
    return tuple(pairs)


def main(argv: Sequence[str] | None = None) -> int:
    config = parse(Config, argv, __doc__)
    run(config)
    print((config.out_folder / "table.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


#: where this analysis runs on a tiny model (it needs more than the shared tiny-run example)
TESTED_BY = "tests/unit/heads_up/test_mask_stats.py"
