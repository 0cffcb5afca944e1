"""The mask-training configuration (:class:`TrainingConfig`), its schedules (``tau``, learning
rate), the paper's noise and the straight-through estimator; re-exported by
:mod:`lens_heads.engine._training`.

>>> config = TrainingConfig(steps=100, lr=0.1, min_lr=0.0)
>>> round(tau_at(0, config), 2), round(tau_at(40, config), 2), round(lr_at(9, config), 3)
(4.0, 0.05, 0.1)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, ClassVar

import torch
from jaxtyping import Float
from torch import Tensor

from lens_heads.core import InputError
from lens_heads.core.internal import (
    ANSWER_ENDS,
    FIXED,
    AblationSetting,
    BatchSetting,
    ChatSetting,
    CheckpointSetting,
    HeldOutSetting,
    InstructedSetting,
    MasksSetting,
    PrecisionSetting,
    SeedSetting,
    SeparatorSetting,
    ShotsSetting,
    SplitSetting,
    check_numeric_fields,
    composed,
    native_bf16,
    own_checks,
    parse_head,
    warn_renamed,
)

#: what a mask can be trained towards: the task's answers, or the unmasked model's outputs
OBJECTIVES = ("answer", "model", "difference", "mean-difference")
#: the objectives that read each example's counterfactual answer (its contrast token)
CONTRASTED = ("difference", "mean-difference")

#: the largest learning rate accepted: above it one AdamW step saturates every mask logit
MAX_LR = 10.0


# -- configuration ----------------------------------------------------------------------------
@own_checks  # __post_init__ checks every field: users and the tests see the same clear errors
@composed  # takes a renamed field under its old name, with a DeprecationWarning
@dataclass(frozen=True, kw_only=True)
class TrainingConfig(
    ChatSetting,
    PrecisionSetting,
    SeedSetting,
    SplitSetting,
    SeparatorSetting,
    CheckpointSetting,
    ShotsSetting,
    InstructedSetting,
    MasksSetting,
    AblationSetting,
    BatchSetting.with_defaults(batch_size=8),
    HeldOutSetting,
):
    """Hyper-parameters of :func:`train_mask`. The defaults are the short CPU schedule (200
    steps, batch 8, lr 0.1: minutes on 2 cores), the same in Python and on the command line;
    :meth:`paper` is the paper's schedule (6,250 steps, batch 16, lr 0.01), ``--paper`` on the
    command line. ``batch_size`` is a step's examples; ``ablation`` may also be
    ``counterfactual``: each example's counterfactual prompt, given as
    ``train_mask(..., counterfactuals=...)``.

    ``precision="auto"`` trains under bfloat16 autocast where the device computes bf16 natively
    (:func:`native_bf16`) and in float32 elsewhere: on a CPU without ``avx512_bf16``/``amx_bf16``
    bf16 autocast is several times *slower* than fp32; the resolved precision is recorded.
    (``precision`` was ``dtype`` before 0.2.0: the old keyword and attribute still work, with a
    :class:`DeprecationWarning`; ``dtype`` now always means a model's weights.)

    ``answer_end`` says what closes each training target after the answer
    (:func:`lens_heads.core._prompts.answer_end_tokens`): ``"auto"`` (default, the faithful choice)
    trains on the chat template's end-of-turn token (``<|im_end|>`` for SmolLM2) for chat
    prompts and on EOS for base-model prompts, so the masked model answers *and stops*;
    ``"none"`` trains on the answer alone (masked outputs then run on: "Jungle. Jungle. ...").

    ``n_eval`` examples at the end of the task (after an optional shuffle with ``split_seed``,
    as :meth:`lens_heads.core.Task.split`) are held out and never trained on;
    :func:`lens_heads.evaluate` with the same ``n_eval``/``split_seed`` (or a smaller ``n_eval``)
    evaluates on held-out examples only. ``n_eval=0`` trains on every example.

    Experimental (Appendix C.3, off by default): ``ffn_masks`` trains one more logit per layer
    that gates the MLP output (``blocks.{l}.hook_mlp_out``) jointly with the heads;
    ``query_side`` masks inside the softmax instead of the head output: a masked head attends
    uniformly over the positions it may see (``hook_pattern``), its output is not removed.

    >>> TrainingConfig().steps, TrainingConfig.paper().steps
    (200, 6250)
    >>> TrainingConfig(tau_begin=0.1, tau_end=1.0)
    Traceback (most recent call last):
    ...
    lens_heads.core._errors.InputError: tau_end (1.0) must not exceed tau_begin (0.1): ...
    """

    ALLOWED_ABLATIONS = (*FIXED, "counterfactual")
    MIN_EVAL = 0  # train on every example
    ABLATION_WHERE = "mask training"

    steps: int = 200
    """Training steps."""
    lr: float = 0.1
    """Peak learning rate (AdamW, warm-up then cosine decay)."""
    min_lr: float = 1e-4
    """The learning rate the cosine decay ends at."""
    warmup_fraction: float = 0.1
    """The share of steps the learning rate warms up over."""
    weight_decay: float = 0.0
    """AdamW's weight decay on the mask logits."""
    tau_begin: float = 4.0
    """The Gumbel-sigmoid temperature at the start."""
    tau_end: float = 0.05
    """The temperature after the anneal."""
    tau_fraction: float = 0.4
    """The share of steps the temperature anneals over."""
    init_mean: float = 4.0
    """Mean of the mask logits' initial values (the paper: 4; Table 6: -3)."""
    init_std: float = 0.02
    """Spread of the mask logits' initial values."""
    noise: str = "example"
    """Gumbel noise drawn per example (the paper's, the default) or once per batch"""
    noise_end: float = 1.0
    """The Gumbel noise's scale after the anneal: it falls linearly from 1 over the same steps
    as the temperature (1: never annealed, the paper's; 0: the last steps train the mask read
    out, without noise)."""
    sparsity: float = 0.0
    """Weight of a penalty on the mean sigmoid(W) (fewer heads kept)."""
    answer_end: str = "auto"
    """What closes each training target after the answer: auto (the chat template's
    end-of-turn token for chat models, EOS for base models), turn, eos, separator or none (the
    answer alone: masked outputs then run on)."""
    trajectory_every: int | None = None
    """Record the mask logits every k steps (default: about 100 samples over the run)."""
    ffn_masks: bool = False
    """Experimental: also train one gate per layer on the MLP output."""
    query_side: bool = False
    """Experimental: mask inside the softmax instead of the head output."""
    soft: bool = False
    """LAHIS's soft mask: multipliers >= 0 from 1, no noise."""
    trainable: Sequence[str] | None = None
    """Soft masks: the heads trained (L3H7, ...); None: all."""
    gates: str = "straight_through"
    """straight_through (the paper's binary Gumbel mask) or sigmoid: gates sigmoid(W) in [0, 1],
    no noise, initial gates uniform in (0, 1) (Causal Head Gating's fits; see head_roles)."""
    gate_pull: float = 0.0
    """Sigmoid gates: weight of a pull on the mean gate logit clamped to +-pull_clamp; > 0 pulls
    the gates towards 0, < 0 towards 1."""
    pull_clamp: float = 4.0
    """Sigmoid gates: the pull stops acting on a gate logit beyond +-pull_clamp."""
    objective: str = "answer"
    """What the masked model is trained towards: answer (the cross-entropy of the task's answer
    tokens, the paper's), model (the KL divergence from the unmasked model's own next-token
    distribution at those positions: a circuit that behaves like the model, not better) or
    difference (the squared gap between the masked and the unmasked model's logit difference of
    the answer's first token and the counterfactual answer's, over the batch's mean squared
    unmasked difference: the quantity faithfulness measures, in logits, where probabilities
    saturate; each example needs ``counterfactual`` and ``counterfactual_output``) or
    mean-difference (the squared gap of the batch's mean logit differences instead, over the
    squared mean: faithfulness is a ratio of means)."""
    budget: int | None = None
    """Keep at most this many heads: a penalty (``budget_weight``) pulls the mean keep
    probability down to budget / heads, and the mask is the top ``budget`` heads of W."""
    budget_weight: float = 10.0
    """Weight of the budget's penalty on the mean keep probability above it."""
    exact_budget: bool = False
    """With a budget: every training forward keeps exactly the top ``budget`` heads of W plus
    its Gumbel noise (:func:`top_k_straight_through`), the circuit the mask is read as, instead
    of the heads above 0.5 held near the budget by the penalty (which then does not act)."""
    compile: bool = False
    """Run each block through torch.compile: fewer, larger kernels on a GPU (equal to eager
    within float rounding; the first steps compile)."""

    RENAMED: ClassVar[dict[str, str]] = {"dtype": "precision"}

    def __post_init__(self) -> None:
        super().__post_init__()  # the shared parts' checks

        def need(condition: bool, message: str) -> None:
            if not condition:
                raise InputError(message)

        check_numeric_fields(self)  # 2.5 steps, lr=inf, chat="yes": a clear error first
        need(
            isinstance(self.steps, int) and self.steps > 0,
            f"steps must be a positive integer, got {self.steps}",
        )
        need(self.lr > 0, f"lr must be positive, got {self.lr}")
        need(
            self.lr <= MAX_LR,
            f"lr={self.lr:g} is far above any rate that trains a mask (the paper's 1e-2, the "
            "short schedule's 0.1): AdamW moves every mask logit by about lr per step and the "
            f"sigmoid saturates within +-10, so one step would decide the mask; use lr <= "
            f"{MAX_LR:g}",
        )
        need(
            0 <= self.min_lr <= self.lr,
            f"min_lr must lie in [0, lr={self.lr}], got {self.min_lr}",
        )
        need(
            0 <= self.warmup_fraction < 1,
            f"warmup_fraction must lie in [0, 1), got {self.warmup_fraction}",
        )
        need(self.weight_decay >= 0, f"weight_decay must be >= 0, got {self.weight_decay}")
        need(
            self.tau_begin > 0 and self.tau_end > 0,
            f"temperatures must be positive, got tau_begin={self.tau_begin}, "
            f"tau_end={self.tau_end}",
        )
        need(
            self.tau_end <= self.tau_begin,
            f"tau_end ({self.tau_end}) must not exceed tau_begin ({self.tau_begin}): "
            "tau anneals downwards",
        )
        need(
            0 < self.tau_fraction <= 1,
            f"tau_fraction must lie in (0, 1], got {self.tau_fraction}",
        )
        need(self.init_std >= 0, f"init_std must be >= 0, got {self.init_std}")
        need(
            self.noise in ("example", "batch"),
            f"noise must be 'example' (per example, the paper's) or 'batch', got {self.noise!r}",
        )
        need(
            0 <= self.noise_end <= 1,
            f"noise_end scales the Gumbel noise after the anneal: it must lie in [0, 1], got "
            f"{self.noise_end}",
        )
        need(self.sparsity >= 0, f"sparsity must be >= 0, got {self.sparsity}")
        _check_soft(self)
        _check_gates(self)
        need(
            self.objective in OBJECTIVES,
            f"objective must be one of {', '.join(OBJECTIVES)}, got {self.objective!r}",
        )
        need(
            self.budget is None or (isinstance(self.budget, int) and self.budget >= 1),
            f"budget must be a positive number of heads (or None), got {self.budget!r}",
        )
        need(self.budget_weight >= 0, f"budget_weight must be >= 0, got {self.budget_weight}")
        need(
            not self.exact_budget or self.budget is not None,
            "exact_budget keeps exactly budget heads: set budget (a number of heads) with it",
        )
        need(
            self.budget is None or (self.gates == "straight_through" and not self.soft),
            "budget applies to the straight-through mask (gates='straight_through', soft=False)",
        )
        if self.ablation != "zero" and self.query_side:
            raise InputError(
                "query_side masks act inside the softmax, not on the head output: use "
                "ablation='zero' with them"
            )
        need(
            self.answer_end in ANSWER_ENDS,
            f"answer_end must be one of {', '.join(ANSWER_ENDS)}, got {self.answer_end!r}",
        )
        need(
            self.trajectory_every is None or self.trajectory_every > 0,
            f"trajectory_every must be positive (or None), got {self.trajectory_every}",
        )

    @classmethod
    def short(cls, **overrides: Any) -> TrainingConfig:
        """The short CPU schedule, which is the default: 200 steps, batch 8, lr 0.1 (cosine to
        1e-4, 10 % warm-up), the paper's tau schedule, init and per-example noise,
        ``precision="auto"``; a few minutes for SmolLM2 on 2 cores (``docs/training.md``).
        ``overrides`` replace single fields.

        >>> TrainingConfig.short(steps=150).lr
        0.1
        """
        values: dict[str, Any] = {"steps": 200, "batch_size": 8, "lr": 0.1}
        return cls(**{**values, **overrides})

    @classmethod
    def paper(cls, **overrides: Any) -> TrainingConfig:
        """The paper's schedule (Heads up! Table 11): 6,250 steps of batch 16 at lr 0.01 (over
        an hour for SmolLM2 on 2 CPU cores), the other fields as the defaults; ``lens-heads
        train-mask --paper``. ``overrides`` replace single fields.

        >>> config = TrainingConfig.paper(seed=3)
        >>> config.steps, config.batch_size, config.lr, config.seed
        (6250, 16, 0.01, 3)
        """
        values: dict[str, Any] = {"steps": 6250, "batch_size": 16, "lr": 1e-2}
        return cls(**{**values, **overrides})

    @property
    def warmup_steps(self) -> int:
        return round(self.warmup_fraction * self.steps)

    @property
    def sample_every(self) -> int:
        """Steps between two samples of the trajectory (auto: about 500 samples per run)."""
        return self.trajectory_every or max(1, self.steps // 500)

    def resolve_precision(self, device: str | torch.device = "cpu") -> TrainingConfig:
        """This config with ``precision="auto"`` replaced by what ``device`` computes fast."""
        if self.precision != "auto":
            return self
        return replace(self, precision="bfloat16" if native_bf16(device) else "float32")

    def resolve_dtype(self, device: str | torch.device = "cpu") -> TrainingConfig:
        """Deprecated name of :meth:`resolve_precision` (until 0.3.0)."""
        warn_renamed("resolve_dtype()", "resolve_precision()")
        return self.resolve_precision(device)

    @property
    def dtype(self) -> str:
        """Deprecated name of :attr:`precision` (until 0.3.0)."""
        warn_renamed("TrainingConfig.dtype", "TrainingConfig.precision")
        return self.precision

    def to_dict(self) -> dict[str, Any]:
        values = asdict(self)
        if values["trainable"] is not None:  # JSON has no tuples: keep checkpoints comparable
            values["trainable"] = list(values["trainable"])
        return values

    @classmethod
    def current_keys(cls, values: dict[str, Any]) -> dict[str, Any]:
        """A stored config's ``values`` under today's field names (``precision`` was ``dtype``
        before 0.2.0): a folder, checkpoint or grid written then compares and loads as it was.

        >>> TrainingConfig.current_keys({"dtype": "float32", "steps": 3})
        {'precision': 'float32', 'steps': 3}
        """
        return {cls.RENAMED.get(name, name): value for name, value in values.items()}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainingConfig:
        """The config of a stored run or checkpoint (one written before a field's rename, too).

        >>> TrainingConfig.from_dict({"steps": 3, "dtype": "float32"}).precision
        'float32'
        """
        values = cls.current_keys(values)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise InputError(f"unknown TrainingConfig field(s) {unknown}")
        return cls(**values)


#: Config fields added after checkpoints existed, with the value that reproduces the behaviour
#: before them: an older checkpoint without them resumes as if it had them. (``answer_end`` is
#: not here on purpose: checkpoints from before it trained answer-only targets.)
_LATER_FIELDS: dict[str, Any] = {
    "soft": False,
    "trainable": None,
    "gates": "straight_through",
    "n_masks": 1,
    "gate_pull": 0.0,
    "pull_clamp": 4.0,
    "ablation": "zero",
    "instructed": False,
    "budget": None,
    "budget_weight": 10.0,
    "checkpoint_activations": False,
    "compile": False,
    "objective": "answer",
    "exact_budget": False,
    "noise_end": 1.0,
}

#: the mask parametrisations of the one trainer
GATES = ("straight_through", "sigmoid")


def _check_gates(config: TrainingConfig) -> None:
    """Validate the sigmoid-gate fields of ``config``."""
    if config.gates not in GATES:
        raise InputError(f"gates must be one of {', '.join(GATES)}, got {config.gates!r}")
    if config.pull_clamp <= 0:
        raise InputError(f"pull_clamp must be positive, got {config.pull_clamp}")
    if config.gates == "sigmoid":
        if config.soft or config.query_side or config.ffn_masks:
            raise InputError(
                "sigmoid gates multiply the head outputs: drop soft / query_side / ffn_masks"
            )
        return
    extra = {"n_masks": config.n_masks != 1, "gate_pull": config.gate_pull != 0}
    named = [name for name, given in extra.items() if given]
    if named:
        raise InputError(
            f"{' and '.join(named)} belong to sigmoid gates: pass gates='sigmoid' with them "
            "(the straight-through mask trains one mask with its own sparsity setting)"
        )


def _trainable_heads(labels: Sequence[str] | None, n_layers: int, n_heads: int) -> Tensor:
    """Boolean ``[n_layers, n_heads]`` of the soft mask's trainable heads (all when None)."""
    if labels is None:
        return torch.ones(n_layers, n_heads, dtype=torch.bool)
    chosen = torch.zeros(n_layers, n_heads, dtype=torch.bool)
    for label in labels:
        layer, head = parse_head(label, n_layers, n_heads)
        chosen[layer, head] = True
    return chosen


def _check_soft(config: TrainingConfig) -> None:
    """Validate (and normalise to a tuple) the soft-mask fields of ``config``."""
    if config.trainable is None:
        return
    if not config.soft:
        raise InputError("trainable heads are for soft masks: pass soft=True with trainable")
    if isinstance(config.trainable, str):
        raise InputError("trainable must be a list of head labels like ['L3H7'], not one string")
    labels = tuple(str(label) for label in config.trainable)
    if not labels:
        raise InputError("trainable is empty: give at least one head (or None for all heads)")
    for label in labels:
        parse_head(label)
    object.__setattr__(config, "trainable", labels)
    if config.query_side or config.ffn_masks:
        raise InputError("soft masks train head multipliers only: drop query_side / ffn_masks")


# -- schedules and the estimator ---------------------------------------------------------------
def tau_at(step: int, config: TrainingConfig) -> float:
    """Temperature at ``step`` (0-based): linear from ``tau_begin`` to ``tau_end`` over the first
    ``tau_fraction * steps`` steps, then constant.

    >>> config = TrainingConfig(steps=100)
    >>> tau_at(0, config), tau_at(20, config), tau_at(40, config), tau_at(99, config)
    (4.0, 2.025, 0.05, 0.05)
    """
    return _annealed(step, config, config.tau_begin, config.tau_end)


def _annealed(step: int, config: TrainingConfig, begin: float, end: float) -> float:
    """The one anneal of the trainer: linear from ``begin`` to ``end`` over the first
    ``tau_fraction * steps`` steps, then ``end``."""
    span = config.tau_fraction * config.steps
    if step >= span:
        return end
    return begin + (end - begin) * (step / span)


def noise_scale_at(step: int, config: TrainingConfig) -> float:
    """The Gumbel noise's scale at ``step`` (0-based): linear from 1 to ``noise_end`` over the
    temperature's anneal (:func:`tau_at`), then constant.

    >>> config = TrainingConfig(steps=100, noise_end=0.0)
    >>> noise_scale_at(0, config), noise_scale_at(20, config), noise_scale_at(99, config)
    (1.0, 0.5, 0.0)
    """
    return _annealed(step, config, 1.0, config.noise_end)


def lr_at(step: int, config: TrainingConfig) -> float:
    """Learning rate of update ``step`` (0-based): linear warm-up ``lr * (step + 1) / W`` for the
    first ``W = round(warmup_fraction * steps)`` updates, then a cosine from ``lr`` down to
    ``min_lr``: ``min_lr + (lr - min_lr) * (1 + cos(pi * (step - W) / (steps - W))) / 2``.

    >>> config = TrainingConfig(steps=100, lr=0.1, min_lr=0.0)
    >>> lr_at(0, config), lr_at(9, config), round(lr_at(55, config), 6)
    (0.01, 0.1, 0.05)
    """
    warmup = config.warmup_steps
    if step < warmup:
        return config.lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, config.steps - warmup)
    return config.min_lr + (config.lr - config.min_lr) * 0.5 * (1 + math.cos(math.pi * progress))


def gumbel_noise(shape: Sequence[int], generator: torch.Generator) -> Tensor:
    """The paper's noise ``G = log(-log U)``, ``U ~ U(0, 1)`` (clamped away from 0 and 1).

    >>> noise = gumbel_noise((3, 2), torch.Generator().manual_seed(0))
    >>> tuple(noise.shape), bool(noise.isfinite().all())
    ((3, 2), True)
    """
    uniform = torch.rand(tuple(shape), generator=generator).clamp(1e-10, 1 - 1e-7)
    return torch.log(-torch.log(uniform))


def straight_through_mask(
    weights: Float[Tensor, "..."],
    noise: Float[Tensor, "..."],
    tau: float,
) -> Float[Tensor, "..."]:
    """Gumbel-sigmoid straight-through sample: forward value ``1[sigmoid((W + G) / tau) > 0.5]``,
    gradient of ``sigmoid((W + G) / tau)``.

    >>> W = torch.tensor([[3.0, -3.0]], requires_grad=True)
    >>> mask = straight_through_mask(W, torch.zeros(1, 2), tau=1.0)
    >>> mask.tolist(), bool(torch.autograd.grad(mask.sum(), W)[0].ne(0).all())
    ([[1.0, 0.0]], True)
    """
    soft = torch.sigmoid((weights + noise) / tau)
    hard = (soft > 0.5).to(soft.dtype)
    return hard - soft.detach() + soft


def top_k_straight_through(
    weights: Float[Tensor, "L H"],
    noise: Float[Tensor, "*batch L H"],
    tau: float,
    k: int,
) -> Float[Tensor, "*batch L H"]:
    """Straight-through sample of exactly ``k`` heads: forward value 1 on the top ``k`` of
    ``W + G`` (per sample, over its layers and heads) and 0 elsewhere, gradient of
    ``sigmoid((W + G - t) / tau)`` with ``t`` midway between the ``k``-th value and the next.

    >>> W = torch.tensor([[2.0, 1.0], [0.0, -1.0]], requires_grad=True)
    >>> mask = top_k_straight_through(W, torch.zeros(2, 2), tau=1.0, k=3)
    >>> mask.tolist(), bool(torch.autograd.grad(mask[1, 1], W)[0][1, 1] > 0)
    ([[1.0, 1.0], [1.0, 0.0]], True)
    """
    scores = (weights + noise).flatten(-2)
    top = scores.topk(min(k + 1, scores.shape[-1]), dim=-1).values
    cut = top[..., k - 1 : k + 1].mean(dim=-1, keepdim=True) if k < scores.shape[-1] else None
    if cut is None:  # every head: nothing to choose
        return torch.ones_like(weights + noise)
    soft = torch.sigmoid((scores - cut.detach()) / tau)
    hard = (scores >= top[..., k - 1 : k]).to(soft.dtype)
    return (hard - soft.detach() + soft).view(scores.shape[:-1] + weights.shape[-2:])


def _uniform_gate_logits(
    seeds: int, n_layers: int, n_heads: int, generator: torch.Generator
) -> Tensor:
    """Initial sigmoid-gate logits: gates uniform in (0, 1), one ``[L, H]`` draw per seed
    (``[seeds, L, H]`` when there are several)."""
    shape = (seeds, n_layers, n_heads) if seeds > 1 else (n_layers, n_heads)
    gates = torch.rand(shape, generator=generator).clamp(1e-6, 1 - 1e-6)
    return torch.logit(gates)


def _checked_initial(initial: Tensor, shape: tuple[int, ...]) -> Tensor:
    """``initial`` as the starting W, when it has the shape the run trains."""
    if tuple(initial.shape) != shape:
        raise InputError(
            f"initial mask logits have shape {tuple(initial.shape)} but this run trains "
            f"{shape}; start from a result of the same model and number of seeds"
        )
    if not torch.isfinite(initial).all():
        raise InputError("initial mask logits hold NaN or inf; start from finite logits")
    return initial.detach().float().clone()


def with_overrides(config: TrainingConfig, **overrides: Any) -> TrainingConfig:
    """``config`` with the given fields replaced (``None`` values are ignored)."""
    return replace(config, **{k: v for k, v in overrides.items() if v is not None})
