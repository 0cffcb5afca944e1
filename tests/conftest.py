"""Shared fixtures: each real model is loaded once per test session."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import lens_heads as lh


@pytest.fixture(scope="session")
def browser():
    """A headless Chromium driven by selenium, one per session (the atlas page, the docs site).

    CI installs Debian's ``chromium`` and ``chromium-driver`` (``.ci/run``); on a machine without
    them the tests that use it are skipped, except under CI (``CI=true``), where a missing
    browser fails."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not (chromium and driver_path):
        if os.environ.get("CI") == "true":
            pytest.fail("CI installs chromium and chromium-driver; the browser tests need them")
        pytest.skip("no chromium/chromedriver here (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1200,1400"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    yield driver
    driver.quit()


@pytest.fixture(autouse=True)
def _unit_tests_load_no_real_model(request, monkeypatch):
    """A test outside the ``models`` pass fails if it loads an offline model (SmolLM2, Gemma):
    patching ``lh.load_model`` does not reach code that imports the loader itself, and such a
    test would run a real model in the fast tier, unseen."""
    if request.node.get_closest_marker("models") is not None:
        return
    from lens_heads.core import _models as models

    real = {id(source) for source in models.MODEL_ALIASES.values()}
    load = models._load_offline

    def refuse(source, *args, **kwargs):
        if id(source) not in real:  # a test's stand-in alias (a tiny model behind it)
            return load(source, *args, **kwargs)
        pytest.fail(
            f"a unit test loaded the offline model {source.hf_id}: give it a tiny model (a "
            "grid's 'tiny-2x4', lh.tiny_model()) or move it to tests/integration"
        )

    monkeypatch.setattr(models, "_load_offline", refuse)


@pytest.fixture(scope="session")
def smollm2():
    """SmolLM2-135M-Instruct (30 layers x 9 query heads), loaded once."""
    return lh.load_model("smollm2-135m-instruct")


@pytest.fixture(scope="session")
def gemma():
    """Gemma 3 270M base (18 layers x 4 query heads), loaded once."""
    return lh.load_model("gemma-3-270m")


@pytest.fixture(scope="session")
def tiny():
    """A 2-layer, 4-head random Llama-style model with grouped-query attention."""
    return lh.tiny_model(n_layers=2, n_heads=4, n_kv_heads=2, seed=0)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory) -> Path:
    """The ``tiny`` model as a checkpoint folder (config.json, weights, tokenizer): a real
    ``--model DIR`` whose shape the commands read before loading it."""
    from lens_heads.core._models import _tiny_hf_model

    folder = tmp_path_factory.mktemp("tiny-model")
    hf_model, tokenizer = _tiny_hf_model(2, 4, 2, 16, None, 512, 0)
    hf_model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def run_command(argv: list[str]) -> None:
    """``lens-heads ARGV`` in this process; a refused flag fails the fixture with the parser's
    message (argparse exits with SystemExit, which pytest would not cache for a session fixture:
    every later test would re-run the command)."""
    from lens_heads.cli import main

    try:
        code = main(argv)
    except SystemExit as exit_:
        pytest.fail(f"lens-heads {' '.join(argv)} exited with {exit_.code} (see the output above)")
    assert code == 0, f"lens-heads {' '.join(argv)} returned {code}"


@pytest.fixture(scope="session")
def demo_report(tmp_path_factory):
    """The README's first command, ``lens-heads demo``, run once on SmolLM2 into a fresh
    temporary folder, so the tests judge this build and never a folder an earlier build left
    (issue 23). It trains the capitalize mask on the CI schedule (100 steps, batch 8, lr 0.2),
    evaluates it, sweeps head removal and writes the report; tests of training, sweeps and the
    lens reuse its mask, and so do the notebooks, which run later in the session: the fixture
    points ``LENS_HEADS_DEMO_REPORT`` at the folder."""
    out = tmp_path_factory.mktemp("demo-report")
    run_command(["demo", "--out", str(out)])
    os.environ["LENS_HEADS_DEMO_REPORT"] = str(out)
    return out


@pytest.fixture(scope="session")
def demo_float32(demo_report, tmp_path_factory):
    """The demo's mask trained in float32 (issue 28): what a CPU without native bf16 trains.
    On such a CPU it is the demo itself; on one with bf16, ``lens-heads demo --precision fp32``
    runs once more (a few minutes), so the float32 path is checked on every machine."""
    from lens_heads.engine import MaskTrainingResult

    if MaskTrainingResult.load(demo_report / "training").config.precision == "float32":
        return demo_report
    out = tmp_path_factory.mktemp("demo-float32")
    run_command(["demo", "--precision", "fp32", "--out", str(out)])
    return out


@pytest.fixture(params=["demo_report", "demo_float32"])
def demo_run(request):
    """The demo's result folder, trained at the machine's own precision and in float32: the
    claims about the demo mask must hold for both (issue 28)."""
    folder = request.getfixturevalue(request.param)
    if request.param == "demo_float32" and folder == request.getfixturevalue("demo_report"):
        pytest.skip("on this CPU the demo itself trains in float32: checked as demo_report")
    return folder
