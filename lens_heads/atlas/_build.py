"""Build a :class:`HeadAtlas`: every measure the toolkit has of each head, in one table.

Stages (each saved under ``out`` and reused when the same code finished it for the same model,
data and settings -- their fingerprint; a killed run resumes at the stage it was in):
``detectors`` (attention patterns on generated inputs), ``readouts`` (the OV circuits, no forward
pass), ``effects`` (exact single-head effects on a task). The three
research lines join from results already on disk: a folder of Heads up! masks, a removal sweep,
token-alignment translation scores and LAHIS language heads.

>>> import lens_heads as lh
>>> model = lh.tiny_model(n_layers=2, n_heads=4)
>>> config = AtlasConfig(task=None, n_sequences=2, length=4, k=4, permutations=10, bootstrap=10)
>>> atlas = head_atlas(model, config)
>>> atlas.measures[:2]
['previous token', 'duplicate token']
>>> head_atlas(model, config, k=10)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
lens_heads.core._errors.InputError: k=10 top heads of 8: ... pass k=4 or less (--k 4)
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from safetensors.torch import load_file, save_file

from lens_heads.alignment import TranslationScores
from lens_heads.atlas._agreement import AgreementConfig, check_top_k
from lens_heads.atlas._atlas_result import HeadAtlas
from lens_heads.atlas._detectors import (
    DETECTORS,
    DetectorConfig,
    RandomBlockSetting,
    chance_scores,
    detect_patterns,
    repeated_random_tokens,
)
from lens_heads.atlas._effects import EffectsConfig, donor_prompts, single_head_effects
from lens_heads.atlas._readouts import (
    builtin_relations,
    relation_chance,
    relation_scores,
    top_ov_tokens,
)
from lens_heads.core import (
    Fingerprint,
    InputError,
    LensHeadsError,
    Stages,
    Task,
    claim_folder,
    configure,
    format_head,
    get_task,
    head_shape,
    write_atomic,
)
from lens_heads.core.internal import (
    AblationsSetting,
    BatchSetting,
    BootstrapSetting,
    HeldOutSetting,
    InstructedSetting,
    MaskShapeError,
    ModelLike,
    PermutationsSetting,
    SeedSetting,
    TaskSetting,
    TokenizerOnly,
    TopKSetting,
    check_int,
    encode_prompt,
    model_name,
    own_checks,
    parse_head,
)
from lens_heads.heads_up import SweepResult, load_masks
from lens_heads.lahis import LanguageHeads

__all__ = ["AtlasConfig", "head_atlas"]


@own_checks
@dataclass(frozen=True, kw_only=True)
class AtlasConfig(
    AblationsSetting,
    RandomBlockSetting,
    PermutationsSetting,
    BootstrapSetting,
    SeedSetting,
    TopKSetting,
    InstructedSetting.with_defaults(instructed=True),
    BatchSetting.with_defaults(batch_size=8),
    HeldOutSetting.with_defaults(n_eval=40),
    TaskSetting,
):
    """What goes into an atlas; the held-out prompts of ``task`` (a name or file, recorded in
    the atlas's fingerprint; None: no effects) give the single-head effects."""

    TASK_OBJECTS = False
    TASK_OPTIONAL = True
    n_reference: int = 40
    """Training prompts of the task whose mean head outputs are the mean-ablation baseline."""
    masks: str | None = None
    """A folder of Heads up! masks (``load_masks``): the share keeping each head."""
    sweep: str | None = None
    """A saved removal sweep: when each head was removed and how the answer's rank moved."""
    scores: str | None = None
    """Saved token-alignment translation scores."""
    language_heads: str | None = None
    """Saved LAHIS language heads: importance per language and specificity."""

    def __post_init__(self) -> None:
        super().__post_init__()  # the shared parts' checks
        check_int("n_reference", self.n_reference, minimum=1)
        _ = self.agreement  # checks k against the agreement's rules
        for name in ("masks", "sweep", "scores", "language_heads"):
            path = getattr(self, name)
            if path is not None and not Path(path).exists():
                raise InputError(f"{name}={path!r} does not exist; give a saved result folder")

    def check(self, model: Any = None, tokenizer: Any = None) -> Task | None:
        """Check, without running the model, what would otherwise fail after stages computed:
        the task (a name or a file, with enough examples for ``n_eval``), ``k`` against the
        heads, the saved results of the research lines (readable, non-empty, of the model's
        shape) and, for resample ablation, a donor of every prompt's length. ``model`` may be a
        shape read before the weights (None: no shape checks), with the model's ``tokenizer``
        (:func:`lens_heads.core._model_shape.load_tokenizer`) for the donors. Returns the task
        (None without one)."""
        task = None
        if self.task is not None:
            task = get_task(self.task)
            if len(task) <= self.n_eval:
                raise InputError(
                    f"task {task.name!r} has {len(task)} examples: not more than n_eval="
                    f"{self.n_eval} held out for the single-head effects; pass a smaller n_eval "
                    "(--n-eval)"
                )
        shape = None if model is None else head_shape(model)
        if shape is not None:
            check_top_k(self.k, shape[0] * shape[1])
        for name, read in _LINES.items():  # before any stage computes
            path = getattr(self, name)
            if path is None:
                continue
            try:
                read(path, shape)
            except LensHeadsError as error:
                raise type(error)(f"{name}={path!r}: {error}") from error
        tokenizer = tokenizer or getattr(model, "tokenizer", None)
        if task is not None and "resample" in self.ablations and tokenizer is not None:
            encoder = TokenizerOnly(tokenizer, getattr(model, "cfg", None))
            _effect_inputs(encoder, self, task)  # a prompt of a length no donor has
        return task

    @property
    def detectors(self) -> DetectorConfig:
        return DetectorConfig(
            n_sequences=self.n_sequences,
            length=self.length,
            seed=self.seed,
            batch_size=self.batch_size,
        )

    @property
    def effects(self) -> EffectsConfig:
        return EffectsConfig(ablations=self.ablations, batch_size=self.batch_size)

    @property
    def agreement(self) -> AgreementConfig:
        return AgreementConfig(
            k=self.k, permutations=self.permutations, bootstrap=self.bootstrap, seed=self.seed
        )


def _check_masks(path: str, shape: tuple[int, int] | None) -> None:
    masks = load_masks(path)  # readable, not empty, one shape
    found = next(iter(masks.values())).shape
    if shape is not None and found != shape:
        raise MaskShapeError(
            f"the masks are of a {found[0]}x{found[1]} model (layers x heads), not of this "
            f"{shape[0]}x{shape[1]} model; give this model's masks"
        )


def _check_sweep(path: str, shape: tuple[int, int] | None) -> None:
    order = SweepResult.load(path).order
    for label in order:
        parse_head(label, *(shape or (None, None)))  # a head this model has


def _check_scores(path: str, shape: tuple[int, int] | None) -> None:
    _check_shape(tuple(TranslationScores.load(path).scores.shape), shape, "translation scores")


def _check_language_heads(path: str, shape: tuple[int, int] | None) -> None:
    found = tuple(LanguageHeads.load(path).scores.shape[1:])
    _check_shape(found, shape, "language heads")


def _check_shape(found: tuple[int, ...], shape: tuple[int, int] | None, what: str) -> None:
    if shape is not None and found != shape:
        raise MaskShapeError(
            f"the {what} are of a {found[0]}x{found[1]} model (layers x heads), not of this "
            f"{shape[0]}x{shape[1]} model; give this model's results"
        )


#: each research line's saved result, checked (readable, of the model's shape when known)
_LINES = {
    "masks": _check_masks,
    "sweep": _check_sweep,
    "scores": _check_scores,
    "language_heads": _check_language_heads,
}


def _heads(model: ModelLike) -> pd.DataFrame:
    n_layers, n_heads = head_shape(model)
    n_kv = int(getattr(model.cfg, "n_key_value_heads", None) or n_heads)
    rows = [
        {"label": format_head(i, h), "layer": i, "head": h, "kv group": h // (n_heads // n_kv)}
        for i in range(n_layers)
        for h in range(n_heads)
    ]
    return pd.DataFrame(rows)


def _column(values: torch.Tensor) -> list[float]:
    return values.flatten().tolist()


def _save_stage(where: Path, frame: pd.DataFrame, meta: dict[str, Any], **tensors: Any) -> None:
    where.mkdir(parents=True, exist_ok=True)
    write_atomic(where / "columns.csv", frame.to_csv(index=False))
    write_atomic(where / "meta.json", json.dumps(meta, indent=1))
    if tensors:
        contiguous = {k: v.contiguous() for k, v in tensors.items()}
        save_file(contiguous, str(where / "tensors.safetensors"))


def _load_stage(where: Path) -> tuple[pd.DataFrame, dict[str, Any], dict[str, Any]]:
    frame = pd.read_csv(where / "columns.csv", keep_default_na=True)
    meta = json.loads((where / "meta.json").read_text(encoding="utf-8"))
    file = where / "tensors.safetensors"
    return frame, meta, (load_file(str(file)) if file.is_file() else {})


def _detector_stage(model: ModelLike, config: AtlasConfig, where: Path) -> None:
    found = detect_patterns(model, config.detectors)
    frame = pd.DataFrame({name: _column(found[name]) for name in DETECTORS})
    example = repeated_random_tokens(
        model, DetectorConfig(n_sequences=1, length=config.length, seed=config.seed)
    )
    _, cache = model.run_with_cache(
        example, names_filter=lambda name: name.endswith("attn.hook_pattern")
    )
    n_layers, _ = head_shape(model)
    attention = torch.stack([cache[f"blocks.{i}.attn.hook_pattern"][0] for i in range(n_layers)])
    tokens = [model.tokenizer.decode([int(t)]) for t in example[0]]
    meta = {"chance": chance_scores(model, config.detectors), "tokens": tokens}
    _save_stage(where, frame, meta, attention=attention.float())


def _readout_stage(model: ModelLike, where: Path, top: int = 8) -> None:
    relations = builtin_relations(model)
    scores = relation_scores(model, relations)
    frame = pd.DataFrame({f"OV {name}": _column(value) for name, value in scores.items()})
    sources = [s for s, _ in relations["copying"]] or list(range(min(200, model.cfg.d_vocab)))
    best = top_ov_tokens(model, sources, top).flatten(0, 1)
    decode = model.tokenizer.decode
    frame["top OV tokens"] = [" | ".join(decode([int(t)]) for t in row) for row in best]
    chance = {f"OV {name}": value for name, value in relation_chance(relations).items()}
    meta = {"chance": chance, "pairs": {name: len(pairs) for name, pairs in relations.items()}}
    _save_stage(where, frame, meta)


def _effect_inputs(
    model: ModelLike, config: AtlasConfig, task: Task
) -> tuple[list[list[int]], list[str], list[list[int]] | None]:
    """The held-out prompts (token ids), their answers and the reference prompts of the
    single-head effects; with resample ablation, every prompt's donor is found here."""
    train, held_out = task.split(n_eval=config.n_eval)
    instruction = task.instruction if config.instructed else None

    def prompts(part: Any) -> list[list[int]]:
        return [encode_prompt(model, text, instruction=instruction).tokens for text in part.inputs]

    reference = prompts(train)[: config.n_reference] if train is not None else None
    answers = [output if isinstance(output, str) else output[0] for output in held_out.outputs]
    tokens = prompts(held_out)
    if "resample" in config.ablations:
        donor_prompts(tokens, reference or [])
    return tokens, answers, reference


def _effect_stage(
    model: ModelLike, config: AtlasConfig, task: Task, where: Path, progress: bool
) -> None:
    tokens, answers, reference = _effect_inputs(model, config, task)
    effects = single_head_effects(
        model, tokens, answers, reference=reference, config=config.effects, progress=progress
    )
    frame = pd.DataFrame({f"{name}-ablation effect": _column(v) for name, v in effects.items()})
    meta = {"task": task.name, "prompts": len(tokens), "instructed": config.instructed}
    _save_stage(where, frame, meta)


def _line_columns(model: ModelLike, config: AtlasConfig, heads: pd.DataFrame) -> pd.DataFrame:
    """The columns of the three research lines, from the result folders given."""
    columns: dict[str, list[Any]] = {}
    labels = list(heads["label"])
    if config.masks:
        masks = load_masks(config.masks)
        kept = torch.stack([m.values.float() for m in masks.values()]).mean(dim=0)
        columns["Heads up! share of masks keeping it"] = _column(kept)
    if config.sweep:
        sweep = SweepResult.load(config.sweep)
        target = sweep.roles.index("target") if "target" in sweep.roles else 0
        ranks = sweep.ranks[:, target].tolist()
        step_of = {label: None for label in labels}
        change = {label: None for label in labels}
        for i in range(1, len(sweep.n_removed)):
            for label in sweep.order[sweep.n_removed[i - 1] : sweep.n_removed[i]]:
                step_of[label] = sweep.order.index(label) + 1
                change[label] = ranks[i] - ranks[i - 1]
        columns["sweep: removed at"] = [step_of[label] for label in labels]
        columns["sweep: answer rank change"] = [change[label] for label in labels]
    if config.scores:
        scores = TranslationScores.load(config.scores)
        columns[f"translation score {scores.pair}"] = _column(scores.scores)
    if config.language_heads:
        found = LanguageHeads.load(config.language_heads)
        for i, language in enumerate(found.languages):
            columns[f"LAHIS importance {language}"] = _column(found.scores[i])
        columns["LAHIS specific to"] = [
            ", ".join(lang for lang, heads in found.specific.items() if label in heads)
            for label in labels
        ]
        columns["LAHIS general"] = _column(found.general.float())
    return pd.DataFrame(columns, index=heads.index)


def head_atlas(
    model: ModelLike,
    config: AtlasConfig | None = None,
    *,
    out: str | os.PathLike[str] | None = None,
    progress: bool = True,
    overwrite: bool = False,
    **overrides: Any,
) -> HeadAtlas:
    """The atlas of ``model`` (``config``, an :class:`AtlasConfig`; its fields also as keywords:
    ``head_atlas(model, task=None)``), saved in ``out`` with its stages when given.

    Everything that needs no forward pass is checked first (:meth:`AtlasConfig.check`, the
    resample donors). A folder ``out`` is resumed only by the same model (weights, tokenizer),
    task examples, saved results and settings: another one is refused naming what differs,
    unless ``overwrite`` (then its stages are computed again).
    """
    config = configure(AtlasConfig, config, overrides, "head_atlas")
    task = config.check(model)  # with the resample donors, before any stage runs
    folder = Path(out) if out is not None else None
    fingerprint = Fingerprint.of(
        model,
        {field.name: getattr(config, field.name) for field in fields(AtlasConfig)},
        {"task": task, **{name: getattr(config, name) for name in _LINES}},
    )
    stages = Stages(folder, fingerprint) if folder is not None else None
    if folder is not None:  # a folder's stages belong to one model, data and configuration
        claim_folder(
            folder,
            fingerprint,
            what="an atlas",
            overwrite=overwrite,
            stages=("detectors", "readouts", "effects", "atlas"),
            remedy="choose another out folder (--out), or pass overwrite=True (--overwrite) to "
            "compute it again",
        )

    def stage(name: str, compute: Any) -> tuple[pd.DataFrame, dict[str, Any], dict[str, Any]]:
        def run(where: Path) -> tuple[pd.DataFrame, dict[str, Any], dict[str, Any]]:
            compute(where)
            return _load_stage(where)

        if stages is None:
            import tempfile

            return run(Path(tempfile.mkdtemp()) / name)
        return stages(name, run, _load_stage)

    heads = _heads(model)
    detectors, detector_meta, tensors = stage(
        "detectors", lambda where: _detector_stage(model, config, where)
    )
    readouts, readout_meta, _ = stage("readouts", lambda where: _readout_stage(model, where))
    parts = [heads, detectors, readouts.drop(columns=["top OV tokens"])]
    notes = {name: "attention-pattern detector on BOS R R sequences" for name in DETECTORS}
    notes |= {c: "OV readout of built-in pairs (weights only)" for c in readouts if "OV " in c}
    effect_meta: dict[str, Any] = {}
    if task is not None:
        effects, effect_meta, _ = stage(
            "effects", lambda where: _effect_stage(model, config, task, where, progress)
        )
        parts.append(effects)
        notes |= {c: f"mean answer-logit drop on {config.task}" for c in effects}
    parts.append(_line_columns(model, config, heads))
    parts.append(readouts[["top OV tokens"]])
    frame = pd.concat([p.reset_index(drop=True) for p in parts], axis=1)
    frame = frame.dropna(axis=1, how="all")  # a relation without a single-token pair
    atlas = HeadAtlas(
        model=model_name(model),
        frame=frame,
        chance={**detector_meta["chance"], **readout_meta["chance"]},
        notes=notes,
        example_tokens=detector_meta["tokens"],
        example_attention=tensors.get("attention"),
        settings={
            **asdict(config),
            "readout pairs": readout_meta["pairs"],
            "effects": effect_meta,
        },
    )
    if folder is not None:
        atlas.save(folder / "atlas")
    return atlas
