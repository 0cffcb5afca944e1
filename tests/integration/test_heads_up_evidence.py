"""The rest of Heads up!'s evidence on SmolLM2 (issue 15), on the demo's capitalize mask:
the Figure 6 alpha curve, and the analysis modules from their command lines."""

from __future__ import annotations

import json

import pytest

import lens_heads as lh
from analyses import figure2_sweep, figure7_mask_weights, logit_lens_tables
from lens_heads.training import MaskTrainingResult

pytestmark = pytest.mark.integration


def test_figure6_alpha_curve_of_the_demo_mask(demo_report, smollm2, tmp_path):
    mask = MaskTrainingResult.load(demo_report / "training").mask
    curve = lh.alpha_curve(smollm2, "capitalize", mask, alphas=(0, 0.2, 0.5, 1), n_eval=12)
    print(f"\n{curve.to_markdown()}")
    ce = {alpha: curve.value(alpha) for alpha in curve.alphas}
    # instructed: the full model (alpha 1) is worse at the answer than the model with M
    assert ce[0.0] < ce[1.0]
    assert curve.best_alpha < 1.0
    # the un-instructed masked point is the figure's reference
    assert curve.uninstructed_ce is not None and curve.uninstructed_ce < ce[1.0]
    # alpha = 1 is the instructed full model (same prompts, same numbers as evaluate)
    full = lh.evaluate(smollm2, "capitalize", ["instruction"], n_eval=12, progress=False)
    assert abs(float(full.runs["answer_ce"].iloc[0]) - ce[1.0]) < 1e-3
    curve.save(tmp_path / "curve")
    assert lh.AlphaCurve.load(tmp_path / "curve").best_alpha == curve.best_alpha


def test_analysis_modules_run_on_the_demo_mask(demo_report, tmp_path, capsys):
    training = str(demo_report / "training")
    common = ["--mask", training, "--no-progress"]
    out = tmp_path / "figure2"
    argv = [*common, "--every", "30", "--generate-tokens", "0", "--out", str(out)]
    assert figure2_sweep.main(argv) == 0
    numbers = json.loads((out / "numbers.json").read_text())
    assert numbers["heads_in_order"] == 270 and numbers["target_rank_start"] > 1
    assert numbers["target_rank_best"] == 1, "removing the unselected heads makes it top-1"
    out = tmp_path / "figure7"
    assert figure7_mask_weights.main([*common, "--out", str(out)]) == 0
    numbers = json.loads((out / "numbers.json").read_text())
    kept = MaskTrainingResult.load(training).mask.n_selected
    assert numbers["heads kept"] == kept
    out = tmp_path / "lens"
    assert logit_lens_tables.main([*common, "--out", str(out)]) == 0
    numbers = json.loads((out / "numbers.json").read_text())
    assert set(numbers) >= {"original", "instructed", "masked"}
    assert "Table 41" in capsys.readouterr().out
