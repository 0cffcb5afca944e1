"""Grids of mask trainings, on Ray or in one process (layer 3).

It may import the core, the engine and the research lines (a grid cell can run a Heads up!
removal sweep after training).

* grid -- ``run_grid``: every model x task x seed x schedule cell, resumable, claimed per folder
* grid_config -- ``GridConfig``: the TOML/YAML config, validated before any cell starts
"""

from lens_heads.scale.grid import GridResult, run_grid
from lens_heads.scale.grid_config import GridConfig, GridConfigError

__all__ = ["GridConfig", "GridConfigError", "GridResult", "run_grid"]
