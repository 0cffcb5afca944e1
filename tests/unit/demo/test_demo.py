"""The demo pipeline on a tiny model: every stage runs and is saved, a second run reuses the
finished stages of the same model (loaded to check its fingerprint), other settings, another
model and an edited task file are refused, --fresh recomputes."""

from __future__ import annotations

import json

import pytest

import lens_heads as lh
from lens_heads.cli import main
from lens_heads.core._provenance import code_version
from lens_heads.demo import run_demo
from lens_heads.heads_up._sweep import SweepResult

WORDS = [f"w{chr(97 + i)}{chr(97 + j)}" for i in range(6) for j in range(6)]


@pytest.fixture()
def loads(monkeypatch, tiny):
    """Count model loads; every load gives the tiny model."""
    calls = []

    def load(spec, **kwargs):
        calls.append(spec)
        return tiny

    monkeypatch.setattr("lens_heads.demo._run.load_model", load)
    monkeypatch.setattr("lens_heads.core.load_model", load)
    return calls


@pytest.fixture()
def capitalize_file(tmp_path):
    # a task file states its instruction and match rule (its name lends it none)
    path = tmp_path / "capitalize.json"
    examples = [{"input": w, "output": w.capitalize()} for w in WORDS]
    instruction = "Capitalize the first letter of the given word."
    path.write_text(
        json.dumps({"instruction": instruction, "match": "startswith", "examples": examples})
    )
    return str(path)


SMALL = dict(steps=3, n_eval=4, sweep_every=3, max_new_tokens=2, progress=False)


def test_demo_runs_every_stage_and_writes_the_report(loads, capitalize_file, tmp_path):
    report = run_demo(tmp_path / "demo", model="tiny", task=capitalize_file, **SMALL)
    assert loads == ["tiny"]
    out = tmp_path / "demo"
    for stage in ["training", "eval", "sweep", "similarity", "logit_lens"]:
        assert (out / stage / ".complete").is_file(), stage
    numbers = json.loads((out / "numbers.json").read_text())
    table = report.evaluation.to_frame()
    assert numbers["evaluation"]["w/ M"]["exact match"] == table.loc["w/ M", "exact match"]
    assert numbers["precision"] == report.training.config.precision in ("float32", "bfloat16")
    assert numbers["code"] == code_version() and numbers["machine"]["cpu"]
    masked = report.evaluation.predictions("mask")
    ended = float((masked["ended_by"] == "<|im_end|>").mean())
    assert numbers["ended_at_end_of_turn"]["mask"] == pytest.approx(ended)
    markdown = report.report.read_text()
    for heading in ["Tables 1, 2", "Figure 3", "Figures 2 and 5", "Figure 4", "Table 41"]:
        assert heading in markdown, heading
    assert "| w/ M |" in markdown and "| w/ random M |" in markdown
    page = (out / "report.html").read_text()
    assert page.count("<h2>") >= 7 and page.count("<h3>") == page.count("Plotly.newPlot") == 7
    assert SweepResult.load(out / "sweep").n_removed == [0, 3, 6, 8]
    assert report.sweep.reference_prompt.startswith("Capitalize")


def test_a_second_run_reuses_the_finished_stages(loads, capitalize_file, tmp_path):
    first = run_demo(tmp_path / "demo", model="tiny", task=capitalize_file, **SMALL)
    markers = {m: m.stat().st_mtime_ns for m in (tmp_path / "demo").glob("*/.complete")}
    second = run_demo(tmp_path / "demo", model="tiny", task=capitalize_file, **SMALL)
    assert loads == ["tiny", "tiny"], "the model is loaded: its fingerprint must match the folder's"
    assert {m: m.stat().st_mtime_ns for m in markers} == markers, "no stage computed again"
    first_times = {k: v for k, v in first.seconds.items() if k != "load model"}
    second_times = {k: v for k, v in second.seconds.items() if k != "load model"}
    assert second_times == first_times, "reused stages report the time they took"
    assert "training: " in second.report.read_text()
    assert second.sweep.outputs == first.sweep.outputs
    assert lh.jaccard(second.training.mask, first.training.mask) == 1.0
    # an interrupted stage (no .complete marker) is recomputed, the others are reused
    (tmp_path / "demo" / "similarity" / ".complete").unlink()
    third = run_demo(tmp_path / "demo", model="tiny", task=capitalize_file, **SMALL)
    assert (tmp_path / "demo" / "similarity" / ".complete").is_file(), "it computed again"
    others = {m: t for m, t in markers.items() if m.parent.name != "similarity"}
    assert {m: m.stat().st_mtime_ns for m in others} == others, "the others were reused"
    assert set(third.seconds) == {"load model", *first_times}


