"""LAHIS's experiments on language heads: the perplexity experiment (removing a language's
specific heads hurts that language most) and attention transfer (scaling a language's heads
x3/x5 and another's x0 pulls translation toward the target language).

Off-target outputs are judged by :func:`lens_heads.core.identify_language`.

>>> PerplexityExperiment.example().direction()["own_hurt_most"].tolist()
[True]
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pandas as pd
import torch

from lens_heads.core import (
    HeadMask,
    HeadScale,
    PromptFormat,
    Task,
    configure,
    generate,
    head_shape,
    identify_language,
    markdown_table,
    parallel_corpus,
)
from lens_heads.core.internal import (
    BatchSetting,
    FolderResult,
    HeldOutSetting,
    MaskShapeError,
    ModelLike,
    NewTokensSetting,
    ParallelCorpus,
    PrecisionSetting,
    ProgressSetting,
    RandomControlsSetting,
    ShotsSetting,
    check_number,
    chrf_pp,
    model_name,
    own_checks,
    sample_shots,
)
from lens_heads.lahis._importance import ImportanceInputError, document_losses
from lens_heads.lahis._languages import DocumentsSetting, LanguageHeads, load_texts_by_language

__all__ = [
    "PerplexityConfig",
    "PerplexityExperiment",
    "TransferConfig",
    "TransferResult",
    "attention_transfer",
    "perplexity_experiment",
]


# -- the perplexity experiment -------------------------------------------------------------------
@dataclass(repr=False)
class PerplexityExperiment(FolderResult):
    """Per (masked language, evaluated language): mean document CE and perplexity without a
    mask, with the masked language's specific heads removed, and with as many random heads
    removed (mean over ``seeds``); ``documents`` holds the same per document (columns
    ``masked, evaluated, document, ce_base, ce_masked, ce_random``), for paired tests.

    >>> result = PerplexityExperiment.example()
    >>> result.direction().to_dict("records")[0]["own_hurt_most"]
    True
    """

    table: pd.DataFrame
    model: str
    seeds: list[int]
    n_docs: int
    notes: list[str] = field(default_factory=list)
    documents: pd.DataFrame = field(default_factory=pd.DataFrame)

    _format: ClassVar[str] = "lens_heads.perplexity_experiment/1"

    @classmethod
    def example(cls) -> PerplexityExperiment:
        rows = [
            ("en", "en", 2, 3.0, 3.6, 3.1),
            ("en", "fr", 2, 3.0, 3.1, 3.05),
        ]
        table = pd.DataFrame(
            rows,
            columns=["masked", "evaluated", "n_heads", "ce_base", "ce_masked", "ce_random"],
        )
        return cls(_derive(table), "example", [0], 10)

    def to_frame(self) -> pd.DataFrame:
        return self.table

    def direction(self) -> pd.DataFrame:
        """Per masked language: the rise of its own perplexity, the largest rise among the
        other languages, the rise with random heads, and whether its own is the largest."""
        rows = []
        for language, group in self.table.groupby("masked", sort=False):
            own = group[group["evaluated"] == language]
            others = group[group["evaluated"] != language]
            if own.empty:
                continue
            own_rise = float(own["ppl_rise"].iloc[0])
            other_max = float(others["ppl_rise"].max()) if len(others) else math.nan
            random_rise = float(own["ppl_rise_random"].iloc[0])
            rows.append(
                {
                    "masked": language,
                    "n_heads": int(own["n_heads"].iloc[0]),
                    "own_rise": own_rise,
                    "max_other_rise": other_max,
                    "mean_other_rise": float(others["ppl_rise"].mean())
                    if len(others)
                    else math.nan,
                    "random_rise": random_rise,
                    "own_hurt_most": bool(own_rise > other_max and own_rise > random_rise),
                }
            )
        return pd.DataFrame(rows)

    def to_markdown(self) -> str:
        notes = "".join(f"\n- {note}" for note in self.notes)
        return (
            f"Perplexity experiment on {self.model} ({self.n_docs} held-out documents per "
            f"language, random seeds {self.seeds})\n\n"
            + markdown_table(self.table, floatfmt=".4g", index=False)
            + "\n\n"
            + markdown_table(self.direction(), floatfmt=".4g", index=False)
            + ("\n\nNotes:" + notes if notes else "")
            + "\n"
        )

    def plot(self) -> Any:
        """Perplexity rise per evaluated language, one group per masked language."""
        import plotly.graph_objects as go

        figure = go.Figure()
        for column, name in (("ppl_rise", "specific heads"), ("ppl_rise_random", "random heads")):
            figure.add_bar(
                x=[list(self.table["masked"]), list(self.table["evaluated"])],
                y=self.table[column],
                name=name,
            )
        figure.update_layout(
            title=f"Perplexity rise when a language's heads are removed: {self.model}",
            yaxis_title="ppl masked / ppl base - 1",
            xaxis_title="masked language / evaluated language",
            template="plotly_white",
            barmode="group",
        )
        return figure

    def _to_saved(self) -> tuple[dict[str, Any], dict[str, Any]]:
        meta = {
            "table": self.table.to_dict("list"),
            "model": self.model,
            "seeds": self.seeds,
            "n_docs": self.n_docs,
            "notes": self.notes,
            "documents": self.documents.to_dict("list"),
        }
        return meta, {}

    @classmethod
    def _from_saved(cls, meta: dict[str, Any], tensors: dict[str, Any]) -> PerplexityExperiment:
        documents = pd.DataFrame(meta.pop("documents", {}))  # absent in results saved before
        return cls(pd.DataFrame(meta.pop("table")), **meta, documents=documents)


def _derive(table: pd.DataFrame) -> pd.DataFrame:
    table = table.copy()
    for kind in ("base", "masked", "random"):
        table[f"ppl_{kind}"] = table[f"ce_{kind}"].map(math.exp)
    table["ppl_rise"] = table["ppl_masked"] / table["ppl_base"] - 1
    table["ppl_rise_random"] = table["ppl_random"] / table["ppl_base"] - 1
    return table


def _random_removal(
    n_layers: int, n_heads: int, k: int, exclude: torch.Tensor, seed: int
) -> HeadMask:
    """A mask removing ``k`` random heads outside ``exclude`` (all others kept)."""
    candidates = (~exclude.flatten()).nonzero().flatten()
    generator = torch.Generator().manual_seed(seed)
    chosen = candidates[torch.randperm(len(candidates), generator=generator)[:k]]
    values = torch.ones(n_layers * n_heads)
    values[chosen] = 0.0
    return HeadMask(values.view(n_layers, n_heads))


@own_checks
@dataclass(frozen=True, kw_only=True)
class PerplexityConfig(
    PrecisionSetting,
    RandomControlsSetting,
    DocumentsSetting.with_defaults(n_docs=20),
    BatchSetting.with_defaults(batch_size=None),
):
    """What :func:`perplexity_experiment` measures (``batch_size``: documents per pass; None
    groups them by length, about ``TOKEN_BUDGET`` tokens a pass)."""

    languages: Sequence[str] | None = None
    """The languages whose heads are removed and whose texts are scored (None: the heads')."""
    skip: int = 0
    """Documents skipped first (those the heads were found on), so the scoring is held out."""

    RENAMED: ClassVar[dict[str, str]] = {"seeds": "random_seeds", "dtype": "precision"}


def perplexity_experiment(
    model: ModelLike,
    heads: LanguageHeads,
    texts_by_language: Mapping[str, Sequence[str]]
    | ParallelCorpus
    | str
    | os.PathLike[str]
    | None = None,
    config: PerplexityConfig | None = None,
    **overrides: Any,
) -> PerplexityExperiment:
    """Remove each language's specific heads (all other heads kept) and measure every
    language's perplexity, against no mask and against removing as many random heads (drawn
    outside that language's selected set, one draw per seed); ``config`` is a
    :class:`PerplexityConfig` (its fields also as keywords).

    ``texts_by_language[lang][skip : skip + n_docs]`` (all after ``skip`` with ``n_docs=None``)
    are scored: pass ``skip`` past the documents the heads were found on so the evaluation is
    held out.
    """
    config = configure(PerplexityConfig, config, overrides, "perplexity_experiment")
    languages, n_docs, skip = config.languages, config.n_docs, config.skip
    seeds, batch_size, dtype = tuple(config.random_seeds), config.batch_size, config.precision
    if heads.shape != head_shape(model):
        raise MaskShapeError(
            f"these language heads are for a {heads.shape[0]}x{heads.shape[1]} model "
            f"({heads.model}), not {model_name(model)}; compute them for this model"
        )
    texts = load_texts_by_language(texts_by_language)
    chosen = list(languages) if languages is not None else list(heads.languages)
    for lang in chosen:
        if lang not in heads.languages or lang not in texts:
            raise ImportanceInputError(
                f"language {lang!r} is not in both the heads ({heads.languages}) and the texts "
                f"({list(texts)})"
            )
    if not seeds:
        raise ImportanceInputError("seeds is empty: give at least one seed for the random heads")
    if skip < 0:
        raise ImportanceInputError(f"skip must be >= 0, got {skip}")
    end = None if n_docs is None else skip + n_docs
    docs = {lang: texts[lang][skip:end] for lang in chosen}
    empty = [lang for lang, values in docs.items() if not values]
    if empty:
        raise ImportanceInputError(
            f"no documents left for {empty} after skipping {skip}; lower skip or give more text"
        )

    def ce(lang: str, mask: HeadMask | None) -> torch.Tensor:
        """Each document's mean token cross-entropy."""
        losses = document_losses(model, docs[lang], mask=mask, batch_size=batch_size, dtype=dtype)
        return losses.float().cpu()

    base = {lang: ce(lang, None) for lang in chosen}
    n_layers, n_heads = heads.shape
    rows, notes, documents = [], [], []
    specific = heads.specific
    for masked in chosen:
        k = len(specific[masked])
        if k == 0:
            notes.append(f"{masked}: no specific heads at q={heads.quantile}; not masked")
            continue
        removal = heads.specific_mask(masked).complement()
        selected = heads.sets[heads.languages.index(masked)]
        randoms = [_random_removal(n_layers, n_heads, k, selected, seed) for seed in seeds]
        for evaluated in chosen:
            random_ce = torch.stack([ce(evaluated, mask) for mask in randoms]).mean(0)
            masked_ce = ce(evaluated, removal)
            rows.append(
                {
                    "masked": masked,
                    "evaluated": evaluated,
                    "n_heads": k,
                    "heads": " ".join(specific[masked]),
                    "ce_base": float(base[evaluated].mean()),
                    "ce_masked": float(masked_ce.mean()),
                    "ce_random": float(random_ce.mean()),
                }
            )
            for index, values in enumerate(zip(base[evaluated], masked_ce, random_ce, strict=True)):
                keys = ("ce_base", "ce_masked", "ce_random")
                row = {"masked": masked, "evaluated": evaluated, "document": skip + index}
                documents.append(row | {key: float(v) for key, v in zip(keys, values, strict=True)})
    table = _derive(pd.DataFrame(rows)) if rows else pd.DataFrame()
    n = min(len(values) for values in docs.values())
    return PerplexityExperiment(
        table, model_name(model), list(seeds), n, notes, pd.DataFrame(documents)
    )


# -- attention transfer ----------------------------------------------------------------------------
@dataclass(repr=False)
class TransferResult(FolderResult):
    """Translation into ``target`` without and with attention transfer: per setting the
    off-target rate (share of outputs identified as another language), chrF++ and the scale.

    >>> TransferResult.example().to_frame()["off_target"].tolist()
    [0.5, 0.0]
    """

    summary: pd.DataFrame
    outputs: pd.DataFrame
    model: str
    source: str
    target: str
    weaken: str | None
    shots: int

    _format: ClassVar[str] = "lens_heads.attention_transfer/1"

    @classmethod
    def example(cls) -> TransferResult:
        summary = pd.DataFrame(
            {
                "setting": ["original", "x3"],
                "factor": [1.0, 3.0],
                "off_target": [0.5, 0.0],
                "chrf_pp": [20.0, 30.0],
                "strengthened": ["", "L1H1"],
                "weakened": ["", "L0H0"],
            }
        )
        outputs = pd.DataFrame({"setting": ["original"], "output": ["x"], "language": ["en"]})
        return cls(summary, outputs, "example", "en", "fr", "en", 0)

    def to_frame(self) -> pd.DataFrame:
        return self.summary

    def to_markdown(self) -> str:
        return (
            f"Attention transfer on {self.model}: {self.source} -> {self.target}, {self.shots} "
            f"shots; strengthen {self.target}'s specific heads, weaken "
            f"{self.weaken or 'nothing'}'s\n\n"
            + markdown_table(self.summary, floatfmt=".4g", index=False)
            + "\n"
        )

    def plot(self) -> Any:
        from plotly.subplots import make_subplots

        figure = make_subplots(rows=1, cols=2, subplot_titles=["off-target rate", "chrF++"])
        figure.add_bar(x=self.summary["setting"], y=self.summary["off_target"], row=1, col=1)
        figure.add_bar(x=self.summary["setting"], y=self.summary["chrf_pp"], row=1, col=2)
        figure.update_layout(
            title=f"Attention transfer: {self.source} -> {self.target} on {self.model}",
            showlegend=False,
            template="plotly_white",
        )
        return figure

    def _to_saved(self) -> tuple[dict[str, Any], dict[str, Any]]:
        meta = {
            "summary": self.summary.to_dict("list"),
            "outputs": self.outputs.to_dict("list"),
            "model": self.model,
            "source": self.source,
            "target": self.target,
            "weaken": self.weaken,
            "shots": self.shots,
        }
        return meta, {}

    @classmethod
    def _from_saved(cls, meta: dict[str, Any], tensors: dict[str, Any]) -> TransferResult:
        summary = pd.DataFrame(meta.pop("summary"))
        outputs = pd.DataFrame(meta.pop("outputs"))
        return cls(summary, outputs, **meta)


def transfer_scale(
    heads: LanguageHeads, target: str, weaken: str | None, factor: float
) -> HeadScale:
    """The scale of attention transfer: ``target``'s specific heads x``factor``, ``weaken``'s
    specific heads x0 (except those also specific to ``target``), every other head x1."""
    n_layers, n_heads = heads.shape
    strengthen = heads.specific[target] if target in heads.languages else None
    if strengthen is None:
        raise ImportanceInputError(f"no language {target!r} in these heads ({heads.languages})")
    if not strengthen:
        raise ImportanceInputError(
            f"{target} has no specific heads at quantile {heads.quantile}; lower the quantile "
            "(or min_languages) when computing the language heads"
        )
    scale = HeadScale.from_heads(strengthen, n_layers=n_layers, n_heads=n_heads, factor=factor)
    if weaken is not None:
        if weaken not in heads.languages:
            raise ImportanceInputError(f"no language {weaken!r} in these heads ({heads.languages})")
        scale = scale.scaled(_weakened(heads, target, weaken), 0.0)
    return scale


def _weakened(heads: LanguageHeads, target: str, weaken: str) -> list[str]:
    return [head for head in heads.specific[weaken] if head not in heads.specific[target]]


#: the largest scale attention transfer accepts (LAHIS strengthens heads x3 and x5)
MAX_TRANSFER_FACTOR = 100.0


@own_checks  # __post_init__ checks every field: users and the tests see the same clear errors
@dataclass(frozen=True, kw_only=True)
class TransferConfig(
    ProgressSetting,
    ShotsSetting,
    BatchSetting.with_defaults(batch_size=8),
    HeldOutSetting.with_defaults(n_eval=20),
    NewTokensSetting.with_defaults(max_new_tokens=32),
):
    """The settings of :func:`attention_transfer`."""

    source: str = "en"
    """The language translated from."""
    target: str = "fr"
    """The language translated into: its specific heads are strengthened."""
    weaken: str | None = "source"
    """The language whose specific heads are zeroed: source (the default), a language, or None."""
    factors: Sequence[float] = (3.0, 5.0)
    """The scales of the target's specific heads, one run each (LAHIS: x3 and x5)."""

    def __post_init__(self) -> None:
        super().__post_init__()  # the shared parts' checks
        if self.source == self.target:
            raise ImportanceInputError(
                f"source and target are both {self.source!r}: attention transfer translates "
                "between two languages"
            )
        if isinstance(self.factors, (str, bytes)) or not isinstance(self.factors, Sequence):
            raise ImportanceInputError(f"factors must be a list of numbers, got {self.factors!r}")
        if not self.factors:
            raise ImportanceInputError("factors is empty: give at least one scale, e.g. [3.0]")
        for factor in self.factors:
            check_number("each factor", factor)
            if not 0 < factor <= MAX_TRANSFER_FACTOR:
                raise ImportanceInputError(
                    f"factor {factor:g} is outside (0, {MAX_TRANSFER_FACTOR:g}]: a head's output "
                    "scaled further swamps the residual stream (LAHIS strengthens x3 and x5)"
                )
        object.__setattr__(self, "factors", tuple(float(f) for f in self.factors))

    @property
    def weakened(self) -> str | None:
        """The language whose heads are zeroed (``weaken="source"`` resolved)."""
        return self.source if self.weaken == "source" else self.weaken

    def check(
        self, heads: LanguageHeads | Sequence[str] | None, corpus: ParallelCorpus | None = None
    ) -> Task:
        """The settings against ``heads`` (the language heads, or only their languages, None
        when not computed yet) and the corpus, without a model; returns the translation task."""
        languages = heads.languages if isinstance(heads, LanguageHeads) else heads
        corpus = corpus or parallel_corpus()
        for name, lang in (("source", self.source), ("target", self.target)):
            if lang not in corpus.languages:
                raise ImportanceInputError(
                    f"{name} {lang!r} is not a language of the corpus "
                    f"({', '.join(corpus.languages)})"
                )
        for name, lang in (("target", self.target), ("weaken", self.weakened)):
            if lang is not None and languages is not None and lang not in languages:
                raise ImportanceInputError(
                    f"no language {lang!r} ({name}) in these heads ({list(languages)})"
                )
        if isinstance(heads, LanguageHeads) and self.target in heads.languages:
            transfer_scale(heads, self.target, None, 1.0)  # the target has heads to scale
        task = corpus.translation_task(self.source, self.target)
        if not self.n_eval < len(task):
            raise ImportanceInputError(
                f"n_eval must lie in [1, {len(task) - 1}], got {self.n_eval}"
            )
        if self.shots > len(task) - self.n_eval:
            raise ImportanceInputError(
                f"shots must lie in [0, {len(task) - self.n_eval}] (the sentences not "
                f"evaluated), got {self.shots}"
            )
        return task


def attention_transfer(
    model: ModelLike,
    heads: LanguageHeads,
    config: TransferConfig | None = None,
    *,
    corpus: ParallelCorpus | None = None,
    **options: Any,
) -> TransferResult:
    """Translate the last ``n_eval`` sentences of ``corpus`` (the built-in one by default) from
    ``source`` into ``target`` with the task's instruction and ``shots`` demonstrations, greedy,
    without and with attention transfer (:func:`transfer_scale` for each factor; ``weaken=
    "source"`` zeroes the source language's specific heads, ``None`` none). ``config`` (a
    :class:`TransferConfig`; its fields also as keywords) holds these settings. The output's
    first line is scored: off-target rate by :func:`identify_language` among the corpus
    languages, chrF++ against the reference."""
    config = configure(TransferConfig, config, options, "attention_transfer")
    if heads.shape != head_shape(model):
        raise MaskShapeError(
            f"these language heads are for a {heads.shape[0]}x{heads.shape[1]} model "
            f"({heads.model}), not {model_name(model)}; compute them for this model"
        )
    corpus = corpus or parallel_corpus()
    task = config.check(heads, corpus)
    source, target, weaken = config.source, config.target, config.weakened
    n_eval, shots, factors = config.n_eval, config.shots, config.factors
    evaluation = task.examples[-n_eval:]
    pool = [(example.input, example.output) for example in task.examples[:-n_eval]]
    prompts = []
    for index, example in enumerate(evaluation):
        demos = sample_shots(pool, shots, seed=index) if shots else ()
        fmt = PromptFormat(chat=False, instruction=task.instruction, shots=demos)
        prompts.append(fmt.render(example.input))
    references = [example.output for example in evaluation]
    settings: list[tuple[str, float, HeadScale | None]] = [("original", 1.0, None)]
    for factor in factors:
        settings.append(
            (f"x{factor:g}", float(factor), transfer_scale(heads, target, weaken, factor))
        )
    candidates = sorted(set(corpus.languages) | {source, target})
    rows, outputs = [], []
    for name, factor, scale in settings:
        generated = generate(
            model,
            prompts,
            max_new_tokens=config.max_new_tokens,
            mask=scale,
            batch_size=config.batch_size,
            progress=config.progress,
        )
        texts = [g.text.strip().split("\n")[0].strip() for g in generated]
        found = identify_language(texts, candidates)
        rows.append(
            {
                "setting": name,
                "factor": factor,
                "off_target": sum(lang != target for lang in found) / len(found),
                "chrf_pp": chrf_pp(texts, references),
                "strengthened": " ".join(heads.specific[target]) if scale is not None else "",
                "weakened": " ".join(_weakened(heads, target, weaken))
                if scale is not None and weaken
                else "",
            }
        )
        outputs += [
            {"setting": name, "source": example.input, "output": text, "language": lang}
            for example, text, lang in zip(evaluation, texts, found, strict=True)
        ]
    return TransferResult(
        pd.DataFrame(rows), pd.DataFrame(outputs), model_name(model), source, target, weaken, shots
    )
