"""Every head finder of the toolkit as a method of the benchmark: a function from the model, the
task and its training pairs to one score per head (higher: more important), timed.

========================  ==================================================================
``effects``               exact single-head effects: ``m`` with all heads minus ``m`` with the
                          head alone ablated (``effects-counterfactual``, ``-mean``, ``-zero``;
                          :func:`lens_heads.atlas.single_head_effects`, which runs each layer's
                          heads from that layer on)
``attribution``           first-order attribution patching at the node level (MIB's NAP): the
                          gradient of ``m`` in each head's multiplier ``a`` (its output is
                          ``a z + (1 - a) z_cf``), at ``a = 1``
``integrated``            integrated gradients of the same (NAP-IG): the mean gradient along all
                          multipliers from 1 to 0 (``ig_steps`` midpoints); they sum to
                          ``m(all) - m(empty)``
``heads-up``              the trained weights ``W`` of a Heads up! mask (uninstructed training)
``heads-up-share``        the share of several Heads up! masks keeping each head (ties: mean W)
``chg``                   Causal Head Gating's down-fit gates (heads the task cannot lose)
``lahis``                 LAHIS gradient importance on the training prompts and answers
``translation``           token-alignment translation scores (a translation task only)
``induction``             the induction detector (a control: it knows no task)
``previous-token``        the previous-token detector (a control)
``ov-copying``            the weights-only OV copying readout (a control)
``faithful-mask``         a mask trained for each circuit size: a head budget and counterfactual
                          patching outside it, trained on the answer (cross-entropy); its ranking:
                          the share of sizes keeping a head
``matching-mask``         the same masks trained to behave like the whole model instead (the KL
                          divergence from its outputs, ``objective="model"``), as CMD asks
``warm-mask``             the matching masks, each started from integrated gradients' ranking
                          (the top ``k`` heads kept at the start; the gradients' cost counted in)
``difference-mask``       the same masks trained to give the whole model's logit difference of
                          the answer and the counterfactual answer, example by example
                          (``objective="difference"``): the quantity ``f`` is made of, in logits,
                          which do not saturate where the model is sure
``warm-difference-mask``  the difference masks, each started from integrated gradients' ranking
``calibrated-<method>``   a method's circuits cut back on the calibration pairs (the training
                          pairs, or a set of their own): for each size, the prefix of at most
                          ``k`` of its heads whose ``f`` there is nearest 1
                          (:func:`calibrated_circuits`; the difference masks, warm or not, and
                          ``calibrated-integrated``, the like-for-like baseline)
``exact-mask``            a mask per size trained with every forward on exactly ``k`` heads
                          (``exact_budget``: the top ``k`` of the noisy logits, the size the
                          circuit is read at) towards the model's mean logit difference
                          (``objective="mean-difference"``), started from the top ``k`` heads by
                          the size of their integrated gradients, its noise annealed to none
                          (``noise_end=0``: the last steps train the circuit read out)
``selected-exact-mask``   the exact masks, each size's circuit the top ``k`` of its mask at the
                          step (every fifth, the warm start among them) whose ``f`` on the
                          calibration pairs is nearest 1 (:func:`nearest_circuits`)
``selected-<ranking>``     ``selected-integrated`` and ``selected-effects-counterfactual``: the
                          like-for-like baselines of ``selected-exact-mask`` (the same
                          calibration pairs, a choice per size): for each size, the prefix of
                          at most ``k`` heads of the ranking's signed or absolute order whose
                          ``f`` on the calibration pairs is nearest 1
``random-<seed>``         random scores (a floor)
========================  ==================================================================

>>> sorted(METHODS)[:3]
['attribution', 'calibrated-difference-mask', 'calibrated-integrated']
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from lens_heads.core import InputError, Task, answer_logits, head_shape, mask_hooks, pad_token_id
from lens_heads.core.internal import (
    BatchSetting,
    IntegratedGradientsSetting,
    MasksSetting,
    ModelLike,
    PrecisionSetting,
    check_int,
    head_outputs,
    own_checks,
    right_padded,
)
from lens_heads.finders._circuits import (
    _fitted,
    calibrated_circuits,
    nearest_circuits,
    prefix_sizes,
)
from lens_heads.finders._counterfactuals import CounterfactualSet
from lens_heads.finders._faithfulness import SIZES

__all__ = ["CONTROLS", "GRADIENT_METHODS", "METHODS", "MethodConfig", "MethodScores", "score"]


@own_checks
@dataclass(frozen=True, kw_only=True)
class MethodConfig(
    IntegratedGradientsSetting,
    PrecisionSetting,
    MasksSetting.with_defaults(n_masks=3),
    BatchSetting.with_defaults(batch_size=64),
):
    """The settings of the head finders the benchmark runs (small CPU defaults)."""

    mask_steps: int = 100
    """Training steps of a Heads up! mask (the short CPU schedule, batch 8, lr 0.2)."""
    chg_steps: int = 100
    """Updates of each of Causal Head Gating's three fits."""
    chg_masks: int = 2
    """Gate sets of each fit (seeds)."""
    lahis_documents: int = 64
    """Training prompts (with their answers) of the LAHIS importance."""
    detector_sequences: int = 16
    """Generated sequences of the pattern detectors."""
    mask_seed: int = 0
    """The training seed of every mask a method trains (its initial draws and its noise): the
    protocol runs each trained method at several."""

    def __post_init__(self) -> None:
        super().__post_init__()  # the shared parts' checks
        for name in ("mask_steps", "chg_steps", "chg_masks", "lahis_documents"):
            check_int(name, getattr(self, name), minimum=1)
        check_int("mask_seed", self.mask_seed)
        check_int("detector_sequences", self.detector_sequences, minimum=1, maximum=10_000)


