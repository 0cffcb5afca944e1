"""The guards against libraries that compute wrong numbers (issue 32): a broken KV cache or a
wrong ``hook_pattern`` stops every decoding entry point with one clear error, before anything
is computed or written; the guard runs once per model, checks the libraries and not the
caller's hooks, and the decoder hands the cache over the way the installed release expects."""

from __future__ import annotations

import importlib
import inspect
import warnings

import pytest
import torch
from transformers import DynamicCache

import lens_heads as lh
from lens_heads import _moved
from lens_heads.core import _guards as guards
from lens_heads.core import _kv_cache as kv_cache
from lens_heads.core._libraries import LibraryMismatchError, declared_range, library_versions


class DroppingCache(DynamicCache):
    """A cache that forgets what it stored: each update hands back only the new keys (what
    transformers 5.24 did to the bridge: the prefix was never seen again)."""

    def update(self, key_states, value_states, *args, **kwargs):
        return key_states, value_states


@pytest.fixture
def broken_cache(monkeypatch):
    monkeypatch.setattr(kv_cache, "new_cache", DroppingCache)


@pytest.fixture
def fresh():
    """A model no guard has seen yet (the session's ``tiny`` passed them long ago)."""
    return lh.tiny_model(n_layers=2, n_heads=4, n_kv_heads=2, seed=3)


def _assert_names_the_fix(error: pytest.ExceptionInfo) -> None:
    message = str(error.value)
    versions = library_versions()
    assert f"transformers {versions['transformers']}" in message
    assert f"transformer-lens {versions['transformer-lens']}" in message
    assert "torch " in message and "pip install" in message and "lens-heads doctor" in message


# -- the guards themselves -------------------------------------------------------------------------
def test_a_sound_model_passes_both_guards_with_float32_rounding(fresh):
    checked = guards.verify_model(fresh)
    assert set(checked) == {"cache", "pattern"}
    assert 0 <= checked["cache"] < 1e-5 and 0 <= checked["pattern"] < 1e-5


def test_a_cache_that_drops_its_keys_is_a_library_mismatch(fresh, broken_cache):
    with pytest.raises(LibraryMismatchError, match="KV-cached decoding disagrees") as error:
        guards.check_cached_decoding(fresh)
    _assert_names_the_fix(error)
    assert "largest logit difference" in str(error.value)


def test_the_pattern_guard_sees_a_dropped_cache_as_a_shape_mismatch(fresh, broken_cache):
    with pytest.raises(LibraryMismatchError, match="hook_pattern") as error:
        guards.check_pattern_capture(fresh)
    assert "KV-cached" in str(error.value) and "shape" in str(error.value)


def test_the_pattern_guard_sees_a_wrong_softmax(fresh, monkeypatch):
    """A pattern that is not the model's attention (a softmax at the wrong temperature)."""
    bridge = type(fresh.blocks[0].attn)
    original = bridge._masked_softmax

    def hotter(self, scores, *args, **kwargs):
        return original(self, scores * 2, *args, **kwargs)

    monkeypatch.setattr(bridge, "_masked_softmax", hotter)
    with pytest.raises(LibraryMismatchError, match="largest difference"):
        guards.check_pattern_capture(fresh)


def test_the_guards_run_once_per_model(fresh, monkeypatch):
    guards.verify_model(fresh)
    calls = []
    monkeypatch.setattr(kv_cache, "new_cache", lambda: calls.append(1) or DynamicCache())
    guards.verify_model(fresh)
    guards.check_cached_decoding(fresh), guards.check_pattern_capture(fresh)
    assert calls == []
    guards.forget_checks(fresh)
    assert set(guards.verify_model(fresh)) == {"cache", "pattern"} and len(calls) == 1
    guards.forget_checks(fresh)
    guards.check_cached_decoding(fresh), guards.check_pattern_capture(fresh)
    assert len(calls) == 3  # each alone builds its own cache


