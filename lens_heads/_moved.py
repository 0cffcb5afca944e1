"""Old module paths of lens_heads 0.1 (one flat folder), kept for one release.

``import lens_heads.training`` or ``lh.tasks`` still work: they give the module at its new
path (the same module object, so a ``monkeypatch`` through the old path intercepts) and warn
once with a :class:`DeprecationWarning` that names the new path.

>>> import warnings
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     import lens_heads.training as old
>>> import lens_heads.engine.training as new
>>> old is new, "lens_heads.engine.training" in str(caught[-1].message)
(True, True)
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

__all__ = ["MOVED", "moved_module"]

#: old module path (under ``lens_heads.``) -> new module path
MOVED: dict[str, str] = {
    "models": "core.models",
    "masks": "core.masks",
    "scales": "core.scales",
    "hooks": "core.hooks",
    "prompts": "core.prompts",
    "tasks": "core.tasks",
    "metrics": "core.metrics",
    "_decoding": "core.decoding",
    "generation": "core.generation",
    "_io": "core.storage",
    "_checks": "core.checks",
    "plotting": "core.figures",
    "lens": "heads_up.lens",
    "_training_config": "engine.training_config",
    "_training_result": "engine.training_result",
    "training": "engine.training",
    "evaluate": "engine.evaluation",
    "sweep": "heads_up.sweep",
    "alpha": "heads_up.alpha",
    "pathways": "heads_up.pathways",
    "mask_stats": "heads_up.mask_stats",
    "similarity": "heads_up.similarity",
    "attention": "heads_up.attention",
    "_aligner": "alignment.aligners",
    "ablation": "alignment.ablation",
    "trater": "alignment.trater",
    "consistency": "alignment.consistency",
    "importance": "lahis.importance",
    "languages": "lahis.languages",
    "language_experiments": "lahis.language_experiments",
    "soft_mask_experiment": "lahis.soft_mask_experiment",
    "grid": "scale.grid",
    "_grid_config": "scale.grid_config",
    "cli_alignment": "cli.alignment",
    "cli_lahis": "cli.lahis",
    "cli_grid": "cli.grid",
}


def moved_module(old: str) -> ModuleType:
    """The module that ``lens_heads.<old>`` became, with a deprecation warning."""
    new = "lens_heads." + MOVED[old]
    warnings.warn(
        f"lens_heads.{old} moved to {new}; the old path goes away in the next release",
        DeprecationWarning,
        stacklevel=3,
    )
    return importlib.import_module(new)


class _Alias(importlib.abc.Loader):
    def __init__(self, old: str) -> None:
        self.old = old

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return moved_module(self.old)

    def exec_module(self, module: ModuleType) -> None:
        """The module at the new path is already executed."""


class _OldPaths(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: object, target: object = None) -> object:
        package, _, old = fullname.rpartition(".")
        if package != "lens_heads" or old not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(old))


def install() -> None:
    """Put the old-path finder on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, _OldPaths) for finder in sys.meta_path):
        sys.meta_path.append(_OldPaths())
