"""The errors lens_heads raises on purpose: one base, :class:`LensHeadsError`, exported as
``lh.LensHeadsError``; each subclass also derives from the built-in error it refines
(``ValueError``, ``TypeError``, ...), so ``except ValueError`` keeps working.

>>> import lens_heads as lh
>>> try:
...     lh.load_model("no-such-model")
... except lh.LensHeadsError as error:
...     print(type(error).__name__)
ModelNotAvailableError
>>> try:
...     lh.HeadMask.from_heads(["L9H0"], n_layers=2, n_heads=4)
... except lh.LensHeadsError as error:
...     print(isinstance(error, ValueError))
True
"""

from __future__ import annotations

__all__ = [
    "ComputationError",
    "FingerprintError",
    "InputError",
    "InputTypeError",
    "LensHeadsError",
    "MissingFileError",
    "MissingModuleError",
    "NonFiniteError",
    "UnknownNameError",
]


class LensHeadsError(Exception):
    """Base class of every error lens_heads raises on purpose."""


class InputError(LensHeadsError, ValueError):
    """A value the caller gave is wrong; the message names it and what to give instead."""


class FingerprintError(InputError):
    """A folder holds results of another model, other data or other settings than this run's
    (:mod:`lens_heads.core._fingerprints`)."""


class InputTypeError(LensHeadsError, TypeError):
    """A value the caller gave has the wrong type."""


class MissingFileError(LensHeadsError, FileNotFoundError):
    """A file or folder the caller named does not exist (or is not what it should be)."""


class MissingModuleError(LensHeadsError, ModuleNotFoundError):
    """A module a feature needs is not installed (the message names the extra to install), or
    an old module path that never existed."""


class UnknownNameError(LensHeadsError, KeyError):
    """A name (a task, a column, a setting) that lens_heads does not know."""


class NonFiniteError(LensHeadsError, FloatingPointError):
    """A loss or logit became NaN or infinite."""


class ComputationError(LensHeadsError, RuntimeError):
    """A computation could not do what it promised (a hook that never fired, a model surface
    that differs); the message says why."""
