"""The settings table that :func:`lens_heads.engine.evaluate` returns, with the names of
its rows (settings) and columns (metrics)."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from lens_heads.core import InputError, ResultRepr, save_figures, write_atomic
from lens_heads.core.internal import MissingFileError, UnknownNameError, mean_std_table

__all__ = ["METRICS", "SETTINGS", "TRANSLATION_METRICS", "WORD_METRICS", "EvaluationResult"]

#: Setting keys, in table order, with the row labels of the paper's tables.
SETTINGS: dict[str, str] = {
    "original": "Original",
    "instruction": "w/ instruction",
    "random": "w/ random M",
    "mask": "w/ M",
    "mask+instruction": "w/ M + instruction",
    "other_mask": "w/ M of another model",
}

#: Metric keys with their column names. "accuracy" uses the paper's match rule (startswith /
#: contains), which counts an echo of the input as correct; "exact_match" (the first answer
#: segment equals the answer) and "echo_rate" (the output repeats the input) sit beside it
#: (:func:`lens_heads.core._metrics.is_exact_match`, :func:`lens_heads.core._metrics.is_echo`).
#: "answer_ce" is what the paper's tables call PPL: the mean cross-entropy of the answer tokens
#: (not exp of it); "perplexity" is the true one,
#: ``exp(total answer-token NLL / number of answer tokens)``.
METRICS: dict[str, str] = {
    "accuracy": "accuracy",
    "exact_match": "exact match",
    "echo_rate": "echo rate",
    "answer_ce": "answer CE (paper: PPL)",
    "perplexity": "perplexity",
    "rouge_l": "ROUGE-L",
    "bleu": "BLEU",
    "chrf": "chrF++",
}

WORD_METRICS = ("accuracy", "exact_match", "echo_rate", "answer_ce", "perplexity")

TRANSLATION_METRICS = (*WORD_METRICS, "rouge_l", "bleu", "chrf")


# -- the result ----------------------------------------------------------------------------------
@dataclass(repr=False)
class EvaluationResult(ResultRepr):
    """Per-example records and per-run metrics of :func:`evaluate`.

    ``records`` has one row per (setting, seed, example): ``input``, ``answer``, ``prompt``, the raw
    ``generated`` text, ``ended_by`` (the stop token that ended it, e.g. ``<|im_end|>``, or
    ``"length"``), the scored ``prediction`` (its first line), ``correct`` (the paper's
    rule), ``exact`` (exact match), ``echo`` (the output repeats the input), ``answer_ce``,
    ``n_answer_tokens``, ``boundary_merged`` and, for translation, ``rouge_l``. ``runs`` has one
    row per (setting, seed) with ``heads`` and each metric key of :data:`METRICS`; the random
    setting has one run per seed, every other setting one run (seed -1).

    >>> result = EvaluationResult.example()
    >>> float(result.to_frame().loc["w/ random M", "accuracy"])
    0.5
    """

    model: str
    task: str
    kind: str
    settings: list[str]
    runs: pd.DataFrame
    records: pd.DataFrame
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def metrics(self) -> list[str]:
        """The metric keys of this task kind that the runs have, in column order (results
        saved before exact match and the echo rate existed lack those two)."""
        keys = TRANSLATION_METRICS if self.kind == "translation" else WORD_METRICS
        return [key for key in keys if key in self.runs.columns]

    @classmethod
    def example(cls) -> EvaluationResult:
        """A small hand-made result (for documentation and tests)."""
        runs = pd.DataFrame(
            [
                {"setting": "original", "seed": -1, "heads": 8, "accuracy": 0.25},
                {"setting": "random", "seed": 0, "heads": 2, "accuracy": 0.25},
                {"setting": "random", "seed": 1, "heads": 2, "accuracy": 0.75},
                {"setting": "mask", "seed": -1, "heads": 2, "accuracy": 1.0},
            ]
        )
        runs["answer_ce"] = [2.0, 3.0, 4.0, 1.0]
        runs["perplexity"] = [math.exp(v) for v in runs["answer_ce"]]
        records = pd.DataFrame(columns=["setting", "seed", "index", "correct"])
        return cls("tiny", "upper", "word", ["original", "random", "mask"], runs, records)

    # -- views --------------------------------------------------------------------------------
    def per_seed_frame(self) -> pd.DataFrame:
        """One row per (setting, seed) with the column names of :meth:`to_frame`."""
        frame = self.runs.copy()
        frame.insert(0, "label", [SETTINGS[key] for key in frame["setting"]])
        return frame.rename(columns={key: METRICS[key] for key in self.metrics})

    def to_frame(self) -> pd.DataFrame:
        """The table: one row per setting (index: the paper's row labels), the number of heads
        kept and each metric; settings with several seeds show the mean and a ``... std``
        column (sample standard deviation over seeds; NaN for single runs)."""
        rows = []
        for key in self.settings:
            runs = self.runs[self.runs["setting"] == key]
            row: dict[str, Any] = {"setting": SETTINGS[key], "heads": int(runs["heads"].iloc[0])}
            row["seeds"] = len(runs)
            for metric in self.metrics:
                values = runs[metric].astype(float)
                row[METRICS[metric]] = float(values.mean())
                row[f"{METRICS[metric]} std"] = float(values.std()) if len(values) > 1 else math.nan
            rows.append(row)
        return pd.DataFrame(rows).set_index("setting")

    def to_markdown(self, digits: int = 3) -> str:
        """The table as GitHub markdown, ``mean ± std`` for settings with several seeds."""
        metrics = [METRICS[m] for m in self.metrics]
        table = mean_std_table(self.to_frame(), metrics, keep=["heads"], digits=digits)
        n = self.config.get("n_eval", "?")
        title = f"**{self.task}** on **{self.model}** ({n} examples"
        seeds = self.config.get("random_seeds")
        if "random" in self.settings and seeds:
            title += f"; random M over seeds {', '.join(map(str, seeds))}"
        return title + ")\n\n" + table + "\n"

    def predictions(self, setting: str, seed: int | None = None) -> pd.DataFrame:
        """The per-example records of one setting (one seed of the random setting)."""
        if setting not in self.settings:
            raise UnknownNameError(f"setting {setting!r} was not evaluated; have {self.settings}")
        rows = self.records[self.records["setting"] == setting]
        if seed is not None:
            rows = rows[rows["seed"] == seed]
        return rows.reset_index(drop=True)

    def plot(self) -> Any:
        """Grouped bars: one panel per metric, one bar per setting (error bars: std over seeds)."""
        from lens_heads.engine._figures import evaluation_figure

        return evaluation_figure(
            self.to_frame(),
            [METRICS[m] for m in self.metrics],
            title=f"{self.task} on {self.model}",
        )

    # -- io -----------------------------------------------------------------------------------
    def save(self, directory: str | os.PathLike[str], *, png: bool = False) -> list[Path]:
        """Write ``table.csv``, ``table.md``, ``per_seed.csv``, ``records.csv``, ``result.json``
        (everything :meth:`load` needs) and ``figure.html`` (and ``figure.png`` when ``png``
        and kaleido can export: it needs a Chrome binary; a failure is logged, not raised).
        Each file is written atomically."""
        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        written = [
            write_atomic(folder / "table.csv", self.to_frame().to_csv()),
            write_atomic(folder / "table.md", self.to_markdown()),
            write_atomic(folder / "per_seed.csv", self.per_seed_frame().to_csv(index=False)),
            write_atomic(folder / "records.csv", self.records.to_csv(index=False)),
        ]
        payload = {
            "format": "lens_heads.evaluation/1",
            "model": self.model,
            "task": self.task,
            "kind": self.kind,
            "settings": self.settings,
            "config": self.config,
            "runs": self.runs.to_dict(orient="records"),
            "records": self.records.to_dict(orient="records"),
        }
        written.append(
            write_atomic(folder / "result.json", json.dumps(payload, indent=1, default=str))
        )
        written += save_figures(folder, {"figure": self.plot()}, png=png)
        return written

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> EvaluationResult:
        """Read a result written by :meth:`save`."""
        path = Path(directory) / "result.json"
        if not path.is_file():
            raise MissingFileError(f"{path} does not exist; is {directory} an evaluation folder?")
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
            if payload.get("format") != "lens_heads.evaluation/1":
                raise InputError(f"format tag {payload.get('format')!r}")
            return cls(
                model=payload["model"],
                task=payload["task"],
                kind=payload["kind"],
                settings=list(payload["settings"]),
                runs=pd.DataFrame(payload["runs"]),
                records=pd.DataFrame(payload["records"]),
                config=dict(payload["config"]),
            )
        except (ValueError, KeyError, TypeError) as error:
            raise InputError(
                f"{path} is not a readable evaluation result ({type(error).__name__}: {error}); "
                "re-create it with EvaluationResult.save()"
            ) from error
