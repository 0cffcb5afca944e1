"""Every number-bearing block of the README and the docs equals what its stored result gives
(``scripts/update_docs.py --check``), and the check catches a number typed by hand and a cited
result that is missing."""

from __future__ import annotations

import importlib.util
import json
import re
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
    assert used == set(docs.BLOCKS), "a block nobody cites, or an unknown one"


@pytest.fixture
def copy(tmp_path):
    """The README, the docs and the results in a temporary folder."""
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copytree(ROOT / "results", tmp_path / "results")
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
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
    "shown, not tested",
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
        try:
            verdict = (
                row.verdict(lambda p: docs.load(p, results))
                if callable(row.verdict)
                else row.verdict
            )
        except docs.NotMeasured as missing:  # the cell the page shows for it
            verdict = missing.cell()
        assert verdict.startswith(VERDICTS), f"{where}: verdict outside the rule: {verdict}"
    heads_up = [where for where, _ in docs.heads_up.HEADS_UP]
    assert any("Figure 8" in w for w in heads_up) and any("Table 7" in w for w in heads_up)


def test_no_hand_typed_table_of_results(docs):
    assert docs.hand_typed_tables(ROOT) == [], "store the table under results/ and generate it"


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


# -- numbers in prose and notebooks (issue 33) ------------------------------------------------
def test_no_number_is_typed_in_prose_or_notebook_markdown(docs):
    assert docs.typed_in_prose(ROOT) == [], "python scripts/update_docs.py --check lists them"


