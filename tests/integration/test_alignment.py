"""Token alignment heads on Gemma 3 270M (small slices of the built-in corpus)."""

from __future__ import annotations

import pytest

import lens_heads as lh
from lens_heads.core.tasks import parallel_corpus

pytestmark = pytest.mark.integration

N = 12  # sentence pairs scored (teacher forced, two-shot)


@pytest.fixture(scope="module")
def en_fr(gemma):
    return lh.translation_scores(gemma, "en-fr", n=N)


def test_alignment_heads_are_sparse_for_en_fr_and_en_de(gemma, en_fr):
    en_de = lh.translation_scores(gemma, "en-de", n=N)
    for scores in (en_fr, en_de):
        heads = scores.alignment_heads(0.1)
        assert 1 <= len(heads) < 72 / 4, heads  # whole-sequence argmax: few heads pass 0.1
        assert scores.chance < 0.05  # chance over the whole sequence is far below 0.1
        assert scores.scores.max() > 0.25
    # the strongest heads are shared by the two pairs
    assert len(set(en_fr.top(6)) & set(en_de.top(6))) >= 3


def test_masking_top_heads_hurts_more_than_random_heads(gemma, en_fr):
    result = lh.ablate_heads(
        gemma,
        "en-fr",
        en_fr.top(6),
        exclude=en_fr.alignment_heads(0.1),
        random_controls=2,
        n_eval=6,
        progress=False,
    )
    frame = result.to_frame()
    assert frame.loc["unmasked", "chrf"] > 30
    assert frame.loc["ablated", "chrf"] < frame.loc["random", "chrf"] - 5
    assert result.failures().to_numpy().sum() >= 1


def test_trater_scores_bilingual_text_higher_than_monolingual(gemma, en_fr):
    corpus = parallel_corpus()
    en, fr = corpus.sentences["en"], corpus.sentences["fr"]
    bilingual = [f"{en[i]}\n{fr[i]}" for i in range(100, 106)]
    monolingual = [f"{en[i]}\n{en[i + 50]}" for i in range(100, 106)]
    result = lh.trater_scores(gemma, bilingual + monolingual, en_fr.top(6))
    scores = result.scores
    assert scores[:6].mean() > scores[6:].mean()
