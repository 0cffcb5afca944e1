"""Checks of lens_heads against plain ``transformers``, and the tiny offline checkpoints to run
them on (docs/compatibility.md): what ``lens-heads doctor`` and the library-version equivalence
matrix (``scripts/compatibility_matrix.py``) are built from, for a model family of your own.

>>> import tempfile
>>> from lens_heads.testing import CHECKS, doctor, tiny_checkpoint
>>> report = doctor(tiny_checkpoint("llama", tempfile.mkdtemp()))
>>> sorted(result.check for result in report.results) == sorted(CHECKS)
True
"""

from typing import TYPE_CHECKING

from lens_heads.core.internal import lazy_exports

if TYPE_CHECKING:  # imported on first use (lens_heads.core._lazy): no torch before it is needed
    from lens_heads.core.internal import (
        CHECKS,
        FAIL,
        FAMILIES,
        NOT_SUPPORTED,
        PASS,
        TOLERANCE,
        CheckResult,
        DoctorReport,
        Family,
        Reference,
        doctor,
        family,
        output_projection,
        run_checks,
        scale_heads_hook,
        tiny_checkpoint,
        tiny_tokenizer,
    )

_EXPORTS, __getattr__, __dir__ = lazy_exports(__name__, __file__)

__all__ = [
    "CHECKS",
    "FAIL",
    "FAMILIES",
    "NOT_SUPPORTED",
    "PASS",
    "TOLERANCE",
    "CheckResult",
    "DoctorReport",
    "Family",
    "Reference",
    "doctor",
    "family",
    "output_projection",
    "run_checks",
    "scale_heads_hook",
    "tiny_checkpoint",
    "tiny_tokenizer",
]
