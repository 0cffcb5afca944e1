"""Every command that takes ``--mask`` runs end to end with a mask file on a tiny checkpoint.

The mask is read once before the model loads (``mask_before_model``) and checked again
against the loaded model (``load_mask``); a command that hands the wrong kind of value from
the first step to the second fails here, not in a user's notebook."""

from __future__ import annotations

import pytest
import torch

import lens_heads as lh
from lens_heads.cli import main

PROMPT = "pear, dog, kiwi"


def _arguments(command: str, out: str) -> list[str]:
    return {
        "generate": ["--prompt", PROMPT, "--max-new-tokens", "2"],
        "eval": ["--task", "capitalize", "--n-eval", "4", "--max-new-tokens", "2", "--out", out],
        "sweep": ["--prompt", PROMPT, "--out", out],
        "logit-lens": ["--prompt", PROMPT, "--out", out],
        "similarity": ["--prompt", PROMPT, "--instruction", "Say it.", "--out", out],
        "attention": ["--prompt", PROMPT, "--target", "pear", "--out", out],
    }[command]


@pytest.mark.parametrize(
    "command", ["generate", "eval", "sweep", "logit-lens", "similarity", "attention"]
)
def test_command_runs_with_a_mask_file(command, tiny_dir, tmp_path, capsys):
    values = torch.ones(2, 4)
    values[1, 2] = 0.0
    mask = lh.HeadMask(values)
    mask.save(tmp_path / "mask.safetensors")
    out = str(tmp_path / "out")
    argv = [command, "--model", str(tiny_dir), "--mask", str(tmp_path / "mask.safetensors")]
    assert main(argv + _arguments(command, out)) == 0
    if command != "generate":
        assert any((tmp_path / "out").iterdir())
