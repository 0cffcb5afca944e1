"""Which head finder to trust: every method's ranking of the heads, measured by its faithfulness
on held-out prompts with counterfactuals (:mod:`lens_heads.finders.faithfulness`), beside what
it cost.

>>> import lens_heads as lh
>>> model = lh.tiny_model()
>>> config = BenchmarkConfig(n_pairs=6, n_eval=60, bootstrap=20, sizes=(0.25, 0.5, 1.0))
>>> result = head_finder_benchmark(model, ["capitalize"], ["effects-zero", "random-0"], config)
>>> list(result.to_frame()["method"])
['effects-zero', 'random-0']
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import torch

from lens_heads.core import (
    Fingerprint,
    InputError,
    ResultRepr,
    Stages,
    Task,
    claim_folder,
    configure,
    get_task,
    has_chat_template,
    markdown_table,
    write_atomic,
)
from lens_heads.core.internal import (
    BootstrapSetting,
    HeldOutSetting,
    InstructedSetting,
    LevelSetting,
    ModelLike,
    SeedSetting,
    check_int,
    model_name,
    own_checks,
)
from lens_heads.finders._counterfactuals import (
    SPLITS,
    CounterfactualSet,
    counterfactual_pairs,
    ioi_task,
    protocol_split,
)
from lens_heads.finders._faithfulness import (
    CircuitSetting,
    FaithfulnessConfig,
    FaithfulnessCurve,
    PairScorer,
    faithfulness,
)
from lens_heads.finders._methods import (
    GRADIENT_METHODS,
    METHODS,
    MethodConfig,
    MethodScores,
    score,
)

__all__ = ["DEFAULT_METHODS", "BenchmarkConfig", "FinderBenchmark", "head_finder_benchmark"]

#: the leaderboard's columns
_SHOWN = ["method", "CPR", "CPR low", "CPR high", "CMD", "CMD low", "CMD high", "CMD log"]
_SHOWN += ["CMD log low", "CMD log high", "seconds", "forwards", "backwards", "vs gradient"]
_SHOWN += ["p (Holm)"]

#: the methods a benchmark runs by default (translation scores only on a translation task)
DEFAULT_METHODS = (
    "effects-counterfactual", "effects-mean", "effects-zero", "attribution", "integrated",
    "faithful-mask", "heads-up", "heads-up-share", "chg", "lahis", "induction",
    "previous-token", "ov-copying", "random-0", "random-1", "random-2",
)  # fmt: skip


@own_checks
@dataclass(frozen=True, kw_only=True)
class BenchmarkConfig(
    CircuitSetting,
    BootstrapSetting,
    LevelSetting,
    SeedSetting,
    InstructedSetting.with_defaults(instructed=True),
    HeldOutSetting.with_defaults(n_eval=200),
):
    """The settings of :func:`head_finder_benchmark`; ``seed`` draws the pairs and the
    resamples, ``level`` is the family-wise level of each task's comparisons with the best
    gradient method."""

    MIN_EVAL = 2  # the pairs are drawn among them

    n_pairs: int = 40
    """Held-out prompt pairs each ranking's faithfulness is measured on."""
    n_train_pairs: int = 40
    """Training prompt pairs the effect and gradient methods read (a task with fewer is an
    error, as for ``n_pairs``)."""
    n_calibration_pairs: int = 0
    """Pairs of the training part beside the training pairs (none in common) that the
    calibrated methods cut their circuits back on; 0: they cut on the training pairs."""
    method_settings: MethodConfig = field(default_factory=MethodConfig)
    """The head finders' own settings."""
    split: str = "development"
    """``"development"``: the held-out pairs are the task's last ``n_eval`` examples, which
    every stored variant of the benchmark was compared on; ``"test"``: the protocol's test part,
    which none of them read (:func:`~lens_heads.finders.protocol_split`)."""
    train_seed: int | None = None
    """The draw of the training and calibration pairs (None: ``seed``, which also draws the
    held-out pairs): the protocol keeps one test set and varies this."""
    protocol: str = ""
    """The hash of the protocol file the run was made under (:class:`FinderProtocol`), or
    empty."""

    def __post_init__(self) -> None:
        super().__post_init__()  # the shared parts' checks
        for name in ("n_pairs", "n_train_pairs"):
            check_int(name, getattr(self, name), minimum=2)
        check_int("n_calibration_pairs", self.n_calibration_pairs)
        if self.n_calibration_pairs == 1:
            raise InputError("n_calibration_pairs must be 0 (the training pairs) or at least 2")
        if not isinstance(self.method_settings, MethodConfig):
            raise InputError("method_settings must be a MethodConfig")
        if self.split not in SPLITS:
            raise InputError(f"split must be one of {', '.join(SPLITS)}, got {self.split!r}")
        if self.train_seed is not None:
            check_int("train_seed", self.train_seed)

    @property
    def faithfulness(self) -> FaithfulnessConfig:
        return FaithfulnessConfig(
            sizes=self.sizes, ablation=self.ablation, bootstrap=self.bootstrap, seed=self.seed,
            batch_size=self.method_settings.batch_size,
        )  # fmt: skip

    def settings(self) -> dict[str, Any]:
        values = asdict(self)
        for name, default in (("split", "development"), ("train_seed", None), ("protocol", "")):
            if values[name] == default:  # folders made before these settings existed resume
                del values[name]
        if self.method_settings.mask_seed == 0:  # and before the training seed did
            del values["method_settings"]["mask_seed"]
        return values


