"""The demo's report (:func:`lens_heads.demo.run_demo`): its results (:class:`DemoReport`), its
headline numbers with where they came from (``numbers.json``), and ``report.md`` and
``report.html`` -- the narrative and the figures first, the long tables collapsed after their
first rows."""

from __future__ import annotations

import html
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lens_heads.core import Task, markdown_table, run_record, write_atomic
from lens_heads.engine import EvaluationResult, MaskTrainingResult
from lens_heads.heads_up import LogitLensResult, SimilarityResult, SweepResult

__all__ = ["DemoReport", "demo_numbers", "write_report"]


@dataclass
class DemoReport:
    """The results of :func:`run_demo` and where they were written."""

    out: Path
    training: MaskTrainingResult
    evaluation: EvaluationResult
    sweep: SweepResult
    similarity: SimilarityResult
    lens: LogitLensResult
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def report(self) -> Path:
        return self.out / "report.md"


def write_report(
    report: DemoReport, task: Task, training_stamp: dict[str, Any], settings: dict[str, Any]
) -> None:
    """Write ``numbers.json`` (:func:`demo_numbers`), ``report.md`` and ``report.html`` into
    ``report.out``."""
    numbers = demo_numbers(report, training_stamp, settings)
    write_atomic(report.out / "numbers.json", json.dumps(numbers, indent=1, default=float))
    write_atomic(report.out / "report.md", _markdown(report, task))
    write_atomic(report.out / "report.html", _html(report, task))


def _figure_links(folder: str, names: list[str], out: Path) -> str:
    links = []
    for name in names:
        png = out / folder / f"{name}.png"
        if png.is_file():
            links.append(f"![{name}]({folder}/{name}.png)")
        links.append(f"[{name} (interactive)]({folder}/{name}.html)")
    return "  \n".join(links)


def _narrative(report: DemoReport, task: Task) -> dict[str, str]:
    """The report's sentences (markdown ``**bold**``), shared by report.md and report.html so
    both say the same -- one training time, the time the training stage took."""
    training, sweep = report.training, report.sweep
    summary = training.summary()
    n_layers, n_heads = (int(n) for n in training.W.shape)
    stay = sweep.switch_step(3)
    seconds = report.seconds.get("training", summary["seconds"])
    return {
        "intro": f"The model has {n_layers} layers x {n_heads} query heads. A 0/1 mask over the "
        f"heads was trained on the **instruction-free** {task.name} examples (Heads up!, §3.2): "
        f"{summary['steps']} steps of batch {training.config.batch_size}, lr "
        f"{training.config.lr}, {training.config.precision}, {seconds:.0f} s. It keeps "
        f"**{summary['heads_kept']} of {summary['heads_total']} heads**.",
        "evaluation": "Held-out examples only; *w/ random M* keeps as many heads as M, at random "
        "(seeds 0, 1). The answer CE is what the paper's tables call PPL.",
        "sweep": f"Prompt {sweep.prompt!r}, target {sweep.target!r}; heads removed in ascending "
        f"trained weight, every {sweep.metadata['every']} heads. The target's rank goes from "
        f"{sweep.target_ranks[0]} (full model) to {min(sweep.target_ranks)}; it is "
        + (
            f"top-1 for three evaluated steps in a row from **{stay} heads removed** on"
            if stay is not None
            else "**never** top-1 for three evaluated steps in a row"
        )
        + f", and reaches rank {sweep.target_ranks[-1]} once every head is gone.",
        "similarity": f"Mean cosine similarity over layers {n_layers // 2}-{n_layers - 1} at the "
        "last position:",
        "lens": "Top-1 token (probability) after each layer, final norm applied:",
        "time": " · ".join(f"{name}: {value:.0f} s" for name, value in report.seconds.items())
        + " (the time each stage took when it was computed)",
    }


