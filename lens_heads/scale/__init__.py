"""Grids of mask trainings, on Ray or in one process, and plans of what a run needs (layer 3).

It may import the core, the engine and the research lines (a grid cell can run a Heads up!
removal sweep after training).

* grid -- ``run_grid``: every model x task x seed x schedule cell, resumable, claimed per folder
* grid_config -- ``GridConfig``: the TOML/YAML config, validated before any cell starts
* cell_analyses -- ``GridEvaluationConfig``, ``GridSweepConfig``: its ``[evaluate]`` and ``[sweep]``
* planning, plan_config, plan_result -- ``plan``: a job's peak memory per device and its time, from
  the configuration alone (``PlanConfig``, ``Plan``, ``PlanDoesNotFitError``)
"""

from typing import TYPE_CHECKING

from lens_heads.core.internal import lazy_exports

if TYPE_CHECKING:  # imported on first use (lens_heads.core._lazy): no torch before it is needed
    from lens_heads.scale._cell_analyses import GridEvaluationConfig, GridSweepConfig
    from lens_heads.scale._grid import GridResult, run_grid
    from lens_heads.scale._grid_config import Cell, GridConfig, GridConfigError
    from lens_heads.scale._plan_config import PlanConfig
    from lens_heads.scale._plan_result import Plan, PlanDoesNotFitError
    from lens_heads.scale._planning import plan

_EXPORTS, __getattr__, __dir__ = lazy_exports(__name__, __file__)

__all__ = [
    "Cell",
    "GridConfig",
    "GridConfigError",
    "GridEvaluationConfig",
    "GridResult",
    "GridSweepConfig",
    "Plan",
    "PlanConfig",
    "PlanDoesNotFitError",
    "plan",
    "run_grid",
]