@dataclass(repr=False)
class FinderBenchmark(ResultRepr):
    """Per task and method: the CPR and CMD with their bootstrap intervals, the cost (seconds,
    forward and backward passes over a prompt), the comparison with the best gradient method
    (on CMD, a paired bootstrap; ``p (Holm)`` across a task's methods), and every curve."""

    model: str
    frame: pd.DataFrame
    curves: dict[str, FaithfulnessCurve]
    settings: dict[str, Any]

    _format: ClassVar[str] = "lens_heads.finder_benchmark/1"

    def to_frame(self) -> pd.DataFrame:
        return self.frame.copy()

    def leaderboard(self, task: str) -> pd.DataFrame:
        """One task's methods, best CMD first."""
        rows = self.frame[self.frame["task"] == task]
        return rows.sort_values("CMD").reset_index(drop=True)

    def to_markdown(self) -> str:
        parts = []
        for task in dict.fromkeys(self.frame["task"]):
            board = self.leaderboard(task)
            shown = board[[column for column in _SHOWN if column in board]]  # older: no log
            parts.append(f"### {task}\n\n" + markdown_table(shown, floatfmt=".3g", index=False))
        return "\n\n".join(parts)

    def plot(self) -> Any:
        """The faithfulness curves (signed, CPR's) with their bootstrap bands, one panel per
        task, one color per method (a click on its legend entry hides or shows it)."""
        from plotly.subplots import make_subplots

        from lens_heads.finders._faithfulness import _band

        tasks = list(dict.fromkeys(self.frame["task"]))
        methods = list(dict.fromkeys(curve.method for curve in self.curves.values()))
        figure = make_subplots(rows=1, cols=len(tasks), subplot_titles=tasks, shared_yaxes=True)
        for column, task in enumerate(tasks, start=1):
            for curve in self.curves.values():
                if curve.task != task:
                    continue
                bands = curve.bands()
                rows = bands[bands["curve"] == "signed"]
                _band(figure, rows, curve.method, methods.index(curve.method), row=1, col=column)
            figure.update_xaxes(type="log", title={"text": "share of heads"}, row=1, col=column)
        figure.update_yaxes(title={"text": "faithfulness"}, row=1, col=1)
        return figure.update_layout(title={"text": f"Faithfulness of head finders ({self.model})"})

    def plot_cost(self) -> Any:
        """CMD against the cost in seconds, one point per task and method (log seconds)."""
        import plotly.express as px

        frame = self.frame.assign(seconds=self.frame["seconds"].clip(lower=1e-3))
        figure = px.scatter(
            frame, x="seconds", y="CMD", color="method", symbol="task", log_x=True,
            error_y=frame["CMD high"] - frame["CMD"], error_y_minus=frame["CMD"] - frame["CMD low"],
        )  # fmt: skip
        return figure.update_layout(title={"text": f"Faithfulness against cost ({self.model})"})

    def save(self, directory: str | os.PathLike[str]) -> list[Path]:
        """``table.csv``, ``table.md``, ``result.json``, ``curves/<task>/<method>/`` and the
        figures ``curves.html`` and ``cost.html``."""
        from lens_heads.core import save_figures

        folder = Path(directory)
        written = [
            write_atomic(folder / "table.csv", self.frame.to_csv(index=False)),
            write_atomic(folder / "table.md", self.to_markdown() + "\n"),
            write_atomic(
                folder / "result.json",
                json.dumps(
                    {
                        "format": self._format,
                        "model": self.model,
                        "settings": self.settings,
                        "curves": sorted(self.curves),
                    },
                    indent=1,
                    default=str,
                ),
            ),
        ]
        for key, curve in self.curves.items():
            written += curve.save(folder / "curves" / key)
        return written + save_figures(folder, {"curves": self.plot(), "cost": self.plot_cost()})

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> FinderBenchmark:
        from lens_heads.core.internal import MissingFileError

        folder = Path(directory)
        path = folder / "result.json"
        if not path.is_file():
            raise MissingFileError(f"{folder} holds no result.json; is it a benchmark folder?")
        meta = json.loads(path.read_text(encoding="utf-8"))
        if meta.get("format") != cls._format:
            raise InputError(f"{path} is not a head-finder benchmark ({meta.get('format')!r})")
        curves = {key: FaithfulnessCurve.load(folder / "curves" / key) for key in meta["curves"]}
        frame = pd.read_csv(folder / "table.csv")
        return cls(meta["model"], frame, curves, meta["settings"])


