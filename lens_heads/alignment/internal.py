"""What the other layers of lens_heads take from ``lens_heads.alignment`` beyond its API
(constants and helpers).

Not public: these names may change in any release. Users import from ``lens_heads.alignment``
or ``lens_heads``; the layers above import from here, so that no implementation module
of one subpackage is imported by another (tests/unit/architecture/test_layers.py).
"""

from typing import TYPE_CHECKING

from lens_heads.core.internal import lazy_exports

if TYPE_CHECKING:  # imported on first use, as the package itself does
    from lens_heads.alignment._ablation import ABLATION, resolve_heads
    from lens_heads.alignment._score_config import CHOICES
    from lens_heads.alignment._scores import check_pairs
    from lens_heads.alignment._trater import load_texts

_EXPORTS, __getattr__, __dir__ = lazy_exports(__name__, __file__)

__all__ = ["ABLATION", "CHOICES", "check_pairs", "load_texts", "resolve_heads"]
