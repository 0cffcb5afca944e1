"""Issue 43: a resumed result never comes from another model or other data.

The mechanism (:mod:`lens_heads.core._fingerprints`) first, then every resumable API and command:
a folder made with model A is refused for model B (same shape, other weights), for an edited
data file and for another setting, each naming what differs; it resumes bit-identically when
nothing differs; a folder of lens_heads 0.2 (a record without fingerprint) resumes with a
warning, never silently."""

from __future__ import annotations

import dataclasses
import json
import shutil
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

import lens_heads as lh
from lens_heads.core._fingerprints import (
    FINGERPRINT_KEY,
    Fingerprint,
    FingerprintError,
    FingerprintWarning,
    claim_folder,
    content_hash,
    model_fingerprint,
)
from lens_heads.core._storage import Stages

WORDS = [f"w{chr(97 + i)}{chr(97 + j)}" for i in range(6) for j in range(6)]


def write_task(path: Path, edited: bool = False) -> Path:
    """A capitalize task file stating its instruction and match rule; with ``edited``, one
    answer differs."""
    rows = [{"input": w, "output": w.capitalize()} for w in WORDS]
    if edited:
        rows[0]["output"] = "Edited"
    instruction = "Capitalize the first letter of the given word."
    path.write_text(
        json.dumps({"instruction": instruction, "match": "startswith", "examples": rows})
    )
    return path


@pytest.fixture(scope="module")
def model_a():
    return lh.tiny_model(n_layers=2, n_heads=4, n_kv_heads=2, seed=0)


@pytest.fixture(scope="module")
def model_b():
    """The same shape and tokenizer as ``model_a``, other weights."""
    return lh.tiny_model(n_layers=2, n_heads=4, n_kv_heads=2, seed=1)


# -- the mechanism ------------------------------------------------------------------------------
def test_the_model_fingerprint_sees_weights_tokenizer_and_dtype(model_a, model_b):
    a, b = model_fingerprint(model_a), model_fingerprint(model_b)
    assert a["config"] == b["config"] and a["tokenizer"] == b["tokenizer"]
    assert a["weights"] != b["weights"]
    assert model_fingerprint(lh.tiny_model(2, 4, n_kv_heads=2, seed=0)) == a, "by value"
    other = lh.tiny_model(2, 4, n_kv_heads=2, seed=0)
    other.tokenizer.chat_template = "{{ messages }}"
    assert model_fingerprint(other)["tokenizer"] != a["tokenizer"]
    assert model_fingerprint(other.to(torch.bfloat16))["dtype"] == "bfloat16"


def test_the_cached_fingerprint_follows_a_weight_edited_in_place():
    model = lh.tiny_model(2, 4, seed=0)
    before = model_fingerprint(model)["weights"]
    with torch.no_grad():
        next(model.parameters())[0, 0] += 1.0
    assert model_fingerprint(model)["weights"] != before


def test_a_non_model_is_a_clear_type_error():
    for value in (None, "smollm2-135m-instruct"):
        with pytest.raises(lh.LensHeadsError, match="loaded model"):
            model_fingerprint(value)
        with pytest.raises(lh.LensHeadsError, match="verify_model checks a loaded model"):
            lh.verify_model(value)


def test_a_folder_hash_reads_data_not_views(tmp_path):
    (tmp_path / "result.json").write_text("{}")
    first = content_hash(tmp_path)
    (tmp_path / "figure.html").write_text("<html>")
    (tmp_path / "stage").mkdir()
    (tmp_path / "stage" / ".complete").write_text("{}")
    assert content_hash(tmp_path) == first, "figures and markers are views"
    (tmp_path / "result.json").write_text('{"a": 1}')
    assert content_hash(tmp_path) != first