def _task_of(name: str | Task, n_eval: int, split: str) -> tuple[str | Task, Task]:
    """The name the pairs take and the training examples the methods read."""
    if isinstance(name, str) and name == "ioi":
        return "ioi", ioi_task("all" if split == "test" else "train", n_eval)
    task = name if isinstance(name, Task) else get_task(name)
    train, _ = protocol_split(task) if split == "test" else task.split(n_eval=n_eval)
    if train is None:
        raise InputError(f"task {task.name!r} keeps no training example after n_eval={n_eval}")
    return task, train


def _compare(curves: dict[str, FaithfulnessCurve], config: BenchmarkConfig) -> dict[str, Any]:
    """Each method's CMD against the best gradient method's (lowest CMD) on the same bootstrap
    resamples of the pairs: the mean difference and a two-sided p, Holm-adjusted across the
    methods."""
    from lens_heads.core.internal import holm

    gradient = [name for name in GRADIENT_METHODS if name in curves]
    if not gradient:
        return {}
    best = min(gradient, key=lambda name: curves[name].cmd)
    n_pairs = curves[best].pair_metrics.shape[1]
    rng = np.random.default_rng(config.seed + 1)
    draws = [rng.integers(0, n_pairs, n_pairs) for _ in range(config.bootstrap)]
    reference = np.array([curves[best].resampled(torch.from_numpy(d))[1] for d in draws])
    found: dict[str, Any] = {}
    others = [name for name in curves if name != best]
    p_values = []
    for name in others:
        cmd = np.array([curves[name].resampled(torch.from_numpy(d))[1] for d in draws])
        difference = cmd - reference
        p = 2 * min(float(np.mean(difference <= 0)), float(np.mean(difference >= 0)))
        p_values.append(min(1.0, p))
        found[name] = {"vs gradient": float(np.mean(difference)), "best gradient": best}
    adjusted = holm(np.array(p_values)) if p_values else []
    for name, p, q in zip(others, p_values, adjusted, strict=True):
        found[name] |= {"p": p, "p (Holm)": float(q)}
    found[best] = {"vs gradient": 0.0, "best gradient": best, "p": np.nan, "p (Holm)": np.nan}
    return found


