"""Old module paths of lens_heads 0.1 (one flat folder), kept in 0.2 and removed in 0.3.

``import lens_heads.training`` or ``lh.tasks`` still work: they give the module at its new
path (the same module object, so a ``monkeypatch`` through the old path intercepts) and warn
once with a :class:`DeprecationWarning` that names the new path. An old path never shadows the
API: ``import lens_heads.evaluate`` leaves ``lh.evaluate`` the function (Python would otherwise
set the package attribute to the module it imported).

>>> import sys, warnings
>>> _ = sys.modules.pop("lens_heads.training", None)  # as in a new process
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

__all__ = ["MOVED", "REMOVED_IN", "moved_module"]

#: the release without the old paths
REMOVED_IN = "0.3.0"

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
        f"lens_heads.{old} moved to {new}; the old path goes away in lens_heads {REMOVED_IN}",
        DeprecationWarning,
        stacklevel=3,
    )
    return importlib.import_module(new)


class _Alias(importlib.abc.Loader):
    def __init__(self, old: str) -> None:
        self.old = old

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = moved_module(self.old)
        self.spec = module.__spec__  # the import system overwrites it with the old path's
        return module

    def exec_module(self, module: ModuleType) -> None:
        """The module at the new path is already executed; it keeps its own spec."""
        module.__spec__ = self.spec


class _OldPaths(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: object, target: object = None) -> object:
        package, _, old = fullname.rpartition(".")
        if package != "lens_heads" or old not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(old))


class _Package(ModuleType):
    """The ``lens_heads`` package: importing an old module path sets the package attribute of
    that name to the module, which would replace an API object of the same name
    (``lh.evaluate``); such an assignment is ignored (the module stays in ``sys.modules``)."""

    def __setattr__(self, name: str, value: object) -> None:
        current = self.__dict__.get(name)
        api = name in self.__dict__.get("_EXPORTS", ())  # an API name not imported yet
        shadows = api or (current is not None and not isinstance(current, ModuleType))
        if name in MOVED and isinstance(value, ModuleType) and shadows:
            return
        super().__setattr__(name, value)


def install() -> None:
    """Put the old-path finder on ``sys.meta_path`` (once) and keep old paths from shadowing
    the API of the ``lens_heads`` package."""
    if not any(isinstance(finder, _OldPaths) for finder in sys.meta_path):
        sys.meta_path.append(_OldPaths())
    package = sys.modules.get("lens_heads")
    if package is not None and not isinstance(package, _Package):
        package.__class__ = _Package