def test_the_refusal_names_each_part_and_overwrite_clears_only_what_runs_wrote(
    model_a, model_b, tmp_path
):
    task = tmp_path / "capitalize.json"
    write_task(task)
    claim_folder(tmp_path / "out", Fingerprint.of(model_a, {"k": 3}, {"task": task}))
    (tmp_path / "out" / "stage").mkdir()
    (tmp_path / "out" / "stage" / ".complete").write_text("{}")
    (tmp_path / "out" / "notes.txt").write_text("mine")
    write_task(task, edited=True)
    wanted = Fingerprint.of(model_b, {"k": 4}, {"task": task})
    with pytest.raises(FingerprintError) as error:
        claim_folder(tmp_path / "out", wanted, what="a test")
    message = str(error.value)
    assert "another model (tiny-2x4-seed0" in message and "this run tiny-2x4-seed1" in message
    assert "other weights" in message and "other data (task: saved" in message
    assert "other settings (k: saved 3, this run 4)" in message and "--overwrite" in message
    claim_folder(tmp_path / "out", wanted, what="a test", overwrite=True)
    assert not (tmp_path / "out" / "stage").exists() and (tmp_path / "out" / "notes.txt").exists()
    claim_folder(tmp_path / "out", wanted)  # recorded: the same fingerprint resumes


def test_a_stage_marker_of_another_fingerprint_is_refused(model_a, model_b, tmp_path):
    def compute(where):
        return 1

    def load(where):
        return 2

    Stages(tmp_path, Fingerprint.of(model_a, {"k": 3}))("answer", compute, load)
    assert Stages(tmp_path, Fingerprint.of(model_a, {"k": 3}))("answer", compute, load) == 2
    with pytest.raises(FingerprintError, match="another fingerprint"):
        Stages(tmp_path, Fingerprint.of(model_b, {"k": 3}))("answer", compute, load)


def test_an_unreadable_record_is_refused(model_a, tmp_path):
    (tmp_path / "config.json").write_text('{"k": ')
    with pytest.raises(FingerprintError, match="not a readable record"):
        claim_folder(tmp_path, Fingerprint.of(model_a, {"k": 3}))


# -- every resumable API and command ----------------------------------------------------------
@dataclass
class Resumable:
    """One resumable thing: ``run(model, task_file, setting, out)`` computes into ``out`` with
    the ``setting``'s value (``values``: the first, and another); ``record`` is the file whose
    fingerprint key a 0.2 folder lacks; ``result`` the file compared byte for byte."""

    name: str
    run: Callable[..., object]
    values: tuple[object, object]
    setting: str
    record: str
    result: str


def _atlas(model, task, value, out):
    lh.head_atlas(
        model, task=str(task), n_eval=4, n_reference=4, n_sequences=2, length=4, k=value,
        permutations=10, bootstrap=10, batch_size=4, out=out,
    )  # fmt: skip


def _roles(model, task, value, out):
    lh.head_roles(
        model, task, steps=value, pulled_steps=2, n_masks=2, batch_size=4, n_eval=4,
        evaluate=False, precision="float32", out=out,
    )  # fmt: skip


def _training(model, task, value, out):
    config = lh.TrainingConfig(steps=value, batch_size=4, n_eval=4, precision="float32")
    lh.engine.train_or_resume(model, lh.get_task(task), config, out, progress=False)


def _demo(model, task, value, out):
    from lens_heads.demo import run_demo

    run_demo(
        out, model=model, task=str(task), steps=value, n_eval=4, sweep_every=4, max_new_tokens=2,
        precision="float32", progress=False,
    )  # fmt: skip


def _soft_mask(model, task, value, out):
    from lens_heads.lahis._soft_mask_experiment import soft_mask_config, soft_mask_experiment

    ranking = ["L1H2", "L0H1", "L1H0", "L0H3", "L0H0", "L1H3", "L0H2", "L1H1"]
    soft_mask_experiment(
        model, lh.get_task(task), ranking, fraction=value, n_train=8, n_eval=4,
        max_new_tokens=2, random_seeds=(0,), progress=False, out=out,
        training=soft_mask_config(batch_size=4, precision="float32"),
    )  # fmt: skip


RESUMABLES = [
    Resumable("atlas", _atlas, (3, 2), "k", "config.json", "atlas/table.csv"),
    Resumable("roles", _roles, (2, 3), "steps", "config.json", "roles/tensors.safetensors"),
    Resumable("training", _training, (2, 3), "steps", "training.json", "training.safetensors"),
    Resumable("demo", _demo, (2, 3), "steps", "demo.json", "training/training.safetensors"),
    Resumable("soft mask", _soft_mask, (0.25, 0.5), "fraction", "plan.json", "tensors.safetensors"),
]


