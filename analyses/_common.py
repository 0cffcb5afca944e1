"""What every analysis shares: its config as a command line, the lazily loaded model, the
trained mask as a resumable stage, and the files every analysis writes.

An analysis module holds a ``Config`` dataclass (every field a command-line option: ``steps``
becomes ``--steps``; tuples are comma-separated; booleans take ``--x/--no-x``), a
``run(config) -> result`` function and ``main = command_line(Config, run, __doc__)``.

>>> from dataclasses import dataclass
>>> @dataclass
... class Config:
...     out: str
...     steps: int = 100
...     tasks: tuple[str, ...] = ("capitalize",)
>>> parse(Config, ["--out", "runs/x", "--steps", "5", "--tasks", "antonym,synonym"])
Config(out='runs/x', steps=5, tasks=('antonym', 'synonym'))
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import lens_heads as lh
from lens_heads.cli import add_settings, settings_from
from lens_heads.core import (
    Fingerprint,
    Stages,
    claim_folder,
    code_version,
    machine,
    markdown_table,
    run_record,
    save_figures,
    write_atomic,
)
from lens_heads.engine import MaskTrainingResult, train_or_resume

DEFAULT_MODEL = "smollm2-135m-instruct"
_COMMAND: list[str] | None = None  # the command line of the analysis running from a shell
_STARTED: float | None = None  # when that command started (time.monotonic)
_CONFIG: Any = None  # the config that command parsed (its seeds and the data it names)
_PRECISION = "auto"  # the training precision the running command asked for
_MASK_PRECISIONS: set[str] = set()  # the precisions the command computed in (its masks' and own)

__all__ = [
    "DEFAULT_MODEL",
    "LazyModel",
    "MaskedTaskConfig",
    "Stages",
    "check_config",
    "command_line",
    "fingerprint_of",
    "help_of",
    "markdown_table",
    "mask_of",
    "note_mask_precision",
    "parse",
    "precision_field",
    "provenance_of",
    "record_precision",
    "settings_of",
    "stages_of",
    "trained_mask",
    "write_outputs",
]


def precision_field() -> Any:
    """The ``--precision`` option of every analysis that trains: ``auto`` (bf16 autocast where
    the CPU computes bf16 natively, else float32), ``float32`` or ``bfloat16``."""
    return dataclasses.field(
        default="auto",
        metadata=help_of(
            "training precision: auto (bf16 autocast where the CPU computes bf16 natively, "
            "else float32), float32 (what any machine reproduces) or bfloat16"
        ),
    )


def help_of(text: str) -> dict[str, Any]:
    """Field metadata carrying an option's help: ``field(default=3, metadata=help_of("..."))``."""
    return {"help": text}


