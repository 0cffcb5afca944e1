"""Plans before the run (issue 44): the arithmetic of weights and of what training keeps for the
backward pass, held to the tensors the trainer really saves on tiny models; the fixes of a plan
that does not fit; ``lens-heads plan``; and every command stopping before any weight loads when
its plan does not fit."""

from __future__ import annotations

import pytest
import torch

import lens_heads as lh
from lens_heads.core._model_shape import shape_of_model
from lens_heads.core._tasks import Example, Task
from lens_heads.engine import MaskTrainer, TrainingConfig
from lens_heads.scale import PlanDoesNotFitError
from lens_heads.scale import _planning as plan_module


def test_the_acceptance_plan_on_a_cpu_only_machine():
    found = lh.plan("llama-3.1-8b-instruct", "train-mask", batch_size=16, device="cuda")
    assert found.components["cuda"]["weights"] == 8_030_261_248 * 2  # bf16 on a GPU
    assert found.random_weights and found.fits
    assert found.time["seconds"] > 0 and found.samples_per_second > 0
    text = "\n".join(found.lines())
    assert "predicted peak" in text and "samples/s" in text


def test_checkpointing_and_smaller_batches_need_less():
    base = lh.plan("qwen2.5-7b-instruct", "train-mask", device="cuda")
    kept = "activations kept for backward"
    assert lh.plan("qwen2.5-7b-instruct", "train-mask", device="cuda", checkpoint_activations=True)
    smaller = lh.plan("qwen2.5-7b-instruct", "train-mask", device="cuda", batch_size=4)
    assert smaller.components["cuda"][kept] * 4 == pytest.approx(base.components["cuda"][kept])
    lean = lh.plan("qwen2.5-7b-instruct", "train-mask", device="cuda", checkpoint_activations=True)
    assert lean.components["cuda"][kept] < base.components["cuda"][kept] / 5


def test_a_plan_that_does_not_fit_names_the_numbers_and_the_fixes(monkeypatch):
    monkeypatch.setattr(plan_module, "available_memory", lambda device="cpu": 12 * 2**30)
    found = lh.plan("qwen2.5-1.5b-instruct", "train-mask", batch_size=64, dtype="float32")
    assert not found.fits
    with pytest.raises(PlanDoesNotFitError) as error:
        found.check()
    message = str(error.value)
    assert "needs" in message and "12.00 GiB is available" in message
    assert "activation checkpointing" in message and "a batch of" in message


def _saved_bytes(model, config: TrainingConfig) -> tuple[int, int, int, int]:
    """Bytes of the tensors one training step saves for its backward pass (each storage once;
    the model's own parameters left out), with the batch's rows, width and answer tokens."""
    task = Task("upper", tuple(Example(w, w.upper()) for w in ["abcdefgh", "xyzw", "hello"] * 9))
    trainer = MaskTrainer(model, task, config)
    trainer.step()  # the partial-unembedding check
    tokens, answer_mask = trainer.batch(1)
    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        pointer = tensor.untyped_storage().data_ptr()
        if pointer not in parameters:
            saved[pointer] = tensor.untyped_storage().nbytes()
        return tensor

    mask = trainer._sample(trainer.W, tokens.shape[0])
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        trainer.loss(tokens, answer_mask, mask)
    return sum(saved.values()), tokens.shape[0], tokens.shape[1], int(answer_mask.sum())


