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
from lens_heads.core.internal import lazy_exports

if TYPE_CHECKING:  # imported on first use (lens_heads.core._lazy): no torch before it is needed
    from lens_heads.alignment import (
        AblationResult,
        ScoreConfig,
        TranslationScores,
        TRaterConfig,
        TRaterResult,
        ablate_heads,
        translation_scores,
        trater_scores,
    )
    from lens_heads.atlas import AtlasConfig, HeadAtlas, head_atlas
    from lens_heads.core import (
        MODEL_ALIASES,
        DecodingConfig,
        Generation,
        GenerationConfig,
        HeadMask,
        HeadScale,
        LensHeadsError,
        PromptFormat,
        Task,
        ablated,
        apply_mask,
        expected_random_jaccard,
        generate,
        get_task,
        greedy_generate,
        head_shape,
        jaccard,
        list_tasks,
        load_model,
        mask_hooks,
        random_model,
        tiny_model,
        verify_model,
    )
    from lens_heads.demo import DemoConfig, DemoReport, run_demo
    from lens_heads.engine import (
        EvaluationConfig,
        EvaluationResult,
        MaskTrainingResult,
        TrainingConfig,
        evaluate,
        train_mask,
    )
    from lens_heads.heads_up import (
        AlphaCurve,
        AttentionConfig,
        HeadRoles,
        HiddenStatesConfig,
        LensConfig,
        MaskStatistics,
        PathwaysResult,
        ReadoutConfig,
        RolesConfig,
        SimilarityStats,
        SweepConfig,
        SweepResult,
        TasksPerHead,
        TopTokensConfig,
        alpha_curve,
        attention_on_target,
        figure4_similarity,
        functional_pathways,
        head_roles,
        layer_similarity,
        load_masks,
        logit_lens,
        mask_statistics,
        plot_sweeps,
        removal_sweep,
        tasks_per_head,
        top_tokens,
        train_family_masks,
    )
    from lens_heads.lahis import (
        HeadImportance,
        ImportanceConfig,
        LanguageHeads,
        LanguageHeadsConfig,
        head_importance,
        language_heads,
    )
    from lens_heads.scale import GridConfig, GridResult, Plan, PlanConfig, plan, run_grid

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
    "AttentionConfig",
    "DecodingConfig",
    "DemoConfig",
    "DemoReport",
    "EvaluationConfig",
    "EvaluationResult",
    "Generation",
    "GenerationConfig",
    "GridConfig",
    "GridResult",
    "HeadAtlas",
    "HeadImportance",
    "HeadMask",
    "HeadRoles",
    "HeadScale",
    "HiddenStatesConfig",
    "ImportanceConfig",
    "LanguageHeads",
    "LanguageHeadsConfig",
    "LensConfig",
    "LensHeadsError",
    "MaskStatistics",
    "MaskTrainingResult",
    "PathwaysResult",
    "Plan",
    "PlanConfig",
    "PromptFormat",
    "ReadoutConfig",
    "RolesConfig",
    "ScoreConfig",
    "SimilarityStats",
    "SweepConfig",
    "SweepResult",
    "TRaterConfig",
    "TRaterResult",
    "Task",
    "TasksPerHead",
    "TopTokensConfig",
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
