"""A head-finder claim decided under a frozen protocol: one TOML file that fixes, before any test
run, the methods and every setting, the pair counts of each part, the seeds, the weighting and
the decision rule (``protocols/head_finders-1.toml``). Every result made under it records the
file's hash; a run on a changed file is refused unless the file says it is a new version.

:func:`run_protocol` runs one model and task: a benchmark per seed on the test part
(:func:`~lens_heads.finders.protocol_split`), the test pairs the same for every seed; then every
method's CMD and CPR, under both weightings, with intervals from a bootstrap over seeds and test
pairs together, and each mask's paired comparison with the strongest like-for-like baseline.

>>> protocol = FinderProtocol.from_toml('''
... version = 1
... name = "tiny"
... models = ["tiny"]
... tasks = ["capitalize"]
... seeds = [0, 1]
... [pairs]
... test = 4
... train = 4
... calibration = 4
... [methods]
... selected = "selected-exact-mask"
... baselines = ["integrated"]
... floors = ["random-0"]
... [settings]
... mask_steps = 2
... bootstrap = 20
... sizes = [0.25, 0.5, 1.0]
... [rule]
... gain = 0.3
... level = 0.05
... ''')
>>> protocol.methods
('selected-exact-mask', 'integrated', 'random-0')
>>> len(protocol.sha256)
16
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import torch

from lens_heads.core import InputError, markdown_table
from lens_heads.core.internal import FolderResult, MissingFileError, ModelLike, holm, model_name
from lens_heads.finders._benchmark import BenchmarkConfig, FinderBenchmark, head_finder_benchmark
from lens_heads.finders._counterfactuals import counterfactual_pairs
from lens_heads.finders._faithfulness import SIZES, FaithfulnessCurve, _f
from lens_heads.finders._methods import METHODS, MethodConfig

__all__ = ["FinderProtocol", "ProtocolResult", "run_protocol"]

#: the weightings of a curve's area: the linear share of heads (MIB's default) and its log
WEIGHTINGS = ("linear", "log")


@dataclass(frozen=True)
class FinderProtocol:
    """A protocol file's content (see the module); ``sha256`` is the first 16 hex digits of the
    file's bytes, what every result made under it records."""

    version: int
    name: str
    models: tuple[str, ...]
    tasks: tuple[str, ...]
    seeds: tuple[int, ...]
    test_seed: int
    pairs: dict[str, int]
    roles: dict[str, str]
    """Each method's role: ``selected``, ``preregistered``, ``baseline`` or ``floor``."""
    settings: dict[str, Any]
    rule: dict[str, Any]
    sha256: str
    source: str = ""
    """The file it was read from (empty for a string)."""

    _TOP: ClassVar[set[str]] = {"version", "name", "models", "tasks", "seeds", "test_seed"}
    _TOP |= {"split", "pairs", "methods", "settings", "rule"}

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> FinderProtocol:
        """Read and check a protocol file."""
        path = Path(path)
        if not path.is_file():
            raise MissingFileError(f"protocol file {path} does not exist")
        return cls.from_toml(path.read_text(encoding="utf-8"), source=str(path))

    @classmethod
    def from_toml(cls, text: str, source: str = "") -> FinderProtocol:
        """Read and check a protocol's text; every problem is an :class:`InputError` naming
        the field, before anything runs."""
        where = source or "the protocol"
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise InputError(f"{where}: not valid TOML ({error})") from error
        unknown = sorted(set(data) - cls._TOP)
        if unknown:
            raise InputError(f"{where}: unknown field(s) {unknown}; known: {sorted(cls._TOP)}")
        if data.get("split", "test") != "test":
            raise InputError(f"{where}: a protocol decides on the test split only")
        methods = data.get("methods", {})
        roles = {methods.get("selected", ""): "selected"}
        if methods.get("preregistered"):
            roles[methods["preregistered"]] = "preregistered"
        roles |= dict.fromkeys(methods.get("baselines", []), "baseline")
        roles |= dict.fromkeys(methods.get("floors", []), "floor")
        missing = [name for name in roles if name not in METHODS]
        if missing or not methods.get("baselines"):
            problem = f"unknown methods {missing}" if missing else "no baselines"
            raise InputError(f"{where}: {problem}; the finders: {', '.join(METHODS)}")
        pairs = {"test": 100, "train": 40, "calibration": 0} | data.get("pairs", {})
        rule = {"metric": "CMD", "weighting": "linear", "reported": list(WEIGHTINGS)}
        rule |= data.get("rule", {})
        if rule["metric"] != "CMD" or rule["weighting"] not in WEIGHTINGS:
            raise InputError(f"{where}: the rule decides on CMD under 'linear' or 'log'")
        if not 0 < float(rule.get("gain", -1)) < 1 or not 0 < float(rule.get("level", -1)) < 1:
            raise InputError(f"{where}: rule.gain and rule.level must lie between 0 and 1")
        seeds = tuple(int(seed) for seed in data.get("seeds", []))
        if len(seeds) < 1 or len(set(seeds)) != len(seeds):
            raise InputError(f"{where}: seeds must list distinct training seeds, got {seeds}")
        return cls(
            version=int(data.get("version", 0)),
            name=str(data.get("name", "")),
            models=tuple(data.get("models", ())),
            tasks=tuple(data.get("tasks", ())),
            seeds=seeds,
            test_seed=int(data.get("test_seed", 0)),
            pairs={key: int(value) for key, value in pairs.items()},
            roles=roles,
            settings=dict(data.get("settings", {})),
            rule=rule,
            sha256=hashlib.sha256(text.encode()).hexdigest()[:16],
            source=source,
        )

    @property
    def methods(self) -> tuple[str, ...]:
        return tuple(self.roles)

    @property
    def label(self) -> str:
        return f"{self.name} protocol v{self.version} ({self.sha256})"

    def config(self, seed: int, n_test: int, n_calibration: int) -> BenchmarkConfig:
        """The benchmark settings of one seed's run."""
        settings = self.settings
        methods = MethodConfig(
            mask_steps=int(settings.get("mask_steps", 50)),
            ig_steps=int(settings.get("ig_steps", 16)),
            precision=settings.get("precision", "auto"),
            mask_seed=seed,
        )
        return BenchmarkConfig(
            n_pairs=n_test,
            n_train_pairs=self.pairs["train"],
            n_calibration_pairs=n_calibration,
            seed=self.test_seed,
            train_seed=seed,
            split="test",
            protocol=self.sha256,
            bootstrap=int(settings.get("bootstrap", 1000)),
            sizes=tuple(settings.get("sizes", SIZES)),
            ablation=settings.get("ablation", "counterfactual"),
            method_settings=methods,
        )


