"""One spelling per concept across every ``lens-heads`` command (issue 34): the test walks every
subcommand's parser. A concept (an option's destination) has one flag in every command that has
it, and of each group of known synonyms at most one spelling is live anywhere; the others may
only survive as deprecated aliases (their help says so) until lens_heads 0.3.0."""

from __future__ import annotations

import argparse
from collections import defaultdict

import pytest

from lens_heads.cli import build_parser

#: spellings of one concept; at most one of each group may be a live flag
SYNONYMS = (
    {"--n", "--n-eval", "--n-prompts"},
    {"--seeds", "--random-seeds", "--random-controls", "--n-random-seeds"},
    {"--precision", "--compute-dtype"},
    {"--max-new-tokens", "--generate-tokens"},
    {"--chat", "--no-chat"},
)


def _flags() -> dict[str, list[tuple[str, str, bool]]]:
    """flag -> [(command, destination, deprecated)] over every subcommand."""
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    found: dict[str, list[tuple[str, str, bool]]] = defaultdict(list)
    for name, sub in commands.items():
        for action in sub._actions:
            deprecated = getattr(action, "replaced_by", None) is not None
            # a section under a prefix of its own (--training-lr: the soft mask's training
            # beside its own batch size) is its own concept, its flags derived from the prefix
            prefix = getattr(action, "prefixed", "")
            dest = f"{action.dest}@{prefix}" if prefix else action.dest
            for flag in action.option_strings:
                if flag.startswith("--") and flag != "--help":
                    found[flag].append((name, dest, deprecated))
    return found


def test_a_concept_has_one_flag_in_every_command():
    spellings: dict[str, set[str]] = defaultdict(set)
    for flag, uses in _flags().items():
        for _, dest, deprecated in uses:
            if not deprecated and not flag.startswith("--no-"):
                spellings[dest].add(flag)
    twice = {dest: sorted(flags) for dest, flags in spellings.items() if len(flags) > 1}
    assert not twice, f"one concept, several flags: {twice}"


@pytest.mark.parametrize("group", SYNONYMS, ids=lambda group: "/".join(sorted(group)))
def test_of_each_group_of_synonyms_one_spelling_is_live(group):
    flags = _flags()
    live = sorted(
        flag for flag in group if any(not deprecated for _, _, deprecated in flags.get(flag, []))
    )
    assert len(live) <= 1, f"{live} are all live spellings of one concept"


def test_a_flag_means_one_thing_in_every_command():
    # a nested settings class's fields keep their name under a section: importance.batch_size
    meanings = {
        flag: {
            dest.split("@")[0].rsplit(".", 1)[-1] for _, dest, deprecated in uses if not deprecated
        }
        for flag, uses in _flags().items()
    }
    # --heads names heads everywhere; the commands keep it under one destination
    mixed = {flag: sorted(dests) for flag, dests in meanings.items() if len(dests) > 1}
    assert not mixed, f"one flag, several destinations: {mixed}"


def test_a_prefixed_section_derives_its_flags_from_its_prefix():
    """The soft mask's training section is ``--training-*``: each flag is its field's, prefixed."""
    parser = build_parser()
    sub = parser._subparsers._group_actions[0].choices["soft-mask-experiment"]
    prefixed = [a for a in sub._actions if getattr(a, "prefixed", "")]
    assert {a.dest for a in prefixed} >= {"training.lr", "training.batch_size"}
    for action in prefixed:
        field = action.dest.split(".", 1)[1].replace("_", "-")
        assert action.option_strings == [f"--{action.prefixed}-{field}"], action.option_strings


def test_the_check_catches_a_second_spelling(monkeypatch):
    """Plant ``--n`` as a live flag beside ``--n-eval``: the synonym check must fail."""
    import lens_heads.cli._heads_up as heads_up

    original = heads_up._add_logit_lens

    def planted(sub: argparse._SubParsersAction) -> None:
        original(sub)
        sub.choices["logit-lens"].add_argument("--n", dest="n_eval", type=int)

    monkeypatch.setattr(
        "lens_heads.cli.COMMANDS",
        [
            (n, planted if n == "logit-lens" else a, r)
            for n, a, r in __import__("lens_heads.cli", fromlist=["COMMANDS"]).COMMANDS
        ],
    )
    with pytest.raises(AssertionError, match="live spellings"):
        test_of_each_group_of_synonyms_one_spelling_is_live(SYNONYMS[0])