def head_finder_benchmark(
    model: ModelLike,
    tasks: Sequence[str | Task],
    methods: Sequence[str] = DEFAULT_METHODS,
    config: BenchmarkConfig | None = None,
    *,
    out: str | os.PathLike[str] | None = None,
    progress: bool = True,
    overwrite: bool = False,
    **overrides: Any,
) -> FinderBenchmark:
    """Every method of ``methods`` (names of :data:`~lens_heads.finders.METHODS`) on
    every task of ``tasks`` (``"ioi"``, toolkit task names or files): its head scores from the
    task's training part, then its faithfulness on held-out pairs (see the module).

    With ``out``, the pairs, each method's scores and each curve are stages of that folder (a
    killed run resumes; another model, other data or other settings are refused unless
    ``overwrite``), and the result is saved in ``out/benchmark``."""
    from tqdm.auto import tqdm

    config = configure(BenchmarkConfig, config, overrides, "head_finder_benchmark")
    if not tasks or not methods:
        raise InputError("give at least one task and one method")
    unknown = [name for name in methods if name not in METHODS]
    if unknown:
        raise InputError(f"unknown head finders {unknown}; the finders: {', '.join(METHODS)}")
    resolved = [_task_of(task, config.n_eval, config.split) for task in tasks]
    folder = Path(out) if out is not None else None
    settings = config.settings()
    if folder is not None:  # the settings and the model: every task and method share them
        claim_folder(
            folder,
            Fingerprint.of(model, settings),
            what="a head-finder benchmark",
            overwrite=overwrite,
            stages=[_task_name(task) for task, _ in resolved],
        )

    runner = _Runner(model, config, folder, has_chat_template(model.tokenizer), overwrite)
    curves: dict[str, FaithfulnessCurve] = {}
    rows: list[dict[str, Any]] = []
    bar = tqdm(total=len(resolved) * len(methods), desc="head finders", disable=not progress)
    for task, train in resolved:  # every task's pairs first: too few stops before any method
        runner.open(_task_name(task), train)
        runner.every_pairs(task)
    for task, train in resolved:
        task_rows, task_curves = runner.task(task, train, methods, bar)
        rows += task_rows
        curves |= task_curves
    bar.close()
    frame = pd.DataFrame(rows)
    for column in ("vs gradient", "p", "p (Holm)", "best gradient"):
        if column not in frame:
            frame[column] = np.nan
    settings |= {"tasks": [_task_name(task) for task, _ in resolved], "methods": list(methods)}
    result = FinderBenchmark(model_name(model), frame, curves, settings)
    if folder is not None:
        result.save(folder / "benchmark")
    return result


def _task_name(task: str | Task) -> str:
    return task if isinstance(task, str) else task.name