@dataclass
class MethodScores:
    """A method's scores ``[n_layers, n_heads]`` (higher: more important), its wall time and
    its cost in passes over a prompt (``forwards``, ``backwards``)."""

    scores: Tensor
    seconds: float
    forwards: int = 0
    backwards: int = 0
    notes: dict[str, Any] = field(default_factory=dict)
    """What a method tells beyond its scores: ``fitted``, the ``f`` on the calibration pairs
    of each size's circuit, where the method chose its circuits by it (the calibrated ones)."""
    circuits: Tensor | None = None
    """A method that builds each size's circuit itself: one 0/1 mask per size
    ``[n_sizes, n_layers, n_heads]`` (its faithfulness is that of these circuits)."""


@dataclass
class _Inputs:
    model: ModelLike
    task: Task
    train_pairs: CounterfactualSet
    config: MethodConfig
    chat: bool
    sizes: tuple[float, ...]
    instruction: str | None = None
    calibration_pairs: CounterfactualSet | None = None
    """The pairs the calibrated methods cut their circuits back on (None: the training pairs)."""


Method = Callable[[_Inputs], Any]


def _effects(ablation: str) -> Method:
    def run(inputs: _Inputs) -> tuple[Tensor, int, int]:
        from lens_heads.atlas import EffectsConfig, single_head_effects

        pairs = inputs.train_pairs.pairs
        kind = "resample" if ablation == "counterfactual" else ablation
        # resample's donors are matched by length, the i-th prompt of a length taking the i-th
        # reference of that length: the counterfactuals, in the pairs' order, are each its own
        reference = [p.counterfactual_tokens if kind == "resample" else p.tokens for p in pairs]
        config = EffectsConfig(ablations=(kind,), batch_size=max(1, inputs.config.batch_size // 8))
        effects = single_head_effects(
            inputs.model, [p.tokens for p in pairs], [p.answer for p in pairs],
            reference=reference, config=config, against=[p.counterfactual_answer for p in pairs],
        )  # fmt: skip
        n_layers, n_heads = head_shape(inputs.model)
        passes = len(pairs) * (1 + n_layers * n_heads) + (len(pairs) if kind == "resample" else 0)
        return effects[kind].float(), passes, 0

    return run


def _gradients(inputs: _Inputs, points: list[float]) -> tuple[Tensor, int, int]:
    """The mean over ``points`` (multiplier values ``a``, all heads at once) of the gradient of
    ``m`` (mean over the training pairs) in each head's multiplier; counterfactual outputs are
    the ablation baseline."""
    model, pairs = inputs.model, inputs.train_pairs.pairs
    n_layers, n_heads = head_shape(model)
    device = model.cfg.device
    pad = pad_token_id(model.tokenizer)
    total = torch.zeros(n_layers, n_heads)
    forwards = backwards = 0
    rows = max(1, inputs.config.batch_size // len(points))
    parameters = [p for p in model.parameters() if p.requires_grad]
    for parameter in parameters:
        parameter.requires_grad_(False)
    try:
        for start in range(0, len(pairs), rows):
            chunk = pairs[start : start + rows]
            tokens, last = right_padded([p.tokens for p in chunk], pad)
            counter, _ = right_padded([p.counterfactual_tokens for p in chunk], pad)
            baseline = head_outputs(model, counter.to(device))
            forwards += len(chunk)
            baseline = torch.cat([baseline, torch.zeros_like(baseline[:, :1])], dim=1)
            batch = torch.cat([tokens, torch.full((len(chunk), 1), pad)], dim=1)
            answers = torch.tensor([[p.answer, p.counterfactual_answer] for p in chunk])
            k = len(points)
            alpha = torch.tensor(points).view(k, 1, 1).repeat(1, n_layers, n_heads)
            alpha = alpha.to(device).requires_grad_(True)
            factor = alpha.repeat_interleave(len(chunk), dim=0)
            where = torch.zeros(k * len(chunk), batch.shape[1], dtype=torch.bool)
            where[torch.arange(k * len(chunk)), last.repeat(k) + 1] = True
            hooks = mask_hooks(factor, model, baseline=baseline.repeat(k, 1, 1, 1, 1))
            with torch.enable_grad():
                logits = answer_logits(
                    model, batch.repeat(k, 1).to(device), where.to(device), hooks, partial=True
                ).float()
                picked = logits.gather(1, answers.repeat(k, 1).to(logits.device))
                (picked[:, 0] - picked[:, 1]).sum().backward()
            total += alpha.grad.detach().sum(dim=0).cpu()
            forwards += k * len(chunk)
            backwards += k * len(chunk)
    finally:
        for parameter in parameters:
            parameter.requires_grad_(True)
    return total / (len(pairs) * len(points)), forwards, backwards


def _attribution(inputs: _Inputs) -> tuple[Tensor, int, int]:
    return _gradients(inputs, [1.0])


def _integrated(inputs: _Inputs) -> tuple[Tensor, int, int]:
    steps = inputs.config.ig_steps
    return _gradients(inputs, [(i + 0.5) / steps for i in range(steps)])


def _training(inputs: _Inputs, **values: Any) -> Any:
    from lens_heads.engine import TrainingConfig

    values.setdefault("seed", inputs.config.mask_seed)
    return TrainingConfig.short(
        steps=inputs.config.mask_steps, lr=0.2, n_eval=0, precision=inputs.config.precision,
        chat=inputs.chat, **values,
    )  # fmt: skip


def _heads_up(inputs: _Inputs) -> tuple[Tensor, int, int]:
    from lens_heads.engine import train_mask

    config = _training(inputs)
    result = train_mask(inputs.model, inputs.task, config, progress=False)
    passes = config.steps * config.batch_size
    return result.W.detach().float(), passes, passes


def _heads_up_share(inputs: _Inputs) -> tuple[Tensor, int, int]:
    from lens_heads.engine import train_mask

    kept, weights = [], []
    for seed in range(inputs.config.n_masks):
        first = inputs.config.mask_seed * inputs.config.n_masks  # seed 0: masks 0 .. n_masks - 1
        training = _training(inputs, seed=first + seed)
        result = train_mask(inputs.model, inputs.task, training, progress=False)
        kept.append(result.mask.values.float())
        weights.append(result.W.detach().float())
    passes = inputs.config.n_masks * inputs.config.mask_steps * 8
    share = torch.stack(kept).mean(dim=0)
    tiebreak = torch.sigmoid(torch.stack(weights).mean(dim=0)) * 1e-3  # within a share only
    return share + tiebreak, passes, passes


def _chg(inputs: _Inputs) -> tuple[Tensor, int, int]:
    from lens_heads.heads_up import RolesConfig, head_roles

    config = RolesConfig(
        steps=inputs.config.chg_steps, pulled_steps=inputs.config.chg_steps,
        n_masks=inputs.config.chg_masks, n_eval=2, evaluate=False,
        precision=inputs.config.precision,
        chat=inputs.chat,
    )  # fmt: skip
    roles = head_roles(inputs.model, inputs.task, config)
    down = roles.gates[1].mean(dim=0)  # the down fit: gates that stay open are needed
    training = config.training
    passes = 3 * training.steps * training.batch_size * training.n_masks
    return down.float(), passes, passes


def _lahis(inputs: _Inputs) -> tuple[Tensor, int, int]:
    from lens_heads.lahis import head_importance

    examples = inputs.task.examples[: inputs.config.lahis_documents]
    texts = [f"{e.input} {e.output}".strip() for e in examples]
    importance = head_importance(
        inputs.model, texts, precision=inputs.config.precision, progress=False
    )
    return importance.scores.float(), len(texts), len(texts)


def _translation(inputs: _Inputs) -> tuple[Tensor, int, int]:
    from lens_heads.alignment import translation_scores

    if inputs.task.kind != "translation" and "-" not in inputs.task.name:
        raise InputError(
            f"translation scores need a translation task, not {inputs.task.name!r}; leave the "
            "method out for this task"
        )
    pair = {"english-french": "en-fr", "english-german": "en-de", "english-spanish": "en-es"}
    found = translation_scores(
        inputs.model, pair.get(inputs.task.name, inputs.task.name), progress=False
    )
    return found.scores.float(), int(found.to_frame().shape[0]), 0


def _detector(name: str) -> Method:
    def run(inputs: _Inputs) -> tuple[Tensor, int, int]:
        from lens_heads.atlas import DetectorConfig, detect_patterns

        config = DetectorConfig(n_sequences=inputs.config.detector_sequences)
        return detect_patterns(inputs.model, config)[name].float(), config.n_sequences, 0

    return run


def _ov_copying(inputs: _Inputs) -> tuple[Tensor, int, int]:
    from lens_heads.atlas import builtin_relations, relation_scores

    pairs = builtin_relations(inputs.model)["copying"]
    if not pairs:  # no word of the built-in list is one token here: every token copies itself
        pairs = [(t, t) for t in range(min(200, int(inputs.model.cfg.d_vocab)))]
    scores = relation_scores(inputs.model, {"copying": pairs})
    return scores["copying"].float(), 0, 0


def warm_start(scores: Tensor, k: int, spread: float = 0.1) -> Tensor:
    """Initial mask logits for a budget of ``k`` heads from a ranking's ``scores``: the top
    ``k`` heads above zero and the others below, in steps of their rank (a logit of 1 per
    ``spread`` of all heads, clamped to +-3), so heads near the boundary start undecided.

    >>> warm_start(torch.tensor([[0.3, 0.1], [0.9, -0.2]]), k=2, spread=0.5)
    tensor([[ 0.2500, -0.2500],
            [ 0.7500, -0.7500]])
    """
    flat = scores.flatten()
    rank = torch.empty_like(flat)
    rank[flat.argsort(descending=True)] = torch.arange(len(flat), dtype=flat.dtype)
    logits = (k - 0.5 - rank) / (spread * len(flat))
    return logits.clamp(-3.0, 3.0).view(scores.shape)


def _budget_masks(
    objective: str,
    warm: bool = False,
    calibrate: bool = False,
    exact: bool = False,
    by_size: bool = False,
    noise_end: float = 1.0,
    select_every: int = 0,
) -> Method:
    """Masks trained for each circuit size: the one trainer with a head budget of ``k`` heads
    and every head outside the mask patched with its output on the example's counterfactual
    prompt, on the training pairs (with their instruction); the circuit is its top ``k`` heads.
    ``objective``: ``"model"`` trains each circuit to behave like the whole model (the KL
    divergence from its outputs), ``"difference"`` to give its logit difference of the answer
    and the counterfactual answer (what faithfulness measures), ``"answer"`` to predict the
    answer best.
    ``warm``: each mask starts from integrated gradients' ranking (:func:`warm_start`; their
    cost is counted in), not from the same value for every head.
    ``calibrate``: each size's circuit is the prefix of its mask's order (heads by trained W)
    that :func:`calibrated_circuits` picks on the calibration pairs, at most ``k`` heads.
    ``exact``: every training forward keeps exactly ``k`` heads (``exact_budget``), the size
    of the circuit read out, instead of a number held near ``k`` by a penalty.
    ``by_size``: the warm start ranks heads by the size of their integrated gradients (CMD's
    order), not by their sign. ``noise_end``: the Gumbel noise's scale after the anneal
    (``TrainingConfig.noise_end``; 0: the last steps train the circuit that is read out).
    ``select_every``: each size's circuit is, among the top ``k`` heads of its mask every
    ``select_every`` steps (the start and the last step among them), the one nearest ``f = 1``
    on the calibration pairs (:func:`nearest_circuits`; ties keep the later step), not the
    last step's alone."""

    def run(inputs: _Inputs) -> tuple[Tensor, int, int, Tensor, dict[str, Any]]:
        from lens_heads.engine import train_mask
        from lens_heads.finders._faithfulness import head_counts, top_heads

        n_layers, n_heads = head_shape(inputs.model)
        task = inputs.train_pairs.as_task(inputs.instruction)
        counts = head_counts(inputs.sizes, n_layers * n_heads)
        circuits, weights, forwards, backwards = {}, {}, 0, 0
        steps: dict[int, list[Tensor]] = {}  # each size's candidate circuits, latest first
        ranking = None
        if warm:
            ranking, forwards, backwards = _integrated(inputs)
        for k in sorted(set(counts)):
            if k in (0, n_layers * n_heads):
                circuits[k] = torch.full((n_layers, n_heads), float(k > 0))
                continue
            config = _training(
                inputs, ablation="counterfactual", budget=k, objective=objective,
                exact_budget=exact, noise_end=noise_end,
                instructed=inputs.instruction is not None, answer_end="none",
                init_mean=float(torch.logit(torch.tensor(k / (n_layers * n_heads)))),
                batch_size=min(8, len(task)), trajectory_every=select_every or None,
            )  # fmt: skip
            initial = None
            if ranking is not None:
                initial = warm_start(ranking.abs() if by_size else ranking, k)
            result = train_mask(inputs.model, task, config, progress=False, initial=initial)
            circuits[k] = result.mask.values.float()
            weights[k] = result.W.detach().float().cpu()
            if select_every:
                picked = [
                    top_heads(values, k)
                    for step, values in zip(result.trajectory_steps, result.trajectory, strict=True)
                    if step % select_every == 0 or step == config.steps
                ]
                steps[k] = picked[::-1]
            rows = config.steps * config.batch_size
            # a donor forward and the masked one (and the unmasked one for the model's outputs)
            forwards += rows * (2 if objective == "answer" else 3)
            backwards += rows
        notes = {}
        if select_every:
            sizes = sorted(steps)
            picked, fitted, spent = nearest_circuits(inputs, [steps[k] for k in sizes])
            circuits.update(zip(sizes, picked, strict=True))
            forwards += spent
            notes["fitted"] = _fitted(counts, n_layers * n_heads, sizes, fitted)
        if calibrate:
            sizes = sorted(weights)
            picked, fitted, spent = calibrated_circuits(inputs, [weights[k] for k in sizes], sizes)
            circuits.update(zip(sizes, picked, strict=True))
            forwards += spent
            notes["fitted"] = _fitted(counts, n_layers * n_heads, sizes, fitted)
        stacked = torch.stack([circuits[k] for k in counts])
        return stacked.mean(dim=0), forwards, backwards, stacked, notes

    return run


def _calibrated(base: str, either: bool = False) -> Method:
    """A ranking's circuits cut back like a calibrated mask's (:func:`calibrated_circuits`):
    for each size, the prefix of at most ``k`` of its heads by absolute score (CMD's order)
    nearest ``f = 1`` on the calibration pairs; the ranking's cost counted in. ``either``: the
    prefixes of the signed order are candidates too (the like-for-like baseline of a selected
    mask: the same pairs and the same kind of choice per size)."""

    def run(inputs: _Inputs) -> tuple[Tensor, int, int, Tensor, dict[str, Any]]:
        from lens_heads.finders._faithfulness import head_counts, top_heads

        scores, forwards, backwards, *_ = METHODS[base](inputs)
        n_layers, n_heads = head_shape(inputs.model)
        counts = head_counts(inputs.sizes, n_layers * n_heads)
        inner = [k for k in sorted(set(counts)) if 0 < k < n_layers * n_heads]
        orders = [scores.abs(), scores] if either else [scores.abs()]
        candidates = [
            [top_heads(order, size) for order in orders for size in prefix_sizes(k)] for k in inner
        ]  # largest absolute prefix first: ties keep it
        picked, fitted, spent = nearest_circuits(inputs, candidates)
        circuits = {k: torch.full((n_layers, n_heads), float(k > 0)) for k in counts}
        circuits.update(zip(inner, picked, strict=True))
        stacked = torch.stack([circuits[k] for k in counts])
        notes = {"fitted": _fitted(counts, n_layers * n_heads, inner, fitted)}
        return scores, forwards + spent, backwards, stacked, notes

    return run


def _random(seed: int) -> Method:
    def run(inputs: _Inputs) -> tuple[Tensor, int, int]:
        generator = torch.Generator().manual_seed(seed)
        return torch.rand(*head_shape(inputs.model), generator=generator), 0, 0

    return run


#: every method, by name
METHODS: dict[str, Method] = {
    "effects-counterfactual": _effects("counterfactual"),
    "effects-mean": _effects("mean"),
    "effects-zero": _effects("zero"),
    "attribution": _attribution,
    "integrated": _integrated,
    "heads-up": _heads_up,
    "heads-up-share": _heads_up_share,
    "chg": _chg,
    "lahis": _lahis,
    "translation": _translation,
    "faithful-mask": _budget_masks("answer"),
    "matching-mask": _budget_masks("model"),
    "warm-mask": _budget_masks("model", warm=True),
    "difference-mask": _budget_masks("difference"),
    "warm-difference-mask": _budget_masks("difference", warm=True),
    "calibrated-difference-mask": _budget_masks("difference", calibrate=True),
    "calibrated-warm-difference-mask": _budget_masks("difference", warm=True, calibrate=True),
    "exact-mask": _budget_masks(
        "mean-difference", warm=True, exact=True, by_size=True, noise_end=0.0
    ),
    "selected-exact-mask": _budget_masks(
        "mean-difference", warm=True, exact=True, by_size=True, noise_end=0.0, select_every=5
    ),
    "calibrated-integrated": _calibrated("integrated"),
    "selected-integrated": _calibrated("integrated", either=True),
    "selected-effects-counterfactual": _calibrated("effects-counterfactual", either=True),
    "induction": _detector("induction"),
    "previous-token": _detector("previous token"),
    "ov-copying": _ov_copying,
    **{f"random-{seed}": _random(seed) for seed in range(10)},
}
#: the gradient methods (MIB's node-level baselines)
GRADIENT_METHODS = ("attribution", "integrated")
#: methods that know nothing of the task
CONTROLS = ("induction", "previous-token", "ov-copying")


def score(
    model: ModelLike,
    method: str,
    task: Task,
    train_pairs: CounterfactualSet,
    config: MethodConfig | None = None,
    *,
    chat: bool | None = None,
    sizes: Sequence[float] = SIZES,
    instruction: str | None = None,
    calibration_pairs: CounterfactualSet | None = None,
) -> MethodScores:
    """The scores of ``method`` (a name of :data:`METHODS`) for ``task``, timed; gradient and
    effect methods read ``train_pairs``, trained methods the task's examples (the faithfulness
    -trained mask: the pairs, with ``instruction``, one mask per circuit size of ``sizes``); the
    calibrated methods cut their circuits back on ``calibration_pairs`` (None: ``train_pairs``)."""
    from lens_heads.core import has_chat_template

    if method not in METHODS:
        import difflib

        close = difflib.get_close_matches(method, list(METHODS), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise InputError(f"unknown head finder {method!r}{hint}; the finders: {', '.join(METHODS)}")
    config = config or MethodConfig()
    chat = has_chat_template(model.tokenizer) if chat is None else chat
    inputs = _Inputs(
        model, task, train_pairs, config, chat, tuple(sizes), instruction, calibration_pairs
    )
    start = time.perf_counter()
    scores, forwards, backwards, *rest = METHODS[method](inputs)
    seconds = round(time.perf_counter() - start, 2)
    circuits, notes = [*rest, None, None][:2]
    return MethodScores(
        scores.detach().float().cpu(), seconds, int(forwards), int(backwards),
        notes=dict(notes or {}), circuits=None if circuits is None else circuits.float().cpu(),
    )  # fmt: skip
