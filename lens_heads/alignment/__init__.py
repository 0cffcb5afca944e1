"""Token alignment heads (Liu et al., 2025): heads whose attention aligns a translation with
its source (layer 2).

It may import :mod:`lens_heads.core` and :mod:`lens_heads.engine`, never another research line.

* scores, pairs, argmax -- ``translation_scores`` per head (each open choice of the method is an
  argument), its inputs (sentence pairs, alignments) and the argmax counting in ``hook_pattern``
* aligners -- the SimAlign-style aligner and ``EflomalAligner``
* ablation -- ``ablate_heads``: mask the top heads against random ones (BLEU, chrF++, failures)
* trater -- ``trater_scores``: data scored by the CE change with the top heads masked
* consistency -- top-k Jaccard across language pairs and models
"""

from typing import TYPE_CHECKING

from lens_heads.core.internal import lazy_exports

if TYPE_CHECKING:  # imported on first use (lens_heads.core._lazy): the package imports fast
    from lens_heads.alignment._ablation import CATEGORIES, AblationResult, ablate_heads
    from lens_heads.alignment._aligners import AlignmentError, EflomalAligner, SimAligner
    from lens_heads.alignment._consistency import (
        AcrossModels,
        Consistency,
        alignment_consistency,
        alignment_heads_across_models,
    )
    from lens_heads.alignment._pairs import PairsLike
    from lens_heads.alignment._score_config import ScoreConfig
    from lens_heads.alignment._scores import TranslationScores, translation_scores
    from lens_heads.alignment._trater import TRaterResult, trater_scores
    from lens_heads.alignment._trater_config import TRaterConfig

_EXPORTS, __getattr__, __dir__ = lazy_exports(__name__, __file__)

__all__ = [
    "CATEGORIES",
    "AblationResult",
    "AcrossModels",
    "AlignmentError",
    "Consistency",
    "EflomalAligner",
    "PairsLike",
    "ScoreConfig",
    "SimAligner",
    "TRaterConfig",
    "TRaterResult",
    "TranslationScores",
    "ablate_heads",
    "alignment_consistency",
    "alignment_heads_across_models",
    "translation_scores",
    "trater_scores",
]
