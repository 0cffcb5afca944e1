"""Every number-bearing block of the README and the docs equals what its stored result gives
(``scripts/update_docs.py --check``), and the check catches a number typed by hand and a cited
result that is missing."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "update_docs.py"


@pytest.fixture(scope="module")
def docs():
    spec = importlib.util.spec_from_file_location("update_docs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_generated_block_matches_its_stored_result(docs):
    assert docs.update(ROOT, check=True) == [], "run: python scripts/update_docs.py"


def test_every_block_is_used_and_every_document_block_is_known(docs):
    used = {
        m["name"] for path in docs.documents(ROOT) for m in docs._BLOCK.finditer(path.read_text())
    }
    assert used == set(docs.BLOCKS) | set(docs.BLOCKS_OF_RESULT), (
        "a block nobody cites, or an unknown one"
    )


@pytest.fixture
def copy(tmp_path):
    """The README, the docs and the results in a temporary folder."""
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copytree(ROOT / "results", tmp_path / "results")
    return tmp_path


def test_a_number_typed_by_hand_is_caught(docs, copy):
    readme = copy / "README.md"
    text = readme.read_text()
    assert "| w/ M | 218 | 0.500 | 0.475 |" in text
    readme.write_text(
        text.replace("| w/ M | 218 | 0.500 | 0.475 |", "| w/ M | 218 | 0.575 | 0.575 |")
    )
    assert docs.update(copy, check=True) == ["README.md: demo_table"]
    assert docs.update(copy) == ["README.md: demo_table"] and docs.update(copy, check=True) == []


def test_a_missing_result_is_caught(docs, copy):
    shutil.rmtree(copy / "results" / "demo" / "smollm2-135m-instruct-float32")
    with pytest.raises(docs.ResultMissing, match=r"smollm2-135m-instruct-float32/numbers\.json"):
        docs.update(copy, check=True)


# -- docs/reproduction.md ---------------------------------------------------------------------
VERDICTS = (
    "reproduced",
    "partly",
    "not reproduced",
    "**not reproduced**",
    "not measurable here",
    "not covered",
    "not yet measured",
    "not testable",
    "the conclusion **reproduced**",
    "the large drop reproduced",
    "the drop is smaller",
    "no KV-group pattern",
    "KV groups removed",
)


def _rows(docs):
    return docs.heads_up.HEADS_UP + docs.alignment.ALIGNMENT + docs.lahis.LAHIS


def test_a_changed_stored_number_changes_the_reproduction_page(docs, copy):
    import json

    path = copy / "results" / "table7" / "smollm2-135m-instruct" / "numbers.json"
    numbers = json.loads(path.read_text())
    numbers["fruit_v_animal_3"]["rows"]["Original, all heads"] = 0.5
    path.write_text(json.dumps(numbers))
    assert docs.update(copy, check=True) == ["docs/reproduction.md: reproduction_heads_up"]


def test_a_missing_cited_result_fails_the_reproduction_page(docs, copy):
    shutil.rmtree(copy / "results" / "figure8_many_words")
    with pytest.raises(docs.ResultMissing, match="figure8_many_words"):
        docs.update(copy, check=True)


def test_our_numbers_are_never_typed_into_a_row(docs):
    """A row either reads its numbers from stored results or says why it has none."""
    for where, row in _rows(docs):
        if not callable(row.ours):
            assert row.ours.startswith("Not"), f"{where}: ours typed by hand: {row.ours[:60]}"
        if not callable(row.verdict):
            assert not any(ch.isdigit() for ch in row.verdict), f"{where}: number in a verdict"


def test_every_row_has_a_paper_source_and_a_verdict_of_the_rule(docs, tmp_path):
    results = ROOT / "results"
    for where, row in _rows(docs):
        assert where and row.paper, "a row without its table/figure or the paper's numbers"
        verdict = (
            row.verdict(lambda p: docs.load(p, results)) if callable(row.verdict) else row.verdict
        )
        assert verdict.startswith(VERDICTS), f"{where}: verdict outside the rule: {verdict}"
    heads_up = [where for where, _ in docs.heads_up.HEADS_UP]
    assert any("Figure 8" in w for w in heads_up) and any("Table 7" in w for w in heads_up)


def test_no_hand_typed_table_of_results(docs):
    assert docs.hand_typed_tables(ROOT) == [], "store the table under results/ (stored_table)"


def test_a_hand_typed_table_is_caught(docs, copy):
    page = copy / "docs" / "training.md"
    page.write_text(page.read_text() + "\n| run | accuracy |\n|---|---|\n| demo | 0.575 |\n")
    assert docs.hand_typed_tables(copy) == ["docs/training.md: hand-typed table | run | accuracy |"]
    settings = "\n<!-- not a result: settings -->\n| lr | 0.2 |\n|---|---|\n"
    page.write_text(page.read_text().replace("| run | accuracy |", "| run | acc |") + settings)
    assert len(docs.hand_typed_tables(copy)) == 1  # the marked settings table is allowed


def test_the_page_and_the_analyses_test_at_one_level(docs):
    """The verdicts of docs/reproduction.md judge the analyses' p-values at the level the
    analyses use for their own claims."""
    import sys

    from analyses._common import LEVEL

    assert sys.modules["reproduction"].LEVEL == LEVEL


def test_the_results_index_names_the_libraries_of_every_stored_run(docs):
    """Issue 32: where a number depends on the libraries, the docs say which made it."""
    index = docs.results_index(ROOT / "results")
    rows = [line.split(" | ") for line in index.splitlines()[2:]]
    runs = [row for row in rows if row[-1].startswith("stored run")]
    assert runs, "no stored run in the index"
    for row in runs:
        assert "transformers 5." in row[3] and "transformer-lens 4." in row[3], row[0]
    record = {"machine": {"cpu": "X", "native_bf16": False, "threads": 2}}
    assert "transformers" not in docs._machine(record)
    record["machine"]["libraries"] = {"transformers": "5.24.0", "torch": "2.13.0+cpu"}
    assert (
        docs._machine(record)
        == "X (no native bf16, 2 threads; torch 2.13.0+cpu, transformers 5.24.0)"
    )
