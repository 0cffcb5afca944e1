"""Issue 70 items 5 and 6: the log weighting of the sizes beside MIB's linear one, the per-size
bands, the circuits each curve stores, and the MIB export of a method's own circuits, read back
and re-scored to the faithfulness the benchmark stored."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from lens_heads.core import InputError
from lens_heads.finders import (
    SIZES,
    BenchmarkConfig,
    CounterfactualSet,
    FaithfulnessCurve,
    FinderBenchmark,
    MethodConfig,
    counterfactual_pairs,
    faithfulness,
    head_finder_benchmark,
    write_mib_curve,
)
from lens_heads.finders._faithfulness import PairScorer, _areas, _draws, area, top_heads


def test_the_log_area_of_a_curve_at_one_is_one_and_a_size_of_zero_is_refused():
    ones = [1.0] * len(SIZES)
    assert area(SIZES, ones) == pytest.approx(1.0) and area(SIZES, ones, "log") == pytest.approx(1)
    with pytest.raises(InputError, match=r"sizes above 0, got 0 in"):
        area((0.0, 0.5, 1.0), (1.0, 1.0, 1.0), "log")
    with pytest.raises(InputError, match="scale must be one of linear, log"):
        area(SIZES, ones, "logit")


def test_a_curve_faithful_only_on_the_small_circuits_has_the_better_log_cmd():
    """``f`` is 1 up to 1 % of the heads and 0 from 2 %: linearly almost all of the axis is
    unfaithful, on the log axis a third of it (0.1 % to 1 %) is faithful."""
    f = [1.0 if size <= 0.01 else 0.0 for size in SIZES]
    n = len(SIZES)
    rows = torch.tensor([1.0, 0.0, *f, *f, *[0.0] * n])  # m(all), m(none), signed, absolute, ...
    cpr, cmd, cpr_log, cmd_log = _areas(rows[:, None].repeat(1, 3), SIZES)
    # |1 - f|: 0 up to 1 %, 1 from 2 %; the step from 1 % to 2 % counts half
    assert cmd == pytest.approx((0.01 * 0.5 + 0.98) / 0.999)
    assert cmd_log == pytest.approx((math.log(2) * 0.5 + math.log(50)) / math.log(1000))
    assert cmd_log < cmd - 0.3
    assert (cpr, cpr_log) == (pytest.approx(1 - cmd), pytest.approx(1 - cmd_log))


@pytest.fixture(scope="module")
def curve(tiny):
    pairs = counterfactual_pairs(tiny, "capitalize", n=6, n_eval=60)
    scores = torch.tensor([[0.3, -0.9, 0.1, 0.5], [-0.2, 0.8, 0.05, -0.4]])
    return faithfulness(tiny, pairs, scores, "fixed", sizes=(0.25, 0.5, 1.0), bootstrap=20)


def test_the_intervals_and_the_bands_draw_the_same_resamples(curve):
    draws = _draws(curve.pair_metrics.shape[1], 20, curve.settings["seed"])
    boot = np.array([curve.resampled(torch.from_numpy(index)) for index in draws])
    for i, name in enumerate(("CPR", "CMD", "CPR log", "CMD log")):
        expected = np.nanpercentile(boot[:, i], [2.5, 97.5])
        assert curve.intervals[name] == pytest.approx(expected.tolist()), name
    assert (curve.cpr_log, curve.cmd_log) == pytest.approx(
        _areas(curve.pair_metrics, curve.sizes)[2:]
    )
    bands = curve.bands().set_index(["curve", "size"])
    means = [curve.pair_metrics[:, torch.from_numpy(index)].mean(-1) for index in draws]
    signed = np.array([((m[2:5] - m[1]) / (m[0] - m[1])).tolist() for m in means])
    for column, size in enumerate(curve.sizes):
        row = bands.loc[("signed", size)]
        assert row["f"] == pytest.approx(curve.f_signed[column])
        expected = np.nanpercentile(signed[:, column], [2.5, 97.5])
        assert [row["low"], row["high"]] == pytest.approx(expected.tolist())
    assert bands.loc[("signed", 1.0), ["low", "high"]].tolist() == pytest.approx([1.0, 1.0])
    figure = curve.plot()
    assert figure.layout.xaxis.type == "log" and len(figure.data) == 3 * 3  # band, band, line


def test_the_circuits_are_stored_and_a_curve_saved_before_them_still_loads(curve, tmp_path):
    assert curve.circuits is not None and curve.circuits_absolute is not None
    for k, signed, absolute in zip(curve.counts, curve.circuits, curve.circuits_absolute,
                                   strict=True):  # fmt: skip
        assert torch.equal(signed, top_heads(curve.scores, k))
        assert torch.equal(absolute, top_heads(curve.scores.abs(), k))
    curve.save(tmp_path)
    again = FaithfulnessCurve.load(tmp_path)
    assert torch.equal(again.circuits, curve.circuits) and again.intervals == curve.intervals
    assert again.circuits_absolute is not None
    assert torch.equal(again.circuits_absolute, curve.circuits_absolute)
    # the folder as it was written before: no log areas, no circuits, no seed
    from safetensors.torch import load_file, save_file

    meta = json.loads((tmp_path / "result.json").read_text())
    for name in ("cpr_log", "cmd_log"):
        del meta[name]
    for name in ("CPR log", "CMD log"):
        del meta["intervals"][name]
    del meta["settings"]["seed"]
    (tmp_path / "result.json").write_text(json.dumps(meta))
    tensors = load_file(tmp_path / "tensors.safetensors")
    save_file({k: v for k, v in tensors.items() if not k.startswith("circuits")},
              tmp_path / "tensors.safetensors")  # fmt: skip
    old = FaithfulnessCurve.load(tmp_path)
    assert old.circuits is None and old.circuits_absolute is None
    assert (old.cpr_log, old.cmd_log) == pytest.approx((curve.cpr_log, curve.cmd_log))
    assert old.intervals["CMD"] == curve.intervals["CMD"]
    assert all(math.isnan(value) for value in old.intervals["CMD log"])  # its seed unknown
    assert "CMD log" in old.to_markdown() and old.plot().data


def _exported(
    folder, size: float, count: int, shape: tuple[int, int], absolute: bool
) -> torch.Tensor:
    """The circuit MIB reads at ``size`` from an export: the per-size file, else the top
    ``count`` heads of the scores (by absolute value for CMD), else (size 1: MIB adds it to
    the per-size files) every head."""
    path = folder / f"circuit_{size:g}.json"
    heads = [(layer, head) for layer in range(shape[0]) for head in range(shape[1])]
    if path.is_file():
        nodes = json.loads(path.read_text())["nodes"]
        values = [float(nodes[f"a{layer}.h{head}"]["in_graph"]) for layer, head in heads]
        return torch.tensor(values).view(shape)
    if not (folder / "importances.json").is_file():
        assert size == 1.0
        return torch.ones(shape)
    nodes = json.loads((folder / "importances.json").read_text())["nodes"]
    scores = torch.tensor([nodes[f"a{layer}.h{head}"]["score"] for layer, head in heads])
    scores = scores.view(shape)
    return top_heads(scores.abs() if absolute else scores, count)


def test_the_mib_export_re_scores_to_the_faithfulness_the_benchmark_stored(tiny, tmp_path):
    """A ranking exports its scores, a method with its own circuits that no ranking gives
    (calibrated: 3 heads at the 4-head size) one circuit per size; each circuit read back and
    measured again on the benchmark's pairs has the ``f`` the curve stored (the old export, the
    mean of the circuits as scores, fails here)."""
    out, mib = tmp_path / "run", tmp_path / "mib"
    config = BenchmarkConfig(
        n_pairs=6, n_train_pairs=6, n_eval=60, bootstrap=10, sizes=(0.25, 0.5, 1.0),
        method_settings=MethodConfig(ig_steps=2),
    )  # fmt: skip
    methods = ["attribution", "calibrated-integrated"]
    head_finder_benchmark(tiny, ["capitalize"], methods, config, out=out)
    result = FinderBenchmark.load(out / "benchmark")  # the stored curves, as the command reads
    for curve in result.curves.values():
        write_mib_curve(curve, mib / curve.method, "tiny", d_model=64)
    frame = result.to_frame().set_index("method")
    pairs = CounterfactualSet.from_json(next(out.rglob("pairs-eval/pairs.json")).read_text())
    scorer = PairScorer(tiny, pairs, "counterfactual", 64)
    ends = torch.stack([torch.ones(2, 4), torch.zeros(2, 4)])
    layouts = {"attribution": "importances.json", "calibrated-integrated": "circuit_0.5.json"}
    for method, layout in layouts.items():
        curve = result.curves[f"capitalize/{method}"]
        assert frame.loc[method, "CMD log"] == pytest.approx(curve.cmd_log)
        assert frame.loc[method, "CMD log high"] == pytest.approx(curve.intervals["CMD log"][1])
        folder = next((mib / method).iterdir())
        assert (folder / layout).is_file() and not (folder / "circuit_1.json").exists()
        for index, (size, count) in enumerate(zip(curve.sizes, curve.counts, strict=True)):
            for absolute, stored in ((False, curve.f_signed), (True, curve.f_absolute)):
                circuit = _exported(folder, size, count, (2, 4), absolute)
                m = scorer.metrics(torch.cat([ends, circuit[None]])).mean(dim=1)
                f = float((m[2] - m[1]) / (m[0] - m[1]))
                assert f == pytest.approx(stored[index], abs=1e-5), (method, size, absolute)
    assert result.curves["capitalize/calibrated-integrated"].kept[1] < 4, "not a ranking's"
