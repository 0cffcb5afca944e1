"""The importance, language-heads, language-perplexity and transfer commands end to end on the
tiny model (their arguments are checked before it loads: tests/unit/cli/test_bad_input.py)."""

from __future__ import annotations

import pytest
import torch

import lens_heads.cli._common as common
from lens_heads.cli import main
from lens_heads.lahis._importance import HeadImportance
from lens_heads.lahis._language_experiments import PerplexityExperiment, TransferResult
from lens_heads.lahis._languages import LanguageHeads


@pytest.fixture()
def model_arg(tiny, tiny_dir, monkeypatch):
    monkeypatch.setattr(common, "load_model", lambda args: tiny)
    return ["--model", str(tiny_dir)]


def test_the_language_commands_run_end_to_end(model_arg, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("le chat dort\n\nun chien court vite\n")
    assert (
        main(["importance", *model_arg, "--texts", str(texts), "--out", str(tmp_path / "i")]) == 0
    )
    assert HeadImportance.load(tmp_path / "i").n_docs == 2
    heads_dir = tmp_path / "heads"
    argv = ["language-heads", *model_arg, "--n-docs", "2", "--quantile", "0.5"]
    assert main([*argv, "--min-languages", "2", "--out", str(heads_dir)]) == 0
    assert LanguageHeads.load(heads_dir).languages == ["en", "fr", "es", "de", "zh"]
    argv = ["language-perplexity", *model_arg, "--heads", str(heads_dir), "--languages", "en,fr"]
    assert main([*argv, "--n-docs", "2", "--skip", "2", "--out", str(tmp_path / "p")]) == 0
    assert PerplexityExperiment.load(tmp_path / "p").table["masked"].nunique() <= 2
    # French with a head of its own (L1H1) to strengthen, English's (L0H0) removed
    scores = torch.zeros(2, 2, 4)
    scores[0, 0, 0], scores[1, 1, 1] = 5.0, 5.0
    LanguageHeads(["en", "fr"], scores, 0.9, 2, "lahis", "tiny").save(tmp_path / "own")
    argv = ["transfer", *model_arg, "--heads", str(tmp_path / "own"), "--n-eval", "2"]
    argv += ["--factors", "3", "--max-new-tokens", "2", "--out", str(tmp_path / "t")]
    assert main(argv) == 0, capsys.readouterr().err
    assert TransferResult.load(tmp_path / "t").to_frame()["setting"].tolist() == ["original", "x3"]
