"""The bad-input battery's last defects (issue 34): a file that exists but cannot be read is
named as such (not "No such file"), ``alignment_heads(nan)`` is refused, and a mask evaluated
on a task it was never trained on may evaluate every example of it."""

from __future__ import annotations

import json
import os

import pytest

import lens_heads as lh
from lens_heads.alignment import TranslationScores
from lens_heads.cli import main

WORDS = [f"w{chr(97 + i)}{chr(97 + j)}" for i in range(4) for j in range(4)]


@pytest.fixture
def unreadable(monkeypatch):
    """Files named here exist but fail os.access(R_OK), as for a user without permission (the
    tests run as root, who may read anything)."""
    denied = set()
    real = os.access

    def access(path, mode, *args, **kwargs):
        if mode & os.R_OK and os.fspath(path) in denied:
            return False
        return real(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", access)
    return denied


def test_an_unreadable_mask_file_is_named_as_unreadable(tmp_path, unreadable):
    path = lh.HeadMask.ones(2, 4).save(tmp_path / "m.safetensors")
    unreadable.add(os.fspath(path))
    with pytest.raises(lh.LensHeadsError, match="exists but cannot be read"):
        lh.HeadMask.load(path)


def test_an_unreadable_model_file_is_named_before_loading(tiny_dir, unreadable, capsys):
    unreadable.add(os.fspath(tiny_dir / "config.json"))
    code = main(["generate", "--model", str(tiny_dir), "--prompt", "hi"])
    error = capsys.readouterr().err
    assert code == 2 and "exists but cannot be read" in error and "No such file" not in error


@pytest.mark.parametrize("threshold", [float("nan"), float("inf"), 1.5, -0.1])
def test_alignment_heads_refuses_a_threshold_that_is_no_score(threshold):
    with pytest.raises(lh.LensHeadsError, match="threshold"):
        TranslationScores.example().alignment_heads(threshold)
    assert TranslationScores.example().alignment_heads(0.1) == ["L0H0"]


def test_a_mask_on_a_task_it_never_saw_evaluates_every_example(tiny, tmp_path):
    data = tmp_path / "heldout.jsonl"
    data.write_text("".join(json.dumps({"input": w, "output": w.upper()}) + "\n" for w in WORDS))
    mask = lh.HeadMask.from_heads(["L0H1"], n_layers=2, n_heads=4)
    mask.metadata["task"] = "capitalize"  # trained on another task
    result = lh.evaluate(tiny, str(data), ["mask"], mask=mask, n_eval=16, progress=False)
    assert result.config["n_eval"] == 16 and result.config["unseen"]
    mask.metadata["task"] = "heldout"  # trained on this one: half at most is held out
    with pytest.raises(lh.LensHeadsError, match="at most 8 are held out"):
        lh.evaluate(tiny, str(data), ["mask"], mask=mask, n_eval=16, progress=False)
    with pytest.raises(lh.LensHeadsError, match="at most 8 are held out"):  # no mask at all
        lh.evaluate(tiny, str(data), ["original"], n_eval=16, progress=False)
