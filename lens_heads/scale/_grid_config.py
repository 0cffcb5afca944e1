"""The grid config of :func:`lens_heads.scale.run_grid`: models × tasks × seeds × schedules, the
analyses run after each training, and the resources of a cell; parsed from TOML or YAML and
validated completely before any cell starts.

>>> config = GridConfig.from_text('''
... models = ["tiny-2x4"]
... tasks = ["capitalize", "antonym"]
... seeds = [0, 1]
... [schedules.short]
... steps = 4
... batch_size = 4
... ''')
>>> len(config.cells), config.cells[0].key
(4, 'tiny-2x4/short/seed0/capitalize')
>>> GridConfig.from_text('models = ["tiny-2x4"]\\ntasks = ["capitalise"]')  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
lens_heads.scale._grid_config.GridConfigError: <config> line 2: unknown task 'capitalise' ...
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from lens_heads.core import InputError, LensHeadsError
from lens_heads.core.internal import LoadingSetting, MissingFileError, read_text_file, warn_renamed
from lens_heads.engine import TrainingConfig
from lens_heads.scale._cell_analyses import GridEvaluationConfig, GridSweepConfig

__all__ = ["Cell", "GridConfig", "GridConfigError"]

_TOP_KEYS = {
    "name",
    "models",
    "tasks",
    "seeds",
    "schedules",
    "evaluate",
    "sweep",
    "resources",
    "model",
    "checkpoint_every",
}
_RESOURCE_KEYS = {"num_cpus", "num_gpus", "retries", "stale_after"}
_MODEL_KEYS = {"device", "dtype"}
_TINY = re.compile(r"^tiny-(\d+)x(\d+)(?:-seed(\d+))?$")


class GridConfigError(LensHeadsError, ValueError):
    """The grid config is invalid; the message names the line (when known) and the fix."""


@dataclass(frozen=True)
class Cell:
    """One training of the grid: a model, a task, a seed and a named schedule; ``path`` is its
    folder under the output directory."""

    model: str
    task: str
    seed: int
    schedule: str
    path: str

    @property
    def key(self) -> str:
        return f"{self.model}/{self.schedule}/seed{self.seed}/{self.task}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "task": self.task,
            "seed": self.seed,
            "schedule": self.schedule,
            "path": self.path,
        }


@dataclass(frozen=True, kw_only=True)
class GridConfig(LoadingSetting):
    """A validated grid: models x schedules x seeds x tasks, each cell a training, then its
    evaluation and optional sweep; each cell's model loads on ``device`` in ``dtype`` (the
    ``[model]`` table of the file)."""

    models: list[str]
    """Model aliases, .gguf files, checkpoint folders or Hugging Face ids."""
    tasks: list[str]
    """Task names (built-in or the names of ``task_files``)."""
    seeds: list[int]
    """Training seeds; each cell sets its schedule's ``seed``."""
    schedules: dict[str, TrainingConfig]
    """Named training schedules (a :class:`TrainingConfig` each, its seed set per cell)."""
    evaluate: GridEvaluationConfig | None = field(default_factory=GridEvaluationConfig)
    """Each cell's evaluation after training (None: no evaluation)."""
    sweep: GridSweepConfig | None = None
    """Each cell's removal sweeps (None: no sweep)."""
    resources: dict[str, Any] = field(default_factory=dict)
    """Per cell: ``num_cpus``, ``num_gpus``, ``retries``, ``stale_after``."""
    checkpoint_every: int = 50
    """Training checkpoint interval in steps."""
    task_files: dict[str, str] = field(default_factory=dict)
    """The name of each task given as a file -> that file."""
    name: str = "grid"
    """The grid's name (its results' title)."""
    config_file: str = "<config>"
    """The file the grid was read from (error messages name it)."""

    # -- derived ------------------------------------------------------------------------------
    @property
    def cells(self) -> list[Cell]:
        """Every cell, model-major; a cell's folder names only the dimensions that vary (a
        one-model, one-seed, one-schedule grid keeps ``<out>/<task>/``, as ``mask_table``)."""
        vary = {
            "model": len(self.models) > 1,
            "schedule": len(self.schedules) > 1,
            "seed": len(self.seeds) > 1,
        }
        cells = []
        for model in self.models:
            for schedule in self.schedules:
                for seed in self.seeds:
                    for task in self.tasks:
                        parts = []
                        if vary["model"]:
                            parts.append(_slug(model))
                        if vary["schedule"]:
                            parts.append(schedule)
                        if vary["seed"]:
                            parts.append(f"seed{seed}")
                        parts.append(task)
                        cells.append(Cell(model, task, seed, schedule, "/".join(parts)))
        return cells

    def training_config(self, cell: Cell) -> TrainingConfig:
        """The :class:`TrainingConfig` of ``cell`` (its schedule with its seed)."""
        return TrainingConfig.from_dict(
            {**self.schedules[cell.schedule].to_dict(), "seed": cell.seed}
        )

    def task_spec(self, task: str) -> str:
        """What :func:`lens_heads.get_task` loads for ``task`` (a built-in name or a file)."""
        return self.task_files.get(task, task)

    @property
    def retries(self) -> int:
        return int(self.resources.get("retries", 2))

    def to_dict(self) -> dict[str, Any]:
        """JSON-able; :meth:`from_dict` reads it back (how cells travel to Ray workers)."""
        return {
            "name": self.name,
            "models": self.models,
            "tasks": self.tasks,
            "seeds": self.seeds,
            "schedules": {k: v.to_dict() for k, v in self.schedules.items()},
            "evaluate": None if self.evaluate is None else self.evaluate.to_dict(),
            "sweep": None if self.sweep is None else self.sweep.to_dict(),
            "resources": self.resources,
            "device": self.device,
            "dtype": self.dtype,
            "checkpoint_every": self.checkpoint_every,
            "task_files": self.task_files,
            "config_file": self.config_file,
        }

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> GridConfig:
        values = dict(values)
        if "source" in values:  # a grid.json written before config_file had its name
            values["config_file"] = values.pop("source")
        values["schedules"] = {
            k: TrainingConfig.from_dict(v) for k, v in values["schedules"].items()
        }
        for key, kind in (("evaluate", GridEvaluationConfig), ("sweep", GridSweepConfig)):
            if isinstance(values.get(key), dict):
                values[key] = kind(**values[key])
        return cls(**values)

    # -- parsing ------------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> GridConfig:
        """Read a ``.toml`` or ``.yaml``/``.yml`` grid config and validate it."""
        path = Path(path)
        if not path.is_file():
            raise MissingFileError(f"grid config {path} does not exist")
        suffix = path.suffix.lower()
        if suffix not in (".toml", ".yaml", ".yml"):
            raise GridConfigError(
                f"{path}: unknown config format {suffix!r}; write the grid as .toml or .yaml"
            )
        text = read_text_file(path, "grid config", error=GridConfigError)
        return cls.from_text(
            text, format="toml" if suffix == ".toml" else "yaml", source=str(path), base=path.parent
        )

    @classmethod
    def from_text(
        cls,
        text: str,
        *,
        format: str = "toml",
        source: str = "<config>",
        base: str | os.PathLike[str] = ".",
    ) -> GridConfig:
        """Parse and validate a config given as text (``format``: ``"toml"`` or ``"yaml"``);
        task files are resolved against ``base``."""
        try:
            if format == "toml":
                import tomllib

                values = tomllib.loads(text)
            else:
                import yaml

                values = yaml.safe_load(text) or {}
        except Exception as error:  # tomllib.TOMLDecodeError / yaml.YAMLError
            mark = getattr(error, "problem_mark", None)  # YAML: where, and what, in one line
            problem = getattr(error, "problem", None)
            detail = (
                f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
                if mark is not None and problem
                else " ".join(str(error).split())
            )
            raise GridConfigError(
                f"{source}: not valid {format.upper()} ({detail}); fix the syntax"
            ) from error
        if not isinstance(values, dict):
            raise GridConfigError(f"{source}: the config must be a table/mapping of keys")
        return _Validator(text, source, Path(base)).build(values)

    @classmethod
    def from_values(
        cls, values: dict[str, Any], *, source: str = "<arguments>", base: str = "."
    ) -> GridConfig:
        """Validate a config given as the mapping a TOML/YAML file would hold.

        >>> config = GridConfig.from_values({"models": ["tiny-2x4"], "tasks": ["antonym"]})
        >>> [cell.path for cell in config.cells], config.schedules["short"].steps
        (['antonym'], 200)
        """
        return _Validator("", source, Path(base)).build(dict(values))