def test_verify_model_shares_one_continuation_and_still_sees_each_defect(fresh, monkeypatch):
    """On a new model both guards share one cached continuation (its last step's patterns
    captured): a dropped cache is named as a cache defect, a wrong softmax as a pattern one."""
    monkeypatch.setattr(kv_cache, "new_cache", DroppingCache)
    with pytest.raises(LibraryMismatchError, match="KV-cached decoding disagrees") as error:
        guards.verify_model(fresh)
    _assert_names_the_fix(error)
    monkeypatch.undo()
    bridge = type(fresh.blocks[0].attn)
    original = bridge._masked_softmax
    monkeypatch.setattr(
        bridge, "_masked_softmax", lambda self, scores, *a, **k: original(self, scores * 2, *a, **k)
    )
    guards.forget_checks(fresh)
    with pytest.raises(LibraryMismatchError, match="hook_pattern disagrees") as error:
        guards.verify_model(fresh)
    assert "the last cached step" in str(error.value)
    monkeypatch.undo()
    guards.forget_checks(fresh)
    assert max(guards.verify_model(fresh).values()) < 1e-5


def test_the_guards_ignore_and_keep_the_callers_hooks(fresh):
    """A caller's hook that rewrites patterns (as the alignment tests do) is not the library's
    fault: the guards run without it, and it is back in place afterwards."""
    fired = []

    def flatten(pattern, hook):
        fired.append(hook.name)
        return torch.full_like(pattern, 1.0 / pattern.shape[-1])

    with fresh.hooks(fwd_hooks=[("blocks.0.attn.hook_pattern", flatten)]):
        guards.verify_model(fresh)
        assert fired == []
        fresh(fresh.to_tokens("hello"))
        assert fired == ["blocks.0.attn.hook_pattern"]


# -- the cache is handed over as the installed release expects ------------------------------------
def test_the_cache_keyword_is_the_one_the_installed_transformers_takes(fresh):
    parameters = inspect.signature(fresh.original_model.forward).parameters
    keyword = kv_cache.cache_keyword(fresh)
    assert keyword in parameters
    assert keyword == ("cache" if "cache" in parameters else "past_key_values")


def test_no_deprecated_cache_name_reaches_transformers(fresh):
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        lh.generate(fresh, ["hello", "a longer prompt"], max_new_tokens=3)


def test_without_the_adapter_the_installed_bridge_loses_the_prefix_or_not(fresh, monkeypatch):
    """The bridge adapter is what makes transformers >= 5.24 correct: with it switched off, the
    guard fails exactly when the decoder layers hand the cache over as ``cache`` and the
    attention bridges do not read that name."""
    attention = fresh.blocks[0].attn
    needs = "cache" in inspect.signature(attention.original_component.forward).parameters
    needs = needs and not kv_cache._finds(attention, "cache")
    monkeypatch.setattr(kv_cache, "adapt_bridge", lambda model: 0)
    if needs:
        with pytest.raises(LibraryMismatchError):
            guards.check_cached_decoding(fresh)
    else:
        assert guards.check_cached_decoding(fresh) < 1e-5


def test_the_adapter_is_idempotent_and_fixes_the_bridges_own_lookup(fresh):
    first = kv_cache.adapt_bridge(fresh)
    assert kv_cache.adapt_bridge(fresh) == 0
    for block in fresh.blocks:
        assert kv_cache._finds(block.attn, "cache")
    assert first in (0, len(fresh.blocks))


# -- every decoding entry point stops before computing ---------------------------------------------
def test_generate_stops(fresh, broken_cache):
    with pytest.raises(LibraryMismatchError):
        lh.generate(fresh, ["hello", "a longer prompt"], max_new_tokens=3)


def test_evaluate_stops(fresh, broken_cache):
    with pytest.raises(LibraryMismatchError):
        lh.evaluate(fresh, "capitalize", ["original"], n_eval=4, progress=False)


def test_removal_sweep_stops(fresh, broken_cache):
    weights = torch.arange(8, dtype=torch.float32).reshape(2, 4)
    with pytest.raises(LibraryMismatchError):
        lh.removal_sweep(fresh, "apple", weights, max_new_tokens=3, progress=False)