def _input_actions() -> dict[str, list[tuple[str, argparse.Action]]]:
    """flag of a shared input -> [(command, its action)] over every subcommand."""
    from lens_heads.cli._inputs import INPUTS

    flags = {spec.get("flags", (f"--{n.replace('_', '-')}",))[0] for n, spec in INPUTS.items()}
    parser = build_parser()
    found: dict[str, list[tuple[str, argparse.Action]]] = defaultdict(list)
    for name, sub in parser._subparsers._group_actions[0].choices.items():
        for action in sub._actions:
            for flag in set(action.option_strings) & flags:
                found[flag].append((name, action))
    return found


def test_an_input_reads_its_value_one_way_in_every_command():
    """Issue 45: the inputs (``--task``, ``--mask``, ``--prompt``, ...) are declared once
    (:mod:`lens_heads.cli._inputs`): in every command that takes one, it parses its value the same
    way and says something about it."""
    from lens_heads.cli._inputs import INPUTS

    actions = _input_actions()
    assert {"--task", "--mask", "--prompt", "--heads", "--out"} <= set(actions)
    for flag, uses in actions.items():
        spec = INPUTS[flag[2:].replace("-", "_")]
        for command, action in uses:
            if getattr(action, "setting", False):
                continue  # a setting of that command (the demo's task), generated from it
            assert action.type is spec.get("type"), (flag, command)
            assert action.help, (flag, command)


def test_the_input_check_sees_a_flag_declared_by_hand(monkeypatch):
    """Plant a hand-written ``--prompt`` without its parser: the check must fail."""
    import lens_heads.cli._core as core

    original = core._add_generate

    def planted(sub: argparse._SubParsersAction) -> None:
        original(sub)
        sub.choices["generate"].add_argument("--target", help="by hand")

    monkeypatch.setattr(
        "lens_heads.cli.COMMANDS",
        [
            (n, planted if n == "generate" else a, r)
            for n, a, r in __import__("lens_heads.cli", fromlist=["COMMANDS"]).COMMANDS
        ],
    )
    with pytest.raises(AssertionError, match="--target"):
        test_an_input_reads_its_value_one_way_in_every_command()


#: the calls that generate flags (settings, inputs, deprecated spellings): not hand-written
GENERATORS = {
    "lens_heads/cli/_options.py",
    "lens_heads/cli/_inputs.py",
    "lens_heads/cli/_common.py",
}
#: hand-written add_argument calls left (issue 45's target: under 40 in all); may only shrink
HAND_WRITTEN = 31


def _hand_written_flags() -> dict[str, int]:
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    found = {}
    for path in [*root.glob("lens_heads/cli/*.py"), *root.glob("analyses/*.py")]:
        where = path.relative_to(root).as_posix()
        if where in GENERATORS:
            continue
        calls = [
            node
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
        ]
        if calls:
            found[where] = len(calls)
    return found


def test_hand_written_flags_only_shrink():
    """Flags come from the settings (``options``) and the inputs' registry (``inputs``); the
    hand-written rest is counted and may only shrink (lower HAND_WRITTEN when it does)."""
    found = _hand_written_flags()
    assert sum(found.values()) <= HAND_WRITTEN, f"hand-written flags: {found}"


def test_every_command_and_analysis_prints_its_help():
    """argparse %-formats each help text: a generated help holding a bare ``%`` (a docstring's
    "95 % interval") crashes ``--help``. Every subcommand's and every analysis's help renders."""
    import importlib
    import pkgutil

    import analyses
    from lens_heads.cli import add_settings

    for name, sub in build_parser()._subparsers._group_actions[0].choices.items():
        assert sub.format_help(), name
    for info in pkgutil.iter_modules(analyses.__path__):
        module = importlib.import_module(f"analyses.{info.name}")
        config = getattr(module, "Config", None)
        if config is None:
            continue
        parser = argparse.ArgumentParser()
        add_settings(parser, config)
        assert "--" in parser.format_help(), info.name


