"""LAHIS (Liu et al., 2025): language heads found by gradient importance (layer 2).

It may import :mod:`lens_heads.core` and :mod:`lens_heads.engine`, never another research line.

* importance -- ``head_importance``: the gradient of the LM loss in a head mask of ones
* languages -- ``language_heads``: language-specific and language-general heads
* language_experiments -- cross-language perplexity and attention transfer (x3/x5, x0)
* soft_mask_experiment, soft_mask_result -- a soft mask on a language's top heads vs random heads
"""

from typing import TYPE_CHECKING

from lens_heads.core.internal import lazy_exports

if TYPE_CHECKING:  # imported on first use (lens_heads.core._lazy): the package imports fast
    from lens_heads.lahis._importance import HeadImportance, ImportanceConfig, head_importance
    from lens_heads.lahis._language_experiments import (
        PerplexityConfig,
        PerplexityExperiment,
        TransferConfig,
        TransferResult,
        attention_transfer,
        perplexity_experiment,
    )
    from lens_heads.lahis._languages import (
        LanguageHeads,
        LanguageHeadsConfig,
        language_heads,
        load_texts_by_language,
    )
    from lens_heads.lahis._soft_mask_experiment import (
        SoftMaskConfig,
        SoftMaskExperiment,
        ranking_documents,
        soft_mask_config,
        soft_mask_experiment,
    )

_EXPORTS, __getattr__, __dir__ = lazy_exports(__name__, __file__)

__all__ = [
    "HeadImportance",
    "ImportanceConfig",
    "LanguageHeads",
    "LanguageHeadsConfig",
    "PerplexityConfig",
    "PerplexityExperiment",
    "SoftMaskConfig",
    "SoftMaskExperiment",
    "TransferConfig",
    "TransferResult",
    "attention_transfer",
    "head_importance",
    "language_heads",
    "load_texts_by_language",
    "perplexity_experiment",
    "ranking_documents",
    "soft_mask_config",
    "soft_mask_experiment",
]
