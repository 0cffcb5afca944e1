"""Translation scores on a tiny random model: patterns set through ``hook_pattern`` hooks give
known scores; each of the four choices acts as defined; batched equals one at a time."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

import lens_heads as lh
from lens_heads.alignment import _scores as scores_module
from lens_heads.alignment._aligners import (
    AlignmentError,
    SimAligner,
    alignment_error_rate,
    iter_max,
    parse_alignment,
    split_words,
)
from lens_heads.alignment._scores import TranslationScores
from lens_heads.core._generation import greedy_generate

HEAD = (1, 2)  # the head whose pattern the tests replace


def _prepare(model, pairs, alignments=None, aligner=None, **options):
    """The sentences as translation_scores encodes them (its private step), options as keywords."""
    config = lh.alignment.ScoreConfig(**options)
    return scores_module._prepare(model, pairs, alignments, None, None, aligner, config)


def replacing_hook(items, rows_to):
    """A ``hook_pattern`` hook for batch size 1: the item is found by sequence length, and
    ``rows_to(item, row_index) -> {position: weight}`` sets the pattern row of HEAD at each
    query row; every other row of HEAD attends to position 0."""
    by_length = {len(item.tokens): item for item in items}
    assert len(by_length) == len(items), "the test needs sentences of distinct lengths"

    def hook(pattern, hook):
        item = by_length[pattern.shape[-1]]
        new = pattern.clone()
        new[:, HEAD[1]] = 0.0
        new[:, HEAD[1], :, 0] = 1.0
        for index, row in enumerate(item.queries):
            new[:, HEAD[1], row] = 0.0
            for position, weight in rows_to(item, index).items():
                new[:, HEAD[1], row, position] = weight
        return new

    return [(f"blocks.{HEAD[0]}.attn.hook_pattern", hook)]


def gold(item, index):
    return {p: 1.0 / len(item.hits[index]) for p in item.hits[index]}


def uniform(item, index):
    return {p: 1.0 / len(item.domains[index]) for p in item.domains[index]}


@pytest.mark.parametrize("query", ["token", "predicting"])
@pytest.mark.parametrize("argmax_over", ["sequence", "source"])
@pytest.mark.parametrize("average", ["per_sentence", "pooled"])
def test_gold_pattern_scores_one_and_uniform_scores_chance(tiny, query, argmax_over, average):
    settings = dict(n_eval=3, shots=1, query=query, argmax_over=argmax_over, average=average)
    items = _prepare(tiny, "en-fr", **settings).items
    with tiny.hooks(fwd_hooks=replacing_hook(items, gold)):
        scores = lh.translation_scores(tiny, "en-fr", batch_size=1, **settings)
    assert scores.n_queries > 10
    assert scores.scores[HEAD].item() == pytest.approx(1.0)
    with tiny.hooks(fwd_hooks=replacing_hook(items, uniform)):
        scores = lh.translation_scores(tiny, "en-fr", batch_size=1, **settings)
    assert scores.scores[HEAD].item() == pytest.approx(scores.chance, rel=1e-5)
    assert 0 < scores.chance < 1
    if argmax_over == "source":
        assert scores.chance > 0.1  # short sentences: chance over the source span is high


def test_gold_pattern_scores_one_on_greedy_outputs(tiny):
    from lens_heads.alignment._scores import score_items

    def every_word_to_the_first(source_words, target_words):
        return [(0, j) for j in range(len(target_words))]

    prepared = _prepare(
        tiny,
        "en-fr",
        n_eval=3,
        shots=1,
        decoding="greedy",
        aligner=every_word_to_the_first,
        max_new_tokens=12,
    )
    items = list({len(i.tokens): i for i in prepared.items if i.queries}.values())
    assert items, "the tiny model's greedy outputs should contain words"
    with tiny.hooks(fwd_hooks=replacing_hook(items, gold)):
        hits, queries, _ = score_items(tiny, items, 1, False)
    assert torch.allclose(hits[:, HEAD[0], HEAD[1]], queries)


SIMPLE = [("a b", "y x"), ("c d e", "u v w")]  # distinct lengths, one-byte target words


def scored(tiny, rows_to, *, alignments=("1-1", "0-0 1-1 2-2"), **settings):
    settings = dict(shots=0, chat=True, **settings)  # position 0 is outside the source
    items = _prepare(tiny, SIMPLE, alignments=list(alignments), **settings).items
    with tiny.hooks(fwd_hooks=replacing_hook(items, rows_to)):
        return lh.translation_scores(
            tiny, SIMPLE, alignments=list(alignments), batch_size=1, **settings
        )


def test_query_choice_reads_the_token_row_or_the_row_before(tiny):
    token_items = _prepare(tiny, SIMPLE, alignments=["1-1", "0-0"], shots=0, chat=True).items
    token_rows = {
        (len(i.tokens), r): i.hits[k] for i in token_items for k, r in enumerate(i.queries)
    }

    def gold_at_token_rows(item, index):
        hits = token_rows.get((len(item.tokens), item.queries[index]))
        return {p: 1.0 / len(hits) for p in hits} if hits else {0: 1.0}

    alignments = ("1-1", "0-0")
    token = scored(tiny, gold_at_token_rows, alignments=alignments, query="token")
    predicting = scored(tiny, gold_at_token_rows, alignments=alignments, query="predicting")
    assert token.scores[HEAD].item() == 1.0
    assert predicting.scores[HEAD].item() == 0.0  # the row before each target token is off


def test_argmax_over_choice_restricts_the_domain(tiny):
    def mostly_first_position(item, index):
        return {0: 0.6, **{p: 0.4 / len(item.hits[index]) for p in item.hits[index]}}

    sequence = scored(tiny, mostly_first_position, argmax_over="sequence")
    source = scored(tiny, mostly_first_position, argmax_over="source")
    assert sequence.scores[HEAD].item() == 0.0  # the argmax is position 0, outside the source
    assert source.scores[HEAD].item() == 1.0  # within the source span the hit is the maximum


def test_average_choice_per_sentence_or_pooled(tiny):
    lengths = {}

    def gold_in_the_short_sentence(item, index):
        lengths.setdefault(len(item.tokens), len(item.queries))
        return gold(item, index) if len(item.tokens) == min(lengths) else {0: 1.0}

    per_sentence = scored(tiny, gold_in_the_short_sentence, average="per_sentence")
    lengths.clear()
    pooled = scored(tiny, gold_in_the_short_sentence, average="pooled")
    assert list(per_sentence.sentence_queries) == [1.0, 3.0]
    assert per_sentence.scores[HEAD].item() == pytest.approx(0.5)  # (1/1 + 0/3) / 2
    assert pooled.scores[HEAD].item() == pytest.approx(0.25)  # 1 / 4


def test_decoding_choice_scores_the_reference_or_the_model_output(tiny):
    def align_all(source_words, target_words):
        return [(0, j) for j in range(len(target_words))]

    settings = dict(n_eval=2, shots=1, aligner=align_all, max_new_tokens=8)
    forced = lh.translation_scores(tiny, "en-fr", decoding="teacher_forced", **settings)
    greedy_prep = _prepare(tiny, "en-fr", decoding="greedy", **settings)
    greedy = lh.translation_scores(tiny, "en-fr", decoding="greedy", **settings)
    references = lh.tasks.parallel_corpus().sentences["fr"][:2]
    assert forced.targets == references
    assert greedy.settings["decoding"] == "greedy" and greedy.targets != references
    forced_prep = _prepare(tiny, "en-fr", **settings)
    for item, forced_item, text in zip(
        greedy_prep.items, forced_prep.items, greedy.targets, strict=True
    ):
        prompt = forced_item.tokens[
            : len(forced_item.tokens)
            - len(
                tiny.tokenizer(
                    references[greedy_prep.items.index(item)], add_special_tokens=False
                ).input_ids
            )
        ]
        new = greedy_generate(tiny, [prompt], max_new_tokens=8, stop_tokens=None)[0]
        assert item.tokens[: len(prompt)] == prompt
        assert tiny.tokenizer.decode(item.tokens[len(prompt) :]) == text
        assert item.tokens[len(prompt) :] == new[: len(item.tokens) - len(prompt)]


@pytest.mark.parametrize("query", ["token", "predicting"])
@pytest.mark.parametrize("argmax_over", ["sequence", "source"])
def test_batched_equals_one_at_a_time(tiny, query, argmax_over):
    settings = dict(n_eval=10, shots=2, query=query, argmax_over=argmax_over)
    batched = lh.translation_scores(tiny, "en-fr", batch_size=16, **settings)
    single = lh.translation_scores(tiny, "en-fr", batch_size=1, **settings)
    assert torch.equal(batched.sentence_hits, single.sentence_hits)
    assert torch.equal(batched.scores, single.scores)


def test_greedy_translations_batched_equal_one_at_a_time(tiny):
    """decoding="greedy": the model's own translations, generated in left-padded batches of
    sources of different lengths, then aligned and scored, as with batch size 1."""
    settings = dict(n_eval=6, shots=0, decoding="greedy", max_new_tokens=6)
    batched = lh.translation_scores(tiny, "en-de", batch_size=16, **settings)
    single = lh.translation_scores(tiny, "en-de", batch_size=1, **settings)
    assert batched.targets == single.targets and len(set(batched.targets)) > 1
    assert len({len(source) for source in batched.sources}) > 1
    assert torch.equal(batched.sentence_hits, single.sentence_hits)
    assert torch.equal(batched.sentence_queries, single.sentence_queries)
    assert torch.equal(batched.scores, single.scores)


def test_result_views_and_save_load(tiny, tmp_path):
    scores = lh.translation_scores(tiny, "en-de", n_eval=4, shots=1)
    frame = scores.to_frame()
    assert len(frame) == 8 and list(frame.index[:3]) == scores.top(3)
    assert frame["score"].is_monotonic_decreasing
    assert scores.alignment_heads(threshold=0.0) == [
        h for h in frame.index if frame.loc[h, "score"] > 0
    ]
    assert scores.alignment_heads(over_chance=1e9) == []
    assert scores.plot_heatmap().data and scores.plot_distribution().data
    scores.save(tmp_path / "s")
    assert (tmp_path / "s" / "distribution.html").is_file()
    loaded = TranslationScores.load(tmp_path / "s")
    assert torch.equal(loaded.scores, scores.scores) and loaded.chance == scores.chance
    assert loaded.settings == scores.settings and loaded.targets == scores.targets
    with pytest.raises(ValueError, match="k must"):
        scores.top(0)


def test_example_result():
    result = TranslationScores.example()
    assert result.scores.tolist() == [[0.75, 0.0]]
    assert result.chance == pytest.approx((0.25 + 0.25) / 2)


# -- alignments and the aligner -----------------------------------------------------------------
def test_alignment_formats_agree():
    source, target = ["the", "cat", "the", "dog"], ["le", "chat", "le", "chien"]
    pharaoh = parse_alignment("0-0 1-1 2-2 3-3", source, target)
    indices = parse_alignment([[0, 0], [1, 1], [2, 2], [3, 3]], source, target)
    words = parse_alignment(
        [["the", "le"], ["cat", "chat"], ["the", "le"], ["dog", "chien"]], source, target
    )
    assert pharaoh == indices == words == [(0, 0), (1, 1), (2, 2), (3, 3)]


def test_alignment_file_and_words_give_the_same_scores(tiny, tmp_path):
    pairs = [("the cat sleeps", "le chat dort"), ("a dog", "un chien")]
    path = tmp_path / "align.txt"
    path.write_text("0-0 1-1 2-2\n0-0 1-1\n")
    from_file = lh.translation_scores(tiny, pairs, alignments=path, shots=1)
    words = [[["the", "le"], ["cat", "chat"], ["sleeps", "dort"]], [["a", "un"], ["dog", "chien"]]]
    from_words = lh.translation_scores(tiny, pairs, alignments=words, shots=1)
    (tmp_path / "align.json").write_text(json.dumps(words))
    from_json = lh.translation_scores(tiny, pairs, alignments=tmp_path / "align.json", shots=1)
    assert torch.equal(from_file.sentence_hits, from_words.sentence_hits)
    assert torch.equal(from_json.sentence_hits, from_words.sentence_hits)


def test_a_word_the_project_splits_names_the_span_it_covers():
    """Outside aligners keep "grand-mère" (or "New York") whole; here it is several words."""
    source, target = ["my", "grandmother", "sleeps"], ["ma", "grand", "-", "mère", "dort"]
    assert split_words("ma grand-mère dort") == target
    words = [["my", "ma"], ["grandmother", "grand-mère"], ["sleeps", "dort"]]
    assert parse_alignment(words, source, target) == [(0, 0), (1, 1), (1, 2), (1, 3), (2, 4)]
    # on the source side too, and a span is matched at its first unused occurrence
    assert parse_alignment(
        [["New York", "New-York"], ["New York", "New-York"]],
        ["New", "York", "and", "New", "York"],
        ["New", "-", "York", "et", "New", "-", "York"],
    ) == [(i, j) for i in (0, 1) for j in (0, 1, 2)] + [(i, j) for i in (3, 4) for j in (4, 5, 6)]
    with pytest.raises(AlignmentError, match="'grand-père' is not in the sentence"):
        parse_alignment([["grandfather", "grand-père"]], ["grandfather"], target)


def test_a_split_word_pair_scores_like_its_index_pairs(tiny):
    pairs = [("my grandmother sleeps", "ma grand-mère dort"), ("a dog", "un chien")]
    words = [
        [["my", "ma"], ["grandmother", "grand-mère"], ["sleeps", "dort"]],
        [["a", "un"], ["dog", "chien"]],
    ]
    from_words = lh.translation_scores(tiny, pairs, alignments=words, shots=1)
    from_indices = lh.translation_scores(
        tiny, pairs, alignments=["0-0 1-1 1-2 1-3 2-4", "0-0 1-1"], shots=1
    )
    assert torch.equal(from_words.sentence_hits, from_indices.sentence_hits)
    assert torch.equal(from_words.sentence_queries, from_indices.sentence_queries)


def test_split_words_and_itermax():
    assert split_words("狗在厨房里。") == ["狗", "在", "厨", "房", "里", "。"]
    similarity = torch.tensor([[0.9, 0.8, 0.1], [0.1, 0.2, 0.3], [0.2, 0.1, 0.95]])
    assert iter_max(similarity, max_count=1).nonzero().tolist() == [[0, 0], [2, 2]]
    assert iter_max(similarity, max_count=2).sum() > 2  # itermax adds links for unaligned words
    assert alignment_error_rate([[(0, 0)]], [[(0, 0)]]) == 0.0


@pytest.mark.parametrize("method", ["itermax", "argmax"])
@pytest.mark.parametrize("layer", [0, 1])
def test_sim_aligner_aligns_identical_sentences(tiny, method, layer):
    """A sentence against itself: each word's vector is its own best match on both sides, so
    the mutual argmax is the whole diagonal and itermax adds nothing (every word is aligned)."""
    words = ["one", "two", "three", "four", "five"]
    aligner = SimAligner(tiny, layer=layer, method=method)
    assert aligner(words, words) == [(i, i) for i in range(len(words))]


# -- bad input ---------------------------------------------------------------------------------
PAIRS = [("the cat", "le chat")]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(pairs=PAIRS, alignments=["0-5"]), "out of range"),
        (dict(pairs=PAIRS, alignments=[[["dog", "chat"]]]), "'dog' is not in the sentence"),
        (dict(pairs=PAIRS, alignments=["0-0", "1-1"]), "2 alignments for 1 sentence pairs"),
        (dict(pairs=PAIRS, alignments=["0:0"]), "not a Pharaoh alignment pair"),
        (dict(pairs="en-xx"), "has the languages en, fr, es, de, zh"),
        (dict(pairs=[("the cat", " ")]), "empty sentence"),
        (dict(pairs=[]), "no sentence pairs"),
        (dict(pairs=[("cat " * 200, "chat")], alignments=["0-0"], shots=0), "context"),
        (dict(pairs="en-fr", query="middle"), "query must be one of token, predicting"),
        (dict(pairs="en-fr", argmax_over="all"), "argmax_over must be one of"),
        (dict(pairs=PAIRS, alignments=["0-0"], shots=3), "3 demonstrations need more"),
    ],
)
def test_bad_input(tiny, kwargs, message):
    kwargs = {"shots": 0, **kwargs}
    with pytest.raises(ValueError, match=message):
        lh.translation_scores(tiny, kwargs.pop("pairs"), **kwargs)


def test_model_without_hook_pattern():
    model = SimpleNamespace(cfg=SimpleNamespace(model_name="bare"), hook_dict={})
    with pytest.raises(AlignmentError, match=r"exposes no 'blocks\.0\.attn\.hook_pattern'"):
        lh.translation_scores(model, "en-fr")


# -- consistency across pairs and models -------------------------------------------------------
def test_consistency_matrix(tiny, tmp_path):
    from lens_heads.alignment._consistency import Consistency, alignment_consistency

    result = alignment_consistency(tiny, ["en", "fr", "zh"], k=3, n_eval=2, shots=1)
    matrix = result.jaccard
    assert list(matrix.index) == ["en-fr", "en-zh", "fr-en", "fr-zh", "zh-en", "zh-fr"]
    assert (matrix.to_numpy().diagonal() == 1).all() and (matrix == matrix.T).all().all()
    scores = lh.translation_scores(tiny, "fr-zh", n_eval=2, shots=1)
    assert result.top["fr-zh"] == scores.top(3)
    a = lh.HeadMask.from_heads(result.top["en-fr"], n_layers=2, n_heads=4)
    b = lh.HeadMask.from_heads(result.top["zh-en"], n_layers=2, n_heads=4)
    assert matrix.loc["en-fr", "zh-en"] == lh.jaccard(a, b)
    assert result.expected == lh.expected_random_jaccard(3, 3, n_heads=8)
    result.save(tmp_path / "c")
    assert Consistency.load(tmp_path / "c").jaccard.equals(matrix)
    with pytest.raises(ValueError, match="k must lie"):
        alignment_consistency(tiny, ["en", "fr"], k=99)


def test_across_models(tiny):
    from lens_heads.alignment._consistency import alignment_heads_across_models

    other = lh.tiny_model(n_layers=3, n_heads=2, seed=1)
    result = alignment_heads_across_models([tiny, other], "en-de", threshold=0.0, n_eval=2, shots=1)
    frame = result.to_frame()
    assert list(frame["n_heads"]) == [8, 6]
    for row in result.rows:
        assert row["proportion"] == row["n_alignment"] / row["n_heads"]
        assert all(0 <= d <= 1 for d in row["relative_depths"])
    assert len(result.plot().data) == 3


def test_eflomal_aligner_learns_the_builtin_corpus():
    """The optional statistical aligner (real eflomal): near-gold on the word-for-word corpus,
    cached per pair, and a clear error for an empty sentence."""
    from lens_heads.alignment._aligners import EflomalAligner
    from lens_heads.core._tasks import parallel_corpus

    corpus = parallel_corpus()
    pairs = list(zip(corpus.tokens["en"], corpus.tokens["de"], strict=True))
    gold = [corpus.alignment("en", "de", i) for i in range(len(pairs))]
    aligner = EflomalAligner()
    predicted = aligner.align_many(pairs)
    assert alignment_error_rate(predicted, gold) < 0.05
    assert aligner(*pairs[3]) == predicted[3]  # looked up, not re-learned
    with pytest.raises(AlignmentError, match="empty sentence"):
        aligner.align_many([([], ["Hund"])])