def test_translation_scores_stop(fresh, broken_cache):
    with pytest.raises(LibraryMismatchError):
        lh.translation_scores(fresh, "en-fr", n_eval=2, shots=1)


def test_the_demo_stops_before_writing_a_result(fresh, broken_cache, tmp_path):
    from lens_heads.demo import run_demo

    out = tmp_path / "demo"
    with pytest.raises(LibraryMismatchError):
        run_demo(out, model=fresh, steps=2, n_eval=4, progress=False)
    written = {path.name for path in out.rglob("*") if path.is_file()} if out.exists() else set()
    assert written <= {"demo.json"}, written


def test_a_command_stops_with_one_line_before_writing(tiny_dir, broken_cache, tmp_path, capsys):
    from lens_heads.cli import main

    out = tmp_path / "eval"
    code = main(["eval", "--model", str(tiny_dir), "--task", "capitalize", "--n-eval", "4",
                 "--out", str(out)])  # fmt: skip
    assert code == 2
    error = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(error) == 1 and "KV-cached decoding disagrees" in error[0]
    written = [p.name for p in out.rglob("*") if p.is_file()] if out.exists() else []
    assert all(name.startswith(".") for name in written), written  # at most the folder's lock


# -- versions and the old paths ------------------------------------------------------------------
def test_the_tested_ranges_have_ceilings():
    for name in ("transformers", "transformer-lens"):
        assert "<" in declared_range(name), f"{name} has no tested ceiling"
    assert "==" not in declared_range("torch"), "torch must not be pinned in a library"


def test_every_old_path_imports_and_the_api_stays_callable():
    functions = [name for name in lh.__all__ if inspect.isfunction(getattr(lh, name))]
    assert "evaluate" in functions and len(functions) > 20
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for old in _moved.MOVED:
            importlib.import_module(f"lens_heads.{old}")
            getattr(lh, old, None)
    for name in functions:
        assert callable(getattr(lh, name)) and inspect.isfunction(getattr(lh, name)), name
    real = importlib.import_module("lens_heads.engine._evaluation")
    assert real.__spec__.name == "lens_heads.engine._evaluation"


def test_an_old_path_warns_and_names_the_release_that_removes_it():
    import sys

    sys.modules.pop("lens_heads.sweep", None)
    with pytest.warns(DeprecationWarning, match=f"lens_heads {_moved.REMOVED_IN}"):
        importlib.import_module("lens_heads.sweep")
    assert lh.__version__ == "0.2.0" and _moved.REMOVED_IN == "0.3.0"


def test_every_public_module_path_of_0_2_imports_the_private_module_with_a_warning():
    """Each module made private (``lens_heads.engine.training`` -> ``engine._training``) still
    imports under its old path as the same module object, warning with the public subpackage to
    import from and never naming a private path (issue 71); a module named as its subpackage's
    function (``heads_up.tasks_per_head``) leaves the function there."""
    import pathlib
    import sys

    root = pathlib.Path(lh.__file__).parent
    checked = 0
    for sub in _moved.PRIVATE_IN:
        package = importlib.import_module(f"lens_heads.{sub}")
        for path in sorted((root / sub).glob("_*.py")):
            name = path.stem[1:]
            if path.stem.startswith("__") or name in package.__all__:
                continue
            old = f"lens_heads.{sub}.{name}"
            sys.modules.pop(old, None)
            with pytest.warns(DeprecationWarning, match=f"from lens_heads.{sub};") as caught:
                module = importlib.import_module(old)
            assert "._" not in str(caught[0].message), caught[0].message
            assert module is importlib.import_module(f"lens_heads.{sub}._{name}"), old
            checked += 1
    assert checked > 100
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("lens_heads.heads_up.tasks_per_head")
    assert inspect.isfunction(importlib.import_module("lens_heads.heads_up").tasks_per_head)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("lens_heads.core.no_such_module")
