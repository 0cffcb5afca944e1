"""Mask statistics (Table 5, Tables 37-38, §4 tasks per head) on hand-written masks."""

from __future__ import annotations

import math
from fractions import Fraction

import pandas as pd
import pytest
import torch

import lens_heads as lh
from analyses import table5_mask_stats
from lens_heads.core._masks import HeadMask, MaskShapeError
from lens_heads.engine import MaskTrainingResult
from lens_heads.heads_up._mask_sets import load_masks
from lens_heads.heads_up._mask_stats import MaskStatistics, pair_row
from lens_heads.heads_up._tasks_per_head import TasksPerHead


def masks_2x3() -> dict[str, HeadMask]:
    """Three masks over 2 layers x 3 heads (6 heads), sizes 3, 2, 3."""
    heads = {
        "A": ["L0H0", "L0H1", "L1H0"],
        "B": ["L0H0", "L1H1"],
        "C": ["L0H0", "L0H1", "L1H2"],
    }
    return {name: HeadMask.from_heads(h, n_layers=2, n_heads=3) for name, h in heads.items()}


def expected_jaccard(n: int, k1: int, k2: int) -> Fraction:
    """Eq. 4 written out with exact fractions (the hypergeometric overlap)."""
    total = Fraction(math.comb(n, k2))
    return sum(
        (
            Fraction(math.comb(k1, i) * math.comb(n - k1, k2 - i))
            / total
            * Fraction(i, k1 + k2 - i)
            for i in range(max(0, k1 + k2 - n), min(k1, k2) + 1)
        ),
        Fraction(0),
    )


# -- Table 5 columns ---------------------------------------------------------------------------
def test_table5_columns_match_hand_computed_values():
    frame = lh.mask_statistics(masks_2x3()).to_frame()
    assert list(zip(frame["mask 1"], frame["mask 2"], strict=True)) == [
        ("A", "B"),
        ("A", "C"),
        ("B", "C"),
    ]
    a_b, a_c, b_c = (row for _, row in frame.iterrows())
    # A & B = {L0H0}; A | B has 4 heads
    assert (a_b["|M1|"], a_b["|M2|"], a_b["|M1 ∩ M2|"]) == (3, 2, 1)
    assert a_b["recall"] == pytest.approx(1 / 3) and a_b["Jaccard"] == pytest.approx(1 / 4)
    # overlap of 3 and 2 random heads out of 6: P(0, 1, 2) = 3/15, 9/15, 3/15 -> E[J] = 17/60
    assert a_b["random Jaccard"] == pytest.approx(17 / 60)
    assert a_b["ratio"] == pytest.approx((1 / 4) / (17 / 60))
    # A & C = {L0H0, L0H1}: recall 2/3, Jaccard 2/4; E[J] for 3 and 3 of 6 = 73/200
    assert (a_c["|M1 ∩ M2|"], a_c["recall"], a_c["Jaccard"]) == (2, pytest.approx(2 / 3), 0.5)
    assert a_c["random Jaccard"] == pytest.approx(float(Fraction(73, 200)))
    assert float(Fraction(73, 200)) == pytest.approx(float(expected_jaccard(6, 3, 3)))
    # B & C = {L0H0}: recall is |M1 ∩ M2| / |M1| with M1 = B
    assert (b_c["recall"], b_c["Jaccard"]) == (0.5, 0.25)


def test_recall_is_relative_to_the_first_mask_and_empty_first_mask_is_nan():
    big = HeadMask.from_heads(["L0H0", "L0H1", "L0H2", "L0H3"], n_layers=1, n_heads=4)
    small = HeadMask.from_heads(["L0H0"], n_layers=1, n_heads=4)
    assert pair_row(big, small)["recall"] == 0.25
    assert pair_row(small, big)["recall"] == 1.0
    row = pair_row(HeadMask.zeros(1, 4), small)
    assert math.isnan(row["recall"]) and row["random Jaccard"] == 0.0 and math.isnan(row["ratio"])


def test_jaccard_matrix_is_symmetric_with_unit_diagonal_and_matches_the_figure():
    stats = lh.mask_statistics(masks_2x3())
    matrix = stats.matrix()
    assert list(matrix.index) == ["A", "B", "C"] == list(matrix.columns)
    assert matrix.to_numpy().diagonal().tolist() == [1.0, 1.0, 1.0]
    assert matrix.loc["A", "C"] == matrix.loc["C", "A"] == 0.5
    figure = stats.plot()
    assert figure.data[0].z.tolist() == matrix.to_numpy().tolist()
    # the hover's random expectation is eq. 4 for the pair
    assert figure.data[0].customdata[0][1] == pytest.approx(17 / 60)


