"""The rest of Heads up!'s evidence on SmolLM2 (issue 15), on the demo's capitalize mask:
the Figure 6 alpha curve, and the analysis modules from their command lines."""

from __future__ import annotations

import json

import pytest

import lens_heads as lh
from analyses import figure2_sweep, figure7_mask_weights, logit_lens_tables
from lens_heads.engine import MaskTrainingResult
from tests.claims import LEVEL, lower_paired

pytestmark = pytest.mark.integration


def test_figure6_alpha_curve_of_the_demo_mask(demo_report, smollm2, tmp_path):
    """Figure 6's claim, example by example (one-sided paired tests at
    :data:`tests.claims.LEVEL` on the answer CE of the 12 held-out words): with the instruction,
    the model with M (alpha 0) answers better than the full model (alpha 1), and so does the
    model with M and no instruction."""
    mask = MaskTrainingResult.load(demo_report / "training").mask
    curve = lh.alpha_curve(smollm2, "capitalize", mask, alphas=(0, 0.2, 0.5, 1), n_eval=12)
    print(f"\n{curve.to_markdown()}")
    ce = {alpha: curve.value(alpha) for alpha in curve.alphas}
    per_example = curve.records.pivot_table(index="index", columns="setting", values="answer_ce")
    full = per_example["w/ instruction"]
    assert lower_paired(per_example["w/ M + instruction"], full) < LEVEL
    assert curve.best_alpha < 1.0
    # the un-instructed masked point is the figure's reference
    assert curve.uninstructed_ce is not None
    assert lower_paired(per_example["w/ M"], full) < LEVEL
    # alpha = 1 is the instructed full model (same prompts, same numbers as evaluate)
    full = lh.evaluate(smollm2, "capitalize", ["instruction"], n_eval=12, progress=False)
    assert abs(float(full.runs["answer_ce"].iloc[0]) - ce[1.0]) < 1e-3
    curve.save(tmp_path / "curve")
    assert lh.AlphaCurve.load(tmp_path / "curve").best_alpha == curve.best_alpha


def test_analysis_modules_run_on_the_demo_mask(demo_report, tmp_path, capsys):
    training = str(demo_report / "training")
    common = ["--mask", training, "--no-progress"]
    out = tmp_path / "figure2"
    argv = [*common, "--every", "30", "--max-new-tokens", "0", "--out", str(out)]
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


# Table 6 (a) on the three shipped family masks (removing the heads every mask keeps hurts more
# than random sets of its size, one-sided Wilcoxon at 1 % over held-out examples) is asserted by
# notebooks/table6_functional_pathways.ipynb, which runs in the same test session with more
# examples; the cache's resume is tested in tests/unit/heads_up/test_pathways.py.
