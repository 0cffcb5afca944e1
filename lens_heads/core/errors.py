"""The one error every lens_heads error derives from.

Catch :class:`LensHeadsError` to handle anything lens_heads raises on purpose (bad input, a model
it cannot use, a library that computes wrong numbers); the subclasses also derive from the
built-in error they refine (``ValueError``, ``RuntimeError``), so older ``except`` clauses keep
working.

>>> import lens_heads as lh
>>> try:
...     lh.load_model("no-such-model")
... except lh.LensHeadsError as error:
...     print(type(error).__name__)
ModelNotAvailableError
"""

from __future__ import annotations

__all__ = ["LensHeadsError"]


class LensHeadsError(Exception):
    """Base class of every error lens_heads raises on purpose."""