def _strip_fingerprint(path: Path) -> None:
    """Make ``path`` a record of lens_heads 0.2: no fingerprint."""
    record = json.loads(path.read_text())
    record.pop(FINGERPRINT_KEY, None)
    path.write_text(json.dumps(record))


@pytest.mark.parametrize("resumable", RESUMABLES, ids=lambda r: r.name)
def test_a_folder_resumes_only_for_its_model_data_and_settings(
    resumable, model_a, model_b, tmp_path
):
    task, out = write_task(tmp_path / "capitalize.json"), tmp_path / "out"
    first, other = resumable.values
    resumable.run(model_a, task, first, out)
    made = (out / resumable.result).read_bytes()
    markers = {m: m.stat().st_mtime_ns for m in out.rglob(".complete")}

    with pytest.raises(lh.LensHeadsError, match=r"another model \(tiny-2x4-seed0 .*other weights"):
        resumable.run(model_b, task, first, out)
    write_task(task, edited=True)
    with pytest.raises(lh.LensHeadsError, match=r"other data \(task: saved"):
        resumable.run(model_a, task, first, out)
    write_task(task)
    with pytest.raises(lh.LensHeadsError, match=rf"other settings \({resumable.setting}: saved"):
        resumable.run(model_a, task, other, out)

    with warnings.catch_warnings():
        warnings.simplefilter("error", FingerprintWarning)  # the same run: no warning at all
        resumable.run(model_a, task, first, out)
    assert (out / resumable.result).read_bytes() == made, "resumed bit-identically"
    assert {m: m.stat().st_mtime_ns for m in markers} == markers, "nothing computed again"

    _strip_fingerprint(out / resumable.record)  # a folder of lens_heads 0.2
    with pytest.warns(FingerprintWarning, match="before lens_heads recorded fingerprints"):
        resumable.run(model_a, task, first, out)
    assert (out / resumable.result).read_bytes() == made


def test_a_checkpoint_of_another_model_is_refused_and_an_old_one_warns(model_a, model_b, tmp_path):
    task = lh.get_task(write_task(tmp_path / "capitalize.json"))
    config = lh.TrainingConfig(steps=4, batch_size=4, n_eval=4, precision="float32")

    def stop(step, loss):
        if step == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        lh.train_mask(model_a, task, config, checkpoint_dir=tmp_path, checkpoint_every=1,
                      progress=False, callback=stop)  # fmt: skip
    with pytest.raises(lh.LensHeadsError, match=r"model: saved 'tiny-2x4-seed0', this run 'tiny"):
        lh.train_mask(model_b, task, config, checkpoint_dir=tmp_path, resume=True, progress=False)
    renamed = lh.tiny_model(n_layers=2, n_heads=4, n_kv_heads=2, seed=1)
    renamed.lens_heads_name = model_a.lens_heads_name  # one name, other weights
    with pytest.raises(lh.LensHeadsError, match=r"another model \(tiny-2x4-seed0 .*other weights"):
        lh.train_mask(renamed, task, config, checkpoint_dir=tmp_path, resume=True, progress=False)
    # a checkpoint of lens_heads 0.2 recorded no model fingerprint: it resumes with a warning
    from safetensors import safe_open
    from safetensors.torch import save_file

    path = tmp_path / "checkpoint.safetensors"
    with safe_open(str(path), framework="pt") as file:
        header = file.metadata()
        tensors = {key: file.get_tensor(key) for key in file.keys()}
    state = json.loads(header["state"])
    state.pop("model_fingerprint")
    save_file(tensors, str(path), {**header, "state": json.dumps(state)})
    with pytest.warns(FingerprintWarning):
        result = lh.train_mask(model_a, task, config, checkpoint_dir=tmp_path, resume=True,
                               progress=False)  # fmt: skip
    assert result.timing["steps_this_session"] == 2


