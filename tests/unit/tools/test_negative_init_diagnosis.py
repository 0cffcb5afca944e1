"""scripts/negative_init_diagnosis.py measures the all-off gradient and the loss landscape."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import lens_heads as lh

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "negative_init_diagnosis.py"


def _script():
    spec = importlib.util.spec_from_file_location("negative_init_diagnosis", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_diagnosis_writes_its_landscape_and_summary(monkeypatch, tiny, tmp_path, capsys):
    monkeypatch.setattr(lh, "load_model", lambda spec, **kw: tiny)
    out = tmp_path / "diag"
    argv = ["--model", "tiny", "--batches", "3", "--seeds", "2", "--out", str(out)]
    assert _script().main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    n_heads = tiny.cfg.n_layers * tiny.cfg.n_heads
    assert 0 <= summary["heads_that_want_on"] <= n_heads
    assert 0.0 <= summary["per_batch_sign_agreement"] <= 1.0
    landscape = (out / "landscape.csv").read_text().splitlines()
    assert landscape[1].startswith("0,") and landscape[-1].startswith(f"{n_heads},")
    assert "Answer CE with k heads on" in capsys.readouterr().out


def test_the_gradient_at_all_off_is_taken_without_an_update(tiny):
    trainer = lh.training.MaskTrainer(
        tiny, lh.get_task("capitalize"), lh.TrainingConfig.short(init_mean=-3.0, n_eval=10)
    )
    before = trainer.W.detach().clone()
    grads = _script().gradient_at_all_off(trainer, 2)
    assert grads.shape == (2, *before.shape) and bool(grads.abs().sum() > 0)
    assert bool((trainer.W == before).all()) and trainer.step_index == 0
