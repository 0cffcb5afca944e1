"""The compatibility matrix (issue 26): every model family of the papers, as a tiny random
checkpoint loaded with ``lh.load_model(folder)``, passes six checks against plain
``transformers``, and the stored result that ``docs/compatibility.md`` is generated from has
the verdicts this run gets. Each check is also shown to fail on a planted defect."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

import lens_heads as lh
from lens_heads.cli import main
from lens_heads.core import (
    _compatibility as compatibility,
)
from lens_heads.core import (
    _decoding as decoding,
)
from lens_heads.core import (
    _generation as generation,
)
from lens_heads.core import (
    _hooks as hooks,
)
from lens_heads.core._compatibility import PASS, Reference
from lens_heads.core._families import FAMILIES, tiny_checkpoint
from lens_heads.core._models import UnsupportedModelError
from lens_heads.core._prompts import encode_text

ROOT = Path(__file__).resolve().parents[3]


def _script():
    spec = importlib.util.spec_from_file_location(
        "compatibility_matrix", ROOT / "scripts" / "compatibility_matrix.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


matrix = _script()
STORED_FILE = matrix.result_path()
STORED = json.loads(STORED_FILE.read_text(encoding="utf-8")) if STORED_FILE.is_file() else None


def _stored() -> dict:
    assert STORED is not None, (
        f"no matrix is stored for the installed transformers ({STORED_FILE} is missing): run "
        "python scripts/compatibility_matrix.py, or install the releases of constraints.txt"
    )
    return STORED


def _id(row: tuple[str, str | None]) -> str:
    return row[0] if row[1] is None else f"{row[0]}-{row[1]}"


@pytest.mark.parametrize("row", matrix.ROWS, ids=_id)
def test_every_family_passes_every_check_as_stored(row, tmp_path):
    key, attention = row
    result = matrix.run_row(key, attention, tmp_path)
    verdicts = {check: cell["status"] for check, cell in result["results"].items()}
    [stored] = [r for r in _stored()["rows"] if (r["key"], r["attention"]) == row]
    expected = {check: cell["status"] for check, cell in stored["results"].items()}
    assert verdicts == expected, (
        "the stored matrix is stale: python scripts/compatibility_matrix.py"
    )
    failed = {c: cell["detail"] for c, cell in result["results"].items() if cell["status"] != PASS}
    assert not failed


def test_the_stored_matrix_covers_every_family_and_check():
    assert {row["key"] for row in _stored()["rows"]} == {family.key for family in FAMILIES}
    assert [(r["key"], r["attention"]) for r in _stored()["rows"]] == list(matrix.ROWS)
    assert all(len(row["results"]) == 6 for row in _stored()["rows"])


def test_a_stored_gpu_matrix_ran_every_row_on_cuda():
    """The matrix of ``--device cuda`` (run on a GPU machine; CI has none) has the CPU matrix's
    rows and checks, and records the GPU it ran on."""
    stored = sorted(matrix.RESULTS.glob("cuda/transformers-*/numbers.json"))
    assert stored, "no GPU matrix stored: run scripts/gpu_check.sh on a GPU machine"
    for file in stored:
        run = json.loads(file.read_text(encoding="utf-8"))
        assert run["device"] == "cuda" and run["machine"]["cuda"], file
        assert [(r["key"], r["attention"]) for r in run["rows"]] == list(matrix.ROWS), file
        assert all(
            set(row["results"]) == set(_stored()["rows"][0]["results"]) for row in run["rows"]
        )


# -- what is not supported, and the error a user gets ----------------------------------------------
def test_an_architecture_transformer_lens_has_no_adapter_for_is_a_clear_error(tmp_path):
    example = matrix.unsupported_example(tmp_path)
    assert "has no TransformerBridge adapter for HeliumForCausalLM" in example["error"]
    assert "attention heads cannot be hooked" in example["error"]
    assert example == _stored()["unsupported_example"]
    report = compatibility.doctor(tmp_path / "helium")
    assert [r.status for r in report.results] == ["not supported"] * 4 and not report.ok


def test_a_model_type_transformers_does_not_know_is_a_clear_error(tmp_path):
    folder = tiny_checkpoint("qwen2", tmp_path)
    config = json.loads((folder / "config.json").read_text())
    config.update(model_type="no_such_type", architectures=["NoSuchForCausalLM"])
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(UnsupportedModelError, match=r"transformers .* cannot load.*no_such_type"):
        lh.load_model(folder)


# -- the BOS convention (check 3's bug), reasoned per tokenizer kind -------------------------------
@pytest.mark.parametrize("key", ["llama", "qwen2", "phi3", "gemma2"])
def test_text_is_tokenized_as_the_checkpoints_tokenizer_does(key, tmp_path):
    """Llama/Gemma tokenizers add BOS themselves and Qwen's has none: TransformerLens's
    convention gives the same ids there; Phi-3's has a BOS it does not add, which only the
    TransformerLens convention puts before the text. Chat templates are tokenized without
    added special tokens, so they never change (SmolLM2's starts with its BOS <|im_start|>,
    Gemma's with {{ bos_token }})."""
    folder = tiny_checkpoint(key, tmp_path)
    reference = Reference.from_pretrained(folder)
    ours = lh.load_model(folder)
    theirs = lh.load_model(folder, transformer_lens_bos=True)
    text = "the cat sat"
    assert encode_text(ours.tokenizer, text) == reference.encode(text, False)
    assert encode_text(ours.tokenizer, text, chat=True) == reference.encode(text, True)
    assert encode_text(theirs.tokenizer, text, chat=True) == reference.encode(text, True)
    same = encode_text(theirs.tokenizer, text) == reference.encode(text, False)
    assert same == (key != "phi3")
    assert ours.cfg.tokenizer_prepends_bos == (key in ("llama", "gemma2"))


# -- lens-heads doctor -----------------------------------------------------------------------------
def test_doctor_command_prints_the_verdicts(tmp_path, capsys):
    folder = tiny_checkpoint("phi3", tmp_path / "phi3")
    assert main(["doctor", str(folder)]) == 0
    out = capsys.readouterr().out
    assert out.count("PASS") == 4 and "verdict: every check passes" in out
    assert main(["doctor", str(folder), "--transformer-lens-bos"]) == 1
    out = capsys.readouterr().out
    assert "3. generate  FAIL" in out and "prompt tokens differ" in out and "NOT every" in out


# -- planted defects: each check fails on one ------------------------------------------------------
@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """Tiny checkpoints loaded once: (bridge, transformers reference) per family."""
    cache = {}

    def get(key: str):
        if key not in cache:
            folder = tiny_checkpoint(key, tmp_path_factory.mktemp(key))
            cache[key] = (lh.load_model(folder), Reference.from_pretrained(folder))
        return cache[key]

    return get


def _fails(result, *phrases: str) -> None:
    assert result.status == "fail", result
    for phrase in phrases:
        assert phrase in result.detail, result.detail


def test_planted_1_a_mask_hook_that_rounds_through_bf16(loaded, monkeypatch):
    model, reference = loaded("llama")
    assert compatibility.check_ones_mask(model, reference).status == PASS
    original = hooks._layer_hook

    def rounding(factor, layer, baseline=None):
        masked = original(factor, layer, baseline)

        def hook(z, hook):
            return masked(z.bfloat16().float(), hook)

        return hook

    monkeypatch.setattr(hooks, "_layer_hook", rounding)
    _fails(compatibility.check_ones_mask(model, reference), "changed the bridge's logits")


def test_planted_2a_an_off_by_one_head_in_the_pre_hook(loaded, monkeypatch):
    model, reference = loaded("qwen2")
    original = compatibility.scale_heads_hook
    shifted = lambda factors, d_head: original({h - 1: f for h, f in factors.items()}, d_head)  # noqa: E731
    monkeypatch.setattr(compatibility, "scale_heads_hook", shifted)
    _fails(compatibility.check_head_zeroing(model, reference), "differs from zeroing it")


def test_planted_2b_a_mask_that_hits_the_neighbour_in_the_kv_group(loaded, monkeypatch):
    model, reference = loaded("qwen2")
    original = hooks._layer_hook

    def swapped(factor, layer, baseline=None):  # heads 2 and 3 share a key-value group
        return original(factor[..., [0, 1, 3, 2]], layer, baseline)

    monkeypatch.setattr(hooks, "_layer_hook", swapped)
    _fails(compatibility.check_head_zeroing(model, reference), "equals zeroing its neighbour")


def test_planted_3a_transformer_lens_bos(tmp_path):
    folder = tiny_checkpoint("phi3", tmp_path)
    model = lh.load_model(folder, transformer_lens_bos=True)
    result = compatibility.check_generation(model, Reference.from_pretrained(folder))
    _fails(result, "prompt tokens differ from the checkpoint's tokenizer")


def test_planted_3b_stop_tokens_without_the_generation_config(loaded, monkeypatch):
    model, reference = loaded("phi3")
    original = generation.stop_token_ids
    tokenizer_only = lambda tokenizer, model=None: original(tokenizer)  # noqa: E731
    monkeypatch.setattr(compatibility, "stop_token_ids", tokenizer_only)
    _fails(compatibility.check_generation(model, reference), "does not stop at", "'<|end|>'")


def test_planted_3c_a_shared_prefix_padded_past_the_sliding_window(loaded, monkeypatch):
    model, reference = loaded("mistral")
    monkeypatch.setattr(decoding, "sliding_window", lambda model: None)
    _fails(compatibility.check_generation(model, reference), "greedy tokens differ")


def test_planted_4a_transformers_sliding_window_cache(loaded, monkeypatch):
    """transformers' own cache keeps only each window's last keys: the cached patterns would
    no longer span the sequence (translation scores index them by position)."""
    from transformers import DynamicCache

    model, reference = loaded("mistral")
    original = compatibility.cached_forward

    def own_cache(model, tokens, attention, cache, keep, masks=None):
        cache = DynamicCache(config=model.original_model.config) if cache is None else cache
        return original(model, tokens, attention, cache, keep, masks)

    monkeypatch.setattr(compatibility, "cached_forward", own_cache)
    [result] = compatibility.run_checks(model, reference, ["pattern"])
    _fails(result, "RuntimeError", "size of tensor")


def test_planted_4b_a_reference_without_soft_capping(loaded, monkeypatch):
    model, reference = loaded("gemma2")
    for layer in reference.model.model.layers:
        monkeypatch.setattr(layer.self_attn, "attn_logit_softcapping", None)
    _fails(compatibility.check_attention_patterns(model, reference), "max difference")


def test_planted_5_finite_differences_of_the_wrong_head(loaded, monkeypatch):
    model, reference = loaded("llama")
    original = matrix._document_loss
    shifted = lambda hf, ids, layer, factors: original(  # noqa: E731
        hf, ids, layer, {h - 1: f for h, f in factors.items()}
    )
    monkeypatch.setattr(matrix, "_document_loss", shifted)
    _fails(matrix.check_gradient(model, reference), "differ from finite differences")


def test_planted_6a_a_resume_that_restarts_the_noise(loaded, monkeypatch, tmp_path):
    from lens_heads.engine._training import MaskTrainer

    model, reference = loaded("llama")
    original = MaskTrainer.load_checkpoint

    def forgetful(self, path):
        original(self, path)
        self.generator.manual_seed(12345)

    monkeypatch.setattr(MaskTrainer, "load_checkpoint", forgetful)
    _fails(matrix.check_training(model, reference, tmp_path), "resumed training differs")


def test_planted_6b_a_sweep_reference_one_head_short(loaded, monkeypatch, tmp_path):
    model, reference = loaded("llama")
    original = matrix._zeroed_logits
    short = lambda reference, ids, heads: original(reference, ids, heads[:-1])  # noqa: E731
    monkeypatch.setattr(matrix, "_zeroed_logits", short)
    _fails(matrix.check_training(model, reference, tmp_path), "sweep")


# -- the fixes, directly ---------------------------------------------------------------------------
def test_a_checkpoint_asking_for_flash_attention_loads_with_patterns(tmp_path):
    folder = tiny_checkpoint("llama", tmp_path, attn_implementation="flash_attention_2")
    from transformers import AutoModelForCausalLM

    with pytest.raises(ImportError, match="FlashAttention2"):  # as the checkpoint asks
        AutoModelForCausalLM.from_pretrained(folder)
    model = lh.load_model(folder)
    _, cache = model.run_with_cache(
        torch.tensor([[1, 50, 60]]), names_filter="blocks.0.attn.hook_pattern"
    )
    assert cache["blocks.0.attn.hook_pattern"].shape == (1, 4, 3, 3)


def test_sliding_window_is_read_from_the_config(loaded):
    assert decoding.sliding_window(loaded("mistral")[0]) == 6
    assert decoding.sliding_window(loaded("gemma2")[0]) == 6
    assert decoding.sliding_window(loaded("qwen2")[0]) is None
    assert decoding.sliding_window(loaded("llama")[0]) is None
