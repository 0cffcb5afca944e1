"""The demo's report.html as a newcomer opens it (issue 17, items 11 and 12): the narrative and
the figures first, long tables collapsed after their first rows, no empty std columns or stray
header rows, every figure inside the page width, one training time; and a real browser renders
it (headless Chromium, when one is installed)."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import torch

import lens_heads as lh
from lens_heads.demo import run_demo
from lens_heads.demo._report import PAGE_WIDTH, SHOWN_ROWS, _collapsed_markdown, _collapsed_table
from lens_heads.heads_up._figures import logit_lens_figure, similarity_figure

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "screenshot_report.sh"
WORDS = [f"w{chr(97 + i)}{chr(97 + j)}" for i in range(6) for j in range(6)]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """A demo on a tiny 8-layer model: enough layers and sweep steps for long tables."""
    import json

    folder = tmp_path_factory.mktemp("report")
    data = folder / "capitalize.json"  # a task file stating its instruction and match rule
    examples = [{"input": w, "output": w.capitalize()} for w in WORDS]
    instruction = "Capitalize the first letter of the given word."
    data.write_text(
        json.dumps({"instruction": instruction, "match": "startswith", "examples": examples})
    )
    model = lh.tiny_model(n_layers=8, n_heads=4, n_kv_heads=2, seed=0)
    run_demo(folder / "demo", model=model, task=str(data), steps=3, n_eval=4, sweep_every=1,
             max_new_tokens=2, progress=False)  # fmt: skip
    return folder / "demo"


def test_narrative_and_figures_come_before_the_long_tables(report):
    page = (report / "report.html").read_text(encoding="utf-8")
    first_figure = page.index("plotly-graph-div")
    outputs = page.index("Removal sweep outputs")
    assert first_figure < outputs
    for sentence in ("of 32 heads</b>", "rank goes from", "Mean cosine similarity"):
        assert page.index(sentence) < outputs, sentence
    assert page.index("<h2>Time</h2>") > outputs  # the page ends with the timings
    # the long tables show SHOWN_ROWS rows, then the whole table inside a closed <details>
    assert page.count("<details>") == 2
    tail = page[outputs:]
    shown = tail[: tail.index("<details>")]
    assert shown.count("<tr>") == SHOWN_ROWS  # body rows (the header row has a style)


def test_tables_have_no_empty_std_columns_or_stray_header_rows(report):
    page = (report / "report.html").read_text(encoding="utf-8")
    for table in re.findall(r"<table.*?</table>", page, flags=re.S):
        head = table[: table.index("</thead>")]
        assert head.count("<tr") == 1, head
        assert " std</th>" not in head
        assert ">NaN<" not in table
    assert " ± " in page  # the random masks' spread, as in report.md


def test_one_training_time_and_figures_within_the_page(report):
    page = (report / "report.html").read_text(encoding="utf-8")
    markdown = (report / "report.md").read_text(encoding="utf-8")
    for text in (page, markdown):
        intro = re.search(r", (\d+) s\. It keeps", text)
        timing = re.search(r"training: (\d+) s", text)
        assert intro and timing and intro.group(1) == timing.group(1)
    widths = [int(w) for w in re.findall(r'"width":(\d+)', page)]
    assert widths and max(widths) <= PAGE_WIDTH


def test_collapsed_table_keeps_short_tables_whole():
    short = pd.DataFrame({"a": range(SHOWN_ROWS)})
    assert "<details>" not in _collapsed_table(short, "x")
    long = pd.DataFrame({"a": range(3 * SHOWN_ROWS)})
    html = _collapsed_table(long, "the rows")
    assert html.count("<details>") == 1 and f"All {3 * SHOWN_ROWS} rows of the rows" in html


def test_figure4_and_logit_lens_labels_fit_their_cells():
    n = 30
    labels = [f"{i}<br>Capitalized<br>apple" for i in range(n)]
    figure = similarity_figure(torch.ones(1, 2, n), comparisons=["a"], hooks=["d", "a"],
                               tick_labels=labels)  # fmt: skip
    axis = figure.layout.xaxis
    assert axis.tickangle == 0
    assert all(len(line) <= 5 for tick in axis.ticktext for line in tick.split("<br>"))
    lens = logit_lens_figure(torch.rand(1, n, 1), [["Capitalized"] * n], settings=["original"],
                             layers=[f"L{i}" for i in range(n)], targets=["A"])  # fmt: skip
    heatmap = lens.data[0]
    assert heatmap.text[0][0] == "Capi…" and heatmap.customdata[0][0] == "Capitalized"


@pytest.mark.skipif(
    not any(shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")),
    reason="no Chromium or Chrome installed (apt-get install chromium)",
)
def test_the_page_renders_in_headless_chromium(report, tmp_path):
    shot = tmp_path / "report.png"
    done = subprocess.run(
        ["bash", str(SCRIPT), str(report / "report.html"), str(shot), "3000"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    header = shot.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", header[16:24])
    assert (width, height) == (1280, 3000)
    assert shot.stat().st_size > 50_000  # rendered figures, not a blank page


def test_report_md_puts_the_long_outputs_table_last_and_collapsed(report):
    markdown = (report / "report.md").read_text(encoding="utf-8")
    outputs = markdown.index("## Removal sweep outputs")
    for section in ("## Removing heads one by one", "## Hidden-state similarity", "## Logit lens"):
        assert markdown.index(section) < outputs, section
    assert markdown.index("## Time") > outputs
    tail = markdown[outputs : markdown.index("## Time")]
    shown = tail[: tail.index("<details>")]
    assert sum(line.startswith("| ") for line in shown.splitlines()) == SHOWN_ROWS + 1
    assert " std |" not in markdown


def test_collapsed_markdown_keeps_short_tables_whole():
    table = "| a |\n|---|\n" + "".join(f"| {i} |\n" for i in range(3 * SHOWN_ROWS))
    assert "<details>" in _collapsed_markdown(table, "x")
    short = "| a |\n|---|\n| 1 |\n"
    assert _collapsed_markdown(short, "x") == short
