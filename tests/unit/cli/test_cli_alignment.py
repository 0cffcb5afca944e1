"""The translation-scores, ablate-heads and trater commands, in process on the tiny model."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from lens_heads.alignment._ablation import AblationResult
from lens_heads.alignment._scores import TranslationScores
from lens_heads.alignment._trater import TRaterResult
from lens_heads.cli import _common as common
from lens_heads.cli import main


@pytest.fixture
def tiny_cli(tiny, tiny_dir, monkeypatch):
    """The ``--model`` of the tests: the tiny checkpoint folder (its shape is read from its
    config before loading), loaded as the in-memory ``tiny``."""
    monkeypatch.setattr(common, "load_model", lambda args: tiny)
    return str(tiny_dir)


def test_translation_scores_command(tiny_cli, tmp_path, capsys):
    out = tmp_path / "ts"
    code = main(
        [
            "translation-scores",
            "--model",
            tiny_cli,
            "--pairs",
            "en-fr,en-de",
            "--n",
            "3",
            "--shots",
            "1",
            "--argmax-over",
            "source",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary["pair"]) == ["en-fr", "en-de"]
    loaded = TranslationScores.load(out / "en-de")
    assert loaded.settings["argmax_over"] == "source" and len(loaded.sources) == 3
    assert (out / "en-fr" / "figure.html").is_file()
    assert (out / "en-fr" / "distribution.html").is_file()
    assert "en-fr" in capsys.readouterr().out


def test_translation_scores_command_with_an_alignment_file(tiny_cli, tmp_path):
    pairs = tmp_path / "pairs.jsonl"
    rows = [{"input": "the cat", "output": "le chat"}, {"input": "a dog", "output": "un chien"}]
    pairs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "a.txt").write_text("0-0 1-1\n0-0 1-1\n")
    out = tmp_path / "ts"
    args = ["translation-scores", "--model", tiny_cli, "--pairs", str(pairs), "--shots", "1"]
    assert main([*args, "--alignments", str(tmp_path / "a.txt"), "--out", str(out)]) == 0
    assert TranslationScores.load(out / "pairs").n_queries == 13  # byte tokens of le chat, un chien
    (tmp_path / "b.txt").write_text("0-0 1-1\n")  # one alignment for two pairs
    assert main([*args, "--alignments", str(tmp_path / "b.txt"), "--out", str(out)]) == 2


def test_ablate_heads_command(tiny_cli, tmp_path, capsys):
    out = tmp_path / "ab"
    code = main(
        [
            "ablate-heads",
            "--model",
            tiny_cli,
            "--task",
            "en-fr",
            "--heads",
            "top:2",
            "--scores-n-eval",
            "3",
            "--n-eval",
            "2",
            "--random-controls",
            "1",
            "--max-new-tokens",
            "4",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    result = AblationResult.load(out)
    assert len(result.heads) == 2 and len(result.controls) == 1
    assert "unmasked" in capsys.readouterr().out
    bad = [
        "ablate-heads",
        "--model",
        tiny_cli,
        "--task",
        "en-fr",
        "--heads",
        "L7H0",
        "--out",
        str(out),
    ]
    assert main(bad) == 2
    assert "out of range" in capsys.readouterr().err


def test_trater_command(tiny_cli, tmp_path):
    texts = tmp_path / "texts.jsonl"
    rows = [
        {"text": "The dog is here. Le chien est ici.", "lang": "fr"},
        {"text": "The dog is here. The cat is there.", "lang": "en"},
        {"text": "Der Hund ist hier.", "lang": "de"},
    ]
    texts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "heads.txt").write_text("L0H1 L1H2\n")
    out = tmp_path / "tr"
    args = [
        "trater",
        "--model",
        tiny_cli,
        "--texts",
        str(texts),
        "--heads",
        str(tmp_path / "heads.txt"),
    ]
    assert main([*args, "--select", "1.0", "--out", str(out)]) == 0
    result = TRaterResult.load(out)
    assert result.heads == ["L0H1", "L1H2"] and result.languages == ["fr", "en", "de"]
    assert len(pd.read_csv(out / "selected.csv")) == 3
    assert len((out / "scores.jsonl").read_text().splitlines()) == 3
