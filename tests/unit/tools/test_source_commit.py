"""Which commit a stored result's code came from (issue 47: the GPU compatibility record ran on
code that no commit has, and nothing said so): ``scripts/source_commit.py`` hashes each commit's
files as ``source_hash`` hashes a checkout, and the GPU page says what it found."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))

import source_commit  # noqa: E402
from reproduction.devices import source_words  # noqa: E402

from lens_heads.core._provenance import source_hash  # noqa: E402


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.email=t@t", "-c", "user.name=t", *args],
        cwd=repo, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip


def _state(repo: Path) -> str:
    """The checkout's source hash, computed from the files on disk (the library's own path;
    it caches one answer per process, so the cache is cleared for each state)."""
    source_hash.cache_clear()
    return source_hash(repo / "lens_heads", repo / "analyses")


def test_each_source_is_traced_to_the_commit_that_has_it_or_to_none(tmp_path):
    repo = tmp_path / "repo"
    (repo / "lens_heads" / "core").mkdir(parents=True)
    (repo / "analyses").mkdir()
    _git(repo, "init", "-q")
    (repo / "lens_heads" / "__init__.py").write_text("x = 1\n")
    (repo / "lens_heads" / "core" / "a.py").write_text("a = 1\n")
    (repo / "lens_heads" / "core_b.py").write_text("b = 1\n")  # sorts beside core/ by path
    (repo / "analyses" / "run.py").write_text("r = 1\n")
    (repo / "README.md").write_text("docs\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "first")
    first, first_source = _git(repo, "rev-parse", "HEAD").strip(), _state(repo)
    (repo / "README.md").write_text("docs only\n")  # a commit that changes no .py file
    _git(repo, "commit", "-qam", "docs")
    (repo / "analyses" / "run.py").write_text("r = 2\n")
    _git(repo, "commit", "-qam", "second")
    second, second_source = _git(repo, "rev-parse", "HEAD").strip(), _state(repo)
    (repo / "lens_heads" / "core" / "a.py").write_text("a = 2\n")  # edited, never committed
    edited = _state(repo)
    assert len({first_source, second_source, edited}) == 3
    found = source_commit.find_commits(repo, [first_source, second_source, edited])
    assert found == {first_source: first, second_source: second, edited: None}
    out = tmp_path / "sources.json"
    assert source_commit.main([first_source, edited, "--repo", str(repo), "--out", str(out)]) == 0
    assert '"commits searched": 3' in out.read_text()
    shallow = tmp_path / "shallow"
    _git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow))
    with pytest.raises(SystemExit, match="shallow clone"):
        source_commit.find_commits(shallow, [first_source])


def test_the_gpu_page_says_which_commit_a_record_ran_on():
    assert source_words("ab12", {"ab12": "9e616c733533"}) == (
        "source ab12, the code of commit 9e616c7"
    )
    assert "which no commit has: it ran on edited, uncommitted code" in source_words(
        "cd34", {"cd34": None}
    )
    assert "not looked up" in source_words("ef56", {})
