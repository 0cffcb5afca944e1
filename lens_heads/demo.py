"""The end-to-end demo behind ``lens-heads demo``: train a head mask, evaluate it, sweep head
removal, compare hidden states and look through the logit lens, then write a report.

Every step is one library call; the demo only chooses small settings (a few minutes on a
2-core CPU) and writes each result folder plus ``report.md`` and ``report.html`` (the figures
inline, opens offline) into the output folder. Re-running it on the same folder resumes the
training from its checkpoint (a finished run is reused).

    lens-heads demo --out demo-report
"""

from __future__ import annotations

import html
import json
import math
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from lens_heads.core.checks import check_int, check_number, own_checks
from lens_heads.core.errors import InputError
from lens_heads.core.fingerprints import Fingerprint, claim_folder
from lens_heads.core.guards import verify_model
from lens_heads.core.models import load_model, model_name
from lens_heads.core.prompts import INSTRUCTION_TEMPLATE, has_chat_template
from lens_heads.core.random_models import refuse_random_weights
from lens_heads.core.settings import configure
from lens_heads.core.storage import Stages, write_atomic
from lens_heads.core.tables import markdown_table
from lens_heads.core.tasks import Task, get_task
from lens_heads.engine import (
    EvaluationResult,
    MaskTrainingResult,
    TrainingConfig,
    evaluate,
    train_or_resume,
)
from lens_heads.engine.training_config import PRECISIONS
from lens_heads.heads_up.lens import LogitLensResult, logit_lens
from lens_heads.heads_up.similarity import SimilarityResult, figure4_similarity
from lens_heads.heads_up.sweep import SweepResult, removal_sweep

__all__ = ["DemoConfig", "DemoReport", "run_demo"]

_ANSWER_ENDS = ("auto", "turn", "eos", "separator", "none")


@own_checks  # __post_init__ checks every field: users and the tests see the same clear errors
@dataclass(frozen=True)
class DemoConfig:
    """What the demo runs: the model and task, the training schedule, the evaluation and sweep."""

    model: str | Any = "smollm2-135m-instruct"
    """The model: an alias, a .gguf file, a checkpoint folder, a hub id or a loaded model."""
    task: str | Task = "capitalize"
    """The task the mask is trained on: a built-in task or a data file (it needs an
    instruction: the demo compares with it)."""
    steps: int = 100
    """Training steps (the short CPU schedule: batch 8)."""
    lr: float = 0.2
    """Peak learning rate."""
    n_eval: int = 40
    """Held-out examples evaluated (never trained on)."""
    sweep_every: int = 2
    """Evaluate every k-th step of the removal sweep."""
    max_new_tokens: int = 10
    """Greedy tokens generated at each step of the sweep."""
    seed: int = 0
    """Seed of the training (init, noise and batches)."""
    answer_end: str = "auto"
    """What closes each training target (see TrainingConfig.answer_end)."""
    precision: str = "auto"
    """Training precision: auto (bf16 autocast where the CPU computes it natively), float32 (fp32)
    or bfloat16 (bf16); the short spellings are stored as the long ones."""
    progress: bool = True
    """Show progress bars."""

    RENAMED: ClassVar[dict[str, str]] = {"generate_tokens": "max_new_tokens"}

    def __post_init__(self) -> None:
        for name, minimum in (("steps", 1), ("n_eval", 1), ("sweep_every", 1)):
            check_int(name, getattr(self, name), minimum=minimum)
        check_int("max_new_tokens", self.max_new_tokens, minimum=0)
        check_int("seed", self.seed)
        if check_number("lr", self.lr) <= 0:
            raise InputError(f"lr must be positive, got {self.lr}")
        for name, choices in (("answer_end", _ANSWER_ENDS), ("precision", tuple(PRECISIONS))):
            if getattr(self, name) not in choices:
                raise InputError(
                    f"{name} must be one of {', '.join(choices)}, got {getattr(self, name)!r}"
                )
        object.__setattr__(self, "precision", PRECISIONS[self.precision])


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


_STAGES = ("training", "eval", "sweep", "similarity", "logit_lens")


def _settings_of(model: Any, task: Task, **values: Any) -> dict[str, Any]:
    name = model if isinstance(model, str) else model_name(model)
    return {"format": "lens_heads.demo/1", "model": name, "task": task.name, **values}