@dataclass
class _Runner:
    """One benchmark's stages: per task (a folder of its own, claimed for the task's examples,
    so that tasks and methods can be added to a benchmark later), the pairs, then each
    method's scores and curve."""

    model: ModelLike
    config: BenchmarkConfig
    folder: Path | None
    chat: bool
    overwrite: bool = False
    stages: Stages | None = None

    def open(self, name: str, train: Task) -> None:
        """Claim the task's folder (its examples, with the benchmark's settings and model)."""
        if self.folder is None:
            return
        fingerprint = Fingerprint.of(self.model, self.config.settings(), {"task": train})
        claim_folder(
            self.folder / name, fingerprint, what="a task's head-finder stages",
            overwrite=self.overwrite,
        )  # fmt: skip
        self.stages = Stages(self.folder / name, fingerprint)

    def stage(self, name: str, compute: Any, save: Any, load: Any) -> Any:
        if self.stages is None:
            return compute()

        def run(where: Path) -> Any:
            value = compute()
            save(value, where)
            return value

        return self.stages(name, run, load)

    def pairs(self, task: str | Task, part: str) -> CounterfactualSet:
        """The task's ``"eval"``, ``"train"`` or ``"calibration"`` pairs (the training part's
        pairs after the training pairs of the same draw)."""
        config = self.config
        n = {"eval": config.n_pairs, "train": config.n_train_pairs}
        n["calibration"] = config.n_calibration_pairs
        seed = config.seed if part == "eval" or config.train_seed is None else config.train_seed
        drawn = self.stage(
            f"pairs-{part}",
            lambda: counterfactual_pairs(
                self.model,
                task,
                part="eval" if part == "eval" else "train",
                seed=seed,
                instructed=config.instructed,
                n=n[part],
                n_eval=config.n_eval,
                skip=config.n_train_pairs if part == "calibration" else 0,
                split=config.split,
            ),
            lambda value, where: write_atomic(where / "pairs.json", value.to_json()),
            lambda where: CounterfactualSet.from_json((where / "pairs.json").read_text()),
        )
        if len(drawn) < n[part]:  # the draw gives up to n: fewer would be measured silently
            setting = {"eval": "n_pairs", "train": "n_train_pairs"}.get(part, f"n_{part}_pairs")
            fewer = "more" if part == "eval" else "fewer"
            held_out = f", or hold out {fewer} examples than n_eval={config.n_eval}"
            raise InputError(
                f"task {_task_name(task)!r} gives {len(drawn)} {part} pairs for this model, "
                f"fewer than {setting}={n[part]}; ask for at most {len(drawn)}{held_out}"
            )
        return drawn

    def every_pairs(
        self, task: str | Task
    ) -> tuple[CounterfactualSet, CounterfactualSet, CounterfactualSet | None]:
        """The task's evaluation, training and calibration pairs (None: no calibration set)."""
        calibration = None
        if self.config.n_calibration_pairs:
            calibration = self.pairs(task, "calibration")
        return self.pairs(task, "eval"), self.pairs(task, "train"), calibration

    def task(
        self, task: str | Task, train: Task, methods: Sequence[str], bar: Any
    ) -> tuple[list[dict[str, Any]], dict[str, FaithfulnessCurve]]:
        name = _task_name(task)
        self.open(name, train)
        evaluation, training, calibration = self.every_pairs(task)
        chat = False if name == "ioi" else self.chat
        instruction = (
            None if isinstance(task, str) or not self.config.instructed else (task.instruction)
        )
        scorer = PairScorer(
            self.model, evaluation, self.config.ablation, self.config.method_settings.batch_size
        )
        curves, rows = {}, []
        for method in methods:
            scores = self.stage(
                f"{method}/scores",
                lambda method=method: score(
                    self.model,
                    method,
                    train,
                    training,
                    self.config.method_settings,
                    chat=chat,
                    sizes=self.config.sizes,
                    instruction=instruction,
                    calibration_pairs=calibration,
                ),
                _save_scores,
                _load_scores,
            )
            curves[method] = self.stage(
                f"{method}/curve",
                lambda method=method, scores=scores: faithfulness(
                    self.model,
                    evaluation,
                    scores.scores,
                    method,
                    self.config.faithfulness,
                    scorer=scorer,
                    circuits=scores.circuits,
                    fitted=scores.notes.get("fitted"),
                ),
                lambda value, where: value.save(where),
                FaithfulnessCurve.load,
            )
            rows.append({"task": name, "method": method, **_row(curves[method], scores)})
            bar.update(1)
        comparison = _compare(curves, self.config)
        for row in rows:
            row.update(comparison.get(row["method"], {}))
        return rows, {f"{name}/{method}": curve for method, curve in curves.items()}


def _row(curve: FaithfulnessCurve, scores: MethodScores) -> dict[str, Any]:
    values = {
        "CPR": curve.cpr,
        "CMD": curve.cmd,
        "CPR log": curve.cpr_log,
        "CMD log": curve.cmd_log,
    }
    row: dict[str, Any] = {}
    for key, value in values.items():
        low, high = curve.intervals[key]
        row |= {key: value, f"{key} low": low, f"{key} high": high}
    return row | {
        "seconds": scores.seconds,
        "forwards": scores.forwards,
        "backwards": scores.backwards,
    }


def _save_scores(value: MethodScores, where: Path) -> None:
    from safetensors.torch import save_file

    where.mkdir(parents=True, exist_ok=True)
    tensors = {"scores": value.scores.contiguous()}
    if value.circuits is not None:
        tensors["circuits"] = value.circuits.contiguous()
    save_file(tensors, str(where / "scores.safetensors"))
    meta = {f.name: getattr(value, f.name) for f in fields(value) if f.name not in tensors}
    meta.pop("circuits", None)
    write_atomic(where / "scores.json", json.dumps(meta, indent=1, default=str))


def _load_scores(where: Path) -> MethodScores:
    from safetensors.torch import load_file

    meta = json.loads((where / "scores.json").read_text(encoding="utf-8"))
    tensors = load_file(str(where / "scores.safetensors"))
    return MethodScores(tensors["scores"], circuits=tensors.get("circuits"), **meta)