def _available(model: ModelLike, task: str, part: str, n: int, seed: int) -> int:
    """How many pairs a part gives for this model, at most ``n``."""
    drawn = counterfactual_pairs(model, task, part=part, n=n, seed=seed, split="test")
    return len(drawn)


def run_protocol(
    model: ModelLike,
    task: str,
    config: FinderProtocol | str | os.PathLike[str],
    *,
    out: str | os.PathLike[str] | None = None,
    progress: bool = True,
    overwrite: bool = False,
) -> ProtocolResult:
    """One model and task under the protocol ``config`` (a :class:`FinderProtocol` or its file,
    every setting in it: nothing to override): a benchmark per seed on the test part
    (``out/seed-<s>``, each a resumable folder claimed for its model, data and settings, the
    protocol's hash among them), then the pooled result, saved in ``out/protocol``. The pair
    counts are fixed before any method runs: the test part's pairs and the calibration pairs are
    what the protocol asks for, or all that the part gives where it gives fewer (the same for
    every seed)."""
    protocol = config if isinstance(config, FinderProtocol) else FinderProtocol.load(config)
    n_test = _available(model, task, "eval", protocol.pairs["test"], protocol.test_seed)
    n_train, wanted = protocol.pairs["train"], protocol.pairs["calibration"]
    n_calibration = wanted and min(
        _available(model, task, "train", n_train + wanted, seed) - n_train
        for seed in protocol.seeds
    )
    if wanted and n_calibration < 2:
        raise InputError(f"task {task!r} leaves {n_calibration} calibration pairs; at least 2")
    runs = {}
    for seed in protocol.seeds:
        folder = None if out is None else Path(out) / f"seed-{seed}"
        runs[seed] = head_finder_benchmark(
            model, [task], protocol.methods, protocol.config(seed, n_test, n_calibration),
            out=folder, progress=progress, overwrite=overwrite,
        )  # fmt: skip
    counts = {"test": n_test, "train": n_train, "calibration": n_calibration}
    result = pool(protocol, model_name(model), task, runs, counts)
    if out is not None:
        result.save(Path(out) / "protocol")
    return result