def test_chosen_pairs_and_two_models_of_the_same_shape():
    first = masks_2x3()
    second = {
        "A": HeadMask.from_heads(["L0H0", "L0H1"], n_layers=2, n_heads=3),
        "C": HeadMask.from_heads(["L1H2"], n_layers=2, n_heads=3),
        "D": HeadMask.from_heads(["L1H1"], n_layers=2, n_heads=3),
    }
    stats = lh.mask_statistics(first, second)
    frame = stats.to_frame()
    assert frame[["mask 1", "mask 2"]].values.tolist() == [["A", "A"], ["C", "C"]]
    assert frame["recall"].tolist() == pytest.approx([2 / 3, 1 / 3])
    assert frame["Jaccard"].tolist() == pytest.approx([2 / 3, 1 / 3])
    assert stats.matrix().shape == (3, 3) and list(stats.matrix().columns) == ["A", "C", "D"]
    chosen = lh.mask_statistics(first, second, pairs=[("B", "D")]).to_frame()
    assert chosen[["|M1|", "|M2|", "|M1 ∩ M2|", "Jaccard"]].values.tolist() == [[2, 1, 1, 0.5]]
    within = lh.mask_statistics(first, pairs=[("C", "A")]).to_frame()
    assert within["recall"].tolist() == [pytest.approx(2 / 3)]


