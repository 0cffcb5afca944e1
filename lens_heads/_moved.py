"""Old module paths, kept in 0.2 and removed in 0.3: those of lens_heads 0.1 (one flat folder)
and the implementation modules of 0.2, which are private now (``lens_heads.engine.training`` is
``lens_heads.engine._training``; import from ``lens_heads`` or its subpackages instead).

``import lens_heads.training``, ``lh.tasks`` or ``import lens_heads.heads_up.sweep`` still work:
they give the module at its new path (the same module object, so a ``monkeypatch`` through the
old path intercepts) and warn once with a :class:`DeprecationWarning` that names the public
subpackage to import from (never the private module behind it).
An old path never shadows the API: ``import lens_heads.evaluate`` leaves ``lh.evaluate`` the
function (Python would otherwise set the package attribute to the module it imported), and a
0.2 module named as its subpackage's function (``heads_up.tasks_per_head``) is not aliased.

>>> import sys, warnings
>>> _ = sys.modules.pop("lens_heads.training", None)  # as in a new process
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     import lens_heads.training as old
>>> import lens_heads.engine._training as new
>>> old is new, str(caught[-1].message).split(";")[0]
(True, 'lens_heads.training is private now: import its names from lens_heads.engine')
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

from lens_heads.core.internal import MissingModuleError

__all__ = ["MOVED", "MOVED_IN_0_2", "REMOVED_IN", "moved_module"]

#: the release without the old paths
REMOVED_IN = "0.3.0"

#: old module path (under ``lens_heads.``) -> new module path
MOVED: dict[str, str] = {
    "models": "core._models",
    "masks": "core._masks",
    "scales": "core._scales",
    "hooks": "core._hooks",
    "prompts": "core._prompts",
    "tasks": "core._tasks",
    "metrics": "core._metrics",
    "_decoding": "core._decoding",
    "generation": "core._generation",
    "_io": "core._storage",
    "_checks": "core._checks",
    "plotting": "core._figures",
    "lens": "heads_up._lens",
    "_training_config": "engine._training_config",
    "_training_result": "engine._training_result",
    "training": "engine._training",
    "evaluate": "engine._evaluation",
    "sweep": "heads_up._sweep",
    "alpha": "heads_up._alpha",
    "pathways": "heads_up._pathways",
    "mask_stats": "heads_up._mask_stats",
    "similarity": "heads_up._similarity",
    "attention": "heads_up._attention",
    "_aligner": "alignment._aligners",
    "ablation": "alignment._ablation",
    "trater": "alignment._trater",
    "consistency": "alignment._consistency",
    "importance": "lahis._importance",
    "languages": "lahis._languages",
    "language_experiments": "lahis._language_experiments",
    "soft_mask_experiment": "lahis._soft_mask_experiment",
    "grid": "scale._grid",
    "_grid_config": "scale._grid_config",
    "cli_alignment": "cli._alignment",
    "cli_lahis": "cli._lahis",
    "cli_grid": "cli._grid",
}


#: the subpackages whose implementation modules became private in 0.2 (``sub.name`` ->
#: ``sub._name``), and the two demo modules that became the ``demo`` subpackage
PRIVATE_IN = (
    "core",
    "engine",
    "heads_up",
    "alignment",
    "lahis",
    "atlas",
    "finders",
    "scale",
    "cli",
)
MOVED_IN_0_2: dict[str, str] = {"demo_outputs": "demo._report"}


def _new_path(old: str) -> str | None:
    """The path under ``lens_heads.`` that ``old`` moved to, or None when it did not move."""
    if old in MOVED:
        return MOVED[old]
    if old in MOVED_IN_0_2:
        return MOVED_IN_0_2[old]
    package, _, name = old.partition(".")
    if package in PRIVATE_IN and name and "." not in name and not name.startswith("_"):
        # a module named as its subpackage's function (heads_up.tasks_per_head) stays the
        # function: importing the module under that name would replace it on the package
        if name in importlib.import_module(f"lens_heads.{package}").__all__:
            return None
        spec = importlib.machinery.PathFinder.find_spec(
            f"lens_heads.{package}._{name}",
            importlib.import_module(f"lens_heads.{package}").__path__,
        )
        return f"{package}._{name}" if spec is not None else None
    return None


def moved_module(old: str) -> ModuleType:
    """The module that ``lens_heads.<old>`` became, with a deprecation warning."""
    new = _new_path(old)
    if new is None:
        raise MissingModuleError(f"lens_heads.{old} did not move")
    public = "lens_heads." + new.partition(".")[0]
    new = "lens_heads." + new
    warnings.warn(
        f"lens_heads.{old} is private now: import its names from {public}; the old path goes "
        f"away in lens_heads {REMOVED_IN}",
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
        if not fullname.startswith("lens_heads."):
            return None
        old = fullname.removeprefix("lens_heads.")
        if _new_path(old) is None:
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