def _slug(spec: str) -> str:
    """A folder name for a model spec: the last path component, '/' made '--'."""
    name = spec.rstrip("/").removesuffix(".gguf")
    if os.sep in name or name.startswith((".", "~")):
        name = Path(name).name
    return re.sub(r"[^A-Za-z0-9._-]+", "--", name)


class _Validator:
    def __init__(self, text: str, source: str, base: Path) -> None:
        self.lines = text.splitlines()
        self.source = source
        self.base = base

    def line(self, value: Any, occurrence: int = 1, key: str | None = None) -> int | None:
        """The 1-based line of the ``occurrence``-th mention of ``value`` (or of ``key =``)."""
        patterns = []
        if key is not None:
            patterns.append(re.compile(rf"^\s*-?\s*{re.escape(key)}\s*[=:]"))
        if value is not None:
            text = re.escape(str(value))
            patterns.append(re.compile(rf"(?<![\w.-]){text}(?![\w.-])"))
        seen = 0
        for number, line in enumerate(self.lines, 1):
            body = line.split("#", 1)[0]
            if all(p.search(body) for p in patterns):
                seen += body.count(str(value)) if value is not None and key is None else 1
                if seen >= occurrence:
                    return number
        return None

    def fail(
        self, message: str, value: Any = None, *, key: str | None = None, occurrence: int = 1
    ) -> NoReturn:
        number = self.line(value, occurrence, key) if (value is not None or key) else None
        where = f"{self.source} line {number}" if number else self.source
        raise GridConfigError(f"{where}: {message}")

    def names(self, values: dict[str, Any], key: str, required: bool = True) -> list[Any]:
        value = values.get(key)
        if value is None:
            if required:
                self.fail(f"missing '{key}'; list at least one, e.g. {key} = [...]")
            return []
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            value = [value]
        if not isinstance(value, list) or not value:
            self.fail(f"'{key}' must be a non-empty list", key=key)
        counts: dict[str, int] = {}
        for item in value:
            counts[str(item)] = counts.get(str(item), 0) + 1
            if counts[str(item)] == 2:
                self.fail(
                    f"duplicate cells: {key} lists {item!r} twice; list each once",
                    item,
                    occurrence=2,
                )
        return value

    def section(self, values: dict[str, Any], key: str, allowed: set[str]) -> dict[str, Any]:
        value = values.get(key) or {}
        if not isinstance(value, dict):
            self.fail(f"'{key}' must be a table of settings", key=key)
        for name in value:
            if name not in allowed:
                self.fail(
                    f"unknown key {name!r} in [{key}]; allowed: {', '.join(sorted(allowed))}",
                    key=name,
                )
        return dict(value)

    def build(self, values: dict[str, Any]) -> GridConfig:
        for key in values:
            if key not in _TOP_KEYS:
                close = difflib.get_close_matches(key, sorted(_TOP_KEYS), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                self.fail(
                    f"unknown key {key!r}{hint}; allowed: {', '.join(sorted(_TOP_KEYS))}",
                    key=key,
                )
        models = [self.model(str(m)) for m in self.names(values, "models")]
        tasks, task_files = self.tasks(values)
        seeds = self.names(values, "seeds", required=False) or [0]
        for seed in seeds:
            if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
                self.fail(f"seed {seed!r} must be a non-negative integer", seed)
        schedules = self.schedules(values.get("schedules"))
        evaluate = self.evaluate(values)
        sweep = self.sweep(values)
        resources = self.section(values, "resources", _RESOURCE_KEYS)
        for key in ("num_cpus", "num_gpus", "retries", "stale_after"):
            if key in resources and (
                not isinstance(resources[key], (int, float)) or resources[key] < 0
            ):
                self.fail(f"resources.{key} must be a number >= 0", key=key)
        loading = {k: str(v) for k, v in self.section(values, "model", _MODEL_KEYS).items()}
        try:
            LoadingSetting(**loading)
        except InputError as error:
            self.fail(f"model.{error}", key=next(k for k in loading if str(error).startswith(k)))
        if evaluate is not None:
            for name, schedule in schedules.items():
                if schedule.n_eval and evaluate.n_eval > schedule.n_eval:
                    self.fail(
                        f"evaluate.n_eval = {evaluate.n_eval} exceeds the {schedule.n_eval} "
                        f"examples schedule {name!r} holds out of training (n_eval): evaluation "
                        "would score trained examples; lower evaluate.n_eval or raise the "
                        "schedule's n_eval",
                        key="n_eval",
                    )
        every = values.get("checkpoint_every", 50)
        if not isinstance(every, int) or every < 1:
            self.fail("checkpoint_every must be a positive integer", key="checkpoint_every")
        return GridConfig(
            models=models,
            tasks=tasks,
            seeds=[int(s) for s in seeds],
            schedules=schedules,
            evaluate=evaluate,
            sweep=sweep,
            resources=resources,
            **loading,
            checkpoint_every=every,
            task_files=task_files,
            name=str(values.get("name", "grid")),
            config_file=self.source,
        )

    def model(self, spec: str) -> str:
        from lens_heads.core import MODEL_ALIASES

        path = Path(spec).expanduser()
        if spec in MODEL_ALIASES or _TINY.match(spec):
            return spec
        if path.suffix == ".gguf" or path.is_dir():
            if not path.exists():
                self.fail(f"model file {spec!r} does not exist; fix the path", spec)
            return spec
        if "/" in spec and not spec.startswith((".", "/", "~")):
            return spec  # a Hugging Face id, checked when the cell loads it
        close = difflib.get_close_matches(spec, sorted(MODEL_ALIASES), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        self.fail(
            f"unknown model alias {spec!r}{hint}; use an alias ({', '.join(sorted(MODEL_ALIASES))}"
            "), tiny-LxH, a .gguf file, a checkpoint directory or a Hugging Face id 'org/name'",
            spec,
        )

    def tasks(self, values: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
        from lens_heads.core import get_task, list_tasks

        raw = values.get("tasks")
        if isinstance(raw, str) and raw in ("all", "word", "translation"):
            return list_tasks(None if raw == "all" else raw), {}
        known = list_tasks()
        names: list[str] = []
        files: dict[str, str] = {}
        for item in self.names(values, "tasks"):
            item = str(item)
            if item in known:
                names.append(item)
                continue
            path = Path(item).expanduser()
            path = path if path.is_absolute() else self.base / path
            if path.suffix in (".json", ".jsonl", ".csv", ".tsv") or path.is_file():
                if not path.is_file():
                    self.fail(f"task file {item!r} does not exist; fix the path", item)
                try:
                    name = get_task(path).name
                except ValueError as error:
                    self.fail(f"task file {item!r} is not readable: {error}", item)
                if name in names:
                    self.fail(f"duplicate cells: task {name!r} appears twice", item)
                names.append(name)
                files[name] = str(path.resolve())
                continue
            close = difflib.get_close_matches(item, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            self.fail(
                f"unknown task {item!r}{hint}; `lens-heads tasks` lists the built-in tasks, or "
                "give a path to a task file",
                item,
            )
        return names, files

    def schedules(self, raw: Any) -> dict[str, TrainingConfig]:
        if raw is None:
            return {"short": TrainingConfig.short()}
        if not isinstance(raw, dict) or not raw:
            self.fail("'schedules' must be a table of named schedules", key="schedules")
        schedules: dict[str, TrainingConfig] = {}
        seen: dict[tuple, str] = {}
        for name, fields in raw.items():
            if not re.fullmatch(r"[A-Za-z0-9._-]+", name):
                self.fail(f"schedule name {name!r}: use letters, digits, '.', '_' or '-'", name)
            fields = dict(fields or {})
            preset = fields.pop("preset", "short")
            if preset not in ("short", "paper"):
                self.fail(f"schedule {name!r}: preset must be 'short' or 'paper'", key="preset")
            if "seed" in fields:
                self.fail(
                    f"schedule {name!r} sets 'seed'; list seeds in the top-level 'seeds'",
                    key="seed",
                )
            for key, value in fields.items():
                if key in ("steps", "batch_size", "n_eval") and (
                    not isinstance(value, int) or isinstance(value, bool) or value < 0
                ):
                    self.fail(
                        f"schedule {name!r}: {key} = {value!r} must be a "
                        f"{'non-negative' if key == 'n_eval' else 'positive'} integer",
                        key=key,
                    )
            for old in set(fields) & set(TrainingConfig.RENAMED):
                warn_renamed(f"schedule {name!r}: {old}", TrainingConfig.RENAMED[old])
            try:
                base = TrainingConfig() if preset == "short" else TrainingConfig.paper()
                schedule = TrainingConfig.from_dict({**base.to_dict(), **fields})
            except (ValueError, TypeError) as error:
                bad = next((k for k in fields if k in str(error)), None)
                self.fail(f"schedule {name!r}: {error}", key=bad or name)
            identity = tuple(sorted(schedule.to_dict().items()))
            if identity in seen:
                self.fail(
                    f"duplicate cells: schedules {seen[identity]!r} and {name!r} are the same "
                    "training; remove one",
                    name,
                )
            seen[identity] = name
            schedules[name] = schedule
        return schedules

    def evaluate(self, values: dict[str, Any]) -> GridEvaluationConfig | None:
        if values.get("evaluate") is False:
            return None
        return self.group(values, "evaluate", GridEvaluationConfig)

    def sweep(self, values: dict[str, Any]) -> GridSweepConfig | None:
        if not values.get("sweep"):
            return None
        return self.group(values, "sweep", GridSweepConfig)

    def group(self, values: dict[str, Any], key: str, kind: type) -> Any:
        """The ``[key]`` table as a ``kind`` settings group: its keys are the group's fields
        but those it sets itself; an old name warns and is read as the new one."""
        allowed = {f.name for f in dataclasses.fields(kind)} - set(kind.NOT_HERE)
        section = values.get(key) or {}
        if isinstance(section, dict):
            section = dict(section)
            for old in set(section) & set(getattr(kind, "RENAMED", {})):
                warn_renamed(f"{key}.{old}", kind.RENAMED[old])
                section.setdefault(kind.RENAMED[old], section.pop(old))
            for name in set(section) & set(kind.NOT_HERE):
                self.fail(f"{key}.{name} cannot be set: {kind.NOT_HERE[name]}", key=name)
        section = self.section({key: section}, key, allowed)
        try:
            return kind(**section)
        except (ValueError, TypeError) as error:
            named = [name for name in section if name in str(error)]
            quoted = [  # the key whose value (or one of its items) the message quotes
                name
                for name, value in section.items()
                for item in (value if isinstance(value, list) else [value])
                if repr(item) in str(error)
            ]
            self.fail(f"{key}: {error}", key=(named or quoted or [key])[0])
