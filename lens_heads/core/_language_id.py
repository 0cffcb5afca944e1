"""The one language identifier: langid.py's offline model, restricted to candidate languages.

Used to judge translations (off-target outputs of LAHIS's attention transfer, the failure
categories of token-alignment-head ablation).

>>> identify_language("Le chien est dans la cuisine.")
'fr'
>>> identify_language(["The dog sleeps.", "Der Hund schläft.", "42"], ["en", "de"])
['en', 'de', '']
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any, overload

from lens_heads.core._errors import InputError

__all__ = ["CORPUS_LANGUAGES", "identify_language"]

#: The languages of the built-in parallel corpus (ISO 639-1).
CORPUS_LANGUAGES: tuple[str, ...] = ("en", "fr", "es", "de", "zh")


@cache
def _identifier(candidates: tuple[str, ...]) -> Any:
    from langid.langid import LanguageIdentifier, model

    identifier = LanguageIdentifier.from_modelstring(model, norm_probs=False)
    try:
        identifier.set_languages(list(candidates))
    except ValueError as error:
        raise InputError(
            f"langid does not know some of {list(candidates)} ({error}); use ISO 639-1 codes "
            "such as 'en', 'fr', 'zh'"
        ) from error
    return identifier


@overload
def identify_language(texts: str, candidates: Sequence[str] = ...) -> str: ...
@overload
def identify_language(texts: Sequence[str], candidates: Sequence[str] = ...) -> list[str]: ...
def identify_language(
    texts: str | Sequence[str], candidates: Sequence[str] = CORPUS_LANGUAGES
) -> str | list[str]:
    """The language of a text (or of each of a list of texts) among ``candidates``, as an ISO
    639-1 code; ``""`` for a text without letters (an empty output, a number)."""
    if isinstance(candidates, str):
        raise InputError(f"candidates must be a list of language codes, got {candidates!r}")
    if not candidates:
        raise InputError(
            "candidates is empty: name the languages to choose from, e.g. ['en', 'fr']"
        )
    identifier = _identifier(tuple(sorted(set(candidates))))

    def one(text: str) -> str:
        return str(identifier.classify(text)[0]) if any(c.isalpha() for c in text) else ""

    return one(texts) if isinstance(texts, str) else [one(text) for text in texts]
