"""The end-to-end demo behind ``lens-heads demo``: train a head mask, evaluate it, sweep head
removal, compare hidden states and look through the logit lens, then write a report.

Every step is one library call; the demo only chooses small settings (a few minutes on a
2-core CPU) and writes each result folder plus ``report.md`` and ``report.html`` (the figures
inline, opens offline) into the output folder. Re-running it on the same folder resumes the
training from its checkpoint (a finished run is reused).

    lens-heads demo --out demo-report
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from lens_heads.core import (
    Fingerprint,
    InputError,
    Stages,
    Task,
    claim_folder,
    configure,
    get_task,
    has_chat_template,
    load_model,
    verify_model,
    write_atomic,
)
from lens_heads.core.internal import (
    ComputationError,
    NewTokensSetting,
    ProgressSetting,
    TaskSetting,
    check_int,
    composed,
    known_fingerprint,
    model_fingerprint,
    model_name,
    own_checks,
    refuse_random_weights,
)
from lens_heads.demo._report import DemoReport, write_report
from lens_heads.engine import (
    EvaluationResult,
    MaskTrainingResult,
    TrainingConfig,
    evaluate,
    train_or_resume,
)
from lens_heads.heads_up import (
    LogitLensResult,
    SimilarityResult,
    SweepResult,
    figure4_similarity,
    logit_lens,
    removal_sweep,
    sweep_example,
)

__all__ = ["DemoConfig", "DemoReport", "run_demo"]


#: the trainer's fields the demo sets (the others keep the short CPU schedule's values)
TRAINING_FIELDS = ("steps", "lr", "n_eval", "seed", "answer_end", "precision")


def _demo_training() -> TrainingConfig:
    """The demo's training: the short CPU schedule (batch 8) at 100 steps, lr 0.2, 40 held-out
    examples."""
    return TrainingConfig.short(steps=100, lr=0.2, n_eval=40)


@composed
@own_checks  # __post_init__ checks every field: users and the tests see the same clear errors
@dataclass(frozen=True, kw_only=True)
class DemoConfig(ProgressSetting, NewTokensSetting.with_defaults(max_new_tokens=10), TaskSetting):
    """What the demo runs: the model and task (the mask is trained on it; it needs an
    instruction, which the demo compares with), the mask's training (a
    :class:`~lens_heads.engine.TrainingConfig`), the removal sweep. The trainer's fields are
    keywords of their own too.

    >>> DemoConfig(steps=50).training.steps
    50
    >>> DemoConfig().training.batch_size
    8
    """

    MIN_NEW_TOKENS = 0  # a sweep without continuations

    model: str | Any = "smollm2-135m-instruct"
    """The model: an alias, a .gguf file, a checkpoint folder, a hub id or a loaded model."""
    training: TrainingConfig = field(default_factory=_demo_training)
    """The mask's training: the short CPU schedule (batch 8) at 100 ``steps`` and ``lr`` 0.2,
    its ``seed``, ``answer_end`` and ``precision`` (auto, float32 or bfloat16); its
    ``n_eval`` held-out examples (never trained on) are the ones the demo evaluates."""
    sweep_every: int = 2
    """Evaluate every k-th step of the removal sweep."""

    RENAMED: ClassVar[dict[str, str]] = {"generate_tokens": "max_new_tokens"}
    #: the trainer's fields the command line shows
    SHOWN: ClassVar[dict[str, tuple[str, ...]]] = {"training": TRAINING_FIELDS}

    def __post_init__(self) -> None:
        super().__post_init__()  # the shared parts' checks
        if not isinstance(self.training, TrainingConfig):
            raise InputError(
                f"training must be a TrainingConfig, got {type(self.training).__name__}"
            )
        check_int("sweep_every", self.sweep_every, minimum=1)


_STAGES = ("training", "eval", "sweep", "similarity", "logit_lens")


def _settings_of(model: Any, task: Task, **values: Any) -> dict[str, Any]:
    name = model if isinstance(model, str) else model_name(model)
    return {"format": "lens_heads.demo/1", "model": name, "task": task.name, **values}


def _other_training(training: TrainingConfig) -> dict[str, Any]:
    """The trainer's fields set away from the demo's schedule, beyond :data:`TRAINING_FIELDS`
    (``{"training": {...}}``, or nothing, so folders written before the demo held a
    TrainingConfig still match)."""
    schedule = _demo_training().to_dict()
    changed = {
        name: value
        for name, value in training.to_dict().items()
        if name not in TRAINING_FIELDS and value != schedule[name]
    }
    return {"training": changed} if changed else {}


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
    **overrides: Any,
) -> DemoReport:
    """Run the demo into ``out`` and return its results (``report.md`` is ``.report``).

    ``config`` (a :class:`DemoConfig`; its fields also as keywords, ``steps=50``) says what
    runs.

    The schedule (100 steps, lr 0.2, batch 8) is the short CPU schedule of
    ``docs/training.md``; the sweep uses the first held-out example with a one-token answer as
    its prompt, that answer as the target and the instructed prompt as the reference (Figures
    2 and 5). Every stage is saved; running again with the same model (its weights and tokenizer
    are fingerprinted after loading; an offline alias's cache remembers that fingerprint, so a
    finished folder is checked without loading the model), task and settings reuses the
    finished stages (and resumes an interrupted training), so a finished folder loads in
    seconds -- the notebooks rely on it; another model, task file or settings is refused.
    ``fresh=True`` recomputes everything. ``answer_end`` is the training target's end
    (:class:`~lens_heads.engine.TrainingConfig`); a folder trained before it was
    recorded (answer-only targets) is refused unless ``fresh``. ``precision`` is the
    training's (``"auto"``: bf16 autocast where the CPU computes bf16 natively, else fp32;
    ``"float32"`` reproduces on any machine what a CPU without bf16 does; ``dtype=`` is its old
    name). Any other trainer field set away from the demo's schedule is part of the
    folder's settings.
    """
    config = configure(DemoConfig, config, overrides, "run_demo")
    training = config.training
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
        steps=training.steps,
        lr=training.lr,
        n_eval=training.n_eval,
        sweep_every=config.sweep_every,
        max_new_tokens=config.max_new_tokens,
        seed=training.seed,
        answer_end=training.answer_end,
        # "auto" is left out, so folders written before this option still match
        **({} if training.precision == "auto" else {"precision": training.precision}),
        **_other_training(training),
    )
    demo = _Demo(folder, config, task)
    if demo.known is None:
        fingerprint = Fingerprint.of(demo.model(), settings, {"task": task})
    else:  # checked against what the cache remembers; the model loads when a stage needs it
        fingerprint = replace(Fingerprint.of(None, settings, {"task": task}), model=demo.known)
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
    write_report(report, task, demo.stage.provenance("training"), settings)
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
    #: the fingerprint an offline alias remembers from an earlier load (a finished folder is
    #: checked against it without loading the model; a stage that computes loads it and checks)
    known: dict[str, str] | None = None

    def __post_init__(self) -> None:
        self.stage: Stages | None = None  # once the folder is claimed for the model's fingerprint
        self.progress = self.config.progress
        self.n_eval = self.config.training.n_eval
        if not isinstance(self.config.model, str):
            refuse_random_weights(self.config.model, "the demo")
            verify_model(self.config.model)  # before any stage computes (load_model does too)
            self.loaded.append(self.config.model)
        else:
            self.known = known_fingerprint(self.config.model)

    def model(self) -> Any:
        if not self.loaded:
            start = time.perf_counter()
            self.loaded.append(load_model(self.config.model))
            self.load_seconds = round(time.perf_counter() - start, 1)
            if self.known is not None and model_fingerprint(self.loaded[0]) != self.known:
                raise ComputationError(
                    f"{self.config.model}: the loaded model is not the one its cache remembered "
                    "(the folder was checked against that one); run again with fresh=True "
                    "(--fresh) to check it against the loaded model"
                )
        return self.loaded[0]

    def chat(self) -> bool:
        return has_chat_template(self.model().tokenizer)

    def train(self, where: Path) -> MaskTrainingResult:
        return train_or_resume(
            self.model(),
            self.task,
            self.config.training,
            where,
            progress=self.progress,
            figures=True,
            png=True,
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
        result = removal_sweep(
            self.model(),
            chosen.input,
            training.W,
            target=chosen.output,
            instruction=self.task.instruction,  # the reference run: the instructed prompt
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
            self.model(), sweep.prompt, self.task.instruction, training.mask, chat=self.chat(),
            progress=self.progress,
        )  # fmt: skip
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