@pytest.mark.parametrize(
    "weights, precision, checkpoint",
    [
        ("float32", "float32", False),
        ("float32", "bfloat16", False),
        ("bfloat16", "float32", False),
        ("float32", "float32", True),
    ],
)
def test_the_training_arithmetic_is_what_the_trainer_keeps(weights, precision, checkpoint):
    """What the plan says training keeps (activations, autocast copies, the answer logits'
    log-softmax) against the bytes the autograd graph really saves, within 10 %."""
    model = lh.tiny_model(n_layers=6, n_heads=6, n_kv_heads=2, d_head=16, d_mlp=200)
    model.to(getattr(torch, weights))
    config = TrainingConfig(
        batch_size=6, precision=precision, n_eval=0, steps=5, checkpoint_activations=checkpoint
    )
    measured, rows, width, answers = _saved_bytes(model, config)
    found = lh.plan(
        shape_of_model(model),
        "train-mask",
        batch_size=rows,
        seq_len=width,
        answer_tokens=-(-answers // rows),
        dtype=weights,
        precision=precision,
        checkpoint_activations=checkpoint,
    )
    parts = found.components["cpu"]
    predicted = parts["activations kept for backward"]
    predicted += parts["bf16 copies of float32 weights (autocast)"]
    predicted += answers * found.shape["d_vocab"] * 4  # the log-softmax cross_entropy keeps
    if checkpoint:  # one recomputed block's activations exist only during the backward pass
        per_layer = parts["backward working memory"] / plan_module.TRANSIENT_LAYERS
        predicted -= per_layer
    assert predicted == pytest.approx(measured, rel=0.1)


def test_cli_plan_prints_the_peak_and_the_time(capsys):
    from lens_heads.cli import main

    code = main(["plan", "llama-3.1-8b-instruct", "--job", "train-mask", "--batch-size", "16",
                 "--device", "cuda"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0 and "cuda: predicted peak" in out and "s per step" in out


def test_cli_plan_exits_1_with_the_fix_when_it_does_not_fit(capsys):
    from lens_heads.cli import main

    code = main(["plan", "llama-3.1-70b-instruct", "--device", "cuda", "--gpu", "h100"])
    out = capsys.readouterr().out
    assert code == 1 and "DOES NOT FIT" in out and "--offload-layers" in out


def test_a_command_whose_plan_does_not_fit_stops_before_any_weight_loads(
    tmp_path, monkeypatch, capsys
):
    import lens_heads.core as models  # the commands look load_model up there at each call
    from lens_heads.cli import main
    from lens_heads.core._families import tiny_checkpoint

    folder = tiny_checkpoint("llama", tmp_path / "model")
    loads = []
    monkeypatch.setattr(models, "load_model", lambda *a, **k: loads.append(a))
    monkeypatch.setattr(plan_module, "available_memory", lambda device="cpu": 2**20)
    code = main(["train-mask", "--model", str(folder), "--task", "capitalize", "--steps", "2",
                 "--out", str(tmp_path / "out")])  # fmt: skip
    error = capsys.readouterr().err
    assert code == 2 and loads == []
    assert "needs" in error and "1.00 MiB" not in error and "is available there. Fix:" in error


def test_an_evaluation_plan_sizes_the_batch_it_will_run(tmp_path):
    """Issue 72: ``eval --n-eval 4 --batch-size 1000000000`` batches at most its 4 examples, so
    the plan sizes 4 rows, not the nominal batch (which would need hundreds of thousands of
    GiB and stop the run); the nominal batch alone is still refused."""
    import argparse

    from lens_heads.cli._common import check_plan
    from lens_heads.core._families import tiny_checkpoint
    from lens_heads.scale import PlanDoesNotFitError

    folder = str(tiny_checkpoint("llama", tmp_path / "model"))
    args = argparse.Namespace(command="eval", model=folder, batch_size=10**9, n_eval=4)
    found = check_plan(args)
    assert found.config["batch_size"] == 4
    with pytest.raises(PlanDoesNotFitError):
        check_plan(argparse.Namespace(command="eval", model=folder, batch_size=10**9))


def test_the_stored_gpu_predictions_are_the_codes():
    """docs/scale.md shows the plan's GPU predictions from the stored scale benchmark; they must
    be what the plan predicts now (after a change to the plan: ``python -m
    benchmarks.bench_scale --out results/benchmarks/scale --replan``)."""
    import json
    from pathlib import Path

    from benchmarks.bench_scale import gpu_predictions

    stored = Path(__file__).parents[3] / "results/benchmarks/scale/numbers.json"
    rows = json.loads(stored.read_text())["gpu predictions"]["rows"]
    now = gpu_predictions()["rows"]
    keys = ("peak GiB (tensors)", "fits", "seconds per unit", "units")
    assert [r["run"] for r in rows] == [r["run"] for r in now]
    for old, new in zip(rows, now, strict=True):
        for key in keys:
            assert old[key] == pytest.approx(new[key], rel=1e-9), (old["run"], key)


def test_lens_heads_plan_for_a_gpu_imports_neither_torch_nor_pandas():
    """The acceptance asks for the plan "in a second" on a CPU-only machine: importing torch
    alone takes about two. A fresh process runs the command and lists what it imported."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from lens_heads.cli import main\n"
        "assert main(['plan', 'llama-3.1-8b-instruct', '--job', 'train-mask', '--batch-size',"
        " '16', '--device', 'cuda', '--gpu', 'h100']) == 0\n"
        "print(sorted(m for m in ('torch', 'pandas', 'transformers') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert "predicted peak" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout
