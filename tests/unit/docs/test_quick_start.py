"""Issue 72: the README's quick start runs as written, on ``lh.tiny_model()`` in place of the
offline model and with a task file of the documented format in the working folder."""

from __future__ import annotations

import json
import re
from pathlib import Path

README = Path(__file__).resolve().parents[3] / "README.md"
SUFFIXES = ("", "s", "y", "ed", "er", "ing", "ly", "ness", "ful", "less", "ish", "ism", "ist")
STEMS = ("apple", "river", "stone", "cloud", "green", "table", "house", "light", "music", "paper")


def quick_start() -> str:
    """The Python block under the README's ``## Quick start``."""
    found = re.search(r"## Quick start\n\n```python\n(.*?)```", README.read_text(), re.S)
    assert found, "the README opens with a quick start"
    return found.group(1)


def test_the_quick_start_is_short_and_comes_first():
    text = README.read_text()
    assert len(quick_start().strip().splitlines()) <= 10
    assert text.index("## Quick start") < text.index("## Set-up")


def test_the_quick_start_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    words = [stem + suffix for stem in STEMS for suffix in SUFFIXES]
    examples = [{"input": w, "output": w.capitalize()} for w in words]
    (tmp_path / "my_task.json").write_text(
        json.dumps({"instruction": "Capitalize the word.", "examples": examples})
    )
    code = quick_start().replace('lh.load_model("smollm2-135m-instruct")', "lh.tiny_model()")
    code = code.replace(".show()", "")
    scope: dict = {}
    exec(compile(code, "README quick start", "exec"), scope)
    assert scope["sweep"].order and len(scope["result"].mask.values.flatten()) == 8
