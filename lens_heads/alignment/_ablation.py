"""Causal ablation of attention heads (token alignment heads paper, Figure 8): BLEU and chrF++
of the unmasked model, of the model with ``heads`` removed, and of as many random heads drawn
from the other heads (several seeds), on held-out sentences; failure categories of the outputs
the ablation damaged, decided with an offline language-identification model (``langid``).

>>> import lens_heads as lh
>>> model = lh.tiny_model()
>>> result = lh.ablate_heads(model, "en-fr", ["L0H1"], random_seeds=(0, 1), n_eval=2,
...                          max_new_tokens=4, progress=False)
>>> list(result.to_frame().index)
['unmasked', 'ablated', 'random']
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from lens_heads.core import (
    CORPUS_LANGUAGES,
    HeadMask,
    InputError,
    Task,
    configure,
    format_head,
    get_task,
    head_shape,
    identify_language,
    markdown_table,
)
from lens_heads.core.internal import (
    FolderResult,
    model_name,
    parse_head,
    read_text_file,
    seeds_from_count,
)
from lens_heads.engine import EvaluationConfig, evaluate

__all__ = [
    "AblationResult",
    "ablate_heads",
    "failure_category",
    "resolve_heads",
]

SETTINGS = ("unmasked", "ablated", "random")
#: The failure categories of the paper's appendix A.4 (its shares: 46 %, 36 %, 18 %).
CATEGORIES = ("no translation", "missing details", "hallucination")
DAMAGE = 10.0  # a sentence-level chrF++ drop of this many points counts as damage


def resolve_heads(heads: Any, model: Any) -> list[str]:
    """Head labels from labels, ``(layer, head)`` tuples, a :class:`HeadMask` (its selected
    heads) or a file (a saved mask, or labels separated by commas/whitespace); each checked
    against ``model``'s shape (a model, or a shape read before the weights; None: the form
    only)."""
    n_layers, n_heads = head_shape(model) if model is not None else (None, None)
    if isinstance(heads, (str, os.PathLike)) and Path(heads).exists():
        path = Path(heads)
        if path.suffix in (".safetensors", ".json"):
            heads = HeadMask.load(path, model)
        else:
            heads = read_text_file(path, "heads file").replace(",", " ").split()
    elif isinstance(heads, str):
        heads = heads.replace(",", " ").split()
    if isinstance(heads, HeadMask):
        if model is not None:
            heads.check_model(model)
        return heads.labels
    labels = []
    for head in heads:
        layer, index = parse_head(head, n_layers, n_heads) if isinstance(head, str) else head
        if n_layers is not None and not (0 <= layer < n_layers and 0 <= index < n_heads):
            raise InputError(
                f"head {format_head(layer, index)} is out of range for a model with {n_layers} "
                f"layers x {n_heads} heads (valid labels: L0H0 .. L{n_layers - 1}H{n_heads - 1})"
            )
        labels.append(format_head(layer, index))
    if len(set(labels)) != len(labels):
        raise InputError(f"heads repeat: {labels}; name each head once")
    return labels


def _removal(labels: Sequence[str], n_layers: int, n_heads: int) -> HeadMask:
    return HeadMask.from_heads(labels, n_layers=n_layers, n_heads=n_heads).complement()


def failure_category(
    output: str,
    before: str,
    target_lang: str,
    languages: Sequence[str],
    prompt: str = "",
    reference: str = "",
) -> str:
    """How an output damaged by ablation fails, in the categories of the paper's appendix A.4:

    * ``"no translation"`` -- empty, not in the target language, or a copy of text the
      ``prompt`` holds (the source or a demonstration): the model repeats instead of translating;
    * ``"missing details"`` -- in the target language, and at least half of its words occur in
      the ``reference`` translation or in the output ``before`` ablation: it says less of the
      source, not something else;
    * ``"hallucination"`` -- in the target language, and most of its words occur in neither:
      content the source does not hold.

    >>> failure_category("", "Le chien.", "fr", ["en", "fr"])
    'no translation'
    >>> failure_category("Le chien.", "Le chien est ici.", "fr", ["en", "fr"])
    'missing details'
    """
    text = output.strip()
    if not text or (prompt and text in prompt) or identify_language(text, languages) != target_lang:
        return CATEGORIES[0]
    words = _words(text)
    known = _words(reference) | _words(before)
    covered = sum(word in known for word in words) / max(1, len(words))
    return CATEGORIES[1] if covered >= 0.5 else CATEGORIES[2]


def _words(text: str) -> set[str]:
    from lens_heads.alignment._aligners import split_words

    return {word.lower() for word in split_words(text) if any(c.isalnum() for c in word)}


@dataclass(repr=False)
class AblationResult(FolderResult):
    """Runs (one row per task, setting and seed: BLEU, chrF++, accuracy) and per-example
    records (outputs, sentence chrF++ and, for damaged translations, a failure category)."""

    model: str
    task: str
    heads: list[str]
    controls: list[list[str]]
    runs: pd.DataFrame
    records: pd.DataFrame
    config: dict[str, Any] = field(default_factory=dict)

    _format: ClassVar[str] = "lens_heads.ablation/1"

    def to_frame(self, task: str | None = None) -> pd.DataFrame:
        """Mean and standard deviation over seeds of each metric, per setting (for ``task``,
        default the translation task)."""
        runs = self.runs[self.runs["task"] == (task or self.task)]
        metrics = [m for m in ("bleu", "chrf", "accuracy") if m in runs and runs[m].notna().any()]
        grouped = runs.groupby("setting", sort=False)[metrics]
        frame = grouped.mean().join(grouped.std().add_suffix(" std"))
        frame["runs"] = grouped.size()
        return frame.reindex([s for s in SETTINGS if s in frame.index])

    def failures(self) -> pd.DataFrame:
        """Counts of each failure category per setting (damaged translations only)."""
        damaged = self.records[self.records["category"].fillna("") != ""]
        table = damaged.groupby(["setting", "category"]).size().unstack(fill_value=0)
        return table.reindex(columns=list(CATEGORIES), fill_value=0)

    def to_markdown(self) -> str:
        lines = [f"**{self.task}** on **{self.model}**, ablating {', '.join(self.heads)}\n"]
        for task in self.runs["task"].unique():
            lines.append(f"*{task}*\n\n" + markdown_table(self.to_frame(task), index=True) + "\n")
        if len(self.records):
            lines.append(
                "Failure categories\n\n" + markdown_table(self.failures(), index=True) + "\n"
            )
        return "\n".join(lines)

    def plot(self) -> Any:
        """Figure 8: chrF++ and BLEU per setting (error bars: std over random seeds)."""
        import plotly.graph_objects as go

        frame = self.to_frame()
        figure = go.Figure()
        for metric, label in (("chrf", "chrF++"), ("bleu", "BLEU")):
            if metric in frame:
                figure.add_trace(
                    go.Bar(
                        x=list(frame.index),
                        y=frame[metric],
                        error_y={"type": "data", "array": frame[f"{metric} std"].fillna(0)},
                        name=label,
                    )
                )
        figure.update_layout(
            title=f"Ablating {len(self.heads)} heads, {self.model} ({self.task})",
            barmode="group",
            template="plotly_white",
        )
        return figure

    def _to_saved(self) -> tuple[dict[str, Any], dict[str, Any]]:
        meta, tensors = super()._to_saved()
        meta["runs"] = self.runs.to_dict(orient="records")
        meta["records"] = self.records.to_dict(orient="records")
        return meta, tensors

    @classmethod
    def _from_saved(cls, meta: dict[str, Any], tensors: dict[str, Any]) -> AblationResult:
        meta = dict(meta)
        meta["runs"] = pd.DataFrame(meta["runs"])
        meta["records"] = pd.DataFrame(meta["records"])
        return cls(**meta)


def _run(model: Any, task: Task, mask: HeadMask, setting: str, config: EvaluationConfig) -> Any:
    name = "original" if setting == "unmasked" else "mask"
    result = evaluate(model, task, [name], mask=None if name == "original" else mask, config=config)
    run = result.runs.iloc[0].to_dict()
    records = result.predictions(name)
    return run, records


#: the evaluation ablate_heads runs by default: two-shot prompts, three random controls
ABLATION = EvaluationConfig(shots=2)


def ablate_heads(
    model: Any,
    task: Task | str | os.PathLike[str],
    heads: Any,
    config: EvaluationConfig | None = None,
    *,
    exclude: Any = None,
    control_task: Task | str | None = None,
    **overrides: Any,
) -> AblationResult:
    """Evaluate ``task`` (a translation task, its last ``n_eval`` examples, ``shots``-shot)
    unmasked, with ``heads`` removed (``hook_z`` masked to 0), and with ``len(heads)`` random
    heads removed for each seed of ``random_seeds``, drawn from the heads outside ``exclude``
    (default: outside ``heads``; pass all alignment heads to draw from non-alignment heads).
    ``config`` is the :class:`~lens_heads.EvaluationConfig` of every run (default
    :data:`ABLATION`: two shots, seeds 0, 1, 2), its fields also as keywords. ``control_task``
    (e.g. a word task) repeats the three settings for functional specificity. Translations
    whose sentence chrF++ drops by :data:`DAMAGE` points get a failure category
    (:func:`failure_category`).
    """
    from sacrebleu.metrics import CHRF

    overrides = seeds_from_count(overrides, "ablate_heads", "random_controls", 3)
    config = configure(EvaluationConfig, config or ABLATION, overrides, "ablate_heads")
    seeds = config.random_seeds
    n_layers, n_heads = head_shape(model)
    labels = resolve_heads(heads, model)
    if not labels:
        raise InputError("no heads to ablate; give at least one head label like 'L3H3'")
    excluded = set(labels) | set(resolve_heads(exclude, model) if exclude is not None else [])
    pool = [format_head(layer, h) for layer in range(n_layers) for h in range(n_heads)]
    pool = [label for label in pool if label not in excluded]
    if seeds and len(pool) < len(labels):
        raise InputError(
            f"only {len(pool)} heads lie outside the excluded set; cannot draw {len(labels)} "
            "random heads -- exclude fewer heads or ablate fewer"
        )
    controls = [sorted(random.Random(seed).sample(pool, len(labels))) for seed in seeds]
    tasks = [task if isinstance(task, Task) else get_task(task)]
    if control_task is not None:
        tasks.append(control_task if isinstance(control_task, Task) else get_task(control_task))
    chrf = CHRF(word_order=2)
    run_rows, record_frames = [], []
    for current in tasks:
        plan = [("unmasked", -1, []), ("ablated", -1, labels)]
        plan += [("random", seed, control) for seed, control in zip(seeds, controls, strict=True)]
        outputs_before: dict[int, str] = {}
        for setting, run_seed, removed in plan:
            mask = _removal(removed, n_layers, n_heads)
            run, records = _run(model, current, mask, setting, config)
            run_rows.append(
                {
                    "task": current.name,
                    "setting": setting,
                    "seed": run_seed,
                    "heads": ",".join(removed),
                    "bleu": run.get("bleu"),
                    "chrf": run.get("chrf"),
                    "accuracy": run["accuracy"],
                }
            )
            frame = records[["index", "input", "answer", "prediction", "correct"]].copy()
            prompts = list(records["prompt"])
            frame.insert(0, "task", current.name)
            frame.insert(1, "setting", setting)
            frame.insert(2, "seed", run_seed)
            frame["category"] = ""
            if current.kind == "translation":
                frame["chrf"] = [
                    chrf.sentence_score(p, [a]).score
                    for p, a in zip(frame["prediction"], frame["answer"], strict=True)
                ]
                if setting == "unmasked":
                    before = dict(zip(frame["index"], frame["chrf"], strict=True))
                    outputs_before = dict(zip(frame["index"], frame["prediction"], strict=True))
                else:
                    languages = sorted({current.source_lang or "en", *CORPUS_LANGUAGES})
                    frame["category"] = [
                        failure_category(
                            p, outputs_before[i], current.target_lang or "en", languages, q, a
                        )
                        if before[i] - c >= DAMAGE
                        else ""
                        for i, p, c, q, a in zip(
                            frame["index"],
                            frame["prediction"],
                            frame["chrf"],
                            prompts,
                            frame["answer"],
                            strict=True,
                        )
                    ]
            record_frames.append(frame)
    stored = {
        "n_eval": config.n_eval,
        "shots": config.shots,
        "random_controls": len(seeds),
        "random_seeds": list(seeds),
        "seed": seeds[0] if seeds else 0,
        "damage_chrf": DAMAGE,
    }
    return AblationResult(
        model=model_name(model),
        task=tasks[0].name,
        heads=labels,
        controls=controls,
        runs=pd.DataFrame(run_rows),
        records=pd.concat(record_frames, ignore_index=True),
        config=stored,
    )
