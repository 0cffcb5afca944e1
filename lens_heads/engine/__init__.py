"""The engine every research line runs on: head-mask training and the settings table.

Layer 1: it imports :mod:`lens_heads.core` and nothing above it. The research lines
(:mod:`~lens_heads.heads_up`, :mod:`~lens_heads.alignment`, :mod:`~lens_heads.lahis`), the grids,
the demo and the CLI use the names below, imported from ``lens_heads.engine``; the engine's
modules are its own business.

* :func:`train_mask` / :class:`MaskTrainer` -- Gumbel-sigmoid straight-through training of a 0/1
  (or soft) head mask on a frozen model, resumable from checkpoints; :class:`TrainingConfig`
  holds the schedule, :class:`MaskTrainingResult` what it learned.
* :func:`evaluate` -- a task under each setting (Original / w/ instruction / w/ random M / w/ M
  / ...) in batched, KV-cached greedy decoding; :class:`EvaluationResult` is the table.
  :class:`EvaluationRun` and :func:`run_plan` let a caller evaluate its own list of runs (the
  alpha curves of Heads up! Figure 6 stack one run per alpha).

>>> from lens_heads import engine
>>> sorted(set(engine.__all__) & {"evaluate", "train_mask"})
['evaluate', 'train_mask']
"""

from typing import TYPE_CHECKING

from lens_heads.core.internal import lazy_exports

if TYPE_CHECKING:  # imported on first use (lens_heads.core._lazy): the package imports fast
    from lens_heads.engine._evaluation import evaluate, mask_info, run_plan
    from lens_heads.engine._evaluation_config import EvaluationConfig
    from lens_heads.engine._evaluation_result import (
        METRICS,
        SETTINGS,
        TRANSLATION_METRICS,
        WORD_METRICS,
        EvaluationResult,
    )
    from lens_heads.engine._figures import evaluation_figure
    from lens_heads.engine._scoring import EvaluationRun
    from lens_heads.engine._training import CheckpointError, MaskTrainer, check_training, train_mask
    from lens_heads.engine._training_config import TrainingConfig, native_bf16, with_overrides
    from lens_heads.engine._training_folder import train_or_resume
    from lens_heads.engine._training_result import MaskTrainingResult

_EXPORTS, __getattr__, __dir__ = lazy_exports(__name__, __file__)

__all__ = [
    "METRICS",
    "SETTINGS",
    "TRANSLATION_METRICS",
    "WORD_METRICS",
    "CheckpointError",
    "EvaluationConfig",
    "EvaluationResult",
    "EvaluationRun",
    "MaskTrainer",
    "MaskTrainingResult",
    "TrainingConfig",
    "check_training",
    "evaluate",
    "evaluation_figure",
    "mask_info",
    "native_bf16",
    "run_plan",
    "train_mask",
    "train_or_resume",
    "with_overrides",
]