def parse(config_type: type, argv: Sequence[str] | None, doc: str | None = None) -> Any:
    """The ``config_type`` instance the command line ``argv`` describes."""
    module = sys.modules.get(config_type.__module__)
    stem = Path(getattr(module, "__file__", None) or config_type.__module__).stem
    parser = argparse.ArgumentParser(
        prog=f"python -m analyses.{stem}",
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_settings(parser, config_type)
    return settings_from(parser.parse_args(argv), config_type)


def command_line(
    config_type: type, run: Callable[[Any], Any], doc: str | None
) -> Callable[[Sequence[str] | None], int]:
    """``main(argv)``: parse the config, run, print the summary the run wrote."""

    def main(argv: Sequence[str] | None = None) -> int:
        global _COMMAND, _STARTED, _PRECISION, _CONFIG
        _STARTED = time.monotonic()
        _MASK_PRECISIONS.clear()
        code_version()  # hash the source as the command starts, not after edits made meanwhile
        arguments = list(sys.argv[1:] if argv is None else argv)
        stem = Path(sys.modules[run.__module__].__file__ or "analysis").stem
        _COMMAND = ["python", "-m", f"analyses.{stem}", *arguments]
        _CONFIG = config = parse(config_type, arguments, doc)
        _PRECISION = getattr(config, "precision", "auto")
        try:
            run(config)
        finally:
            _CONFIG = None  # a later result written from Python is not this command's
        summary = Path(config.out) / "summary.md"
        if summary.is_file():
            print(summary.read_text(encoding="utf-8"))
        print(f"results in {config.out}")
        return 0

    return main


#: Config fields that do not change what a run computes (not stored, not compared).
UNSTORED_FIELDS = ("out", "progress")

#: The level of every one-sided test the analyses report (the verdict rule of
#: docs/reproduction.md).
LEVEL = 0.01


def settings_of(config: Any) -> dict[str, Any]:
    """The settings of ``config`` (a dataclass, or a mapping of settings): every field but
    :data:`UNSTORED_FIELDS` and the config class's own ``UNSTORED`` (e.g. a count of
    independent items each a stage)."""
    settings = dict(config) if isinstance(config, Mapping) else dataclasses.asdict(config)
    for name in (*UNSTORED_FIELDS, *getattr(config, "UNSTORED", ())):
        settings.pop(name, None)
    return settings


def fingerprint_of(config: Any, model: Any) -> Fingerprint:
    """What an analysis with ``config`` computes from: the loaded ``model`` (its weights and
    tokenizer), the content of every input the config names (its task and every other field
    that is an existing file or folder, e.g. a training folder to reuse) and the settings
    (:func:`settings_of`)."""
    settings = settings_of(config)
    data: dict[str, Any] = {}
    if isinstance(settings.get("task"), str):
        data["task"] = lh.get_task(settings["task"])  # its examples, not only its name
    if isinstance(settings.get("tasks"), (list, tuple)):
        data["tasks"] = [lh.get_task(name) for name in settings["tasks"]]
    for name, value in settings.items():
        if name != "model" and isinstance(value, str) and value and Path(value).exists():
            data[name] = value  # a file or folder it reads: its content, not its name
    return Fingerprint.of(model, settings, data)


def check_config(config: Any, model: Any) -> Fingerprint:
    """Record the fingerprint of ``config`` run on ``model`` (:func:`fingerprint_of`) in
    ``<config.out>/config.json`` on the first run; refuse a later run of another model, other
    inputs or other settings, whose finished stages would otherwise be reused as if they were
    its own."""
    fingerprint = fingerprint_of(config, model)
    claim_folder(
        config.out,
        fingerprint,
        what="an analysis",
        remedy="choose another --out, or delete the folder to start again",
    )
    return fingerprint


def stages_of(config: Any, model: LazyModel) -> Stages:
    """The resumable stages of ``config.out`` for ``model`` (loaded here: its fingerprint decides
    whether finished stages are this run's), after :func:`check_config`."""
    return Stages(config.out, check_config(config, model()))


class LazyModel:
    """The model of ``spec``, loaded on first call (once per analysis)."""

    def __init__(self, spec: Any) -> None:
        self.spec = spec
        self._model: Any = None if isinstance(spec, (str, os.PathLike)) else spec

    def __call__(self) -> Any:
        if self._model is None:
            self._model = lh.load_model(self.spec)
        return self._model

    @property
    def name(self) -> str:
        return str(self.spec) if isinstance(self.spec, (str, os.PathLike)) else "model"


def trained_mask(
    stages: Stages,
    model: LazyModel,
    task: Any,
    *,
    steps: int,
    lr: float,
    seed: int = 0,
    mask: str | os.PathLike[str] | None = None,
    name: str = "training",
    progress: bool = True,
    **config: Any,
) -> MaskTrainingResult:
    """The mask of ``task``: loaded from ``mask`` (a ``train-mask`` / training folder) when
    given, else trained once with :func:`lens_heads.train_mask` into the stage ``name`` (the
    short CPU schedule with ``steps``, ``lr``, ``seed`` and any other
    :class:`~lens_heads.TrainingConfig` field), resuming an interrupted training from its
    checkpoint."""
    if mask is not None:
        folder = Path(mask)
        if not (folder / "training.json").is_file():
            raise FileNotFoundError(
                f"{folder} is not a training folder (no training.json); pass the folder "
                "`lens-heads train-mask --out` or an analysis's training/ folder wrote"
            )
        return note_mask_precision(MaskTrainingResult.load(folder))

    def train(where: Path) -> MaskTrainingResult:
        schedule = lh.TrainingConfig.short(steps=steps, lr=lr, seed=seed, **config)
        return train_or_resume(model(), task, schedule, where, progress=progress, figures=True)

    return note_mask_precision(stages(name, train, MaskTrainingResult.load))


def note_mask_precision(source: Any) -> Any:
    """Record, for the result's provenance, the precision the mask of ``source`` (a
    :class:`MaskTrainingResult`, or a mask file or training folder, whose ``training.json`` says)
    was trained in; returns ``source``. A command that used masks records their precision, not
    the CPU's: the forward passes of an analysis run in float32."""
    if isinstance(source, MaskTrainingResult):
        record_precision(source.config.precision)
    elif isinstance(source, (str, os.PathLike)):
        folder = Path(source)
        folder = folder.parent if folder.is_file() else folder
        record = folder / "training.json"
        if record.is_file():
            record_precision(MaskTrainingResult.load(folder).config.precision)
    return source


def record_precision(dtype: str) -> None:
    """Record ``dtype`` as a precision the running command computed in (its provenance lists
    every one recorded; an analysis that trains nothing and never autocasts records float32)."""
    _MASK_PRECISIONS.add(dtype)


def write_outputs(
    out: str | os.PathLike[str],
    *,
    title: str,
    markdown: str,
    figures: Mapping[str, Any] = {},
    numbers: Mapping[str, Any] | None = None,
    command: Sequence[str] | None = None,
) -> Path:
    """``summary.md`` (``title``, the command, ``markdown`` and links to the figures),
    ``<figure>.html`` for each figure and ``numbers.json`` (``numbers`` plus a ``provenance``
    entry: the command, the code version, the machine and the training precision); returns
    the summary's path."""
    folder = Path(out)
    save_figures(folder, figures)
    argv = command if command is not None else _COMMAND or ["(run from Python)"]
    links = "\n".join(f"- [{name}]({name}.html)" for name in figures)
    text = f"# {title}\n\n`{' '.join(argv)}`\n\n{markdown.strip()}\n"
    if links:
        text += f"\nFigures (interactive HTML):\n\n{links}\n"
    if numbers is not None:
        stored = {**numbers, "provenance": provenance_of(argv)}
        write_atomic(folder / "numbers.json", json.dumps(stored, indent=2, default=str))
    return write_atomic(folder / "summary.md", text)


def run_inputs(config: Any) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The settings of ``config`` (:func:`settings_of`, with what its ``implied_settings()``
    resolves a default to, e.g. the task family of ``tasks=None``) and the data it reads
    whatever its settings (the config class's ``READS``, e.g. the parallel corpus): what
    :func:`provenance_of` takes the seeds and the data of a run from, and what
    ``scripts/backfill_provenance.py`` takes them from for a stored command."""
    if config is None:
        return {}, ()
    settings = settings_of(config)
    implied = getattr(config, "implied_settings", None)
    if callable(implied):
        settings.update(implied())
    return settings, tuple(getattr(config, "READS", ()))


def provenance_of(
    argv: Sequence[str], started: float | None = None, config: Any = None
) -> dict[str, Any]:
    """What a stored result records of how it was made: the command, the code version, the
    machine, the training precision, (when known) the command's wall time so far, and the
    seeds, date and data of the run (:func:`lens_heads.core._provenance.run_record` of
    ``config``'s settings, by default the config the running command parsed)."""
    provenance = {"command": " ".join(argv), "code": code_version(), "machine": machine()}
    # the precision of the masks the command used; else what it asked for, or what training (and
    # LAHIS importance) resolves "auto" to here; the forward passes run in float32
    native = "bfloat16" if provenance["machine"]["native_bf16"] else "float32"
    if _MASK_PRECISIONS:
        provenance["precision"] = "+".join(sorted(_MASK_PRECISIONS))
    else:
        provenance["precision"] = native if _PRECISION == "auto" else _PRECISION
    started = _STARTED if started is None else started
    if started is not None:  # this invocation only: finished stages it reused cost nothing
        provenance["seconds"] = round(time.monotonic() - started, 1)
    settings, reads = run_inputs(_CONFIG if config is None else config)
    return provenance | run_record(settings, reads)


@dataclasses.dataclass
class MaskedTaskConfig:
    """The options every mask analysis shares (subclasses add theirs and set ``out``)."""

    model: str = dataclasses.field(default=DEFAULT_MODEL, metadata=help_of("model alias or path"))
    task: str = dataclasses.field(default="capitalize", metadata=help_of("task name or file"))
    steps: int = dataclasses.field(default=100, metadata=help_of("training steps"))
    lr: float = dataclasses.field(default=0.2, metadata=help_of("peak learning rate"))
    seed: int = dataclasses.field(default=0, metadata=help_of("training seed"))
    mask: str | None = dataclasses.field(
        default=None, metadata=help_of("a training folder to reuse instead of training")
    )
    n_eval: int = dataclasses.field(default=40, metadata=help_of("held-out examples"))
    precision: str = precision_field()
    progress: bool = dataclasses.field(default=True, metadata=help_of("progress bars"))
    out: str = dataclasses.field(default="runs/analysis", metadata=help_of("output folder"))

    def task_object(self) -> Any:
        return lh.get_task(self.task)

    def held_out(self) -> Any:
        """The held-out examples (the last ``n_eval``), never seen in training."""
        return self.task_object().split(n_eval=self.n_eval)[1]


def mask_of(config: MaskedTaskConfig, stages: Stages, model: LazyModel, **overrides: Any) -> Any:
    """:func:`trained_mask` with ``config``'s schedule (``overrides``: other TrainingConfig
    fields, e.g. ``init_mean=-3.0`` with ``name="training_negative"``; ``mask``: a training
    folder to load instead, by default ``config.mask`` for the stage ``"training"``)."""
    name = overrides.pop("name", "training")
    given = overrides.pop("mask", config.mask if name == "training" else None)
    schedule = {"steps": config.steps, "lr": config.lr, "seed": config.seed}
    schedule["precision"] = config.precision
    schedule.update((key, overrides.pop(key)) for key in list(schedule) if key in overrides)
    return trained_mask(
        stages,
        model,
        config.task_object(),
        mask=given,
        name=name,
        progress=config.progress,
        n_eval=config.n_eval,
        **schedule,
        **overrides,
    )
