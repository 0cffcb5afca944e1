"""Token alignment heads."""

from lens_heads.alignment.scores import TranslationScores, translation_scores

__all__ = ["TranslationScores", "translation_scores"]
