"""HeadMask: constructors, validation, algebra, Jaccard, io."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lens_heads as lh
from lens_heads.core._masks import HeadMask, MaskFileError, MaskShapeError, format_head, parse_head


def test_from_heads_labels_and_counts():
    mask = HeadMask.from_heads(["L0H1", "L2H0", (1, 1)], n_layers=3, n_heads=2)
    assert mask.labels == ["L0H1", "L1H1", "L2H0"]
    assert mask.heads == [(0, 1), (1, 1), (2, 0)]
    assert mask.n_selected == 3
    assert mask.is_binary
    assert mask.values[0, 1] == 1 and mask.values[0, 0] == 0


def test_label_round_trip_and_out_of_range():
    assert parse_head(format_head(12, 7)) == (12, 7)
    with pytest.raises(ValueError, match=r"L99H3 is out of range .* 30 layers x 9 heads"):
        HeadMask.from_heads(["L99H3"], n_layers=30, n_heads=9)
    with pytest.raises(ValueError, match="not of the form"):
        parse_head("layer3head7")


def test_from_weights_thresholds_sigmoid():
    weights = torch.tensor([[4.0, -3.0], [0.0, -0.01]])
    assert HeadMask.from_weights(weights).values.tolist() == [[1.0, 0.0], [1.0, 0.0]]


@pytest.mark.parametrize("bad", [torch.tensor([[0.5, 1.2]]), torch.tensor([[-0.1, 0.0]])])
def test_values_outside_unit_interval_rejected(bad):
    with pytest.raises(ValueError, match=r"\[0, 1\].*from_weights"):
        HeadMask(bad)


def test_nan_and_wrong_rank_rejected():
    with pytest.raises(ValueError, match="NaN"):
        HeadMask(torch.tensor([[float("nan"), 1.0]]))
    with pytest.raises(MaskShapeError, match=r"\[n_layers, n_heads\]"):
        HeadMask(torch.ones(2, 3, 4))


def test_random_like_keeps_size_and_is_seeded():
    mask = HeadMask.from_heads(["L0H0", "L1H2", "L3H1"], n_layers=4, n_heads=3)
    first, again, other = (HeadMask.random_like(mask, seed=s) for s in (1, 1, 2))
    assert first.n_selected == mask.n_selected == other.n_selected
    assert first == again


def test_random_like_different_seeds_differ():
    """3 of 12 heads: C(12, 3) = 220 masks, so 20 seeds drawn uniformly give about 19 distinct
    masks (all 20 equal has probability 220**-19), and each head is drawn 5 times on average
    (two heads never drawn in 20 seeds: 66 * (120/220)**20 < 0.1 %)."""
    mask = HeadMask.from_heads(["L0H0", "L1H2", "L3H1"], n_layers=4, n_heads=3)
    draws = [HeadMask.random_like(mask, seed=seed) for seed in range(20)]
    assert all(draw.n_selected == 3 for draw in draws)
    assert len({tuple(draw.labels) for draw in draws}) >= 10
    counts = torch.stack([draw.values for draw in draws]).sum(0)
    assert int((counts > 0).sum()) >= 11, "the draws cover the heads, not a fixed few"


def test_algebra_against_hand_sets():
    a = HeadMask.from_heads(["L0H0", "L0H1", "L1H0"], n_layers=2, n_heads=2)
    b = HeadMask.from_heads(["L0H1", "L1H1"], n_layers=2, n_heads=2)
    assert (a & b).labels == ["L0H1"]
    assert (a | b).labels == ["L0H0", "L0H1", "L1H0", "L1H1"]
    assert (a - b).labels == ["L0H0", "L1H0"]
    assert (~a).labels == ["L1H1"]
    assert lh.jaccard(a, b) == pytest.approx(1 / 4)
    with pytest.raises(MaskShapeError):
        _ = a & HeadMask.ones(3, 2)


def test_expected_random_jaccard_hand_computed():
    # N=4, k1=k2=2: overlap 0 w.p. 1/6, 1 w.p. 4/6 (J=1/3), 2 w.p. 1/6 (J=1).
    assert lh.expected_random_jaccard(2, 2, n_heads=4) == pytest.approx(4 / 6 / 3 + 1 / 6)
    # N=3, k1=1, k2=2: overlap 1 w.p. 2/3 (J=1/2), 0 w.p. 1/3.
    assert lh.expected_random_jaccard(1, 2, n_heads=3) == pytest.approx(1 / 3)
    full = HeadMask.ones(2, 2)
    assert lh.expected_random_jaccard(full, full) == 1.0


def test_expected_random_jaccard_matches_simulation():
    a = HeadMask.from_heads([f"L{i}H0" for i in range(5)], n_layers=6, n_heads=3)
    b = HeadMask.from_heads([f"L{i}H1" for i in range(4)], n_layers=6, n_heads=3)
    simulated = (
        sum(
            lh.jaccard(HeadMask.random_like(a, seed=s), HeadMask.random_like(b, seed=10_000 + s))
            for s in range(3000)
        )
        / 3000
    )
    assert lh.expected_random_jaccard(a, b) == pytest.approx(simulated, abs=0.01)


def test_alpha_multiplier():
    mask = HeadMask.from_heads(["L0H0"], n_layers=1, n_heads=2).with_alpha(0.25)
    assert mask.multiplier().tolist() == [[1.0, 0.25]]
    with pytest.raises(ValueError, match="alpha"):
        mask.with_alpha(1.5)


def test_save_load_metadata(tmp_path):
    mask = HeadMask.from_heads(["L1H0"], n_layers=2, n_heads=2)
    path = mask.save(tmp_path / "m.safetensors", model="tiny", task="capitalize")
    loaded = HeadMask.load(path)
    assert loaded == mask
    assert loaded.metadata["model"] == "tiny" and loaded.metadata["task"] == "capitalize"
    assert loaded.metadata["created"]
    assert not list(tmp_path.glob("*.tmp"))


def test_load_checks_model_shape(tmp_path, tiny):
    path = HeadMask.ones(3, 4).save(tmp_path / "m.safetensors")
    with pytest.raises(MaskShapeError, match=r"model .* has 2 layers x 4 heads"):
        HeadMask.load(path, model=tiny)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "missing"])
def test_corrupted_mask_file(tmp_path, damage):
    path = HeadMask.ones(2, 2).save(tmp_path / "m.safetensors")
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:-7])
    elif damage == "garbage":
        path.write_bytes(b"\x00not a mask file at all")
    else:
        path.unlink()
    with pytest.raises(MaskFileError, match=r"m\.safetensors"):
        HeadMask.load(path)


@settings(max_examples=40, deadline=None)
@given(
    n_layers=st.integers(1, 6),
    n_heads=st.integers(1, 6),
    seed=st.integers(0, 2**31 - 1),
    alpha=st.floats(0, 1),
    binary=st.booleans(),
)
def test_save_load_round_trip_property(tmp_path_factory, n_layers, n_heads, seed, alpha, binary):
    values = torch.rand(n_layers, n_heads, generator=torch.Generator().manual_seed(seed))
    mask = HeadMask(values.round() if binary else values, alpha=alpha, metadata={"seed": seed})
    path = mask.save(tmp_path_factory.mktemp("masks") / "m.safetensors")
    loaded = HeadMask.load(path)
    assert loaded == mask
    assert torch.equal(loaded.values, mask.values)
    assert math.isclose(loaded.alpha, alpha)
    assert loaded.metadata["seed"] == seed
