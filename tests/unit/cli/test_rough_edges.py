"""Issue 17, items 1-10: bad input fails early with an error naming the problem and the fix,
one mask resolver and one context check serve every entry point, the CLI's flags agree."""

from __future__ import annotations

import json
import logging
import math
import time

import pytest
import torch

import lens_heads as lh
import lens_heads.cli._common as cli
from lens_heads.cli import build_parser, main
from lens_heads.core._checks import (
    ContextLengthError,
    check_context,
    resolve_mask,
)
from lens_heads.core._masks import HeadMask, MaskFileError, MaskShapeError
from lens_heads.core._tasks import Example, Task, TaskDataError, load_examples
from lens_heads.engine import TrainingConfig, evaluate, train_mask
from lens_heads.heads_up._lens import logit_lens
from lens_heads.heads_up._similarity import figure4_similarity
from lens_heads.heads_up._sweep import removal_sweep

WORDS = "cat dog owl bee ant cow pig elk yak emu fox hen ram".split()
LONG = "word " * 40  # about 200 byte-level tokens: more than the short model's 64 positions


def word_task(words=WORDS) -> Task:
    return Task("upper", tuple(Example(w, w.upper()) for w in words), instruction="Capitals.")


@pytest.fixture(scope="module")
def short():
    """A tiny model with a 64-position context."""
    return lh.tiny_model(n_layers=2, n_heads=4, n_ctx=64, seed=0)


@pytest.fixture()
def no_load(monkeypatch):
    """Fail the test if a command loads a model (its arguments must be checked first)."""

    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded before the arguments were checked")

    monkeypatch.setattr(cli, "load_model", refuse)
    monkeypatch.setattr("lens_heads.core.load_model", refuse)


def _error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    return err


# -- 1: one mask resolver --------------------------------------------------------------------
def test_a_train_mask_folder_is_a_mask_everywhere(tiny, tiny_dir, tmp_path, monkeypatch, capsys):
    mask = HeadMask.from_heads(["L0H1", "L1H0"], n_layers=2, n_heads=4)
    folder = tmp_path / "training"
    folder.mkdir()
    mask.save(folder / "mask.safetensors")
    assert resolve_mask(folder, tiny).labels == ["L0H1", "L1H0"]
    assert resolve_mask(folder / "training.safetensors", tiny).labels == mask.labels
    assert resolve_mask(str(folder / "mask.safetensors"), tiny).labels == mask.labels
    assert resolve_mask(None, tiny) is None
    with pytest.raises(MaskFileError, match=r"holds no mask\.safetensors"):
        resolve_mask(tmp_path, tiny)
    with pytest.raises(MaskShapeError):
        resolve_mask(folder, lh.tiny_model(n_layers=3, n_heads=2))
    # the library's evaluate and the CLI's eval take the folder, as the README writes it
    result = evaluate(tiny, word_task(), ["mask"], mask=folder, n_eval=3, progress=False)
    assert result.config["mask"]["heads"] == 2
    monkeypatch.setattr(cli, "load_model", lambda args: tiny)
    argv = ["eval", "--model", str(tiny_dir), "--task", "capitalize", "--mask", str(folder)]
    argv += ["--settings", "mask", "--n-eval", "2", "--out", str(tmp_path / "eval")]
    assert main(argv) == 0, capsys.readouterr().err
    assert (tmp_path / "eval" / "table.csv").is_file()


# -- 2: the context window, wherever a prompt enters ------------------------------------------
def test_a_prompt_longer_than_the_context_fails_before_any_compute(short, tmp_path):
    started = time.perf_counter()
    with pytest.raises(ContextLengthError, match="context of 64 positions"):
        lh.generate(short, LONG, max_new_tokens=5)
    with pytest.raises(ContextLengthError, match="with 30 new tokens"):
        lh.generate(short, "word " * 8, max_new_tokens=30)  # 40 + 30 > 64
    lh.generate(short, "word " * 8, max_new_tokens=5)  # fits
    with pytest.raises(ContextLengthError, match="evaluation example 1"):
        evaluate(short, word_task(["cat", "dog", "owl", LONG]), ["original"], n_eval=2,
                 split_seed=None, progress=False)  # fmt: skip
    with pytest.raises(ContextLengthError, match="the prompt"):
        removal_sweep(short, LONG, torch.zeros(2, 4), target="W", progress=False)
    with pytest.raises(ContextLengthError, match="the reference prompt"):
        removal_sweep(short, "cat", torch.zeros(2, 4), target="C", reference_prompt=LONG,
                      progress=False)  # fmt: skip
    with pytest.raises(ContextLengthError, match="the prompt"):
        logit_lens(short, LONG)
    with pytest.raises(ContextLengthError):
        figure4_similarity(short, "cat", LONG, HeadMask.ones(short))
    with pytest.raises(ContextLengthError, match="the token prompt"):
        logit_lens(short, list(range(70)))
    task = word_task([LONG, *WORDS])
    with pytest.raises(ContextLengthError, match=r"training example \d+ \('word word"):
        train_mask(short, task, TrainingConfig.short(steps=1, batch_size=2, n_eval=3),
                   progress=False)  # fmt: skip
    assert time.perf_counter() - started < 30
    check_context(short, 64)  # exactly the context fits


