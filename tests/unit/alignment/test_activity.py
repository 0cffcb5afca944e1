"""The activity groups of the token-alignment paper's Figure 3, by hand."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from lens_heads.alignment._scores import TranslationScores


def test_activity_groups_split_at_the_threshold_and_at_zero():
    # one sentence of 20 queries; four heads hit 6, 1, 0 and 2 of them: 0.3, 0.05, 0, 0.1
    scores = dataclasses.replace(
        TranslationScores.example(),
        sources=["a"],
        targets=["b"],
        sentence_hits=torch.tensor([[[6.0, 1.0, 0.0, 2.0]]]),
        sentence_queries=torch.tensor([20.0]),
        sentence_chance=torch.tensor([0.05]),
    )
    assert scores.scores.flatten().tolist() == pytest.approx([0.3, 0.05, 0.0, 0.1])
    assert scores.activity() == {
        "alignment heads": 0.25,  # 0.3 only: 0.1 is not above the threshold
        "infrequently active": 0.5,  # 0.05 and 0.1
        "never active": 0.25,
    }
    assert scores.activity(threshold=0.04)["alignment heads"] == 0.75