def demo_numbers(
    report: DemoReport, training_stamp: dict[str, Any], settings: dict[str, Any]
) -> dict[str, Any]:
    """The demo's headline numbers with where they came from: the command and settings, the
    code version and machine that trained the mask (its stage marker), the precision, the
    settings table, how the outputs ended, the sweep's switch step, the similarity means and the
    seeds, date and data of the run (:func:`~lens_heads.core._provenance.run_record`).
    ``numbers.json`` holds them; stored copies under ``results/demo/`` feed the README."""
    evaluation = report.evaluation
    records = evaluation.records
    ended = (records["ended_by"] == "<|im_end|>").groupby(records["setting"]).mean()
    flags = [f"--{key.replace('_', '-')} {value}" for key, value in settings.items()]
    flags = [flag for flag in flags if flag.split()[0] in ("--precision",)]
    return {
        "format": "lens_heads.demo_numbers/1",
        "command": " ".join(["lens-heads demo --out DIR", *flags]),
        "settings": settings,
        "code": training_stamp.get("code"),
        "machine": training_stamp.get("machine"),
        "precision": report.training.config.precision,
        "training": report.training.summary(),
        "n_eval": int(evaluation.config["n_eval"]),
        "evaluation": {
            label: {key: None if math.isnan(v) else float(v) for key, v in row.items()}
            for label, row in evaluation.to_frame().iterrows()
        },
        "ended_at_end_of_turn": {setting: float(value) for setting, value in ended.items()},
        "sweep": {
            "prompt": report.sweep.prompt,
            "target": report.sweep.target,
            "switch_step": report.sweep.switch_step(3),
        },
        "similarity_later_layers": {
            str(name): float(value) for name, value in _similarity_means(report).iloc[:, 0].items()
        },
        "seconds": dict(report.seconds),
        **run_record(settings),
    }


def _similarity_means(report: DemoReport) -> Any:
    n_layers = int(report.training.W.shape[0])
    return report.similarity.summary(range(n_layers // 2, n_layers))


def _markdown(report: DemoReport, task: Task) -> str:
    text = _narrative(report, task)
    lines = [
        f"# lens_heads demo: {task.name} on {report.training.model}",
        "",
        text["intro"],
        "",
        "## Does the mask make the model do the task without being told? (Tables 1, 2)",
        "",
        report.evaluation.to_markdown(),
        text["evaluation"],
        "",
        _figure_links("eval", ["figure"], report.out),
        "",
        "## Mask weights during training (Figure 3) and per head (Figure 7)",
        "",
        _figure_links("training", ["trajectories", "heatmap", "loss"], report.out),
        "",
        "## Removing heads one by one (Figures 2 and 5)",
        "",
        text["sweep"],
        "",
        _figure_links("sweep", ["ranks", "similarity"], report.out),
        "",
        "## Hidden-state similarity to the instructed run (Figure 4)",
        "",
        text["similarity"],
        "",
        markdown_table(_similarity_means(report), floatfmt=".4f"),
        "",
        _figure_links("similarity", ["figure"], report.out),
        "",
        "## Logit lens (Table 41)",
        "",
        text["lens"],
        "",
        report.lens.to_markdown(),
        "",
        _figure_links("logit_lens", ["figure"], report.out),
        "",
        "## Removal sweep outputs (Figure 2, right)",
        "",
        _collapsed_markdown(report.sweep.outputs_markdown(), "the continuations"),
        "## Time",
        "",
        text["time"],
        "",
        "Each folder holds its tables (CSV, markdown) and a file to reload the result with "
        "`lens_heads` (e.g. `SweepResult.load('sweep')`).",
        "",
    ]
    return "\n".join(lines)


#: the page's content width (px); wider figures are scaled to it
PAGE_WIDTH = 1040
#: rows of a long table shown before the rest is collapsed
SHOWN_ROWS = 8


def _collapsed_markdown(text: str, what: str) -> str:
    """A markdown table (and any text before it) with its first :data:`SHOWN_ROWS` rows shown
    and the whole table in a closed ``<details>`` block (rendered by GitHub and most viewers)."""
    lines = text.strip().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("|")), len(lines))
    table = lines[start:]
    if len(table) <= SHOWN_ROWS + 2:
        return text
    before = "\n".join(lines[:start])
    shown = "\n".join(table[: SHOWN_ROWS + 2])
    whole = "\n".join(table)
    return (
        f"{before}\n{shown}\n\n<details><summary>All {len(table) - 2} rows of {what}"
        f"</summary>\n\n{whole}\n\n</details>\n"
    )


def _inline(text: str) -> str:
    """Escaped text with markdown ``**bold**`` and ``*italics*`` as HTML."""
    text = html.escape(text)
    text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
    return re.sub(r"\*(.+?)\*", r"<i>\1</i>", text)


def _table(frame: Any, *, index: bool = True) -> str:
    """A small table: the index as the first column (no stray header row for its name)."""
    frame = frame.reset_index() if index else frame
    return frame.to_html(index=False, border=0, classes="table", na_rep="")


