"""Devices and precision: load_model's dtype/device resolution, and every public analysis run
with the model on a device keeps its tensors there (CPU always; CUDA when a GPU is present)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import lens_heads as lh
from lens_heads.core._compatibility import PASS, Reference, run_checks
from lens_heads.core._devices import resolve_device, resolve_dtype
from lens_heads.core._families import tiny_checkpoint
from lens_heads.core._models import _tiny_hf_model
from lens_heads.core._tasks import Example, Task

DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=pytest.mark.skipif(
            not torch.cuda.is_available(), reason="no CUDA GPU on this machine"
        ),
    ),
]


def test_dtype_and_device_resolution():
    assert resolve_dtype("auto", "cpu") is torch.float32
    assert resolve_dtype("bfloat16") is torch.bfloat16 and resolve_dtype(torch.float16)
    assert resolve_device("cpu") == torch.device("cpu")
    if not torch.cuda.is_available():
        assert resolve_device("auto") == torch.device("cpu")
    with pytest.raises(ValueError, match="unknown dtype 'int8'; use 'auto', 'float32'"):
        resolve_dtype("int8")


def test_load_model_takes_dtype_names(tmp_path):
    hf_model, tokenizer = _tiny_hf_model(2, 4, None, 16, None, 128, 0)
    hf_model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    model = lh.load_model(tmp_path, dtype="bfloat16")
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    assert lh.load_model(tmp_path, dtype="auto", device="cpu").cfg.n_layers == 2


def test_a_model_on_the_cpu_names_the_cpu_where_a_gpu_is_visible(tmp_path, monkeypatch):
    """TransformerLens's config names CUDA whenever a GPU is visible; lens_heads places inputs
    by the config, so a model loaded on the CPU of a GPU machine must name the CPU (seen failing
    on an H100 machine: every CPU-loaded model raised a device mismatch)."""
    hf_model, tokenizer = _tiny_hf_model(2, 4, None, 16, None, 128, 0)
    hf_model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    model = lh.load_model(tmp_path, device="cpu", verify=False)
    assert model.cfg.device == "cpu"
    monkeypatch.undo()
    assert lh.generate(model, "hi", max_new_tokens=2)[0].new_tokens


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")
def test_load_model_on_cuda_with_auto_dtype(tmp_path):
    hf_model, tokenizer = _tiny_hf_model(2, 4, None, 16, None, 128, 0)
    hf_model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    model = lh.load_model(tmp_path, device="cuda", dtype="auto")
    parameter = next(iter(model.parameters()))
    assert parameter.device.type == "cuda"
    expected = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32
    assert parameter.dtype == expected


@pytest.mark.parametrize("family", ["llama", "gemma3"])
@pytest.mark.parametrize("device", DEVICES)
def test_the_bridge_on_each_device_computes_what_transformers_computes_on_the_cpu(
    device, family, tmp_path
):
    """Checks 1-4 of docs/compatibility.md (mask of ones, zeroed query head, greedy generation,
    hook_pattern) with the float32 bridge on ``device`` against plain transformers on the CPU:
    grouped-query attention (Llama), and sliding windows with soft-capping (Gemma 3)."""
    folder = tiny_checkpoint(family, tmp_path / family)
    model = lh.load_model(folder, device=device, dtype="float32", verify=False)
    assert next(iter(model.parameters())).device.type == device
    results = run_checks(model, Reference.from_pretrained(folder))
    failed = [f"{r.check}: {r.detail}" for r in results if r.status != PASS]
    assert not failed, failed


def _tensors(value, seen=None):
    """Every tensor reachable through dataclass fields, dicts, lists and tuples."""
    if isinstance(value, torch.Tensor):
        yield value
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for item in dataclasses.fields(value):
            yield from _tensors(getattr(value, item.name))
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item)


@pytest.mark.parametrize("device", DEVICES)
def test_every_result_keeps_its_tensors_on_the_models_device(device):
    model = lh.tiny_model(n_layers=2, n_heads=4, n_kv_heads=2).to(device)
    where = next(iter(model.parameters())).device
    words = [f"w{chr(97 + i)}{chr(97 + j)}" for i in range(4) for j in range(6)]
    task = Task("upper", tuple(Example(w, w.upper()) for w in words), instruction="Upper.")
    config = lh.TrainingConfig(steps=3, batch_size=4, n_eval=4, precision="auto")
    training = lh.train_mask(model, task, config, progress=False)
    mask = lh.HeadMask.from_heads(["L0H1", "L1H2"], n_layers=2, n_heads=4)
    results = {
        "train_mask": training,
        "removal_sweep": lh.removal_sweep(
            model, "hi", training.W, target="H", max_new_tokens=2, progress=False
        ),
        "logit_lens": lh.logit_lens(model, "apple", mask=mask, instruction="Up.", targets=["A"]),
        "top_tokens": lh.top_tokens(model, "apple", mask=mask, instruction="Up."),
        "figure4_similarity": lh.figure4_similarity(model, "apple", "Up.", mask),
        "attention_on_target": lh.attention_on_target(model, ["apple pie"], ["apple"], mask=mask),
    }
    evaluation = lh.evaluate(model, task, mask=mask, n_eval=4, random_seeds=(0,), progress=False)
    assert evaluation.runs["answer_ce"].notna().all()
    for name, result in results.items():
        tensors = list(_tensors(result))
        assert tensors, f"{name} returned no tensors to check"
        for tensor in tensors:
            if where.type == "cpu":
                assert tensor.device == where, name
            else:  # on a GPU, results are on the model's device or host copies for saving
                assert tensor.device.type in (where.type, "cpu"), name
            if tensor.is_floating_point():
                assert bool(torch.isfinite(tensor).any()), name
