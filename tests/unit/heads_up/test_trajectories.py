"""Dependent changes (Figure 3): head kinds by hand, and the coincidence test on planted
trajectories where crossings do and do not coincide."""

from __future__ import annotations

import torch

from lens_heads.engine import MaskTrainingResult, TrainingConfig
from lens_heads.heads_up._trajectories import coincidence, dependent_changes


def _result(trajectory: torch.Tensor) -> MaskTrainingResult:
    import pandas as pd

    steps = list(range(trajectory.shape[0]))
    history = pd.DataFrame({"step": steps[1:], "loss": 1.0, "tau": 1.0, "lr": 0.1, "kept": 1})
    return MaskTrainingResult(
        W=torch.logit(trajectory[-1].clamp(1e-4, 1 - 1e-4)),
        trajectory=trajectory,
        trajectory_steps=steps,
        history=history,
        config=TrainingConfig(steps=len(steps) - 1, batch_size=1),
        model="tiny",
        task="planted",
    )


def test_kinds_of_the_example_by_hand():
    changes = dependent_changes(MaskTrainingResult.example(), shuffles=10)
    # L0H0 0.9 .. 0.95 stays in; L0H1 0.9 0.4 0.6 0.3 crosses three times; L1H0 0.9 0.4 0.3
    # 0.2 is dropped once; L1H1 stays in
    assert dict(zip(changes.heads["label"], changes.heads["kind"], strict=True)) == {
        "L0H0": "stayed in",
        "L0H1": "changed more than once",
        "L1H0": "dropped",
        "L1H1": "stayed in",
    }
    assert changes.heads.set_index("label").loc["L0H1", "steps"] == "1 2 3"


def test_coincidence_counts_other_heads_only():
    assert coincidence([[5, 6]], window=3) == 0.0  # one head: nothing to coincide with
    assert coincidence([[5], [7], [20]], window=2) == 2 / 3


def _paired(together: bool, *, pairs: int, span: int, switches: int, seed: int) -> torch.Tensor:
    """``2 * pairs`` heads (4 per layer) over 200 samples, each in at 0.9 and flipping at
    ``switches`` samples drawn from ``10 .. 10 + span - 1``; each pair (0, 1), (2, 3), ... flips
    at the same samples when ``together``, at unrelated samples otherwise."""
    generator = torch.Generator().manual_seed(seed)
    trajectory = torch.full((200, pairs // 2, 4), 0.9)
    for pair in range(pairs):
        times = sorted(torch.randperm(span, generator=generator)[:switches].add(10).tolist())
        partner = (
            times
            if together
            else sorted(torch.randperm(span, generator=generator)[:switches].add(10).tolist())
        )
        for head, switch in ((2 * pair, times), (2 * pair + 1, partner)):
            state = 0.9
            for t in range(200):
                if t in switch:
                    state = 1.0 - state
                trajectory[t, head // 4, head % 4] = state
    return trajectory


def _planted(together: bool) -> torch.Tensor:
    """Eight heads whose flips spread over the whole run."""
    return _paired(together, pairs=4, span=180, switches=6, seed=0)


def test_crossings_that_coincide_are_detected_and_unrelated_ones_are_not():
    together = dependent_changes(_result(_planted(True)), window=1, shuffles=200)
    apart = dependent_changes(_result(_planted(False)), window=1, shuffles=200)
    assert together.counts()["changed more than once"] == 8
    assert together.p_value < 0.01 and together.coincidence > together.shuffled_mean
    assert apart.p_value > 0.05


def _scheduled(together: bool) -> torch.Tensor:
    """Sixteen heads whose crossings all fall early (samples 10-69, as under a shared schedule
    that settles every head at once)."""
    return _paired(together, pairs=8, span=60, switches=2, seed=1)


def test_the_shared_schedule_alone_does_not_count_as_dependence():
    """Independent heads crowded into the same early steps: the shift null calls them
    coincident, the schedule-keeping null does not; heads that really cross together are found
    by both."""
    independent = dependent_changes(_result(_scheduled(False)), window=1, shuffles=300)
    assert independent.p_value < 0.01  # the shifted crossings leave the early steps
    assert independent.schedule_p_value > 0.05
    paired = dependent_changes(_result(_scheduled(True)), window=1, shuffles=300)
    assert paired.schedule_p_value < 0.01 and paired.coincidence > paired.schedule_mean
    summary = paired.summary()
    assert summary["p (crossings coincide more than under the shared schedule)"] < 0.01
