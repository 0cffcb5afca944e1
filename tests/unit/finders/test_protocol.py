"""Issue 70: the head-finder protocol -- the frozen file and its hash, a test part that no
development run read (a planted overlap fails), donors from the same part, the like-for-like
baselines, and a whole protocol run on a tiny model with its pooled statistics."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

import lens_heads as lh
from lens_heads.core._tasks import Example
from lens_heads.finders import (
    FinderProtocol,
    ProtocolResult,
    counterfactual_pairs,
    pair_key,
    protocol_split,
    run_protocol,
)
from lens_heads.finders import _counterfactuals as counterfactuals
from lens_heads.finders._counterfactuals import ioi_records, ioi_test_records

ROOT = Path(__file__).resolve().parents[3]
PROTOCOL = ROOT / "protocols" / "head_finders-1.toml"
RECORDED = ("antonym", "capitalize", "country-capital")


# -- the protocol file ----------------------------------------------------------------------------
def test_the_protocol_file_is_read_whole_and_hashed():
    protocol = FinderProtocol.load(PROTOCOL)
    assert protocol.sha256 == hashlib.sha256(PROTOCOL.read_bytes()).hexdigest()[:16]
    assert protocol.version == 1 and protocol.seeds == (0, 1, 2)
    assert protocol.roles["selected-exact-mask"] == "selected"
    assert protocol.roles["faithful-mask"] == "preregistered"
    assert {"selected-integrated", "selected-effects-counterfactual"} <= set(protocol.roles)
    assert len([m for m, r in protocol.roles.items() if r == "floor"]) >= 5
    assert protocol.pairs == {"test": 100, "train": 40, "calibration": 80}
    assert protocol.rule["weighting"] == "linear" and protocol.rule["reported"] == ["linear", "log"]
    assert set(protocol.tasks) == {"ioi", *RECORDED}
    edited = FinderProtocol.from_toml(PROTOCOL.read_text().replace("gain = 0.30", "gain = 0.20"))
    assert edited.sha256 != protocol.sha256  # any edit is another protocol


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("seeds = [0, 1, 2]", "seeds = [0, 0]"), "distinct training seeds"),
        (('"integrated",', '"integrated-gradients",'), "unknown methods"),
        (("gain = 0.30", "gain = 1.5"), "between 0 and 1"),
        (('weighting = "linear"', 'weighting = "square"'), "'linear' or 'log'"),
        (('split = "test"', 'split = "development"'), "test split only"),
        (("version = 1", "version = 1\nseed = 3"), "unknown field"),
    ],
)
def test_a_bad_protocol_is_refused_naming_the_field(change, message):
    text = PROTOCOL.read_text()
    assert change[0] in text
    with pytest.raises(lh.LensHeadsError, match=message):
        FinderProtocol.from_toml(text.replace(*change))


# -- the test part --------------------------------------------------------------------------------
def _leaks(train, test, development) -> list[str]:
    """Test examples sharing an unordered pair with a development or a training example."""
    seen = {pair_key(e) for e in [*development, *train.examples]}
    return [f"{e.input}->{e.output}" for e in test.examples if pair_key(e) in seen]


@pytest.mark.parametrize("name", RECORDED)
def test_the_test_part_shares_no_pair_with_development_or_training(name):
    development = counterfactuals.development_examples()[name]
    train, test = protocol_split(lh.get_task(name))
    assert _leaks(train, test, development) == []
    assert len(test) >= 2 and len(train) + len(test) >= len(lh.get_task(name))
    assert {pair_key(e) for e in development} <= {pair_key(e) for e in train.examples}


def test_a_planted_overlap_is_caught(monkeypatch):
    """One development example left out of the record lands in the test part, and the check
    that guards the real split names it (the split itself cannot know)."""
    recorded = counterfactuals.development_examples()
    development = recorded["antonym"]
    dropped = next(e for e in development if Example(e.output, e.input) in development)
    planted = {**recorded, "antonym": [e for e in development if pair_key(e) != pair_key(dropped)]}
    monkeypatch.setattr(counterfactuals, "development_examples", lambda: planted)
    train, test = protocol_split(lh.get_task("antonym"))
    assert f"{dropped.input}->{dropped.output}" in _leaks(train, test, development)


def test_an_antonym_and_its_reverse_stay_on_one_side():
    train, test = protocol_split(lh.get_task("antonym"))
    sides = {pair_key(e): "train" for e in train.examples}
    assert all(sides.get(pair_key(e)) is None for e in test.examples)
    reversed_pairs = [e for e in test.examples if Example(e.output, e.input) in test.examples]
    assert reversed_pairs  # the test part holds both directions of its pairs


def test_ioi_test_prompts_share_no_name_template_place_or_object_with_development():
    development, test = ioi_records(), ioi_test_records()
    assert len(test) >= 100
    for field in ("io", "s"):
        assert not {r[field] for r in test} & {r[f] for r in development for f in ("io", "s")}
    words = {w.strip(".,") for r in development for w in r["prompt"].split()}
    test_words = {w.strip(".,") for r in test for w in r["prompt"].split()}
    names = {r[f] for r in test for f in ("io", "s")} | {
        r[f] for r in development for f in ("io", "s")
    }
    assert not (test_words - names) >= (words - names)  # other templates
    assert not {r["prompt"] for r in test} & {r["prompt"] for r in development}


def test_test_pairs_draw_their_counterfactuals_from_the_test_part():
    model = lh.tiny_model()
    _, test = protocol_split(lh.get_task("capitalize"))
    pairs = counterfactual_pairs(model, "capitalize", n=30, split="test")
    inputs = set(test.inputs)
    assert pairs.settings["split"] == "test" and len(pairs) >= 10
    assert all(p.text in inputs and p.counterfactual_text in inputs for p in pairs.pairs)
    with pytest.raises(lh.LensHeadsError, match="split must be"):
        counterfactual_pairs(model, "capitalize", split="held-out")


# -- a whole run on a tiny model ------------------------------------------------------------------
TINY = (ROOT / "protocols" / "example-tiny.toml").read_text()


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("protocol")
    model = lh.tiny_model()
    protocol = FinderProtocol.from_toml(TINY)
    return model, protocol, folder, run_protocol(model, "capitalize", protocol, out=folder)


def test_a_protocol_run_pools_seeds_and_records_its_protocol(tiny_run):
    _, protocol, folder, result = tiny_run
    assert result.seeds == [0, 1] and result.counts == {"test": 8, "train": 6, "calibration": 6}
    assert result.protocol["sha256"] == protocol.sha256
    frame = result.to_frame().set_index("method")
    assert {"CMD", "CMD low", "CMD high", "CMD log", "CPR log"} <= set(frame.columns)
    # the point estimate is the mean over seeds of each seed's own CMD on all test pairs
    per_seed = []
    for seed in (0, 1):
        bench = lh.finders.FinderBenchmark.load(folder / f"seed-{seed}" / "benchmark")
        assert bench.settings["protocol"] == protocol.sha256 and bench.settings["split"] == "test"
        assert bench.settings["method_settings"].get("mask_seed", 0) == seed
        per_seed.append(bench.frame.set_index("method").loc["integrated", "CMD"])
    assert frame.loc["integrated", "CMD"] == pytest.approx(np.mean(per_seed), abs=1e-5)  # float32
    for key in ("CMD", "CMD log"):
        assert (frame[f"{key} low"] <= frame[key] + 1e-9).all()
        assert (frame[key] <= frame[f"{key} high"] + 1e-9).all()
    # the same test pairs for every seed, other training pairs
    pairs = [
        json.loads((folder / f"seed-{s}" / "capitalize" / f"pairs-{p}" / "pairs.json").read_text())
        for s in (0, 1)
        for p in ("eval", "train")
    ]
    assert pairs[0]["pairs"] == pairs[2]["pairs"] and pairs[1]["pairs"] != pairs[3]["pairs"]


def test_the_comparison_follows_the_rule_and_prints_its_p_floor(tiny_run):
    result = tiny_run[3]
    rows = result.comparison_frame()
    assert set(rows["weighting"]) == {"linear", "log"}
    for row in rows.to_dict("records"):
        assert row["baseline"] == min(
            ("integrated", "selected-integrated"),
            key=lambda m: (
                result.to_frame()
                .set_index("method")
                .loc[m, "CMD" if row["weighting"] == "linear" else "CMD log"]
            ),
        )
        assert row["p"] >= row["p floor"] == pytest.approx(2 / 51)
        assert row["met"] == (row["gain"] >= 0.3 and row["p (Holm)"] < 0.05)
    assert result.met("selected-exact-mask") == bool(rows[rows["decides"]]["met"].iloc[0])


def test_a_protocol_result_saves_loads_and_resumes(tiny_run, tmp_path):
    model, protocol, folder, result = tiny_run
    loaded = ProtocolResult.load(folder / "protocol")
    assert loaded.table == result.table and loaded.comparisons == result.comparisons
    assert loaded.f_mean.equal(result.f_mean)
    assert len(repr(loaded)) < 1000 and "beats the baselines" in repr(loaded)
    again = run_protocol(model, "capitalize", protocol, out=folder)  # every stage reused
    assert again.table == result.table
    other = FinderProtocol.from_toml(TINY.replace("gain = 0.3", "gain = 0.25"))
    with pytest.raises(lh.LensHeadsError, match="settings"):
        run_protocol(model, "capitalize", other, out=folder)  # another protocol: refused
    assert result.plot().data  # per-size curves with bands


def test_a_mask_compared_with_itself_ties():
    """Planted: a baseline that is the selected mask itself gives a difference of 0 on every
    draw, so p is 1, the gain 0 and the rule unmet."""
    from lens_heads.finders._protocol import _compare

    point = {"a": {"CMD": np.array([0.2]), "CMD log": np.array([0.3])}}
    point["b"] = point["a"]
    boot = {"a": {"CMD": np.full(50, 0.2), "CMD log": np.full(50, 0.3)}}
    boot["b"] = boot["a"]
    twin = FinderProtocol.from_toml(TINY)
    object.__setattr__(twin, "roles", {"a": "selected", "b": "baseline"})
    rows = _compare(twin, point, boot, 50)
    assert all(row["p"] == 1.0 and row["gain"] == 0 and not row["met"] for row in rows)