def test_cli_generate_rejects_a_long_prompt(short, tiny_dir, monkeypatch, capsys):
    monkeypatch.setattr(cli, "load_model", lambda args: short)
    assert main(["generate", "--model", str(tiny_dir), "--prompt", LONG]) == 2
    assert "more than the model's context of 64 positions" in _error_line(capsys)


# -- 3: numbers ---------------------------------------------------------------------------------
def test_numeric_options_are_checked(tiny, tmp_path, capsys, no_load):
    with pytest.raises(ValueError, match="no prompts"):
        lh.generate(tiny, [])
    for bad in (0, -1):
        with pytest.raises(ValueError, match="max_new_tokens must be at least 1"):
            evaluate(tiny, word_task(), ["original"], n_eval=3, max_new_tokens=bad)
        with pytest.raises(ValueError, match="max_new_tokens must be at least 1"):
            lh.generate(tiny, "cat", max_new_tokens=bad)
    # the user's errors, not the runtime type checker's TypeError (which pytest turns on)
    with pytest.raises(ValueError, match=r"batch_size must be an integer, got 2\.5"):
        TrainingConfig(batch_size=2.5)
    with pytest.raises(ValueError, match="steps must be an integer"):
        TrainingConfig(steps=True)
    with pytest.raises(ValueError, match="lr must be a finite number"):
        TrainingConfig(lr=float("inf"))
    with pytest.raises(ValueError, match=r"lr must be a number, got '0\.1'"):
        TrainingConfig(lr="0.1")
    with pytest.raises(ValueError, match="ffn_masks must be True or False, got 'no'"):
        TrainingConfig(ffn_masks="no")  # a non-empty string is true: it would switch them on
    with pytest.raises(ValueError, match="separator must be a string, got 2"):
        TrainingConfig(separator=2)
    for value in ("-1", "0", "abc"):
        with pytest.raises(SystemExit) as exit_info:
            main(["eval", "--model", "x", "--task", "capitalize", "--max-new-tokens", value,
                  "--out", str(tmp_path)])  # fmt: skip
        assert exit_info.value.code == 2
        assert "--max-new-tokens" in capsys.readouterr().err


# -- 4: HeadMask ----------------------------------------------------------------------------
def test_head_mask_rejects_nan_empty_strings_and_bad_tuples():
    weights = torch.zeros(2, 3)
    weights[1, 2] = math.nan
    with pytest.raises(ValueError, match=r"NaN or inf \(at \[layer, head\] \[\[1, 2\]\]\)"):
        HeadMask.from_weights(weights)
    with pytest.raises(MaskShapeError, match="at least one layer and one head"):
        HeadMask(torch.ones(0, 4))
    with pytest.raises(ValueError, match=r"from_heads\(\['L0H1'\]"):
        HeadMask.from_heads("L0H1", n_layers=2, n_heads=2)
    with pytest.raises(ValueError, match=r"head \(0, 1, 2\) is neither a label"):
        HeadMask.from_heads([(0, 1, 2)], n_layers=2, n_heads=2)
    assert HeadMask.from_heads([(1, 0)], n_layers=2, n_heads=2).labels == ["L1H0"]


# -- 5: too few examples to train ---------------------------------------------------------------
def test_train_mask_refuses_a_task_not_larger_than_n_eval(tiny):
    with pytest.raises(ValueError, match="has 13 examples, not more than the n_eval=40"):
        train_mask(tiny, word_task(), TrainingConfig.short(steps=1, n_eval=40), progress=False)


# -- 6: arguments and the output folder before the model -----------------------------------------
def test_cli_checks_arguments_and_out_before_loading(tmp_path, tiny_dir, capsys, no_load):
    x = str(tiny_dir)
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    assert main(["eval", "--model", x, "--task", "capitalize", "--out", str(a_file)]) == 2
    assert "is a file; give a folder" in _error_line(capsys)
    nested = str(a_file / "sub")
    assert main(["logit-lens", "--model", x, "--prompt", "a", "--out", nested]) == 2
    assert "cannot be created" in _error_line(capsys)
    argv = ["similarity", "--model", x, "--prompt", "a", "--instruction", "b", "--mask", "m"]
    assert main([*argv, "--layers", "abc", "--out", str(tmp_path / "s")]) == 2
    assert "--layers must look like 15-29" in _error_line(capsys)
    assert main(["eval", "--model", x, "--task", "no-such-task", "--out", str(tmp_path)]) == 2
    assert "no-such-task" in _error_line(capsys)
    out = tmp_path / "train"
    with pytest.raises(SystemExit):
        main(["train-mask", "--model", x, "--task", "capitalize", "--out", str(out),
              "--checkpoint-every", "0"])  # fmt: skip
    assert "--checkpoint-every: must be at least 1" in capsys.readouterr().err
    assert not out.exists()


