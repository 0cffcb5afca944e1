"""Issue 27: bad input across every command and the Python API is checked before a model loads,
never accepted silently, and named in one line; every command that writes a folder locks it.

The commands run on a tiny checkpoint folder (``tiny_dir``): its shape comes from its
config.json before any weights load, so head lists, masks and ``--top-k`` are checked against
it. ``no_load`` fails a test if any model loads."""

from __future__ import annotations

import json
import math
import os
import textwrap
import warnings
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

import lens_heads as lh
import lens_heads.cli._common as common
from lens_heads.cli import COMMANDS, EXAMPLES, build_parser, main
from lens_heads.cli._common import Examples
from lens_heads.core._checks import InputWarning
from lens_heads.core._locks import CLAIM, claim
from lens_heads.core._tasks import Example, Task
from lens_heads.lahis._languages import LanguageHeads
from lens_heads.scale._grid import GridConfigError

WORDS = [f"w{chr(97 + i)}{chr(97 + j)}" for i in range(5) for j in range(5)]


@pytest.fixture()
def no_load(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a model loaded before the arguments were checked")

    monkeypatch.setattr(common, "load_model", refuse)
    monkeypatch.setattr("lens_heads.core.load_model", refuse)


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def _mask_file(path, values):
    """A head-mask file holding ``values`` as given (HeadMask.save would refuse bad ones)."""
    n_layers, n_heads = values.shape
    header = {"format": "lens_heads.head_mask/1", "n_layers": str(n_layers)}
    header |= {"n_heads": str(n_heads), "alpha": "0.0", "metadata": "{}"}
    save_file({"values": values.contiguous()}, str(path), header)
    return str(path)


def _heads(path, n_layers=2):
    """Language heads of en and fr, each with a head of its own (L0H0, L1H1)."""
    scores = torch.zeros(2, n_layers, 4)
    scores[0, 0, 0], scores[1, 1, 1] = 5.0, 5.0
    LanguageHeads(["en", "fr"], scores, 0.9, 2, "lahis", "tiny").save(path)
    return str(path)


def _no_own_heads(path):
    """Language heads in which no head stands out: no language has heads of its own."""
    LanguageHeads(["en", "fr"], torch.zeros(2, 2, 4), 0.5, 2, "lahis", "tiny").save(path)
    return str(path)


@pytest.fixture()
def f(tmp_path, tiny_dir):
    """The files the bad (and good) arguments name."""
    grid_yaml = tmp_path / "grid.yaml"
    grid_yaml.write_text("models: [tiny-2x4]\ntasks: [capitalize\nseeds: [0]\n")
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("un caf\xe9 noir\nle th\xe9 vert\n".encode("latin-1"))
    pairs = [{"input": "a cat", "output": "un chat"}, {"input": "a dog", "output": "un chien"}]
    bad_json = tmp_path / "align.json"
    bad_json.write_text("[[[0, 0]], [[0, 0], [1, 1]")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    texts = tmp_path / "texts.txt"
    texts.write_text("le chat dort\nun chien court\n")
    return dict(
        M=str(tiny_dir),
        out=str(tmp_path / "out"),
        mask=_mask_file(tmp_path / "m.safetensors", torch.ones(2, 4)),
        nan=_mask_file(tmp_path / "nan.safetensors", torch.tensor([[1.0, math.nan] * 2] * 2)),
        wide=_mask_file(tmp_path / "wide.safetensors", torch.ones(3, 4)),
        dup=_jsonl(tmp_path / "dup.jsonl", [{"input": "a", "output": "A"}] * 2),
        one=_jsonl(tmp_path / "one.jsonl", [{"input": "a", "output": "A"}]),
        upper=_jsonl(tmp_path / "upper.jsonl", [{"input": w, "output": w.upper()} for w in WORDS]),
        pairs=_jsonl(tmp_path / "pairs.jsonl", pairs),
        grid_yaml=str(grid_yaml),
        latin1=str(latin1),
        bad_json=str(bad_json),
        empty=str(empty),
        texts=str(texts),
        heads=_heads(tmp_path / "heads"),
        wide_heads=_heads(tmp_path / "wide-heads", n_layers=3),
        no_own=_no_own_heads(tmp_path / "no-own"),
        folder=str(tmp_path),
    )


def _run(argv, capsys) -> tuple[int, str]:
    """Exit code and stderr of ``lens-heads ARGV`` (parse errors exit through SystemExit)."""
    try:
        code = main(argv)
    except SystemExit as exit_info:
        code = exit_info.code
    return code, capsys.readouterr().err


def _one_line_error(command, argv, capsys) -> str:
    code, err = _run(argv, capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code != 0, err
    assert "Traceback" not in err and "it/s" not in err, err  # no traceback, no progress
    assert len(lines) == 1 and lines[0].startswith(f"lens-heads {command}: error: "), err
    return lines[0]


# -- every command: a bad argument, refused in one line before the model loads ------------------
#: each command's bad argument and the message it gets, kept beside the command
#: (lens_heads.cli.EXAMPLES, whose placeholders are the files of the fixture ``f``)
BAD = {name: (example.bad, example.message) for name, example in EXAMPLES.items()}


def _argv(command, template, f):
    if isinstance(template, str):
        return Examples.argv(command, template, **f)
    return [command, *[item.format(**f) for item in template]]


def test_every_command_has_a_bad_argument_case():
    assert set(BAD) == {name for name, _, _ in COMMANDS}


@pytest.mark.parametrize("command", sorted(BAD))
def test_every_command_refuses_a_bad_argument_before_the_model_loads(command, f, capsys, no_load):
    template, message = BAD[command]
    line = _one_line_error(command, _argv(command, template, f), capsys)
    assert message in line
    assert not os.path.exists(f["out"]), "nothing written, no folder left"


# -- every command that writes a folder locks it ------------------------------------------------
#: each command's valid call, kept beside the command (lens_heads.cli.EXAMPLES)
GOOD = {name: example.good for name, example in EXAMPLES.items() if example.good is not None}


def test_every_command_with_out_is_in_the_lock_test():
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    writing = {
        name
        for name, sub in commands.items()
        if any("--out" in action.option_strings for action in sub._actions)
    }
    # grid: two runs with the same config share the folder by design (a claim per cell)
    assert writing == set(GOOD) | {"grid"}


@pytest.mark.parametrize("command", sorted(GOOD))
def test_every_command_refuses_a_folder_another_process_writes(command, f, capsys, no_load):
    assert claim(Path(f["out"]), "another-run")  # held by a live process (this one)
    line = _one_line_error(command, _argv(command, f"{GOOD[command]} --out {{out}}", f), capsys)
    assert f"--out {f['out']} is being written by process {os.getpid()} on " in line
    assert os.listdir(f["out"]) == [CLAIM], "nothing written"


def test_a_command_releases_its_lock_on_success_and_on_error(f, tiny, monkeypatch, capsys):
    monkeypatch.setattr(common, "load_model", lambda args: tiny)
    argv = _argv("logit-lens", f"{GOOD['logit-lens']} --out {{out}}", f)
    assert _run(argv, capsys)[0] == 0
    assert not os.path.exists(os.path.join(f["out"], CLAIM))

    def broken(args):
        raise OSError("disk gone")

    monkeypatch.setattr(common, "load_model", broken)
    assert _run(argv, capsys)[0] == 2
    assert not os.path.exists(os.path.join(f["out"], CLAIM)), "released on an error too"


# -- accepted silently before issue 27 -------------------------------------------------------
SILENT = [
    (["generate", "--model", "{M}", "--prompt", "   "], "--prompt: must not be empty or blank"),
    (["eval", "--model", "{M}", "--task", "{upper}", "--n-eval", "300", "--out", "{out}"],
     "n_eval=300 asks for at least every example of task 'upper', which has 25"),
    (["train-mask", "--model", "{M}", "--task", "{upper}", "--holdout", "0", "--n-eval", "5",
      "--out", "{out}"], "--holdout 0 trains on every example: pass --n-eval 0"),
    (["similarity", "--model", "{M}", "--task", "{upper}", "--n-eval", "40", "--mask",
      "{mask}", "--instruction", "Up.", "--out", "{out}"], "--n-eval 40 but task 'upper'"),
    (["similarity", "--model", "{M}", "--task", "capitalize", "--instruction", "", "--mask",
      "{mask}", "--out", "{out}"], "--instruction: must not be empty or blank"),
    (["similarity", "--model", "{M}", "--task", "{upper}", "--n-eval", "1", "--mask",
      "{mask}", "--out", "{out}"], "--n-eval must be at least 2"),
    (["importance", "--model", "{M}", "--language", "fr", "--n-docs", "0", "--out", "{out}"],
     "--n-docs: must be at least 1, got 0"),
    (["importance", "--model", "{M}", "--language", "fr", "--n-docs", "-1", "--out", "{out}"],
     "--n-docs: must be at least 1, got -1"),
    (["importance", "--model", "{M}", "--language", "fr", "--max-tokens", "-5", "--out",
      "{out}"], "--max-tokens: must be at least 2, got -5"),
    (["transfer", "--model", "{M}", "--source", "fr", "--target", "fr", "--out", "{out}"],
     "source and target are both 'fr'"),
    (["translation-scores", "--model", "{M}", "--pairs", ",", "--out", "{out}"],
     "--pairs ',' names no pair"),
    (["translation-scores", "--model", "{M}", "--pairs", "english-french", "--out", "{out}"],
     "'english-french' is a built-in word task (single words), not sentence pairs"),
    *[(["translation-scores", "--model", "{M}", "--pairs", "en-fr", "--threshold", value,
        "--out", "{out}"], "--threshold: must") for value in ("nan", "-1", "inf")],
    (["sweep", "--model", "{M}", "--heads", "L0H1", "--prompt", "hi", "--target", "H",
      "--ablation", "mean", "--out", "{out}"], "with --ablation-task TASK"),
    (["sweep", "--model", "{M}", "--heads", "L0H1", "--prompt", "hi", "--target", "H",
      "--ablation-task", "{upper}", "--out", "{out}"], "with --ablation-task TASK"),
    (["sweep", "--model", "{M}", "--heads", "L0H1", "--prompt", "hi", "--target", "H",
      "--ablation", "resample", "--ablation-task", "{upper}", "--out", "{out}"],
     "no donor for generated tokens: pass --max-new-tokens=0"),
]  # fmt: skip


@pytest.mark.parametrize(("template", "message"), SILENT)
def test_what_was_accepted_silently_is_a_clear_error(template, message, f, capsys, no_load):
    command = template[0]
    line = _one_line_error(command, _argv(command, template[1:], f), capsys)
    assert message in line


def test_a_legal_but_surely_mistaken_input_is_one_warning_line(f, tiny, monkeypatch, capsys):
    def load(args):
        with warnings.catch_warnings():  # as loading a real model does: Python's own
            pass  # once-per-place memory of warnings is reset
        return tiny

    monkeypatch.setattr(common, "load_model", load)
    argv = _argv("eval", ["--model", "{M}", "--task", "{upper}", "--n-eval", "20"], f)
    code, err = _run([*argv, "--settings", "original", "--max-new-tokens", "1", "--out",
                      f["out"]], capsys)  # fmt: skip
    said = [line for line in err.splitlines() if "warning:" in line]
    assert code == 0 and said == [
        "lens-heads eval: warning: task 'upper' has 25 examples, fewer than 2 x n_eval=20: its "
        "last 12 (half the task) are held out, not 20"
    ], err  # once, though the command and the library both check the split
    assert lh.EvaluationResult.load(f["out"]).config["n_eval"] == 12


# -- clear before issue 27 too, but only after the model loaded: now before ------------------------
BEFORE_LOAD = [
    (["generate", "--model", "{M}", "--prompt", "a", "--mask", "{wide}"],
     "mask has shape (3, 4) (layers, heads) but model"),
    (["generate", "--model", "{M}", "--prompt", "a", "--mask", "{upper}"],
     "is not a readable head-mask file"),
    (["eval", "--model", "{M}", "--task", "capitalize", "--settings", "orig", "--out", "{out}"],
     "unknown setting 'orig'"),
    (["eval", "--model", "{M}", "--task", "capitalize", "--settings", "mask", "--out", "{out}"],
     "needs the trained mask M"),
    (["eval", "--model", "{M}", "--task", "{one}", "--out", "{out}"],
     "has 1 example; at least 2"),
    (["eval", "--model", "{M}", "--task", "{upper}", "--n-eval", "5", "--shots", "30",
      "--out", "{out}"], "use at most 20 shots"),
    (["train-mask", "--model", "{M}", "--task", "{upper}", "--batch-size", "30", "--holdout",
      "5", "--out", "{out}"], "batch_size 30 is larger than the 20 training examples"),
    (["sweep", "--model", "{M}", "--prompt", "a", "--heads", "L0H1,L0H1", "--out", "{out}"],
     "names L0H1 twice"),
    (["sweep", "--model", "{M}", "--prompt", "a", "--heads", "(0, 1)", "--out", "{out}"],
     "is not of the form"),
    (["sweep", "--model", "{M}", "--prompt", "a", "--heads", ",", "--out", "{out}"],
     "names no heads"),
    (["sweep", "--model", "{M}", "--prompt", "a", "--mask", "{nan}", "--out", "{out}"], "NaN"),
    (["sweep", "--model", "{M}", "--prompt", "", "--heads", "L0H0", "--out", "{out}"],
     "--prompt: must not be empty"),
    (["similarity", "--model", "{M}", "--prompt", "a", "--instruction", "b", "--mask", "{mask}",
      "--layers", "0-2", "--out", "{out}"], "has layers 0-1"),
    (["attention", "--model", "{M}", "--prompt", "a cat", "--target", "dog", "--out",
      "{out}"], "--target 'dog' is not in its --prompt"),
    (["translation-scores", "--model", "{M}", "--pairs", "en-en", "--out", "{out}"],
     "no pair en-en"),
    (["translation-scores", "--model", "{M}", "--pairs", "en-fr", "--n", "0", "--out", "{out}"],
     "--n: must be at least 1"),
    (["translation-scores", "--model", "{M}", "--pairs", "en-fr", "--shots", "-1", "--out",
      "{out}"], "--shots: must be at least 0"),
    (["translation-scores", "--model", "{M}", "--pairs", "en-fr", "--batch-size", "0", "--out",
      "{out}"], "--batch-size: must be at least 1"),
    (["translation-scores", "--model", "{M}", "--pairs", "en-fr", "--out", "{mask}"],
     "is a file; give a folder"),
    (["ablate-heads", "--model", "{M}", "--task", "en-fr", "--heads", "top:99", "--out",
      "{out}"], "K must lie in [1, 8]"),
    (["trater", "--model", "{M}", "--texts", "{texts}", "--heads", "L0H1", "--out", "{mask}"],
     "is a file; give a folder"),
    (["importance", "--model", "{M}", "--texts", "{empty}", "--out", "{out}"],
     "holds no documents"),
    (["language-heads", "--model", "{M}", "--quantile", "1", "--out", "{out}"],
     "--quantile: must lie in (0, 1)"),
    (["language-heads", "--model", "{M}", "--min-languages", "0", "--out", "{out}"],
     "--min-languages: must be at least 1"),
    (["language-perplexity", "--model", "{M}", "--heads", "{heads}", "--skip", "300", "--out",
      "{out}"], "en: 220 documents, none left after --skip 300"),
    (["language-perplexity", "--model", "{M}", "--heads", "{heads}", "--out", "{mask}"],
     "is a file; give a folder"),
    (["transfer", "--model", "{M}", "--heads", "{heads}", "--target", "de", "--out", "{out}"],
     "no language 'de' (target) in these heads"),
    (["transfer", "--model", "{M}", "--heads", "{no_own}", "--out", "{out}"],
     "fr has no specific heads at quantile 0.5"),
    (["soft-mask-experiment", "--model", "{M}", "--fraction", "0", "--out", "{out}"],
     "--fraction: must lie in (0, 1]"),
    (["soft-mask-experiment", "--model", "{M}", "--epochs", "0", "--out", "{out}"],
     "--epochs: must be at least 1"),
    (["soft-mask-experiment", "--model", "{M}", "--n-train", "500", "--out", "{out}"],
     "too few for n_eval=20 held-out and n_train=500"),
]  # fmt: skip


@pytest.mark.parametrize(("template", "message"), BEFORE_LOAD)
def test_what_was_checked_after_loading_is_checked_before(template, message, f, capsys, no_load):
    command = template[0]
    line = _one_line_error(command, _argv(command, template[1:], f), capsys)
    assert message in line


def test_a_checkpoint_is_checked_before_the_model_loads(f, tiny, monkeypatch, capsys):
    def load(args):
        monkeypatch.setattr(tiny, "lens_heads_name", args.model)  # as load_model names it
        return tiny

    monkeypatch.setattr(common, "load_model", load)
    argv = _argv("train-mask", ["--model", "{M}", "--task", "{upper}", "--holdout", "5"], f)
    argv += ["--steps", "2", "--batch-size", "4", "--n-eval", "0", "--out", f["out"]]
    assert _run(argv, capsys)[0] == 0
    monkeypatch.setattr(common, "load_model", lambda args: pytest.fail("loaded a model"))
    assert "exists; pass resume=True (--resume)" in _one_line_error("train-mask", argv, capsys)
    other = [*argv, "--resume", "--seed", "7"]
    assert "seed: saved 0, this run 7" in _one_line_error("train-mask", other, capsys)
    checkpoint = os.path.join(f["out"], "checkpoints", "checkpoint.safetensors")
    with open(checkpoint, "r+b") as file:
        file.truncate(100)
    line = _one_line_error("train-mask", [*argv, "--resume"], capsys)
    assert "is not a readable mask-training checkpoint" in line


def test_a_grid_rerun_with_other_settings_is_refused(tmp_path, capsys):
    config = textwrap.dedent("""\
        models = ["tiny-2x4"]
        tasks = ["capitalize"]
        [schedules.tiny]
        steps = 2
        batch_size = 4
        n_eval = 8
        precision = "float32"
        [evaluate]
        n_eval = 4
        settings = ["original", "mask"]
        """)
    path, out = tmp_path / "grid.toml", str(tmp_path / "out")
    path.write_text(config)
    assert _run(["grid", str(path), "--out", out, "--address", "local", "--quiet"], capsys)[0] == 0
    path.write_text(config.replace("steps = 2", "steps = 3"))
    line = _one_line_error("grid", ["grid", str(path), "--out", out, "--check"], capsys)
    assert "holds a grid with other settings (schedules.tiny: saved {" in line
    assert "'steps': 2" in line and "'steps': 3" in line
    with pytest.raises(GridConfigError, match="other settings"):
        lh.run_grid(str(path), out, address="local", progress=False)
    # more tasks are more cells: the finished ones keep their settings
    path.write_text(config.replace('["capitalize"]', '["capitalize", "antonym"]'))
    assert _run(["grid", str(path), "--out", out, "--check"], capsys)[0] == 0


# -- messages that did not name the problem -----------------------------------------------------
def test_messages_name_the_file_and_the_problem(f, tmp_path, capsys, no_load):
    latin1_grid = tmp_path / "grid.toml"
    latin1_grid.write_bytes('name = "caf\xe9"\n'.encode("latin-1"))
    cases = [
        (["grid", str(latin1_grid), "--out", f["out"]], "grid.toml is not UTF-8 text"),
        (["trater", "--model", f["M"], "--texts", f["latin1"], "--heads", "L0H1", "--out",
          f["out"]], "latin1.txt is not UTF-8 text (byte 6: invalid continuation byte); "
         "save it as UTF-8"),
        (["translation-scores", "--model", f["M"], "--pairs", f["pairs"], "--alignments",
          f["latin1"], "--out", f["out"]], "alignment file " + f["latin1"] + " is not UTF-8"),
        (["translation-scores", "--model", f["M"], "--pairs", f["pairs"], "--alignments",
          f["folder"], "--out", f["out"]], f"alignment file {f['folder']} is a directory"),
        (["importance", "--model", f["M"], "--texts", f["folder"], "--out", f["out"]],
         f"--texts {f['folder']} is a directory; give a file"),
        (["eval", "--model", f["M"], "--task", f["folder"] + "/", "--out", f["out"]],
         "is a directory; give a file"),
        (["generate", "--model", "", "--prompt", "a"], "--model '': the model spec is empty"),
        (["trater", "--model", f["M"], "--texts", f["empty"], "--heads", "L0H1", "--out",
          f["out"]], "empty.txt is empty; it should hold one text per line"),
        (["grid", f["grid_yaml"], "--out", f["out"]], "grid.yaml: not valid YAML (line 3, "
         "column 6: expected ',' or ']', but got ':'); fix the syntax"),
    ]  # fmt: skip
    for argv, message in cases:
        assert message in _one_line_error(argv[0], argv, capsys), argv


# -- the Python API ----------------------------------------------------------------------------
def test_the_api_refuses_what_it_accepted_silently(tiny):
    mask = lh.HeadMask.ones(tiny)
    with pytest.raises(ValueError, match=r"mask tensor holds NaN or inf \(at \[\[0, 1\]"):
        with lh.apply_mask(tiny, torch.tensor([[1.0, math.nan, 1.0, 1.0]] * 2)):
            pass
    with pytest.raises(ValueError, match="n_eval=1000000000 asks for at least every example"):
        lh.evaluate(tiny, "capitalize", ["original"], n_eval=10**9, progress=False)
    with pytest.warns(InputWarning, match="its last 229 .half the task. are held out, not 300"):
        lh.get_task("capitalize").split(n_eval=300)
    with pytest.raises(ValueError, match=r"lr=1e\+06 is far above"):
        lh.TrainingConfig(lr=1e6)
    for function in (lh.logit_lens, lh.top_tokens):
        with pytest.raises(ValueError, match="top_k=262 exceeds the model's vocabulary of 261"):
            function(tiny, "apple", top_k=262)
    with pytest.raises(ValueError, match=r"needs at least 2 .* pass one prompt as a string"):
        lh.figure4_similarity(tiny, ["apple"], "Repeat.", mask)
    with pytest.raises(ValueError, match="'english-french' is a built-in word task"):
        lh.translation_scores(tiny, "english-french")
    with pytest.raises(ValueError, match=r"document 0 .* more than the model's context of 64"):
        lh.head_importance(lh.tiny_model(n_ctx=64), ["word " * 20], progress=False)
    with pytest.raises(ValueError, match="max_tokens must be at least 2, got -5"):
        lh.head_importance(tiny, ["hello world"], max_tokens=-5, progress=False)
    with pytest.raises(ValueError, match="n_layers must be a positive integer, got 0"):
        lh.tiny_model(n_layers=0)
    from lens_heads.heads_up._attention import extractive_targets

    with pytest.raises(ValueError, match="'present-past' is not extractive"):
        extractive_targets(lh.get_task("present-past"))  # 14 of 239 answers are input words
    with pytest.warns(InputWarning, match="1 examples skipped"):
        extractive_targets(
            Task("t", (Example("a, b", "a"), Example("c, d", "d"), Example("e", "E")))
        )


def _unchecked(function):
    """The function as users without pytest's runtime type checker call it."""
    return getattr(function, "__wrapped__", function)


@pytest.mark.parametrize("prompt", [None, 5])
def test_api_prompts_of_the_wrong_type_are_named_at_the_entry_point(tiny, prompt):
    mask = lh.HeadMask.ones(tiny)
    kind = type(prompt).__name__
    lens = f"prompt must be a string or token ids, got {kind}"
    if prompt is None:  # None is the default (settings=... instead)
        lens = r"no prompt given; pass a prompt \(or settings=...\)"
    calls = [
        (lh.generate, (tiny, prompt), f"prompts must be a string or a list of strings, got {kind}"),
        (lh.logit_lens, (tiny, prompt), lens),
        (lh.top_tokens, (tiny, prompt), lens),
        (lh.figure4_similarity, (tiny, prompt, "Repeat.", mask), "prompt must be a string, a"),
        (lh.removal_sweep, (tiny, prompt, mask), f"the prompt must be a string, got {kind}"),
        (lh.attention_on_target, (tiny, prompt, ["a"]), "prompts must be a string or a list"),
        (lh.head_importance, (tiny, prompt), "texts must be a list of documents"),
        (lh.evaluate, (tiny, prompt), "a task is a Task, a built-in task name or a"),
    ]  # fmt: skip
    for function, args, message in calls:
        with pytest.raises((TypeError, ValueError), match=message):
            _unchecked(function)(*args)
