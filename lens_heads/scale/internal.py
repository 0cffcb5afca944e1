"""What the other layers of lens_heads take from ``lens_heads.scale`` beyond its API
(the job list, GPU kinds and grid-folder check).

Not public: these names may change in any release. Users import from ``lens_heads.scale``
or ``lens_heads``; the layers above import from here, so that no implementation module
of one subpackage is imported by another (tests/unit/architecture/test_layers.py).
"""

from typing import TYPE_CHECKING

from lens_heads.core.internal import lazy_exports

if TYPE_CHECKING:  # imported on first use, as the package itself does
    from lens_heads.scale._grid import check_grid_folder
    from lens_heads.scale._plan_config import GPUS, JOBS

_EXPORTS, __getattr__, __dir__ = lazy_exports(__name__, __file__)

__all__ = ["GPUS", "JOBS", "check_grid_folder"]