def _prepare_folder(folder: Path, fingerprint: Fingerprint, fresh: bool) -> None:
    """Record the demo's fingerprint; a folder of another demo (another model, task or settings)
    is an error unless ``fresh``, which recomputes every stage."""
    import shutil

    recorded = folder / "demo.json"
    if recorded.is_file():  # a folder of lens_heads 0.1 named the sweep's tokens generate_tokens
        old = json.loads(recorded.read_text(encoding="utf-8"))
        if "generate_tokens" in old:
            old["max_new_tokens"] = old.pop("generate_tokens")
            write_atomic(recorded, json.dumps(old, indent=1))
    if fresh:
        for stage in _STAGES:
            shutil.rmtree(folder / stage, ignore_errors=True)
        recorded.unlink(missing_ok=True)
    claim_folder(
        folder,
        fingerprint,
        record="demo.json",
        what="a demo",
        remedy="choose another output folder, or pass fresh=True (--fresh) to replace it",
    )


def run_demo(
    out: str | os.PathLike[str],
    config: DemoConfig | None = None,
    *,
    fresh: bool = False,
    **options: Any,
) -> DemoReport:
    """Run the demo into ``out`` and return its results (``report.md`` is ``.report``).

    ``config`` (a :class:`DemoConfig`; its fields also as keywords, ``steps=50``) says what
    runs.

    The schedule (100 steps, lr 0.2, batch 8) is the short CPU schedule of
    ``docs/training.md``; the sweep uses the first held-out example with a one-token answer as
    its prompt, that answer as the target and the instructed prompt as the reference (Figures
    2 and 5). Every stage is saved; running again with the same model (its weights and tokenizer
    are fingerprinted after loading), task and settings reuses the finished stages (and resumes
    an interrupted training), so a finished folder loads in seconds -- the notebooks rely on it;
    another model, task file or settings is refused. ``fresh=True`` recomputes everything.
    ``answer_end`` is the training target's end
    (:class:`~lens_heads.engine.training.TrainingConfig`); a folder trained before it was
    recorded (answer-only targets) is refused unless ``fresh``. ``precision`` is
    the training's (``"auto"``: bf16 autocast where the CPU computes bf16 natively, else fp32;
    ``"float32"`` reproduces on any machine what a CPU without bf16 does).
    """
    config = configure(DemoConfig, config, options, "run_demo")
    folder = Path(out)
    task = get_task(config.task) if isinstance(config.task, str) else config.task
    if not task.instruction:
        raise InputError(
            f"the demo compares with the instructed prompt, but task {task.name!r} has no "
            "instruction; choose a built-in task or pass a file named like one"
        )
    settings = _settings_of(
        config.model,
        task,
        steps=config.steps,
        lr=config.lr,
        n_eval=config.n_eval,
        sweep_every=config.sweep_every,
        max_new_tokens=config.max_new_tokens,
        seed=config.seed,
        answer_end=config.answer_end,
        # "auto" is left out, so folders written before this option still match
        **({} if config.precision == "auto" else {"precision": config.precision}),
    )
    demo = _Demo(folder, config, task)
    fingerprint = Fingerprint.of(demo.model(), settings, {"task": task})
    _prepare_folder(folder, fingerprint, fresh)
    demo.stage = Stages(folder, fingerprint)
    if demo.load_seconds is not None:
        demo.stage.seconds["load model"] = demo.load_seconds
    training = demo.stage("training", demo.train, MaskTrainingResult.load)
    evaluation = demo.stage(
        "eval", lambda where: demo.evaluate(where, training), EvaluationResult.load
    )
    sweep = demo.stage("sweep", lambda where: demo.sweep(where, training), SweepResult.load)
    similarity = demo.stage(
        "similarity", lambda where: demo.similarity(where, training, sweep), SimilarityResult.load
    )
    lens = demo.stage(
        "logit_lens", lambda where: demo.lens(where, training, sweep), LogitLensResult.load
    )
    report = DemoReport(folder, training, evaluation, sweep, similarity, lens, demo.stage.seconds)
    numbers = demo_numbers(report, demo.stage.provenance("training"), settings)
    write_atomic(folder / "numbers.json", json.dumps(numbers, indent=1, default=float))
    write_atomic(folder / "report.md", _markdown(report, task))
    write_atomic(folder / "report.html", _html(report, task))
    return report


