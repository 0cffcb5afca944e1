"""The head atlas: every line's evidence about each attention head in one table -- pattern
detectors, weights-only readouts, exact single-head effects, the Heads up! masks, token-alignment
scores and LAHIS importance -- with where the measures agree, and an interactive page.

>>> import lens_heads as lh
>>> atlas = lh.atlas.HeadAtlas.example()
>>> atlas.measures
['previous token', 'induction', 'zero-ablation effect']
"""

from typing import TYPE_CHECKING

from lens_heads.core.internal import lazy_exports

if TYPE_CHECKING:  # imported on first use (lens_heads.core._lazy): the package imports fast
    from lens_heads.atlas._agreement import AgreementConfig, agreement, top_k_overlap
    from lens_heads.atlas._atlas_result import HeadAtlas
    from lens_heads.atlas._build import AtlasConfig, head_atlas
    from lens_heads.atlas._detectors import (
        DETECTORS,
        DetectorConfig,
        chance_scores,
        detect_patterns,
        repeated_half_loss,
    )
    from lens_heads.atlas._effects import (
        ABLATIONS,
        EffectsConfig,
        MeanOutputsConfig,
        mean_head_outputs,
        plain_single_head_effects,
        single_head_effects,
    )
    from lens_heads.atlas._readouts import builtin_relations, ov_readout, relation_scores

_EXPORTS, __getattr__, __dir__ = lazy_exports(__name__, __file__)

__all__ = [
    "ABLATIONS",
    "DETECTORS",
    "AgreementConfig",
    "AtlasConfig",
    "DetectorConfig",
    "EffectsConfig",
    "HeadAtlas",
    "MeanOutputsConfig",
    "agreement",
    "builtin_relations",
    "chance_scores",
    "detect_patterns",
    "head_atlas",
    "mean_head_outputs",
    "ov_readout",
    "plain_single_head_effects",
    "relation_scores",
    "repeated_half_loss",
    "single_head_effects",
    "top_k_overlap",
]
