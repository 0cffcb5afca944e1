"""Translation scores and token alignment heads (Liu et al., 2025).

A head's translation score is the fraction of aligned target tokens whose attention argmax
lands on a source token aligned to them. The method leaves four choices open; each is an
argument of :func:`translation_scores`:

* ``query``: ``"token"`` -- the target token's own position is the attention query (Shift-Att
  style; both public implementations do this) -- or ``"predicting"`` -- the position that
  predicts the target token (one before it).
* ``argmax_over``: ``"sequence"`` -- the argmax over every position the query sees (the
  teacher-forced public script) -- or ``"source"`` -- over the source sentence's tokens only
  (the greedy public script). Chance is far higher over the source span.
* ``average``: ``"per_sentence"`` -- a score per sentence, then the mean (the paper's text and
  the teacher-forced script) -- or ``"pooled"`` -- hits / queries over the corpus (g/m of the
  greedy script).
* ``decoding``: ``"teacher_forced"`` -- the reference follows the prompt -- or ``"greedy"`` --
  the model's own greedy translation follows it (the paper's setting), aligned with the gold
  alignment when it equals the reference, else with ``aligner``.

Word -> token rule (the public implementations'): every token of an aligned target word is a
query; it hits when the argmax lands on any token of a source word aligned to that target word.
Ties in the argmax share the hit (a tie among ``m`` positions, ``h`` of them hits, counts
``h / m``), so a head that attends uniformly scores exactly the chance level. Patterns are
reduced inside the ``hook_pattern`` hook to these argmaxes at the query positions; no pattern
is cached.

>>> import lens_heads as lh
>>> model = lh.tiny_model()
>>> scores = lh.translation_scores(model, "en-fr", n_eval=4, shots=1)
>>> tuple(scores.scores.shape), 0 < scores.chance < 1
((2, 4), True)
>>> len(scores.top(3))
3
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import torch
from jaxtyping import Float
from torch import Tensor

from lens_heads.alignment._aligners import (
    Aligner,
    AlignmentError,
    EflomalAligner,
    SimAligner,
    parse_alignment,
    split_words,
)
from lens_heads.alignment._argmax import check_pattern_hook, score_items
from lens_heads.alignment._pairs import (
    PairsLike,
    QueryItem,
    SentencePairs,
    _encode_item,
    demonstrations,
    read_alignments,
    resolve_pairs,
)
from lens_heads.alignment._score_config import ScoreConfig
from lens_heads.core import (
    HeadMask,
    InputError,
    PromptFormat,
    configure,
    format_head,
    has_chat_template,
    markdown_table,
    save_figures,
)
from lens_heads.core.internal import FolderResult, check_number, model_name, warn_input

__all__ = [
    "AlignmentError",
    "EflomalAligner",
    "SimAligner",
    "TranslationScores",
    "check_pairs",
    "translation_scores",
]


# -- the result -------------------------------------------------------------------------------
@dataclass(repr=False)
class TranslationScores(FolderResult):
    """Per-head translation scores of one language pair and setting.

    ``sentence_hits[i, l, h]`` sums head (l, h)'s hits over sentence ``i``'s queries (a tie
    counts fractionally), ``sentence_queries[i]`` is its number of queries (aligned target
    tokens) and ``sentence_chance[i]`` the sum over its queries of the uniform-argmax hit
    probability ``|aligned source tokens| / |argmax domain|``. ``targets`` are the texts
    scored (references, or the model's outputs with ``decoding="greedy"``).

    >>> result = TranslationScores.example()
    >>> result.scores.tolist(), result.alignment_heads(threshold=0.1)
    ([[0.75, 0.0]], ['L0H0'])
    """

    model: str
    pair: str
    settings: dict[str, Any]
    sources: list[str]
    targets: list[str]
    sentence_hits: Float[Tensor, "n_sentences n_layers n_heads"]
    sentence_queries: Float[Tensor, " n_sentences"]
    sentence_chance: Float[Tensor, " n_sentences"]

    _format: ClassVar[str] = "lens_heads.translation_scores/1"

    @classmethod
    def example(cls) -> TranslationScores:
        """A hand-made result with one layer of two heads over two sentences."""
        return cls(
            model="tiny",
            pair="en-fr",
            settings={"average": "per_sentence"},
            sources=["a b", "c"],
            targets=["x y", "z"],
            sentence_hits=torch.tensor([[[1.0, 0.0]], [[1.0, 0.0]]]),
            sentence_queries=torch.tensor([2.0, 1.0]),
            sentence_chance=torch.tensor([0.5, 0.25]),
        )

    # -- numbers --------------------------------------------------------------------------------
    @property
    def n_layers(self) -> int:
        return int(self.sentence_hits.shape[1])

    @property
    def n_heads(self) -> int:
        return int(self.sentence_hits.shape[2])

    @property
    def _scored(self) -> Tensor:
        return self.sentence_queries > 0

    @property
    def per_sentence(self) -> Float[Tensor, "n_sentences n_layers n_heads"]:
        """Each sentence's scores ``hits / queries`` (NaN for a sentence without queries)."""
        queries = self.sentence_queries[:, None, None]
        return torch.where(queries > 0, self.sentence_hits / queries.clamp(min=1), math.nan)

    @property
    def scores(self) -> Float[Tensor, "n_layers n_heads"]:
        """Translation score of each head, averaged as ``settings["average"]`` says."""
        if not bool(self._scored.any()):
            return torch.zeros(self.n_layers, self.n_heads)
        if self.settings.get("average") == "pooled":
            return self.sentence_hits.sum(0) / self.sentence_queries.sum()
        return self.per_sentence[self._scored].mean(0)

    @property
    def chance(self) -> float:
        """The score of a head whose argmax is uniform over its domain, averaged the same way."""
        if not bool(self._scored.any()):
            return 0.0
        if self.settings.get("average") == "pooled":
            return float(self.sentence_chance.sum() / self.sentence_queries.sum())
        scored = self._scored
        return float((self.sentence_chance[scored] / self.sentence_queries[scored]).mean())

    @property
    def n_queries(self) -> int:
        return int(self.sentence_queries.sum())

    def _ranked(self) -> list[tuple[str, float]]:
        flat = self.scores.flatten()
        order = sorted(range(flat.numel()), key=lambda i: (-float(flat[i]), i))
        return [(format_head(i // self.n_heads, i % self.n_heads), float(flat[i])) for i in order]

    def top(self, k: int) -> list[str]:
        """Labels of the ``k`` highest-scoring heads, best first (ties: layer-major order)."""
        if not 0 < k <= self.n_layers * self.n_heads:
            raise InputError(f"k must lie in [1, {self.n_layers * self.n_heads}], got {k}")
        return [label for label, _ in self._ranked()[:k]]

    def alignment_heads(
        self, threshold: float | None = None, *, over_chance: float | None = None
    ) -> list[str]:
        """Heads scoring above ``threshold`` (the paper's 0.1, the default) or above
        ``over_chance`` times the chance level, best first. Use the fixed threshold with
        ``argmax_over="sequence"`` (chance there is tiny); use ``over_chance`` with
        ``argmax_over="source"``, whose chance on short sentences exceeds 0.1."""
        if threshold is not None and over_chance is not None:
            raise InputError("give threshold or over_chance, not both")
        for name, value in (("threshold", threshold), ("over_chance", over_chance)):
            if value is not None:
                number = check_number(name, value)  # NaN, inf and non-numbers are errors
                if name == "threshold" and not 0 <= number <= 1:
                    raise InputError(f"threshold must lie in [0, 1] (a score), got {value}")
                if name == "over_chance" and number <= 0:
                    raise InputError(f"over_chance must be positive, got {value}")
        cut = threshold if over_chance is None else over_chance * self.chance
        cut = 0.1 if cut is None else cut
        return [label for label, score in self._ranked() if score > cut]

    def activity(self, threshold: float = 0.1) -> dict[str, float]:
        """The three groups of the paper's Figure 3, as shares of all heads: alignment heads
        (score above ``threshold``), infrequently active heads (above zero, at most
        ``threshold``) and heads never active (a score of exactly zero: the argmax never lands
        on an aligned source token, as in the paper's Figure 6b). The paper: under 8 % alignment
        heads on every model, nearly half infrequently active, 36-55 % never active.

        >>> scores = TranslationScores.example()
        >>> scores.activity()
        {'alignment heads': 0.5, 'infrequently active': 0.0, 'never active': 0.5}
        """
        flat = self.scores.flatten()
        n = flat.numel()
        return {
            "alignment heads": int((flat > threshold).sum()) / n,
            "infrequently active": int(((flat > 0) & (flat <= threshold)).sum()) / n,
            "never active": int((flat == 0).sum()) / n,
        }

    def alignment_mask(self, threshold: float | None = None, **kwargs: Any) -> HeadMask:
        """The alignment heads as a :class:`HeadMask` (selected = alignment head)."""
        heads = self.alignment_heads(threshold, **kwargs)
        return HeadMask.from_heads(heads, n_layers=self.n_layers, n_heads=self.n_heads)

    # -- views ----------------------------------------------------------------------------------
    def to_frame(self) -> pd.DataFrame:
        """One row per head, best first: score, hits, queries, score / chance."""
        hits = self.sentence_hits.sum(0)
        rows = []
        for label, score in self._ranked():
            layer, head = (int(x) for x in label[1:].split("H"))
            rows.append(
                {
                    "head": label,
                    "layer": layer,
                    "head_index": head,
                    "score": score,
                    "hits": float(hits[layer, head]),
                    "queries": self.n_queries,
                    "over_chance": score / self.chance if self.chance > 0 else math.nan,
                }
            )
        return pd.DataFrame(rows).set_index("head")

    def to_markdown(self, k: int = 10) -> str:
        head = (
            f"**{self.pair}** on **{self.model}**: {len(self.sources)} sentences, "
            f"{self.n_queries} queries, chance {self.chance:.4f}; settings {self.settings}\n\n"
        )
        table = self.to_frame().head(k).reset_index()[["head", "score", "over_chance"]]
        table["over_chance"] = table["over_chance"].map(lambda value: f"{value:.2f}")
        table = table.rename(columns={"over_chance": "score / chance"})
        return head + markdown_table(table, floatfmt=".4f", index=False, empty="") + "\n"

    def plot_heatmap(self) -> Any:
        """Figure 4: layer x head heat map of the scores (alignment heads dotted)."""
        from lens_heads.core.internal import head_score_figure

        return head_score_figure(
            self.scores[None],
            panels=[f"{self.pair} translation score"],
            outline=self.alignment_mask().selected,
            colorbar_title="TS",
            title=f"Translation scores, {self.model} ({self.pair})",
        )

    def plot_distribution(self, threshold: float = 0.1, near_zero: float = 0.01) -> Any:
        """Figure 3: heads sorted by score, coloured alignment (> ``threshold``), infrequent
        and near zero (< ``near_zero``), with the chance level as a dashed line."""
        import plotly.graph_objects as go

        ranked = self._ranked()
        colours = {"alignment": "#d62728", "infrequent": "#1f77b4", "near zero": "#c7c7c7"}
        kinds = [
            "alignment" if s > threshold else "near zero" if s < near_zero else "infrequent"
            for _, s in ranked
        ]
        figure = go.Figure()
        for kind, colour in colours.items():
            points = [
                (i, label, s)
                for i, ((label, s), k) in enumerate(zip(ranked, kinds, strict=True))
                if k == kind
            ]
            figure.add_trace(
                go.Bar(
                    x=[i for i, _, _ in points],
                    y=[s for _, _, s in points],
                    text=[label for _, label, _ in points],
                    name=f"{kind} ({len(points)})",
                    marker_color=colour,
                    hovertemplate="%{text}: %{y:.4f}<extra></extra>",
                )
            )
        figure.add_hline(y=self.chance, line_dash="dash", annotation_text="chance")
        figure.add_hline(y=threshold, line_dash="dot", annotation_text=f"{threshold}")
        figure.update_layout(
            title=f"Heads by translation score, {self.model} ({self.pair})",
            xaxis_title="head rank",
            yaxis_title="translation score",
            template="plotly_white",
            bargap=0.1,
        )
        return figure

    def plot(self) -> Any:
        return self.plot_heatmap()

    def save(self, directory: str | os.PathLike[str], *, png: bool = False) -> list[Path]:
        """:meth:`FolderResult.save` plus ``distribution.html`` (Figure 3)."""
        written = super().save(directory, png=png)
        return written + save_figures(
            directory, {"distribution": self.plot_distribution()}, png=png
        )


@dataclass
class _Prepared:
    name: str
    sources: list[str]
    targets: list[str]
    items: list[QueryItem]
    settings: dict[str, Any]


def translation_scores(
    model: Any,
    pairs: PairsLike,
    config: ScoreConfig | None = None,
    *,
    alignments: Sequence[Any] | str | os.PathLike[str] | None = None,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
    aligner: Aligner | None = None,
    **overrides: Any,
) -> TranslationScores:
    """Translation score of every head on ``pairs`` (see the module docstring for the four
    choices and the word -> token rule).

    ``pairs``: a built-in pair name (``"en-fr"``: the corpus's sentences and gold alignments),
    a :class:`~lens_heads.Task`, a task file, or ``(source, reference)`` strings. ``alignments``
    (one per pair; a list, or a Pharaoh/JSON file) overrides the gold ones: index pairs
    ``[[i, j], ...]``, word pairs ``[["cat", "chat"], ...]`` or Pharaoh lines ``"0-0 1-2"``, over
    the words of :func:`split_words` (the corpus's own words for built-in
    pairs). Without gold alignments the ``aligner`` (default :class:`SimAligner` on ``model``)
    aligns. ``config`` (a :class:`ScoreConfig`; its fields also as keywords, ``n_eval=8``)
    holds the method's choices: ``n_eval`` scores the first pairs; each prompt has ``shots``
    demonstrations drawn (``shot_seed``) from the other pairs. Sentences are scored in
    right-padded batches of ``batch_size`` (default 16), equal to scoring them one at a time.

    >>> import lens_heads as lh
    >>> pairs = [("a cat", "un chat"), ("a dog", "un chien")]
    >>> scores = lh.translation_scores(lh.tiny_model(), pairs, alignments=["0-0 1-1"] * 2, shots=1)
    >>> scores.n_queries > 0
    True
    """
    config = configure(ScoreConfig, config, overrides, "translation_scores")
    prepared = _prepare(model, pairs, alignments, src_lang, tgt_lang, aligner, config)
    hits, queries, chance = score_items(
        model, prepared.items, config.batch_size or 16, config.progress
    )
    return TranslationScores(
        model=model_name(model),
        pair=prepared.name,
        settings=prepared.settings,
        sources=prepared.sources,
        targets=prepared.targets,
        sentence_hits=hits,
        sentence_queries=queries,
        sentence_chance=chance,
    )


def _prepare(
    model: Any,
    pairs: PairsLike,
    alignments: Sequence[Any] | str | os.PathLike[str] | None,
    src_lang: str | None,
    tgt_lang: str | None,
    aligner: Aligner | None,
    config: ScoreConfig,
) -> _Prepared:
    """Check the pairs and encode every sentence (greedy: decode first)."""
    shots, n, decoding = config.shots, config.n_eval, config.decoding
    data, gold = check_pairs(
        pairs, alignments=alignments, src_lang=src_lang, tgt_lang=tgt_lang, shots=shots, n=n
    )
    check_pattern_hook(model)
    count = len(data.sources) if n is None else min(n, len(data.sources))
    tokenizer = model.tokenizer
    chat = has_chat_template(tokenizer) if config.chat is None else config.chat
    prompts = _prompts(model, data, count, chat, shots, config.shot_seed)
    new_tokens = config.max_new_tokens if decoding == "greedy" else 0
    _check_fit(model, prompts, data, chat, shots, new_tokens)
    answers: list[str] = list(data.targets[:count])
    answer_ids: list[list[int] | None] = [None] * count
    target_words = [list(w) for w in data.target_words[:count]]
    if decoding == "greedy":
        answers, answer_ids = _greedy_outputs(
            model, prompts, chat, config.max_new_tokens, config.batch_size
        )
    links, n_gold = _links(model, data, gold, answers, target_words, aligner)
    items = [
        _encode_item(
            tokenizer,
            prompts[i],
            chat,
            data.sources[i],
            data.source_words[i],
            answers[i],
            answer_ids[i],
            target_words[i],
            links[i],
            config.query,
            config.argmax_over,
            where=f"pair {i}: ",
        )
        for i in range(count)
    ]
    settings = {
        **config.stored(),
        "chat": chat,
        "alignments": "given" if alignments is not None else "gold" if data.gold else "aligner",
        "n_gold_aligned": n_gold,
    }
    return _Prepared(data.name, list(data.sources[:count]), answers, items, settings)


def check_pairs(
    pairs: PairsLike,
    *,
    alignments: Sequence[Any] | str | os.PathLike[str] | None = None,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
    shots: int = 2,
    n: int | None = None,
) -> tuple[SentencePairs, list[Any] | None]:
    """The sentence pairs and their alignments (given, or the corpus's gold ones), checked
    without a model: the pair name or file, each given alignment against its sentence's words,
    ``shots`` and ``n`` against the number of pairs. The command line calls it before the model
    loads; :func:`translation_scores` calls it first."""
    if n is not None and n < 1:
        raise InputError(f"n must be positive, got {n}")
    data = resolve_pairs(pairs, src_lang, tgt_lang)
    gold = data.gold if alignments is None else _given_alignments(data, alignments)
    if shots < 0:
        raise InputError(f"shots must be >= 0, got {shots}")
    if shots and len(data.sources) <= shots:
        raise AlignmentError(
            f"{shots} demonstrations need more than {shots} sentence pairs, {data.name} has "
            f"{len(data.sources)}; use fewer shots or more pairs"
        )
    if n is not None and n > len(data.sources):
        warn_input(f"n={n}, but {data.name} has {len(data.sources)} sentence pairs: all scored")
    return data, gold


def _given_alignments(data: SentencePairs, alignments: Any) -> list[Any]:
    """Alignments from a file or a list, one per sentence pair, checked against its words."""
    entries = read_alignments(alignments)
    if len(entries) != len(data.sources):
        raise AlignmentError(
            f"got {len(entries)} alignments for {len(data.sources)} sentence pairs; give one "
            "alignment per pair, in the same order"
        )
    return [
        parse_alignment(entry, source, target, where=f"pair {i}: ")
        for i, (entry, source, target) in enumerate(
            zip(entries, data.source_words, data.target_words, strict=True)
        )
    ]


def _prompts(
    model: Any, data: SentencePairs, count: int, chat: bool, shots: int, shot_seed: int
) -> list[str]:
    """Each source sentence after ``shots`` demonstrations drawn from the other pairs."""
    pick = demonstrations(list(zip(data.sources, data.targets, strict=True)), shots, shot_seed)
    return [
        PromptFormat(chat=chat, shots=pick(i)).render(data.sources[i], model.tokenizer)
        for i in range(count)
    ]


def _check_fit(
    model: Any, prompts: list[str], data: SentencePairs, chat: bool, shots: int, new_tokens: int
) -> None:
    """Each prompt with its reference (or ``new_tokens`` generated) fits the context."""
    tokenizer = model.tokenizer
    n_ctx = int(getattr(model.cfg, "n_ctx", 0) or 0)
    for i, prompt in enumerate(prompts):
        length = len(tokenizer(prompt, add_special_tokens=not chat).input_ids)
        reference = len(tokenizer(data.targets[i], add_special_tokens=False).input_ids)
        if n_ctx and length + max(reference, new_tokens) > n_ctx:
            raise AlignmentError(
                f"pair {i}: the prompt ({length} tokens with {shots} demonstrations) and its "
                f"translation do not fit the model's context of {n_ctx} tokens; use a shorter "
                "source, fewer shots, or a model with a longer context"
            )


def _links(
    model: Any,
    data: SentencePairs,
    gold: list[Any] | None,
    answers: list[str],
    target_words: list[list[str]],
    aligner: Aligner | None,
) -> tuple[list[Any], int]:
    """Word links of each answer to its source, and how many are gold: the gold alignment
    where the answer is the reference, else the aligner's (default :class:`SimAligner`) on the
    output's own words (``target_words`` is updated for those)."""
    links: list[Any] = []
    n_gold = 0
    for i, answer in enumerate(answers):
        is_reference = answer.strip() == data.targets[i].strip()
        if gold is not None and is_reference:
            links.append(gold[i])
            n_gold += 1
            continue
        if not is_reference:  # a greedy output: its own words
            target_words[i] = split_words(answer)
        aligner = aligner or SimAligner(model)
        links.append([tuple(pair) for pair in aligner(data.source_words[i], target_words[i])])
    return links, n_gold


def _greedy_outputs(
    model: Any, prompts: Sequence[str], chat: bool, max_new_tokens: int, batch_size: int | None
) -> tuple[list[str], list[list[int] | None]]:
    """The model's greedy translations (first line) on the KV-cached decoder: texts and ids."""
    from lens_heads.core import greedy_generate
    from lens_heads.core.internal import newline_tokens, stop_token_ids

    tokenizer = model.tokenizer
    encoded = [list(tokenizer(prompt, add_special_tokens=not chat).input_ids) for prompt in prompts]
    stops = sorted(set(stop_token_ids(tokenizer, model)) | set(newline_tokens(tokenizer)))
    outputs = greedy_generate(
        model,
        encoded,
        max_new_tokens=max_new_tokens,
        stop_tokens=stops,
        batch_size=batch_size or 16,
    )
    texts = [tokenizer.decode(ids) for ids in outputs]
    return texts, [list(ids) for ids in outputs]