def test_a_number_changed_by_hand_in_prose_fails(docs, copy):
    """A value snippet's number edited by hand is stale; a number added to a sentence, to a
    notebook's markdown or an output left in a notebook is reported."""
    cited = [
        (page, snippet)
        for page in docs.documents(copy)
        if (snippet := docs.prose_numbers.VALUE.search(page.read_text()))
    ]
    assert cited, "the docs cite stored numbers in sentences"
    page, snippet = cited[0]
    where = page.relative_to(copy).as_posix()
    page.write_text(page.read_text().replace(snippet[0], snippet[1] + "0.123" + snippet[4], 1))
    stale = docs.update(copy, check=True)
    assert stale == [f"{where}: value {snippet['spec']}"]
    assert docs.update(copy) == stale and docs.update(copy, check=True) == []

    page = copy / "docs" / "reproduction.md"
    page.write_text(page.read_text() + "\nThe mask keeps 0.875 of the accuracy.\n")
    assert docs.typed_in_prose(copy) == [
        f"docs/reproduction.md:{len(page.read_text().splitlines())}: '0.875' typed in prose: "
        "The mask keeps 0.875 of the accuracy."
    ]
    notebook = copy / "notebooks" / "figure7_mask_weights.ipynb"
    cells = json.loads(notebook.read_text())
    markdown = next(c for c in cells["cells"] if c["cell_type"] == "markdown")
    markdown["source"] = ["It keeps 11 of 18 tasks."]
    code = next(c for c in cells["cells"] if c["cell_type"] == "code")
    code["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["0.5"]}]
    notebook.write_text(json.dumps(cells))
    found = docs.typed_in_prose(copy)[1:]
    assert found == [
        "notebooks/figure7_mask_weights.ipynb (markdown): '11 of 18' typed: It keeps 11 of 18 "
        "tasks.",
        "notebooks/figure7_mask_weights.ipynb: 1 stored outputs (CI executes it; clear them)",
    ]


def test_settings_versions_and_marked_paper_numbers_are_not_measurements(docs):
    typed = docs.prose_numbers.typed_numbers
    text = (
        "Train with `--lr 0.1` on Llama-3.1-8B under `transformers 5.24`; the paper keeps "
        "<!-- paper Heads up! Table 3 -->4 of 6<!-- /paper --> (see [x](a/0.5.md)).\n"
        "```\nlr = 0.2\n```\n"
    )
    assert list(typed(text)) == []
    assert [n for _, n, _ in typed("about 3-4x slower, 5.8 s, 40 %, 1,320 of 1,024 heads.")] == [
        "4x",
        "5.8 s",
        "40 %",
        "1,320 of 1,024",
    ]
    with pytest.raises(docs.prose_numbers.SnippetError, match="say where in the paper"):
        list(typed("<!-- paper  -->8 %<!-- /paper -->"))
    # issue 47: durations in words and scientific notation are measurements too
    found = typed("about 8 minutes per task, 1 hour in all, within 1e-5 (`1e-5` is code).")
    assert [n for _, n, _ in found] == ["8 minutes", "1 hour", "1e-5"]


def test_back_ticks_comments_and_row_references_are_read_too(docs, copy):
    """Issue 47: a measured-looking number in back-ticks, a number in a notebook's code comment
    and a reference to a reproduction row that is not there are reported; a setting in
    back-ticks and a row that exists are not."""
    typed = docs.prose_numbers.typed_numbers
    found = typed("The CE falls to `0.878` (`72.4 %`, `1.99x`) at `--lr 0.1`, threshold `0.1`.")
    assert [n for _, n, _ in found] == ["0.878", "72.4 %", "1.99x"]

    page = copy / "docs" / "training.md"
    page.write_text(
        page.read_text() + "\nSee the Figure 5 row, the Figure 99 row and row 10 of the page.\n"
    )
    notebook = copy / "notebooks" / "figure7_mask_weights.ipynb"
    cells = json.loads(notebook.read_text())
    code = next(c for c in cells["cells"] if c["cell_type"] == "code")
    code["source"] = ["x = 1  # takes 8 minutes per task; `0.5` is a setting\n"]
    notebook.write_text(json.dumps(cells))
    line = len(page.read_text().splitlines())
    context = "See the Figure 5 row, the Figure 99 row and row 10 of the page."
    assert docs.typed_in_prose(copy) == [
        f"docs/training.md:{line}: 'the Figure 99 row' names no row of docs/reproduction.md: "
        + context,
        f"docs/training.md:{line}: 'row 10' names no row of docs/reproduction.md: " + context,
        "notebooks/figure7_mask_weights.ipynb (comments): '8 minutes' typed: takes 8 minutes "
        "per task;       is a setting",
    ]


def test_a_value_snippet_reads_its_result(docs):
    numbers = {"a": {"b c": [0.5, 0.25]}}
    value_of = docs.prose_numbers.value_of
    assert value_of('x a "b c" 1 :.1%', lambda path: numbers) == "25.0%"
    assert value_of("x a", lambda path: numbers) == "{'b c': [0.5, 0.25]}"
    with pytest.raises(docs.prose_numbers.SnippetError, match="has no 'd'"):
        value_of("x a d", lambda path: numbers)


def _transcribe(copy, path="figure7/smollm2-135m-instruct"):
    file = copy / "results" / path / "numbers.json"
    numbers = json.loads(file.read_text())
    numbers["source"] = "typed by hand"
    file.write_text(json.dumps(numbers))


def test_a_doc_citing_a_transcription_fails(docs, copy):
    """A transcribed record (``source``, no run behind it) cannot be cited by a block or a
    snippet; a row of the reproduction page says it is not yet measured instead."""
    page = copy / "docs" / "command-line.md"
    page.write_text(
        page.read_text()
        + '\nKept: <!-- value figure7/smollm2-135m-instruct "heads kept" -->1<!-- /value -->.\n'
    )
    docs.update(copy)
    _transcribe(copy)
    with pytest.raises(docs.NotMeasured, match="figure7/smollm2-135m-instruct is a transcription"):
        docs.update(copy, check=True)
    load = lambda path: docs.load(path, copy / "results")  # noqa: E731
    rows = docs.heads_up.heads_up_table(load).splitlines()
    figure7 = next(line for line in rows if line.startswith("| Figure 7 |"))
    assert "results/figure7" not in figure7
    assert figure7.count("not yet measured here (`python -m analyses.figure7_mask_weights") == 2


def test_a_planned_result_not_yet_run_is_not_yet_measured_with_its_command(docs, copy):
    """A result of the re-run plan that has no run yet reads as "not yet measured" (with the
    plan's command); one outside the plan is missing (test_a_missing_result_is_caught)."""
    from rerun_results import PLAN

    entry = next(entry for entry in PLAN if entry.pending)
    shutil.rmtree(copy / "results" / entry.result, ignore_errors=True)
    with pytest.raises(docs.NotMeasured, match="has not been run yet") as caught:
        docs.load(entry.result, copy / "results")
    assert caught.value.command == entry.command
    with pytest.raises(docs.ResultMissing):
        docs.load("figure7/not-in-the-plan", copy / "results")


def test_only_a_results_whole_name_picks_that_entry_alone(docs):
    """``rerun_results.py --only NAME``: a result's whole name is that entry, not every entry
    whose name starts with it (``head_finders/gemma-3-270m`` is not its ``-difference`` run);
    any other part of a name still picks every entry containing it."""
    from rerun_results import PLAN, _chosen

    names = [entry.result for entry in PLAN]
    assert [n for n in names if _chosen("head_finders/gemma-3-270m", n)] == [
        "head_finders/gemma-3-270m"
    ]
    assert "head_finders/gemma-3-270m-difference" in names
    picked = [n for n in names if _chosen("gemma-3-270m-antonym", n)]
    assert picked == [
        "head_finders/gemma-3-270m-antonym",
        "head_finders/gemma-3-270m-antonym-difference",
        "head_finders/gemma-3-270m-antonym-calibrated",
        "head_finders/gemma-3-270m-antonym-separate-cut",
        "head_finders/gemma-3-270m-antonym-exact",
        "head_finders/gemma-3-270m-antonym-more-pairs",
        "head_finders/gemma-3-270m-antonym-selected",
        "head_finders/protocol-1/gemma-3-270m-antonym",
    ]


def test_the_gpu_block_counts_what_the_stored_gpu_check_holds(docs, tmp_path):
    """The GPU block reads the stored check: a cell planted as failed, or a failed device test,
    shows in its counts; without a stored check it says how to run one."""
    from reproduction import devices

    assert "not yet measured" in devices.gpu_check(tmp_path).lower()
    results = ROOT / "results"
    shutil.copytree(results / "benchmarks" / "gpu", tmp_path / "benchmarks" / "gpu")
    shutil.copytree(results / "compatibility" / "cuda", tmp_path / "compatibility" / "cuda")
    [matrix] = (tmp_path / "compatibility" / "cuda").glob("*/numbers.json")
    run = json.loads(matrix.read_text())
    cells = devices.matrix_summary(run)["cells"]
    assert f"{cells} of {cells} cells pass" in devices.gpu_check(tmp_path)
    run["rows"][0]["results"]["head"]["status"] = "fail"
    matrix.write_text(json.dumps(run))
    report = tmp_path / "benchmarks" / "gpu" / "tests.xml"
    report.write_text(report.read_text().replace('failures="0"', 'failures="1"', 1))
    block = devices.gpu_check(tmp_path)
    assert f"{cells - 1} of {cells} cells pass" in block
    passed, run_count = map(int, re.search(r"(\d+) of (\d+) passed", block).groups())
    assert passed == run_count - 1


def test_the_docs_check_needs_neither_torch_nor_the_package():
    """``scripts/update_docs.py --check`` runs with the docs' own light dependencies (issue 47):
    its Holm correction is read from its file, not imported through ``lens_heads``."""
    import subprocess
    import sys

    code = (
        "import sys; sys.path.insert(0, 'scripts'); import update_docs; "
        "code = update_docs.main(['--check']); "
        "print(code, 'torch' in sys.modules, 'lens_heads' in sys.modules)"
    )
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert done.stdout.split()[-3:] == ["0", "False", "False"], done.stdout + done.stderr


def test_a_permutation_p_at_its_floor_is_a_bound_and_ties_are_not_one_head(docs):
    """Issue 47: a Holm p whose permutation p could not go lower reads "≤"; the top successor
    score names every head tied at it, or says the ties were not stored."""
    at_floor = {"p": 1 / 18201, "permutations": 18200, "p (Holm)": 0.005}
    assert docs._holm_cell(at_floor) == "≤ 0.005"
    assert docs._holm_cell({**at_floor, "p": 3 / 18201, "p (Holm)": 0.015}) == "0.015"
    old = {"best head": "L14H1"}
    assert docs._top_heads(old) == "first at it: L14H1; ties were not stored"
    assert docs._top_heads({**old, "heads at the top score": ["L14H1", "L3H2"]}) == "L14H1, L3H2"
    tied = {**old, "heads at the top score": [f"L{i}H0" for i in range(9)]}
    assert docs._top_heads(tied) == "9 heads tie at it"


# -- issue 70, item 9: the loopholes of the prose check, each with a planted statement ----------
def _typed(docs, text: str) -> list[str]:
    return [number for _, number, _ in docs.prose_numbers.typed_numbers(text)]


def test_number_words_are_read(docs):
    """ "Eleven families" (the README once said so of a matrix of twelve rows) and "eleven of
    twelve" are counts in words; "one trainer" and "two passes" describe the design."""
    planted = "Eleven families of the papers' models are checked; eleven of twelve pass."
    assert _typed(docs, planted) == ["Eleven families", "eleven of twelve"]
    assert _typed(docs, "One trainer, two passes, three lines of research, one of the runs.") == []


def test_plain_counts_and_out_of_are_read(docs):
    """A count of what runs count ("40 held-out words", "100-400 steps"), "3 out of 5", a range
    of model sizes ("7–14B"), also across a line break; references are not counts."""
    planted = (
        "Figure 4 over the 40 held-out words; our schedules are 100-400 steps; it keeps 3 out of "
        "5; the papers ran 7–14B models; TRater on the 200\ntexts."
    )
    assert _typed(docs, planted) == [
        "40 held-out words",
        "100-400 steps",
        "3 out of 5",
        "7–14B",
        "200 texts",
    ]
    references = "Table 3 and Figure 4 rows, layer 14 heads, Gemma 2 models, 30 layers × 9 heads."
    assert _typed(docs, references) == []


def test_short_back_ticked_numbers_are_read(docs):
    """A number alone in back-ticks with the digits of a measurement (`31 %`, `0.88`) is read as
    typed; a round one (`0.1`, `1 %`, `3x`) stays a setting, as does code that names itself."""
    planted = "the paper's share of the heads (`31 %`), a Jaccard of `0.88`"
    assert _typed(docs, planted) == ["31 %", "0.88"]
    settings = "threshold `0.1` at the `1 %` level, `3x` chance, `quantile=0.96`, `--lr 0.25`"
    assert _typed(docs, settings) == []


def test_a_row_reference_in_a_table_is_read(docs, copy):
    """A table cell that points at a row of docs/reproduction.md by number (rows move) or at a
    row that is not there is reported like one in a sentence."""
    page = copy / "docs" / "training.md"
    planted = "\n| setting | note |\n|---|---|\n| init | [the page](reproduction.md), row 10 |\n"
    page.write_text(page.read_text() + planted)
    line = len(page.read_text().splitlines())
    found = [report.split(": |")[0] for report in docs.typed_in_prose(copy)]
    assert found == [f"docs/training.md:{line}: 'row 10' names no row of docs/reproduction.md"]


def test_results_readme_is_read(docs, copy):
    """results/README.md is one of the documents the check reads."""
    readme = copy / "results" / "README.md"
    readme.write_text(readme.read_text() + "\nThe stored runs took 8 minutes on 2 CPU cores.\n")
    line = len(readme.read_text().splitlines())
    context = "The stored runs took 8 minutes on 2 CPU cores."
    assert docs.typed_in_prose(copy) == [
        f"results/README.md:{line}: '8 minutes' typed in prose: {context}",
        f"results/README.md:{line}: '2 CPU cores' typed in prose: {context}",
    ]


def test_a_number_typed_in_a_reproduction_string_is_read(docs, copy):
    """The strings of scripts/reproduction/ become the cells of docs/reproduction.md: a number
    typed in one ("the paper's 0.8 mean") is reported at its line; a computed one, a key, the
    row's claim and paper cells and a marked paper quote are not."""
    shutil.copytree(ROOT / "scripts" / "reproduction", copy / "scripts" / "reproduction")
    module = copy / "scripts" / "reproduction" / "planted.py"
    module.write_text(
        '"""A docstring with 0.5 in it."""\n'
        "from reproduction import Row, paper\n\n\n"
        "def verdict(load, mean):\n"
        '    n = load("x")["fraction 0.02"]\n'
        '    return f"partly: {mean:.2f}, below the paper\'s 0.8 mean on 12 of 12 families"\n\n\n'
        'ROWS = [("A.4", Row("claim above 0.1", "46 % / 36 %", verdict, "no: 40 words", "x"))]\n'
        "QUOTED = f\"(the paper: {paper('Heads up! Table 6', '6 of 6')})\"\n"
    )
    found = [line for line in docs.typed_in_prose(copy) if "planted.py" in line]
    context = "partly: {}, below the paper's 0.8 mean on 12 of 12 families"
    assert found == [
        f"scripts/reproduction/planted.py:7: '0.8' typed in a string: {context}",
        f"scripts/reproduction/planted.py:7: '12 of 12' typed in a string: {context}",
        "scripts/reproduction/planted.py:10: '40 words' typed in a string: A.4 · no: 40 words · x",
    ]


# -- issue 70, item 11: each notebook asserts its claim or says it shows without judging -------
#: the notebooks that illustrate a claim they cannot settle (one word, one mask, one run)
WITHOUT_JUDGING = (
    "figure3_mask_trajectories",
    "figure4_layer_similarity",
    "figure5_similarity_along_the_sweep",
    "figure7_mask_weights",
    "figure8_9_removal_orders",
)


def test_every_notebook_asserts_its_claim_or_says_it_shows_without_judging(docs):
    stance = docs.prose_numbers.notebook_stance
    assert docs.prose_numbers.notebooks_without_a_stance(ROOT) == []
    tours = set(docs.prose_numbers.WITHOUT_CLAIM)  # the quick start: no claim to judge
    assert tours == {"quick_start"}
    found = {
        path.stem: stance(path)
        for path in sorted((ROOT / "notebooks").glob("*.ipynb"))
        if path.stem not in tours
    }
    assert {name for name, s in found.items() if s == "shows"} == set(WITHOUT_JUDGING)
    assert {name for name, s in found.items() if s == "asserts"} == set(found) - set(
        WITHOUT_JUDGING
    )


def _cells(notebook: Path) -> dict:
    return json.loads(notebook.read_text(encoding="utf-8"))


def test_a_notebook_that_only_checks_its_own_consistency_is_caught(docs, copy):
    """A notebook with neither the claim's assert nor the "shows without judging" cell and
    line is reported by the check (and named by the page's generated sentence); half a marker
    is not enough: a claim comment without an assert, a markdown cell without the printed line."""
    pn = docs.prose_numbers
    notebook = copy / "notebooks" / "figure7_mask_weights.ipynb"
    cells = _cells(notebook)
    kept = [c for c in cells["cells"] if pn.WITHOUT_JUDGING not in "".join(c["source"]).lower()]
    assert len(kept) == len(cells["cells"]) - 2  # the markdown cell and the printed line
    notebook.write_text(json.dumps({**cells, "cells": kept}))
    assert pn.notebook_stance(notebook) is None
    assert pn.notebooks_without_a_stance(copy) == [
        "notebooks/figure7_mask_weights.ipynb: neither asserts its claim (an `assert` in a cell "
        "with a `# the claim: ...` comment) nor says it shows without judging (a markdown cell "
        "and a printed line)"
    ]
    assert docs.update(copy, check=True) == ["docs/reproduction.md: notebook_claims"]
    assert "1 do neither yet: `figure7_mask_weights`." in docs.notebook_claims(copy / "results")

    def stance_of(*sources: tuple[str, str]) -> str | None:
        cell = {"metadata": {}, "outputs": []}
        planted = [{**cell, "cell_type": kind, "source": [text]} for kind, text in sources]
        notebook.write_text(json.dumps({**cells, "cells": kept + planted}))
        return pn.notebook_stance(notebook)

    assert stance_of(("code", "# the claim: it works\nx = 1")) is None  # no assert
    assert stance_of(("code", "assert 1 + 1 == 2  # consistency")) is None  # no claim
    assert stance_of(("code", "# the claim: it works\nassert 1 + 1 == 2")) == "asserts"
    assert stance_of(("markdown", "It shows without judging.")) is None  # no printed line
    assert stance_of(("code", 'print("shows without judging")')) is None  # no markdown cell
    said = ("markdown", "**Shows without judging.**")
    assert stance_of(said, ("code", 'print("shows without judging: one mask")')) == "shows"


def test_the_readme_sentence_on_alignment_heads_leads_with_the_verdict_at_the_papers_share(docs):
    """Issue 70, item 10: the README's sentence gives the ablation's verdict at the paper's share
    of heads (the word the page computes) before the larger ablation."""
    sentence = docs.readme_alignment(ROOT / "results")
    numbers = docs.load("alignment_heads/gemma-3-270m", ROOT / "results")
    verdict = docs.alignment.ablation_ours_verdict(lambda path: docs.load(path, ROOT / "results"))
    word = verdict.split(" (", 1)[0]
    at_share = docs.alignment.paper_k(numbers)
    largest = max(row["heads ablated"] for row in numbers["ablation"])
    assert at_share < largest
    assert f"**{word}**: removing the top {at_share} " in sentence
    assert sentence.index(f"**{word}**") < sentence.index(f"removing the top {largest} ")