# -- folders whose model is a spec: the same path, other weights ---------------------------------
def _save_tiny(folder: Path, seed: int) -> Path:
    from lens_heads.core._models import _tiny_hf_model

    shutil.rmtree(folder, ignore_errors=True)
    hf_model, tokenizer = _tiny_hf_model(2, 4, 2, 16, None, 512, seed)
    hf_model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_a_grid_cell_of_other_weights_at_the_same_path_is_refused(tmp_path, monkeypatch):
    from lens_heads.scale import _grid as grid

    model = _save_tiny(tmp_path / "model", seed=0)
    task = write_task(tmp_path / "capitalize.json")
    config = lh.GridConfig.from_text(
        f'models = ["{model}"]\ntasks = ["{task}"]\n[schedules.tiny]\nsteps = 2\nbatch_size = 4\n'
        'n_eval = 4\nprecision = "float32"\n[evaluate]\nn_eval = 2\n'
        'settings = ["original", "mask"]\n'
    )
    out = tmp_path / "grid"
    first = lh.run_grid(config, out, address="local", progress=False).to_frame()
    cell = out / config.cells[0].path / grid.DONE
    stamp = cell.stat().st_mtime_ns
    again = lh.run_grid(config, out, address="local", progress=False).to_frame()
    assert cell.stat().st_mtime_ns == stamp and again["heads kept"].equals(first["heads kept"])
    _save_tiny(model, seed=1)
    monkeypatch.setattr(grid, "_MODEL", {})  # a new process: nothing cached
    with pytest.raises(lh.LensHeadsError, match=r"another model .*other weights"):
        grid.run_cell(config, config.cells[0], out)
    _save_tiny(model, seed=0)
    monkeypatch.setattr(grid, "_MODEL", {})
    write_task(task, edited=True)
    with pytest.raises(lh.LensHeadsError, match=r"other data \(task: saved"):
        grid.run_cell(config, config.cells[0], out)


@dataclasses.dataclass
class _AnalysisConfig:
    """The settings of a one-stage analysis (an analysis's ``Config``, small)."""

    model: str
    task: str
    out: str
    n_eval: int = 2


def _run_analysis(config: _AnalysisConfig) -> None:
    """One resumable stage of an analysis: the held-out examples' first answer logit."""
    from analyses._common import LazyModel, stages_of

    model = LazyModel(config.model)
    stages = stages_of(config, model)
    held_out = lh.get_task(config.task).split(n_eval=config.n_eval)[1]

    def compute(where):
        first = model()(held_out.examples[0].input)[0, -1, 0]
        lh.core.write_atomic(where / "logit.txt", str(float(first)))

    stages("logit", compute, lambda where: (where / "logit.txt").read_text())


def test_an_analysis_of_other_weights_at_the_same_path_is_refused(tmp_path):
    model = _save_tiny(tmp_path / "model", seed=0)
    task = write_task(tmp_path / "capitalize.json")
    config = _AnalysisConfig(model=str(model), task=str(task), out=str(tmp_path / "out"))
    _run_analysis(config)
    _save_tiny(model, seed=1)
    with pytest.raises(lh.LensHeadsError, match=r"another model .*other weights"):
        _run_analysis(config)
    _save_tiny(model, seed=0)
    write_task(task, edited=True)
    with pytest.raises(lh.LensHeadsError, match=r"other data \(task: saved"):
        _run_analysis(config)


@pytest.mark.parametrize(
    ("command", "options"),
    [
        ("atlas", ["--n-eval", "4", "--n-reference", "4", "--n-sequences", "2", "--length", "4",
                   "--k", "3", "--permutations", "10", "--bootstrap", "10"]),
        ("roles", ["--steps", "2", "--pulled-steps", "2", "--n-masks", "2", "--batch-size", "4",
                   "--n-eval", "4", "--no-evaluate", "--precision", "float32"]),
    ],
)  # fmt: skip
def test_a_command_refuses_another_models_folder_and_overwrites_on_request(
    command, options, tmp_path, capsys
):
    from lens_heads.cli import main

    model = _save_tiny(tmp_path / "model", seed=0)
    task = write_task(tmp_path / "capitalize.json")
    argv = [command, str(model), "--task", str(task), *options, "--out", str(tmp_path / "out")]
    assert main(argv) == 0
    _save_tiny(model, seed=1)
    capsys.readouterr()
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert "another model" in error and "other weights" in error and "--overwrite" in error
    assert main([*argv, "--overwrite"]) == 0
    assert main(argv) == 0, "overwritten: the folder is model B's now"