def _collapsed_table(frame: Any, what: str) -> str:
    """The first :data:`SHOWN_ROWS` rows; the whole table inside a closed ``<details>``."""
    if len(frame) <= SHOWN_ROWS:
        return _table(frame, index=False)
    return (
        _table(frame.head(SHOWN_ROWS), index=False)
        + f"<details><summary>All {len(frame)} rows of {html.escape(what)}</summary>"
        + _table(frame, index=False)
        + "</details>"
    )


def _settings_table(evaluation: EvaluationResult) -> Any:
    """The settings table as the markdown shows it: ``mean ± std`` where several seeds ran,
    no std columns of single runs."""
    import pandas as pd

    frame = evaluation.to_frame()
    metrics = [c for c in frame.columns if c not in ("heads", "seeds") and not c.endswith(" std")]
    rows = []
    for label, row in frame.iterrows():
        cells = {"setting": label, "heads": int(row["heads"])}
        for metric in metrics:
            std = row.get(f"{metric} std", math.nan)
            value = f"{row[metric]:.3f}"
            cells[metric] = value if pd.isna(std) else f"{value} ± {std:.3f}"
        rows.append(cells)
    return pd.DataFrame(rows)


def _fit(figure: Any) -> Any:
    """The figure scaled down to the page width (its height kept), if it is wider."""
    width = figure.layout.width
    if width is not None and width > PAGE_WIDTH:
        figure.update_layout(width=PAGE_WIDTH)
    return figure


def _html(report: DemoReport, task: Task) -> str:
    """One self-contained page (plotly.js inline once, opens offline): the narrative and the
    figures first, then the long tables, collapsed after their first rows."""
    text = _narrative(report, task)
    first = [True]

    def figure(title: str, plot: Any) -> str:
        include = first[0]
        first[0] = False
        return f"<h3>{html.escape(title)}</h3>" + _fit(plot).to_html(
            full_html=False, include_plotlyjs=include, config={"responsive": True}
        )

    sweep, lens = report.sweep, report.lens
    outputs = sweep.outputs_table().rename(
        columns={"n_removed": "heads removed", "removed_head": "last removed"}
    )
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>lens_heads demo: {html.escape(task.name)}</title>",
        f"<style>body{{font-family:sans-serif;max-width:{PAGE_WIDTH + 40}px;margin:auto;"
        "padding:0 20px}table{border-collapse:collapse;margin:8px 0}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}"
        "details{margin:8px 0}summary{cursor:pointer;color:#1f4e9c}</style>",
        "</head><body>",
        f"<h1>lens_heads demo: {html.escape(f'{task.name} on {report.training.model}')}</h1>",
        f"<p>{_inline(text['intro'])}</p>",
        "<h2>Does the mask make the model do the task without being told? (Tables 1, 2)</h2>",
        _table(_settings_table(report.evaluation), index=False),
        f"<p>{_inline(text['evaluation'])}</p>",
        figure("Each metric per setting", report.evaluation.plot()),
        "<h2>Removing heads one by one (Figures 2 and 5)</h2>",
        f"<p>{_inline(text['sweep'])}</p>",
        figure("Token ranks while removing heads (Figure 2)", sweep.plot_ranks()),
        figure("Similarity along the removal (Figure 5)", sweep.plot_similarity()),
        "<h2>Hidden-state similarity to the instructed run (Figure 4)</h2>",
        f"<p>{_inline(text['similarity'])}</p>",
        _table(_similarity_means(report).map(lambda v: f"{v:.4f}")),
        figure("Similarity to the instructed run (Figure 4)", report.similarity.plot()),
        "<h2>Mask weights during training (Figure 3) and per head (Figure 7)</h2>",
        figure("Mask weights during training (Figure 3)", report.training.plot_trajectories()),
        figure("sigmoid(W) per head (Figure 7)", report.training.plot_heatmap()),
        "<h2>Logit lens (Table 41)</h2>",
        figure("Target probability and top-1 token per layer", lens.plot()),
        f"<p>{_inline(text['lens'])}</p>",
        _collapsed_table(lens.top1_table().reset_index(), "the logit-lens table"),
        "<h2>Removal sweep outputs (Figure 2, right)</h2>",
        _collapsed_table(outputs, "the continuations"),
        "<h2>Time</h2>",
        f"<p>{_inline(text['time'])}</p>",
        "</body></html>",
    ]
    return "\n".join(parts)
