"""What the other layers of lens_heads take from ``lens_heads.engine`` beyond its API
(the prompt encoder and baselines of the scorer).

Not public: these names may change in any release. Users import from ``lens_heads.engine``
or ``lens_heads``; the layers above import from here, so that no implementation module
of one subpackage is imported by another (tests/unit/architecture/test_layers.py).
"""

from typing import TYPE_CHECKING

from lens_heads.core.internal import lazy_exports

if TYPE_CHECKING:  # imported on first use, as the package itself does
    from lens_heads.engine._scoring import encode_prompts, task_baseline

_EXPORTS, __getattr__, __dir__ = lazy_exports(__name__, __file__)

__all__ = ["encode_prompts", "task_baseline"]