@dataclass
class _Demo:
    """The demo's stages, each computing one result into its folder. The model is loaded first:
    its fingerprint decides whether the folder's finished stages are this run's."""

    folder: Path
    config: DemoConfig
    task: Task
    loaded: list[Any] = field(default_factory=list)
    load_seconds: float | None = None

    def __post_init__(self) -> None:
        self.stage: Stages | None = None  # once the folder is claimed for the model's fingerprint
        self.progress = self.config.progress
        self.n_eval = self.config.n_eval
        if not isinstance(self.config.model, str):
            refuse_random_weights(self.config.model, "the demo")
            verify_model(self.config.model)  # before any stage computes (load_model does too)
            self.loaded.append(self.config.model)

    def model(self) -> Any:
        if not self.loaded:
            start = time.perf_counter()
            self.loaded.append(load_model(self.config.model))
            self.load_seconds = round(time.perf_counter() - start, 1)
        return self.loaded[0]

    def chat(self) -> bool:
        return has_chat_template(self.model().tokenizer)

    def train(self, where: Path) -> MaskTrainingResult:
        demo = self.config
        config = TrainingConfig.short(
            steps=demo.steps, lr=demo.lr, n_eval=demo.n_eval, seed=demo.seed,
            answer_end=demo.answer_end, dtype=demo.precision,
        )  # fmt: skip
        return train_or_resume(
            self.model(), self.task, config, where, progress=self.progress, figures=True, png=True
        )

    def evaluate(self, where: Path, training: MaskTrainingResult) -> EvaluationResult:
        result = evaluate(
            self.model(),
            self.task,
            ["original", "instruction", "random", "mask"],
            mask=training.mask,
            n_eval=self.n_eval,
            random_seeds=(0, 1),
            progress=self.progress,
        )
        result.save(where, png=True)
        return result

    def sweep(self, where: Path, training: MaskTrainingResult) -> SweepResult:
        chosen = sweep_example(self.model(), self.task.split(n_eval=self.n_eval)[1], self.chat())
        instruction = self.task.instruction
        instructed = INSTRUCTION_TEMPLATE.format(instruction=instruction, input=chosen.input)
        result = removal_sweep(
            self.model(),
            chosen.input,
            training.W,
            target=chosen.output,
            reference_prompt=instructed,
            max_new_tokens=self.config.max_new_tokens,
            every=self.config.sweep_every,
            chat=self.chat(),
            progress=self.progress,
        )
        result.save(where)
        result.save_figures(where, png=True)
        return result

    def similarity(
        self, where: Path, training: MaskTrainingResult, sweep: SweepResult
    ) -> SimilarityResult:
        result = figure4_similarity(
            self.model(), sweep.prompt, self.task.instruction, training.mask, chat=self.chat()
        )
        result.save(where, png=True)
        return result

    def lens(
        self, where: Path, training: MaskTrainingResult, sweep: SweepResult
    ) -> LogitLensResult:
        result = logit_lens(
            self.model(),
            sweep.prompt,
            mask=training.mask,
            instruction=self.task.instruction,
            targets=[sweep.target_id] if sweep.target_id is not None else None,
            chat=self.chat(),
        )
        result.save(where, png=True)
        return result


def sweep_example(model: Any, held_out: Task, chat: bool) -> Any:
    """The first held-out example whose answer is one token (so the tracked target is the whole
    answer), else the first one."""
    from lens_heads.core.prompts import PromptFormat, encode_example

    for example in held_out.examples:
        prompt = PromptFormat(chat=chat).render(example.input, model.tokenizer)
        encoded = encode_example(model.tokenizer, prompt, example.output, chat=chat)
        if len(encoded.answer_tokens) == 1:
            return example
    return held_out.examples[0]


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
        f"{training.config.lr}, {training.config.dtype}, {seconds:.0f} s. It keeps "
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
    settings table, how the outputs ended, the sweep's switch step and the similarity means.
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
        "precision": report.training.config.dtype,
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