#: the commands that read no model (a catalogue, a task file, a grid file naming its own models)
WITHOUT_MODEL = {"models", "tasks", "grid"}


def test_every_command_takes_the_model_first_or_as_model_flag():
    """Issue 71: one way to name the model on every command -- the first argument, with
    ``--model`` the same argument -- and the same value either way."""
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    for name, sub in commands.items():
        if name in WITHOUT_MODEL:
            continue
        first = [a for a in sub._actions if not a.option_strings and a.dest == "model"]
        flag = [a for a in sub._actions if "--model" in a.option_strings]
        assert first and flag, f"{name}: the model is not both its first argument and --model"
        assert first[0].nargs == "?", f"{name}: the first argument is required, so --model is not"
    parsed = {
        how: build_parser().parse_args(["plan", *how.split(), "--job", "eval"]).model
        for how in ("tiny", "--model tiny")
    }
    assert set(parsed.values()) == {"tiny"}, parsed


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["atlas", "one", "--model", "two", "--out", "o"], "the model is named twice"),
        (["train-mask", "--task", "capitalize", "--out", "o"], "a model is required"),
    ],
)
def test_a_model_named_twice_or_not_at_all_is_one_clear_error(argv, message, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(argv)
    assert message in capsys.readouterr().err


def test_deprecated_flags_work_but_stay_out_of_help():
    """Issue 72: an old spelling still sets its option (with a note) and crowds no help."""
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    old = [
        (name, flag)
        for name, sub in commands.items()
        for action in sub._actions
        if getattr(action, "replaced_by", None)
        for flag in action.option_strings
    ]
    assert old, "no deprecated spelling is left to check"
    for name, flag in old:
        assert flag not in commands[name].format_help().split(), f"{name} {flag} in --help"


def _help_problems(parser) -> list[str]:
    """Options whose help hides their default, or describes an ablation the flag refuses."""
    from lens_heads.cli._common import shown_default
    from lens_heads.core.internal import ABLATIONS

    commands = parser._subparsers._group_actions[0].choices
    found = []
    for name, sub in commands.items():
        text = "".join(sub.format_help().split())  # help wraps lines, even inside a list
        for action in sub._actions:
            shown = shown_default(action)
            flag = action.option_strings[0] if action.option_strings else action.dest
            needle = "".join(f"[{shown}]".split())
            if shown is not None and needle not in text and "default:" not in action.help:
                found.append(f"{name} {flag}: default {shown} not shown")
            if action.choices and "ablation" in action.dest and action.help:
                described = [a for a in (*ABLATIONS, "counterfactual") if f"{a} (" in action.help]
                found += [
                    f"{name} {flag}: help describes {a}, not a choice"
                    for a in described
                    if a not in action.choices
                ]
    return found


def test_every_help_shows_its_defaults_and_describes_only_its_choices():
    """Issue 72: ``--help`` states each option's default (train-mask's did not) and an
    ``--ablation {zero,mean}`` describes zero and mean, not resample and counterfactual."""
    assert _help_problems(build_parser()) == []


def test_the_help_check_sees_a_hidden_default_and_a_wrong_choice(monkeypatch):
    import argparse

    from lens_heads.cli import _common

    monkeypatch.setattr(_common.DefaultsFormatter, "_get_help_string", lambda self, a: a.help or "")
    parser = build_parser()
    found = _help_problems(parser)
    assert any("eval --dtype: default float32 not shown" in p for p in found)
    sub = parser._subparsers._group_actions[0].choices["eval"]
    ablation = next(a for a in sub._actions if a.dest == "ablation")
    ablation.help = "what a removed head outputs: zero; resample (a donor's output)"
    assert any("eval --ablation: help describes resample" in p for p in _help_problems(parser))
    assert isinstance(ablation, argparse.Action)
