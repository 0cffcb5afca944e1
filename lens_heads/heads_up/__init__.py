"""Heads up! (Han et al., ICML 2025): the analyses of trained head masks (layer 2).

It may import :mod:`lens_heads.core` and :mod:`lens_heads.engine`, never another research line.

* sweep, sweep_inputs, sweep_result -- one-by-one head removal: ranks, outputs, similarity
  (Fig. 2, 5, 8, 9)
* alpha -- masks scaled by alpha (Fig. 6, Table 8)
* trajectories -- heads that join or leave a mask in training, and whether together (Fig. 3)
* kv_groups -- whether a mask removes whole key-value groups (Fig. 7)
* similarity, similarity_stats -- layer similarity of settings (Fig. 4), over many prompts
* lens -- logit lens (Table 41) and top tokens (Table 4b)
* attention -- attention on the target word (Table 7)
* mask_sets, mask_stats, tasks_per_head -- sets of masks, their statistics (Table 5), how many
  masks keep each head (§4)
* pathways, pathways_result -- common and unused heads of a task family (Table 6)
* roles, roles_result -- facilitating, interfering and irrelevant heads (three gate fits)
* roles_agreement -- how far two sets of classes agree: kappa and chance, like for like
* sweep_gradients -- gradient estimates of a removal sweep against the exact one
* estimate_errors -- their errors over a task's prompts, step by step, with what explains them
* figures -- their plotly figures
"""

from typing import TYPE_CHECKING

from lens_heads.core.internal import lazy_exports

if TYPE_CHECKING:  # imported on first use (lens_heads.core._lazy): the package imports fast
    from lens_heads.heads_up._alpha import (
        DEFAULT_ALPHAS,
        AlphaCurve,
        alpha_curve,
        check_alphas,
        table8,
    )
    from lens_heads.heads_up._attention import (
        AttentionResult,
        TargetSpec,
        attention_on_target,
        candidate_words,
    )
    from lens_heads.heads_up._attention_config import AttentionConfig
    from lens_heads.heads_up._estimate_errors import (
        ESTIMATES,
        EstimateErrors,
        EstimateErrorsConfig,
        estimate_errors,
    )
    from lens_heads.heads_up._kv_groups import KVGroupsRemoved, kv_groups_removed
    from lens_heads.heads_up._lens import LogitLensResult, TopTokensResult, logit_lens, top_tokens
    from lens_heads.heads_up._lens_config import LensConfig, TopTokensConfig
    from lens_heads.heads_up._mask_sets import MaskSet, load_masks
    from lens_heads.heads_up._mask_stats import MaskStatistics, mask_statistics
    from lens_heads.heads_up._pathways import (
        PathwaysResult,
        functional_pathways,
        pathway_heads,
        train_family_masks,
    )
    from lens_heads.heads_up._readout_config import HiddenStatesConfig, ReadoutConfig
    from lens_heads.heads_up._roles import HeadRoles, RolesConfig, head_roles
    from lens_heads.heads_up._roles_agreement import agreement_table, agreement_within, cohen_kappa
    from lens_heads.heads_up._similarity import (
        SimilarityResult,
        figure4_similarity,
        layer_similarity,
    )
    from lens_heads.heads_up._similarity_stats import SimilarityStats, figure4_stats
    from lens_heads.heads_up._sweep import SweepResult, plot_sweeps, removal_sweep
    from lens_heads.heads_up._sweep_config import SweepConfig, sweep_example
    from lens_heads.heads_up._sweep_gradients import SweepEstimates, sweep_estimates
    from lens_heads.heads_up._sweep_inputs import OrderLike
    from lens_heads.heads_up._tasks_per_head import TasksPerHead, tasks_per_head
    from lens_heads.heads_up._trajectories import DependentChanges, dependent_changes

_EXPORTS, __getattr__, __dir__ = lazy_exports(__name__, __file__)

__all__ = [
    "DEFAULT_ALPHAS",
    "ESTIMATES",
    "AlphaCurve",
    "AttentionConfig",
    "AttentionResult",
    "DependentChanges",
    "EstimateErrors",
    "EstimateErrorsConfig",
    "HeadRoles",
    "HiddenStatesConfig",
    "KVGroupsRemoved",
    "LensConfig",
    "LogitLensResult",
    "MaskSet",
    "MaskStatistics",
    "OrderLike",
    "PathwaysResult",
    "ReadoutConfig",
    "RolesConfig",
    "SimilarityResult",
    "SimilarityStats",
    "SweepConfig",
    "SweepEstimates",
    "SweepResult",
    "TargetSpec",
    "TasksPerHead",
    "TopTokensConfig",
    "TopTokensResult",
    "agreement_table",
    "agreement_within",
    "alpha_curve",
    "attention_on_target",
    "candidate_words",
    "check_alphas",
    "cohen_kappa",
    "dependent_changes",
    "estimate_errors",
    "figure4_similarity",
    "figure4_stats",
    "functional_pathways",
    "head_roles",
    "kv_groups_removed",
    "layer_similarity",
    "load_masks",
    "logit_lens",
    "mask_statistics",
    "pathway_heads",
    "plot_sweeps",
    "removal_sweep",
    "sweep_estimates",
    "sweep_example",
    "table8",
    "tasks_per_head",
    "top_tokens",
    "train_family_masks",
]