@dataclass(repr=False)
class ProtocolResult(FolderResult):
    """One model and task under a protocol: per method (``table``) its CMD and CPR under both
    weightings (the mean over seeds on the test pairs, with 95 % intervals from the bootstrap
    over seeds and pairs), its mean cost; per mask (``comparisons``) the paired comparison with
    the strongest baseline under each weighting and whether the rule is met; per method and
    size the mean faithfulness with its band (``f_mean``, ``f_low``, ``f_high``:
    ``[n_methods, n_sizes]``, the absolute order's circuits, CMD's)."""

    protocol: dict[str, Any]
    model: str
    task: str
    counts: dict[str, int]
    seeds: list[int]
    methods: list[str]
    roles: dict[str, str]
    sizes: list[float]
    table: list[dict[str, Any]]
    comparisons: list[dict[str, Any]]
    f_mean: torch.Tensor
    f_low: torch.Tensor
    f_high: torch.Tensor
    settings: dict[str, Any] = field(default_factory=dict)

    _format: ClassVar[str] = "lens_heads.finder_protocol/1"

    def __repr__(self) -> str:
        met = [c["mask"] for c in self.comparisons if c["decides"] and c["met"]]
        return (
            f"ProtocolResult({self.model}, {self.task}, {self.protocol['label']}: "
            f"{len(self.methods)} methods x {len(self.seeds)} seeds on {self.counts['test']} "
            f"test pairs; beats the baselines: {', '.join(met) or 'none'})"
        )

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.table)

    def comparison_frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.comparisons)

    def met(self, mask: str, weighting: str | None = None) -> bool:
        """Does ``mask`` beat the baselines under the rule (the deciding weighting unless
        ``weighting``)?"""
        weighting = weighting or self.protocol["rule"]["weighting"]
        rows = [c for c in self.comparisons if c["mask"] == mask and c["weighting"] == weighting]
        if not rows:
            raise InputError(f"no comparison of {mask!r} under {weighting!r} in this result")
        return bool(rows[0]["met"])

    def to_markdown(self) -> str:
        shown = self.to_frame().drop(columns=["seconds"], errors="ignore")
        head = (
            f"{self.model}, {self.task}: {self.protocol['label']}, seeds {self.seeds}, "
            f"{self.counts['test']} test pairs"
        )
        compared = markdown_table(self.comparison_frame(), floatfmt=".3g", index=False)
        return f"{head}\n\n{markdown_table(shown, floatfmt='.3g', index=False)}\n\n{compared}"

    def plot(self) -> Any:
        """Faithfulness per size (the absolute order's circuits), mean over seeds with its band
        over seeds and pairs, one line per method; floors dotted."""
        import plotly.graph_objects as go

        figure = go.Figure()
        for index, method in enumerate(self.methods):
            low, high = self.f_low[index].tolist(), self.f_high[index].tolist()
            figure.add_scatter(
                x=self.sizes + self.sizes[::-1], y=high + low[::-1], fill="toself",
                line={"width": 0}, opacity=0.15, showlegend=False, legendgroup=method,
                hoverinfo="skip",
            )  # fmt: skip
            dash = "dot" if self.roles[method] == "floor" else None
            figure.add_scatter(
                x=self.sizes, y=self.f_mean[index].tolist(), mode="lines+markers",
                name=f"{method} ({self.roles[method]})", legendgroup=method,
                line={"dash": dash},
            )  # fmt: skip
        figure.add_hline(y=1.0, line_dash="dot")
        return figure.update_layout(
            title={"text": f"{self.task} on {self.model}: {self.protocol['label']}"},
            xaxis={"title": {"text": "circuit size (share of heads)"}, "type": "log"},
            yaxis={"title": {"text": "faithfulness (mean over seeds)"}},
        )


def _curve_areas(
    curve: FaithfulnessCurve, draws: np.ndarray, sizes: Sequence[float]
) -> dict[str, np.ndarray]:
    """Per draw of the pairs (rows of ``draws``: pair indices), the curve's CPR and CMD under
    both weightings (:meth:`FaithfulnessCurve.resampled`) and its ``f`` per size of the
    absolute order (``[n_sizes, draws]``)."""
    index = [torch.from_numpy(row) for row in draws]
    areas = np.array([curve.resampled(row) for row in index])  # [draws, 4]
    values, n = curve.pair_metrics, len(sizes)
    absolute = [_f(values[2 + n : 2 + 2 * n, row], values[0, row], values[1, row]) for row in index]
    found = {"f": torch.stack(absolute, dim=1).double().numpy()}
    return found | {key: areas[:, i] for i, key in enumerate(("CPR", "CMD", "CPR log", "CMD log"))}


def _interval(values: np.ndarray) -> tuple[float, float]:
    low, high = np.quantile(values, [0.025, 0.975])
    return float(low), float(high)


