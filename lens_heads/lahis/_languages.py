"""Language-specific and language-general heads (LAHIS): head importance per language, the
heads strictly above each language's score quantile, and the heads shared by many languages.

>>> import lens_heads as lh
>>> model = lh.tiny_model(n_layers=2, n_heads=4)
>>> texts = {"en": ["the cat sat", "a dog ran"], "fr": ["le chat", "un chien"]}
>>> result = lh.language_heads(model, texts, quantile=0.75, min_languages=2, progress=False)
>>> result.languages, sorted(result.specific) == ["en", "fr"]
(['en', 'fr'], True)

The rule (the reference's): for language ``x`` the set ``S_x`` holds the heads whose score is
*strictly* above the ``quantile`` of ``x``'s 72 (or ``n_layers * n_heads``) scores; a head in
the sets of at least ``min_languages`` languages is *language-general*, every other head of
``S_x`` is *specific* to ``x``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import torch
from jaxtyping import Bool, Float
from torch import Tensor

from lens_heads.core import HeadMask, configure, format_head, markdown_table, parallel_corpus
from lens_heads.core.internal import (
    FolderResult,
    MissingFileError,
    ModelLike,
    ParallelCorpus,
    SharedPart,
    UnknownNameError,
    check_int,
    load_parallel_tsv,
    model_name,
    own_checks,
    read_text_file,
)
from lens_heads.lahis._importance import ImportanceConfig, ImportanceInputError, head_importance

__all__ = [
    "DocumentsSetting",
    "LanguageHeads",
    "LanguageHeadsConfig",
    "check_rule",
    "language_heads",
    "load_texts_by_language",
    "select_language_heads",
]


def load_texts_by_language(
    source: Mapping[str, Sequence[str]] | ParallelCorpus | str | os.PathLike[str] | None = None,
) -> dict[str, list[str]]:
    """Documents per language from: ``None`` (the built-in en/fr/es/de/zh corpus), a mapping,
    a :class:`ParallelCorpus`, a TSV file (header = language codes, one column
    each) or a folder of ``<lang>.txt`` files (one document per non-empty line)."""
    if source is None:
        source = parallel_corpus()
    if isinstance(source, ParallelCorpus):
        texts = {lang: list(values) for lang, values in source.sentences.items()}
    elif isinstance(source, Mapping):
        texts = {str(lang): list(values) for lang, values in source.items()}
    else:
        path = Path(source)
        if path.is_dir():
            texts = {}
            for file in sorted(path.iterdir()):
                if file.is_file() and not file.name.startswith("."):
                    lines = read_text_file(file, "language file").splitlines()
                    texts[file.name.split(".")[0]] = [
                        line.strip() for line in lines if line.strip()
                    ]
            if not texts:
                raise ImportanceInputError(
                    f"folder {path} holds no language files; put one <lang>.txt per language "
                    "(one document per line) in it"
                )
        elif path.is_file():
            texts = dict(load_parallel_tsv(path).sentences)
        else:
            raise MissingFileError(f"{path} is neither a folder of <lang>.txt files nor a TSV file")
    if not texts:
        raise ImportanceInputError("no languages given: texts_by_language is empty")
    for lang, values in texts.items():
        if not values or not any(isinstance(v, str) and v.strip() for v in values):
            raise ImportanceInputError(
                f"language {lang!r} has no documents; give it some text or leave it out"
            )
    return texts


def select_language_heads(
    scores: Float[Tensor, "n_languages n_layers n_heads"], quantile: float, min_languages: int
) -> tuple[Float[Tensor, " n_languages"], Bool[Tensor, "n_languages n_layers n_heads"]]:
    """``(thresholds, sets)``: each language's ``quantile`` of its scores and the heads strictly
    above it.

    >>> scores = torch.arange(8.0).view(2, 2, 2)
    >>> thresholds, sets = select_language_heads(scores, 0.5, 2)
    >>> thresholds.tolist(), sets[0].flatten().tolist()
    ([1.5, 5.5], [False, False, True, True])
    """
    check_rule(quantile, min_languages, int(scores.shape[0]))
    flat = scores.flatten(1).double()
    thresholds = torch.quantile(flat, quantile, dim=1)
    sets = flat > thresholds[:, None]
    return thresholds.float(), sets.view(scores.shape)


def check_rule(quantile: float, min_languages: int, n_languages: int | None) -> None:
    """The selection rule's numbers: a quantile in (0, 1), 1 <= min_languages <= languages
    (when their number is known)."""
    if isinstance(quantile, bool) or not isinstance(quantile, (int, float)) or not 0 < quantile < 1:
        raise ImportanceInputError(
            f"quantile must lie in (0, 1), got {quantile} (0.96 keeps the top 4 % of heads)"
        )
    if isinstance(min_languages, bool) or not isinstance(min_languages, int) or min_languages < 1:
        raise ImportanceInputError(f"min_languages must be at least 1, got {min_languages}")
    if n_languages is not None and min_languages > n_languages:
        raise ImportanceInputError(
            f"min_languages={min_languages} exceeds the {n_languages} language(s) given: no head "
            f"could be language-general; pass min_languages <= {n_languages} or more languages"
        )


@dataclass(repr=False)
class LanguageHeads(FolderResult):
    """Head importance per language and the language-specific / language-general heads.

    >>> result = LanguageHeads.example()
    >>> result.specific, result.general_labels
    ({'en': ['L0H0'], 'fr': ['L1H1']}, ['L0H1'])
    """

    languages: list[str]
    scores: Float[Tensor, "n_languages n_layers n_heads"]
    quantile: float
    min_languages: int
    method: str
    model: str
    n_docs: dict[str, int] = field(default_factory=dict)

    _format: ClassVar[str] = "lens_heads.language_heads/1"

    def __post_init__(self) -> None:
        if len(self.languages) != self.scores.shape[0]:
            raise ImportanceInputError(
                f"{len(self.languages)} languages but scores for {self.scores.shape[0]}"
            )
        check_rule(self.quantile, self.min_languages, len(self.languages))

    @classmethod
    def example(cls) -> LanguageHeads:
        scores = torch.tensor([[[5.0, 4.0], [1.0, 0.0]], [[0.0, 4.0], [1.0, 5.0]]])
        return cls(["en", "fr"], scores, quantile=0.5, min_languages=2, method="lahis", model="x")

    # -- the sets ------------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        return int(self.scores.shape[1]), int(self.scores.shape[2])

    @property
    def thresholds(self) -> Float[Tensor, " n_languages"]:
        return select_language_heads(self.scores, self.quantile, self.min_languages)[0]

    @property
    def sets(self) -> Bool[Tensor, "n_languages n_layers n_heads"]:
        """Heads strictly above each language's quantile."""
        return select_language_heads(self.scores, self.quantile, self.min_languages)[1]

    @property
    def counts(self) -> Tensor:
        """``[n_layers, n_heads]``: in how many languages' sets each head is."""
        return self.sets.sum(0)

    @property
    def general(self) -> Bool[Tensor, "n_layers n_heads"]:
        return self.counts >= self.min_languages

    @property
    def general_labels(self) -> list[str]:
        return _labels(self.general)

    @property
    def specific(self) -> dict[str, list[str]]:
        """Language -> the heads of its set that are not language-general."""
        sets, general = self.sets, self.general
        return {lang: _labels(sets[i] & ~general) for i, lang in enumerate(self.languages)}

    def _index(self, language: str) -> int:
        if language not in self.languages:
            raise UnknownNameError(f"no language {language!r}; this result has {self.languages}")
        return self.languages.index(language)

    def specific_mask(self, language: str) -> HeadMask:
        """A binary mask selecting ``language``'s specific heads."""
        i = self._index(language)
        return HeadMask((self.sets[i] & ~self.general).float())

    def ranking(self, language: str) -> list[str]:
        """All heads by ``language``'s score, highest first."""
        flat = self.scores[self._index(language)].flatten()
        order = sorted(range(flat.numel()), key=lambda j: (-float(flat[j]), j))
        return [format_head(j // self.shape[1], j % self.shape[1]) for j in order]

    # -- views ---------------------------------------------------------------------------------
    def to_frame(self) -> pd.DataFrame:
        """One row per (language, head): ``language, label, layer, head, score, rank,
        selected, kind`` (``specific``, ``general`` or empty)."""
        sets, general = self.sets, self.general
        n_layers, n_heads = self.shape
        rows = []
        for i, lang in enumerate(self.languages):
            rank = {label: r for r, label in enumerate(self.ranking(lang), start=1)}
            for layer in range(n_layers):
                for head in range(n_heads):
                    selected = bool(sets[i, layer, head])
                    kind = ("general" if general[layer, head] else "specific") if selected else ""
                    label = format_head(layer, head)
                    rows.append(
                        {
                            "language": lang,
                            "label": label,
                            "layer": layer,
                            "head": head,
                            "score": float(self.scores[i, layer, head]),
                            "rank": rank[label],
                            "selected": selected,
                            "kind": kind,
                        }
                    )
        return pd.DataFrame(rows)

    def summary(self) -> pd.DataFrame:
        """One row per language: threshold, selected, specific heads, general heads."""
        specific, general = self.specific, self.general_labels
        rows = []
        for i, lang in enumerate(self.languages):
            chosen = _labels(self.sets[i])
            rows.append(
                {
                    "language": lang,
                    "documents": self.n_docs.get(lang),
                    "threshold": float(self.thresholds[i]),
                    "selected": len(chosen),
                    "specific": " ".join(specific[lang]),
                    "n_specific": len(specific[lang]),
                    "general": " ".join(h for h in chosen if h in general),
                }
            )
        return pd.DataFrame(rows)

    def to_markdown(self) -> str:
        return (
            f"Language heads of {self.model} ({self.method}; strictly above the "
            f"{self.quantile} quantile; general = in >= {self.min_languages} languages' sets)\n\n"
            + markdown_table(self.summary(), floatfmt=".4g", index=False)
            + f"\n\nlanguage-general: {' '.join(self.general_labels) or '(none)'}\n"
        )

    def plot(self) -> Any:
        """One heat map per language; specific heads marked with a white dot, general heads
        with a red cross."""
        import plotly.graph_objects as go

        from lens_heads.core.internal import head_score_figure

        normalised = (
            self.scores / self.scores.flatten(1).abs().amax(1).clamp_min(1e-30)[:, None, None]
        )
        figure = head_score_figure(
            normalised.clamp_min(0),
            panels=self.languages,
            colorbar_title="score / max",
            title=f"Language heads of {self.model} (q={self.quantile}, general >= "
            f"{self.min_languages} languages)",
        )
        general = self.general.nonzero().tolist()
        sets = self.sets
        for column in range(1, len(self.languages) + 1):
            own = (sets[column - 1] & ~self.general).nonzero().tolist()
            for heads, name, symbol, color in (
                (own, "specific", "circle", "white"),
                (general, "general", "x", "red"),
            ):
                figure.add_trace(
                    go.Scatter(
                        x=[h for _, h in heads],
                        y=[layer for layer, _ in heads],
                        mode="markers",
                        marker={"size": 8, "color": color, "symbol": symbol},
                        name=name,
                        legendgroup=name,
                        showlegend=column == 1,
                        hoverinfo="skip",
                    ),
                    row=1,
                    col=column,
                )
        return figure


def _labels(selected: Tensor) -> list[str]:
    return [format_head(int(layer), int(h)) for layer, h in selected.nonzero().tolist()]


@own_checks
@dataclass(frozen=True, kw_only=True)
class DocumentsSetting(SharedPart):
    """The part of a settings class that scores each language's documents.

    >>> DocumentsSetting(n_docs=0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lens_heads.core._errors.InputError: n_docs must be at least 1, got 0
    """

    n_docs: int | None = None
    """Documents of each language scored, the first ones (after any skipped; None: all)."""

    def __post_init__(self) -> None:
        if self.n_docs is not None:
            check_int("n_docs", self.n_docs, minimum=1)
        super().__post_init__()


@own_checks
@dataclass(frozen=True, kw_only=True)
class LanguageHeadsConfig(DocumentsSetting):
    """What :func:`language_heads` computes: the selection rule and each language's importance."""

    quantile: float = 0.96
    """A head is among a language's top heads above this quantile of its scores."""
    min_languages: int = 4
    """A head among the top heads of at least this many languages is general."""
    importance: ImportanceConfig = field(default_factory=ImportanceConfig)
    """How each language's importance is computed (:func:`head_importance`)."""

    def __post_init__(self) -> None:
        super().__post_init__()  # the shared parts' checks
        check_rule(self.quantile, self.min_languages, None)


def language_heads(
    model: ModelLike,
    texts_by_language: Mapping[str, Sequence[str]]
    | ParallelCorpus
    | str
    | os.PathLike[str]
    | None = None,
    config: LanguageHeadsConfig | None = None,
    **overrides: Any,
) -> LanguageHeads:
    """Importance per language (:func:`lens_heads.head_importance`) and the language heads;
    ``config`` is a :class:`LanguageHeadsConfig` (its fields, and its importance's, also as
    keywords: ``quantile=0.9, precision="float32"``).

    ``texts_by_language``: see :func:`load_texts_by_language` (``None`` = the built-in five-
    language corpus); ``n_docs`` uses the first ``n_docs`` documents of each language.
    """
    config = configure(LanguageHeadsConfig, config, overrides, "language_heads")
    quantile, min_languages, n_docs = config.quantile, config.min_languages, config.n_docs
    texts = load_texts_by_language(texts_by_language)
    check_rule(quantile, min_languages, len(texts))
    if n_docs is not None:
        texts = {lang: values[:n_docs] for lang, values in texts.items()}
    scores = []
    for values in texts.values():
        result = head_importance(model, values, config.importance)
        scores.append(result.scores)
    method = config.importance.method
    return LanguageHeads(
        languages=list(texts),
        scores=torch.stack(scores),
        quantile=quantile,
        min_languages=min_languages,
        method=method,
        model=model_name(model),
        n_docs={lang: len(values) for lang, values in texts.items()},
    )