def test_a_finished_folder_is_checked_against_the_remembered_fingerprint(
    loads, capitalize_file, tmp_path, monkeypatch, tiny
):
    """An offline alias's cache remembers its loaded model's fingerprint: a finished folder is
    checked against it without loading the model; a stage that computes loads the model and
    refuses one that is not what the cache remembered."""
    from lens_heads.core._fingerprints import FingerprintError, model_fingerprint

    run_demo(tmp_path / "demo", model="tiny", task=capitalize_file, **SMALL)
    remembered = model_fingerprint(tiny)
    monkeypatch.setattr("lens_heads.demo._run.known_fingerprint", lambda spec: remembered)
    run_demo(tmp_path / "demo", model="tiny", task=capitalize_file, **SMALL)
    assert loads == ["tiny"], "a finished folder needs no model"
    (tmp_path / "demo" / "logit_lens" / ".complete").unlink()
    run_demo(tmp_path / "demo", model="tiny", task=capitalize_file, **SMALL)
    assert loads == ["tiny", "tiny"], "a stage to compute loads the model"
    other = {**remembered, "weights": "0" * 16}
    monkeypatch.setattr("lens_heads.demo._run.known_fingerprint", lambda spec: other)
    with pytest.raises(FingerprintError, match="weights"):
        run_demo(tmp_path / "demo", model="tiny", task=capitalize_file, **SMALL)
    (tmp_path / "demo" / "logit_lens" / ".complete").unlink()
    with pytest.raises(lh.LensHeadsError, match="not the one its cache remembered"):
        run_demo(tmp_path / "demo", model="tiny", task=capitalize_file, fresh=True, **SMALL)


def test_other_settings_are_refused_unless_fresh(loads, capitalize_file, tmp_path):
    run_demo(tmp_path / "demo", model="tiny", task=capitalize_file, **SMALL)
    other = {**SMALL, "steps": 4}
    with pytest.raises(ValueError, match=r"other settings.*steps"):
        run_demo(tmp_path / "demo", model="tiny", task=capitalize_file, **other)
    report = run_demo(tmp_path / "demo", model="tiny", task=capitalize_file, fresh=True, **other)
    assert report.training.config.steps == 4 and "training" in report.seconds


def test_cli_demo(loads, capitalize_file, tiny_dir, tmp_path, capsys):
    argv = ["demo", "--model", str(tiny_dir), "--task", capitalize_file, "--steps", "3"]
    argv += ["--n-eval", "4", "--sweep-every", "4", "--out", str(tmp_path / "cli")]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "switch step:" in printed and "report.md" in printed
    assert (tmp_path / "cli" / "report.html").is_file()


@pytest.mark.parametrize(("given", "stored"), [("fp32", "float32"), ("bf16", "bfloat16")])
def test_demo_precision_takes_the_short_spellings_training_takes(given, stored):
    """``lens-heads demo --precision fp32`` (the README's spelling) means what
    ``train-mask --precision fp32`` means; a CI run once failed on it at the flag check."""
    from lens_heads.demo import DemoConfig
    from lens_heads.engine import TrainingConfig

    same = TrainingConfig(precision=given).precision
    assert DemoConfig(precision=given).training.precision == stored == same
    with pytest.warns(DeprecationWarning, match="dtype= is now precision="):
        assert DemoConfig(dtype=given).training.precision == stored  # its old name
    with pytest.raises(lh.LensHeadsError, match="fp16"):
        DemoConfig(precision="fp16")


def test_the_demo_holds_the_trainers_settings_and_records_the_ones_it_changes():
    """DemoConfig composes a TrainingConfig (issue 45) instead of copying five of its fields; a
    trainer field set away from the demo's schedule enters the folder's settings, so a folder
    trained with another batch is not reused."""
    from lens_heads.demo._run import DemoConfig, _other_training

    config = DemoConfig(steps=7, batch_size=4)
    assert (config.training.steps, config.training.batch_size, config.training.lr) == (7, 4, 0.2)
    assert _other_training(DemoConfig().training) == {}
    assert _other_training(config.training) == {"training": {"batch_size": 4}}
    with pytest.raises(lh.LensHeadsError, match="did you mean 'steps'"):
        DemoConfig(stepz=3)