def _first_heads(k: int, n_layers: int, n_heads: int) -> HeadMask:
    return HeadMask.from_heads(
        [(i // n_heads, i % n_heads) for i in range(k)], n_layers=n_layers, n_heads=n_heads
    )


@pytest.mark.parametrize("shape, k1, k2", [((6, 3), 7, 5), ((30, 9), 220, 214)])
def test_eq4_matches_a_monte_carlo_estimate_over_random_like(shape, k1, k2):
    """The ``random Jaccard`` column against the mean Jaccard of 4000 pairs of
    ``HeadMask.random_like`` draws (a fresh seed per mask, so the pairs are i.i.d.).

    Tolerance: 4 standard errors of the mean (s / sqrt(n), s the sample standard deviation);
    by the central limit theorem a correct formula falls outside with probability ~6e-5 (and the
    seeds are fixed, so the test is deterministic). On the small model the band is narrow enough
    to reject the naive E|A & B| / E|A | B|, so the check has teeth."""
    n_draws = 4000
    a, b = _first_heads(k1, *shape), _first_heads(k2, *shape)
    row = lh.mask_statistics({"a": a, "b": b}).to_frame().iloc[0]

    def draw(seed: int) -> float:  # the Jaccard of one pair of random_like masks
        x = HeadMask.random_like(a, seed=seed).selected
        y = HeadMask.random_like(b, seed=n_draws + seed).selected
        return float((x & y).sum() / (x | y).sum())

    draws = torch.tensor([draw(s) for s in range(n_draws)], dtype=torch.float64)
    band = 4 * float(draws.std()) / math.sqrt(n_draws)
    assert abs(row["random Jaccard"] - float(draws.mean())) <= band
    n = shape[0] * shape[1]
    assert row["random Jaccard"] == pytest.approx(float(expected_jaccard(n, k1, k2)), rel=1e-9)
    if n == 18:
        naive = (k1 * k2 / n) / (k1 + k2 - k1 * k2 / n)
        assert abs(naive - float(draws.mean())) > band


# -- bad input -----------------------------------------------------------------------------------
def test_masks_of_different_shapes_are_a_clear_error():
    small = {"A": HeadMask.ones(2, 3), "B": HeadMask.ones(2, 3)}
    big = {"A": HeadMask.ones(3, 3)}
    with pytest.raises(MaskShapeError, match="different shapes compared: masks_a are 2x3"):
        lh.mask_statistics(small, big)
    with pytest.raises(MaskShapeError, match=r"different shapes.*2x3: A; 3x3: B"):
        lh.mask_statistics({"A": HeadMask.ones(2, 3), "B": HeadMask.ones(3, 3)})
    with pytest.raises(MaskShapeError, match="different shapes compared"):
        pair_row(HeadMask.ones(2, 3), HeadMask.ones(3, 2))
    with pytest.raises(MaskShapeError, match="different shapes"):
        lh.tasks_per_head({"A": HeadMask.ones(2, 3), "B": HeadMask.ones(3, 3)})


def test_pairs_and_sets_that_cannot_be_compared():
    masks = masks_2x3()
    with pytest.raises(ValueError, match=r"no mask 'Z' in the second set; have \['A', 'B', 'C'\]"):
        lh.mask_statistics(masks, pairs=[("A", "Z")])
    with pytest.raises(ValueError, match="nothing to compare"):
        lh.mask_statistics({"A": masks["A"]})
    with pytest.raises(ValueError, match="no task has a mask in both sets"):
        lh.mask_statistics(masks, {"Z": masks["A"]})
    with pytest.raises(ValueError, match="is empty"):
        lh.tasks_per_head({})


# -- tasks per head --------------------------------------------------------------------------------
def test_tasks_per_head_counts_mean_all_and_none():
    per_head = lh.tasks_per_head(masks_2x3())
    assert per_head.counts.tolist() == [[3, 2, 0], [1, 1, 1]]
    assert per_head.mean_tasks_per_head == pytest.approx(8 / 6)
    assert per_head.mean_tasks_per_used_head == pytest.approx(8 / 5)
    assert per_head.kept_by_all == ["L0H0"] and per_head.kept_by_none == ["L0H2"]
    assert per_head.distribution()["heads"].tolist() == [1, 3, 1, 1]  # kept by 0, 1, 2, 3 masks
    frame = per_head.to_frame()
    assert frame.loc[frame["label"] == "L0H1", "masks"].item() == "A, C"
    assert frame["tasks"].sum() == 3 + 2 + 3
    summary = per_head.summary()
    assert (summary["kept by all"], summary["kept by none"]) == (1, 1)
    assert summary["mean heads per mask"] == pytest.approx(8 / 3)
    assert [list(row) for row in per_head.plot().data[0].z] == [[3, 2, 0], [1, 1, 1]]


# -- loading -------------------------------------------------------------------------------------
def test_load_masks_reads_training_results_and_mask_files(tmp_path):
    MaskTrainingResult.example().save(tmp_path / "upper")  # a 2x2 mask of model "tiny"
    HeadMask.from_heads(["L1H0"], n_layers=2, n_heads=2).save(
        tmp_path / "seed1" / "lower" / "mask.safetensors", model="tiny"
    )
    HeadMask.from_heads(["L0H1"], n_layers=2, n_heads=2).save(tmp_path / "extra.safetensors")
    (tmp_path / "unfinished" / "checkpoints").mkdir(parents=True)  # a task still training
    (tmp_path / "unfinished" / "checkpoints" / "checkpoint.safetensors").write_bytes(b"x")
    (tmp_path / "notes.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(lh.LensHeadsError, match=r"notes\.safetensors is not a readable"):
        load_masks(tmp_path)  # it may be a truncated mask: named, never skipped (issue 43)
    (tmp_path / "notes.safetensors").unlink()
    masks = load_masks(tmp_path)
    assert sorted(masks) == ["extra", "seed1/lower", "upper"]
    assert masks["upper"].labels == ["L0H0", "L1H1"] and masks["extra"].labels == ["L0H1"]
    # a training-result folder on its own gives its mask, named by its task
    assert list(load_masks(tmp_path / "upper")) == ["upper"]


def test_load_masks_errors_name_what_is_looked_for(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no masks in .*<task>/mask.safetensors"):
        load_masks(tmp_path)
    (tmp_path / "capitalize" / "checkpoints").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match=r"HeadMask\.save"):
        load_masks(tmp_path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_masks(tmp_path / "missing")


def test_load_masks_rejects_mixed_shapes_and_mixed_models(tmp_path):
    HeadMask.ones(30, 9).save(tmp_path / "shapes" / "capitalize.safetensors")
    HeadMask.ones(18, 4).save(tmp_path / "shapes" / "en-fr.safetensors")
    with pytest.raises(MaskShapeError, match=r"30x9: capitalize; 18x4: en-fr"):
        load_masks(tmp_path / "shapes")
    HeadMask.ones(2, 2).save(tmp_path / "models" / "a" / "mask.safetensors", model="smollm2")
    HeadMask.ones(2, 2).save(tmp_path / "models" / "b" / "mask.safetensors", model="other")
    with pytest.raises(ValueError, match=r"different models .*smollm2: a; other: b"):
        load_masks(tmp_path / "models")


def test_a_folder_is_accepted_wherever_masks_are(tmp_path):
    for name, mask in masks_2x3().items():
        mask.save(tmp_path / name / "mask.safetensors", model="tiny")
    stats = lh.mask_statistics(tmp_path)
    assert stats.model_a == "tiny" and len(stats.to_frame()) == 3
    assert lh.tasks_per_head(tmp_path).counts.tolist() == [[3, 2, 0], [1, 1, 1]]


# -- save / load -----------------------------------------------------------------------------------
def test_mask_statistics_round_trip(tmp_path):
    first = masks_2x3()
    stats = lh.mask_statistics(first, {"A": first["B"], "B": first["A"]}, pairs=[("A", "B")])
    written = {path.name for path in stats.save(tmp_path)}
    assert {"table.csv", "table.md", "matrix.csv", "figure.html", "result.json"} <= written
    loaded = MaskStatistics.load(tmp_path)
    pd.testing.assert_frame_equal(loaded.to_frame(), stats.to_frame())
    pd.testing.assert_frame_equal(loaded.matrix(), stats.matrix())
    assert loaded.pairs == [("A", "B")] and loaded.cross
    markdown = (tmp_path / "table.md").read_text()
    assert "Jaccard matrix:" in markdown and "| recall |" in markdown.replace("  ", "")


def test_tasks_per_head_round_trip(tmp_path):
    per_head = lh.tasks_per_head(masks_2x3())
    per_head.save(tmp_path)
    loaded = TasksPerHead.load(tmp_path)
    assert torch.equal(loaded.counts, per_head.counts) and loaded.names == ["A", "B", "C"]
    pd.testing.assert_frame_equal(loaded.to_frame(), per_head.to_frame())
    markdown = (tmp_path / "table.md").read_text()
    assert "Kept by all (1): L0H0" in markdown and "| heads | 1 | 3 | 1 | 1 |" in markdown


# -- the analysis --------------------------------------------------------------------------------
def test_table5_analysis_writes_tasks_models_and_tasks_per_head(tmp_path, capsys):
    for name, mask in masks_2x3().items():
        mask.save(tmp_path / "one" / name / "mask.safetensors", model="m1")
        (~mask).save(tmp_path / "two" / name / "mask.safetensors", model="m2")
    out = tmp_path / "out"
    argv = ["--masks", str(tmp_path / "one"), "--other", str(tmp_path / "two")]
    assert table5_mask_stats.main([*argv, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "## The same task on two models (Table 5)" in printed and "M2 (m2)" in printed
    for name in ["tasks/table.csv", "tasks/figure.html", "models/table.csv", "summary.json"]:
        assert (out / name).is_file(), name
    assert (out / "tasks-per-head" / "figure.html").is_file()
    models = pd.read_csv(out / "models" / "table.csv")
    assert models["Jaccard"].tolist() == [0.0, 0.0, 0.0]  # each mask against its complement
    tasks = MaskStatistics.load(out / "tasks")
    assert len(tasks.to_frame()) == 3
    chosen = table5_mask_stats.main(
        ["--masks", str(tmp_path / "one"), "--pairs", "C:A", "--out", str(tmp_path / "chosen")]
    )
    assert chosen == 0
    assert pd.read_csv(tmp_path / "chosen" / "tasks" / "table.csv")["mask 1"].tolist() == ["C"]


def test_table5_analysis_on_an_empty_folder_says_what_is_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="no masks in"):
        table5_mask_stats.run(table5_mask_stats.Config(masks=str(tmp_path), out=str(tmp_path)))
    assert table5_mask_stats.Config().masks_folder.as_posix() == "runs/mask-table/smollm2"
    assert table5_mask_stats.Config("gemma-3-270m").out_folder.as_posix() == "runs/table5/gemma"


def test_table5_flags_are_generated_and_a_bad_pair_is_refused_before_any_mask_is_read(tmp_path):
    """Issue 45: the analysis's flags come from its Config (each field once, with its help); a
    malformed --pairs is a LensHeadsError naming the flag, before the folder is read."""
    from dataclasses import fields

    from lens_heads.core._settings import field_docs

    assert all(
        field_docs(table5_mask_stats.Config)[f.name] for f in fields(table5_mask_stats.Config)
    )
    with pytest.raises(lh.LensHeadsError, match="--pairs: 'A' is not of the form task1:task2"):
        table5_mask_stats.main(["--masks", str(tmp_path / "missing"), "--pairs", "A"])
