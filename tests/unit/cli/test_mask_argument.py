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
    if command == "sweep":  # an order needs weights: a binary mask is refused (its heads tie)
        values = torch.linspace(0.1, 0.9, 8).reshape(2, 4)
    mask = lh.HeadMask(values)
    mask.save(tmp_path / "mask.safetensors")
    out = str(tmp_path / "out")
    argv = [command, "--model", str(tiny_dir), "--mask", str(tmp_path / "mask.safetensors")]
    assert main(argv + _arguments(command, out)) == 0
    if command != "generate":
        assert any((tmp_path / "out").iterdir())


def _mask_commands() -> set[str]:
    from lens_heads.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices
    return {
        name
        for name, sub in commands.items()
        if any("--mask" in action.option_strings for action in sub._actions)
    }


FOLDER_ARGUMENTS = {
    "sweep-estimates": ["--task", "capitalize", "--n-eval", "2", "--out", "{out}"],
    "eval": ["--task", "capitalize", "--n-eval", "4", "--max-new-tokens", "2", "--other-mask",
             "{folder}", "--settings", "mask,other_mask", "--out", "{out}"],
}  # fmt: skip


def test_every_command_with_a_mask_is_checked_with_each_form():
    assert _mask_commands() == {*FOLDER_ARGUMENTS, "generate", "sweep", "logit-lens",
                                "similarity", "attention"}  # fmt: skip


@pytest.mark.parametrize("command", sorted(_mask_commands()))
def test_command_runs_with_a_training_folder(command, tiny_dir, tmp_path, capsys):
    """Issue 72: a ``train-mask`` output folder is a mask (or, for a sweep, its order) wherever a
    command takes one; ``--other-mask`` too."""
    model = lh.load_model(tiny_dir, verify=False)
    result = lh.train_mask(model, "capitalize", steps=2, batch_size=2, n_eval=4, progress=False)
    folder = tmp_path / "run"
    result.save(folder)
    out = str(tmp_path / "out")
    if command in FOLDER_ARGUMENTS:
        rest = [item.format(out=out, folder=folder) for item in FOLDER_ARGUMENTS[command]]
    else:
        rest = _arguments(command, out)
    assert main([command, str(tiny_dir), "--mask", str(folder), *rest]) == 0, capsys.readouterr()
