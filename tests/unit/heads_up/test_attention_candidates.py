"""Table 7's normalisation over the candidate words, against the raw attention on each word."""

from __future__ import annotations

import pytest
import torch

import lens_heads as lh
from lens_heads.heads_up._attention import attention_on_target, candidate_words

PROMPTS = ["pear, dog, cat", "owl, fig, ant"]
TARGETS = ["pear", "fig"]


def test_the_score_is_the_targets_share_of_the_candidates_attention(tiny):
    mask = lh.HeadMask.from_heads(["L0H1", "L1H2"], n_layers=2, n_heads=4)
    words = [candidate_words(prompt) for prompt in PROMPTS]
    normalised = attention_on_target(
        tiny, PROMPTS, TARGETS, mask=mask, instruction="Name the fruit.", candidates=words,
        chat=False,
    )  # fmt: skip
    assert normalised.normalized == "candidates"
    # the raw attention on the i-th candidate of every prompt, computed without normalising
    raw = [
        attention_on_target(
            tiny,
            PROMPTS,
            [w[i] for w in words],
            mask=mask,
            instruction="Name the fruit.",
            chat=False,
        ).per_prompt
        for i in range(3)
    ]
    total = sum(raw)
    positions = [w.index(t) for w, t in zip(words, TARGETS, strict=True)]
    on_target = torch.stack([raw[i][:, p] for p, i in enumerate(positions)], dim=1)
    torch.testing.assert_close(normalised.per_prompt, on_target / total)
    means = normalised.means()
    assert ((means > 0) & (means < 1)).all().all()


def test_the_target_must_be_a_candidate(tiny):
    with pytest.raises(ValueError, match="not among its candidates"):
        attention_on_target(tiny, PROMPTS, TARGETS, candidates=[["dog", "cat"], ["fig"]])
    with pytest.raises(ValueError, match="candidate lists"):
        attention_on_target(tiny, PROMPTS, TARGETS, candidates=[["pear"]])
