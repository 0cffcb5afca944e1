"""The atlas's detectors on the two real offline models: equal to TransformerLens' own head
detector on the same tokens, and causal -- removing the three strongest induction heads raises
the loss on a repeated block more than removing three random heads (one-sided, over seeds)."""

from __future__ import annotations

import pytest
import torch
from scipy import stats

from lens_heads.atlas import DetectorConfig, detect_patterns, repeated_half_loss
from lens_heads.atlas._detectors import repeated_random_tokens
from tests.detector_reference import transformer_lens_scores

pytestmark = pytest.mark.integration

SEEDS = range(10)


@pytest.fixture(params=["smollm2", "gemma"])
def model(request):
    return request.getfixturevalue(request.param)


def test_detectors_equal_transformer_lens_on_a_real_model(smollm2):
    config = DetectorConfig(n_sequences=1, length=12)
    ours = detect_patterns(smollm2, config)
    theirs = transformer_lens_scores(smollm2, repeated_random_tokens(smollm2, config), "induction")
    torch.testing.assert_close(ours["induction"], theirs, rtol=1e-4, atol=1e-5)


def test_the_strongest_induction_heads_are_causal(model):
    config = DetectorConfig(n_sequences=16, length=20, seed=3)
    scores = detect_patterns(model, config)["induction"]
    layers, heads = scores.shape
    top = scores.flatten().topk(3).indices
    base = repeated_half_loss(model, config).mean()

    def without(indices: torch.Tensor) -> float:
        mask = torch.ones(layers * heads)
        mask[indices] = 0.0
        return float(repeated_half_loss(model, config, mask.view(layers, heads)).mean() - base)

    rise = without(top)
    others = torch.tensor([i for i in range(layers * heads) if i not in set(top.tolist())])
    random_rises = []
    for seed in SEEDS:
        generator = torch.Generator().manual_seed(seed)
        random_rises.append(without(others[torch.randperm(len(others), generator=generator)[:3]]))
    differences = [rise - other for other in random_rises]
    test = stats.ttest_1samp(differences, 0.0, alternative="greater")
    assert rise > 0 and test.pvalue < 0.01, (rise, random_rises, test.pvalue)