def test_cli_turns_os_errors_into_one_line(tmp_path, tiny_dir, monkeypatch, capsys):
    def denied(args):
        raise PermissionError(13, "Permission denied", str(tmp_path / "x"))

    monkeypatch.setattr(cli, "load_model", denied)
    assert main(["generate", "--model", str(tiny_dir), "--prompt", "a"]) == 2
    err = _error_line(capsys)
    assert err.startswith("lens-heads generate: error:") and "Permission denied" in err
    assert len(err.splitlines()) == 1


# -- 7: files that are not what they claim --------------------------------------------------
def test_an_empty_model_directory_and_a_non_utf8_task_file(tmp_path):
    with pytest.raises(lh.models.ModelNotAvailableError, match="holds no model") as info:
        lh.load_model(tmp_path)
    assert "config.json" in str(info.value) and "tokenizer" in str(info.value)
    data = tmp_path / "latin1.json"
    data.write_bytes(
        json.dumps([{"input": "caf\xe9", "output": "x"}], ensure_ascii=False).encode("latin-1")
    )
    with pytest.raises(TaskDataError, match=r"latin1\.json is not UTF-8"):
        load_examples(data)


# -- 8: PNG export advice -------------------------------------------------------------------------
def test_png_advice_names_what_is_missing(monkeypatch, caplog):
    import importlib.util
    import shutil

    from lens_heads.core import _storage as _io

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "kaleido" else real(name, *a)
    )
    assert "pip install kaleido" in _io.png_advice()
    assert "apt-get install chromium" in _io.png_advice()
    monkeypatch.setattr(importlib.util, "find_spec", real)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    advice = _io.png_advice()
    assert "finds no Chrome or Chromium" in advice and "apt-get install chromium" in advice
    monkeypatch.setattr(_io, "_png_failure", None)
    with caplog.at_level(logging.WARNING, logger=_io.logger.name):
        _io._note_png_failure(RuntimeError(""))
    assert "(RuntimeError: no message)" in caplog.text and "apt-get install chromium" in caplog.text
    monkeypatch.setattr(_io, "_png_failure", None)


# -- 9: one spelling per concept ----------------------------------------------------------------
def test_every_command_spells_chat_and_counts_the_same_way(capsys):
    parser = build_parser()
    commands = {
        name: action for name, action in parser._subparsers._group_actions[0].choices.items()
    }

    def option(command: str, flag: str):
        return next(a for a in commands[command]._actions if flag in a.option_strings)

    for command in ("generate", "eval", "sweep", "logit-lens", "similarity", "attention"):
        chat = option(command, "--chat")
        assert (chat.choices, chat.default, chat.const) == (["auto", "yes", "no"], "auto", "yes")
    for command in ("eval", "train-mask", "attention", "demo"):  # the demo's: its training's
        assert option(command, "--n-eval").dest.removeprefix("training.") == "n_eval"
    assert option("eval", "--n-eval").default == 100
    groups = {g.title: g.description for g in commands["train-mask"]._action_groups}
    assert "--n-eval unset: every example held out" in groups["evaluation afterwards"]
    assert option("train-mask", "--precision").choices[:3] == ["auto", "bf16", "fp32"]
    assert option("generate", "--dtype").help == "weights dtype"
    assert option("train-mask", "--noise").help.endswith("once per batch [example]")
    for command in ("generate", "eval", "sweep"):
        assert option(command, "--max-new-tokens").dest == "max_new_tokens"
    # the old spellings still parse, with a note
    base = ["--model", "m", "--prompt", "p", "--heads", "L0H0", "--out", "o"]
    args = parser.parse_args(["sweep", *base, "--no-chat", "--generate-tokens", "4"])
    assert (args.chat, args.max_new_tokens) == ("no", 4)
    args = parser.parse_args(["generate", "--model", "m", "--chat", "--prompt", "p"])
    assert args.chat == "yes"
    args = parser.parse_args(
        ["train-mask", "--model", "m", "--task", "t", "--out", "o", "--dtype", "fp32"]
    )
    assert args.precision == "fp32"
    args = parser.parse_args(["attention", "--model", "m", "--task", "t", "--n", "7", "--out", "o"])
    assert args.n_eval == 7
    notes = capsys.readouterr().err
    for old, new in [("--no-chat", "--chat no"), ("--generate-tokens", "--max-new-tokens"),
                     ("--dtype", "--precision"), ("--n", "--n-eval")]:  # fmt: skip
        assert f"{old} is deprecated; use {new}" in notes


# -- 10: the eval progress bar counts examples ---------------------------------------------------
def test_eval_progress_counts_examples(tiny, capsys):
    evaluate(tiny, word_task(), ["original", "instruction"], n_eval=4, batch_size=3)
    err = capsys.readouterr().err
    assert "8/8" in err and "example" in err