def pool(
    protocol: FinderProtocol,
    model: str,
    task: str,
    runs: dict[int, FinderBenchmark],
    counts: dict[str, int],
) -> ProtocolResult:
    """The pooled result of one benchmark per seed (see :class:`ProtocolResult`). The same
    bootstrap draws (seeds and test pairs, with replacement) serve every method, so the
    comparisons are paired; a two-sided p is ``2 (k + 1) / (B + 1)`` (``k``: the draws on the
    rarer side of 0), never below ``2 / (B + 1)``, which the result stores beside it."""
    seeds = sorted(runs)
    sizes = list(protocol.config(seeds[0], 2, 0).sizes)
    curves = {seed: {curve.method: curve for curve in runs[seed].curves.values()} for seed in seeds}
    n_pairs = curves[seeds[0]][protocol.methods[0]].pair_metrics.shape[1]
    b = int(protocol.settings.get("bootstrap", 1000))
    rng = np.random.default_rng(protocol.test_seed + 7)
    pair_draws = rng.integers(0, n_pairs, (b, n_pairs))
    seed_draws = rng.integers(0, len(seeds), (b, len(seeds)))
    whole = np.arange(n_pairs)[None]
    point: dict[str, dict[str, Any]] = {}
    boot: dict[str, dict[str, np.ndarray]] = {}
    for method in protocol.methods:
        per_seed = [_curve_areas(curves[s][method], whole, sizes) for s in seeds]
        drawn = [_curve_areas(curves[s][method], pair_draws, sizes) for s in seeds]
        point[method] = {key: np.mean([p[key] for p in per_seed], axis=0) for key in per_seed[0]}
        draw = np.arange(b)[:, None]  # each bootstrap draw: its seeds, at its own pair draw
        boot[method] = {
            key: np.stack([d[key] for d in drawn])[seed_draws, draw].mean(axis=1)
            if key != "f"
            else np.stack([d[key] for d in drawn])  # [seeds, sizes, draws]
            for key in drawn[0]
        }
        seconds = [runs[s].frame.set_index("method").loc[method, "seconds"] for s in seeds]
        point[method]["seconds"] = float(np.mean(seconds))
    keys = [f"{metric}{suffix}" for metric in ("CMD", "CPR") for suffix in ("", " log")]
    table = []
    for method in protocol.methods:
        row: dict[str, Any] = {"method": method, "role": protocol.roles[method]}
        for key in keys:
            row[key] = float(point[method][key][0])
            row[f"{key} low"], row[f"{key} high"] = _interval(boot[method][key])
        row["seconds"] = point[method]["seconds"]
        table.append(row)
    comparisons = _compare(protocol, point, boot, b)
    f_mean, f_low, f_high = [], [], []
    for method in protocol.methods:
        f_mean.append(point[method]["f"][:, 0])
        pooled = boot[method]["f"][seed_draws, :, np.arange(b)[:, None]].mean(axis=1)  # [b, n]
        f_low.append(np.quantile(pooled, 0.025, axis=0))
        f_high.append(np.quantile(pooled, 0.975, axis=0))
    settings = runs[seeds[0]].settings
    return ProtocolResult(
        protocol={
            "version": protocol.version, "name": protocol.name, "sha256": protocol.sha256,
            "label": protocol.label, "rule": protocol.rule, "source": protocol.source,
        },
        model=model, task=task, counts=dict(counts), seeds=seeds,
        methods=list(protocol.methods), roles=dict(protocol.roles), sizes=sizes, table=table,
        comparisons=comparisons, f_mean=torch.tensor(np.array(f_mean)),
        f_low=torch.tensor(np.array(f_low)), f_high=torch.tensor(np.array(f_high)),
        settings={"benchmark": settings, "bootstrap": b},
    )  # fmt: skip


def _compare(
    protocol: FinderProtocol,
    point: dict[str, dict[str, Any]],
    boot: dict[str, dict[str, np.ndarray]],
    b: int,
) -> list[dict[str, Any]]:
    """Each mask against the strongest baseline (lowest mean CMD) under each weighting: the
    gain, the paired bootstrap interval of the difference, the p (Holm over the run's masks, per
    weighting) and whether the rule is met."""
    rule = protocol.rule
    masks = [m for m, role in protocol.roles.items() if role in ("selected", "preregistered")]
    baselines = [m for m, role in protocol.roles.items() if role == "baseline"]
    rows = []
    for weighting in rule.get("reported", WEIGHTINGS):
        key = "CMD" if weighting == "linear" else "CMD log"
        best = min(baselines, key=lambda name: float(point[name][key][0]))
        found = []
        for mask in masks:
            difference = boot[mask][key] - boot[best][key]
            k = min(int(np.sum(difference >= 0)), int(np.sum(difference <= 0)))
            mine, theirs = float(point[mask][key][0]), float(point[best][key][0])
            found.append(
                {
                    "mask": mask, "weighting": weighting, "baseline": best, "CMD": mine,
                    "baseline CMD": theirs, "gain": 1 - mine / theirs if theirs else np.nan,
                    "difference low": _interval(difference)[0],
                    "difference high": _interval(difference)[1],
                    "p": min(1.0, 2 * (k + 1) / (b + 1)), "p floor": 2 / (b + 1),
                    "decides": weighting == rule["weighting"],
                }
            )  # fmt: skip
        adjusted = holm(np.array([row["p"] for row in found]))
        for row, q in zip(found, adjusted, strict=True):
            row["p (Holm)"] = float(q)
            row["met"] = bool(row["gain"] >= float(rule["gain"]) and q < float(rule["level"]))
        rows += found
    return rows
