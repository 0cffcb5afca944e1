"""lens_heads: find, train and analyse attention-head masks with TransformerLens.

>>> import lens_heads as lh
>>> model = lh.tiny_model(n_layers=2, n_heads=4)
>>> mask = lh.HeadMask.from_heads(["L0H1", "L1H3"], n_layers=2, n_heads=4)
>>> with lh.apply_mask(model, mask):
...     logits = model(model.to_tokens("hello"))
>>> tuple(logits.shape[:2])
(1, 6)
"""

from typing import TYPE_CHECKING, Any

from lens_heads import _moved
from lens_heads.core.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (lens_heads.core.lazy): no torch before it is needed
    from lens_heads.alignment.ablation import AblationResult, ablate_heads
    from lens_heads.alignment.score_config import ScoreConfig
    from lens_heads.alignment.scores import TranslationScores, translation_scores
    from lens_heads.alignment.trater import TRaterResult, trater_scores
    from lens_heads.atlas import AtlasConfig, HeadAtlas, head_atlas
    from lens_heads.core.errors import LensHeadsError
    from lens_heads.core.generation import Generation, generate, greedy_generate
    from lens_heads.core.guards import verify_model
    from lens_heads.core.hooks import ablated, apply_mask, mask_hooks
    from lens_heads.core.masks import HeadMask, expected_random_jaccard, jaccard
    from lens_heads.core.models import MODEL_ALIASES, head_shape, load_model
    from lens_heads.core.prompts import PromptFormat
    from lens_heads.core.random_models import random_model, tiny_model
    from lens_heads.core.scales import HeadScale
    from lens_heads.core.tasks import Task, get_task, list_tasks
    from lens_heads.demo import DemoConfig, DemoReport, run_demo
    from lens_heads.engine import (
        EvaluationConfig,
        EvaluationResult,
        MaskTrainingResult,
        TrainingConfig,
        evaluate,
        train_mask,
    )
    from lens_heads.heads_up.alpha import AlphaCurve, alpha_curve
    from lens_heads.heads_up.attention import attention_on_target
    from lens_heads.heads_up.lens import logit_lens, top_tokens
    from lens_heads.heads_up.lens_config import LensConfig
    from lens_heads.heads_up.mask_sets import load_masks
    from lens_heads.heads_up.mask_stats import MaskStatistics, mask_statistics
    from lens_heads.heads_up.pathways import PathwaysResult, functional_pathways, train_family_masks
    from lens_heads.heads_up.roles import HeadRoles, RolesConfig, head_roles
    from lens_heads.heads_up.similarity import SimilarityStats, figure4_similarity, layer_similarity
    from lens_heads.heads_up.sweep import SweepResult, plot_sweeps, removal_sweep
    from lens_heads.heads_up.sweep_config import SweepConfig
    from lens_heads.heads_up.tasks_per_head import TasksPerHead, tasks_per_head
    from lens_heads.lahis.importance import HeadImportance, head_importance
    from lens_heads.lahis.languages import LanguageHeads, language_heads
    from lens_heads.scale.grid import GridConfig, GridResult, run_grid
    from lens_heads.scale.planning import Plan, PlanConfig, plan

_EXPORTS, _lazy_getattr, __dir__ = lazy_exports(__name__, __file__)

__version__ = "0.2.0"

_moved.install()  # old module paths (lens_heads.training, ...) for one release


def __getattr__(name: str) -> Any:
    """An API name, imported on first use; ``lh.tasks`` and the other old module attributes,
    with a deprecation warning."""
    if name in _moved.MOVED and name not in _EXPORTS:
        return _moved.moved_module(name)
    return _lazy_getattr(name)


__all__ = [
    "MODEL_ALIASES",
    "AblationResult",
    "AlphaCurve",
    "AtlasConfig",
    "DemoConfig",
    "DemoReport",
    "EvaluationConfig",
    "EvaluationResult",
    "Generation",
    "GridConfig",
    "GridResult",
    "HeadAtlas",
    "HeadImportance",
    "HeadMask",
    "HeadRoles",
    "HeadScale",
    "LanguageHeads",
    "LensConfig",
    "LensHeadsError",
    "MaskStatistics",
    "MaskTrainingResult",
    "PathwaysResult",
    "Plan",
    "PlanConfig",
    "PromptFormat",
    "RolesConfig",
    "ScoreConfig",
    "SimilarityStats",
    "SweepConfig",
    "SweepResult",
    "TRaterResult",
    "Task",
    "TasksPerHead",
    "TrainingConfig",
    "TranslationScores",
    "ablate_heads",
    "ablated",
    "alpha_curve",
    "apply_mask",
    "attention_on_target",
    "evaluate",
    "expected_random_jaccard",
    "figure4_similarity",
    "functional_pathways",
    "generate",
    "get_task",
    "greedy_generate",
    "head_atlas",
    "head_importance",
    "head_roles",
    "head_shape",
    "jaccard",
    "language_heads",
    "layer_similarity",
    "list_tasks",
    "load_masks",
    "load_model",
    "logit_lens",
    "mask_hooks",
    "mask_statistics",
    "plan",
    "plot_sweeps",
    "random_model",
    "removal_sweep",
    "run_demo",
    "run_grid",
    "tasks_per_head",
    "tiny_model",
    "top_tokens",
    "train_family_masks",
    "train_mask",
    "translation_scores",
    "trater_scores",
    "verify_model",
]
