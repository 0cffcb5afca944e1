"""Head-mask training (Heads up! §3.2): a 0/1 mask over all attention heads learned on
instruction-free task data with a Gumbel-sigmoid straight-through estimator, the model frozen.

>>> import lens_heads as lh
>>> from lens_heads.core._tasks import Example, Task
>>> model = lh.tiny_model(n_layers=2, n_heads=4)
>>> task = Task("upper", tuple(Example(w, w.upper()) for w in "abcdefghijklmnop"))
>>> config = lh.TrainingConfig(steps=3, batch_size=4, n_eval=4, precision="float32")
>>> result = lh.train_mask(model, task, config, progress=False)
>>> tuple(result.W.shape), result.mask.shape, len(result.history)
((2, 4), (2, 4), 3)

The algorithm (Heads up! §3.2 and its reference code): a logit ``W[l, h]`` per (layer, query
head), initialised from N(4, 0.02); at every step each example of the batch draws its own noise
``G = log(-log U)``, ``soft = sigmoid((W + G) / tau)``, ``hard = 1[soft > 0.5]`` and the forward
pass uses ``hard - soft.detach() + soft`` on ``blocks.{l}.attn.hook_z`` (through
:func:`lens_heads.core.mask_hooks`): the forward value is binary and the gradient is the
soft one's. ``tau`` falls linearly from 4 to 0.05 over the first 40 % of the steps; AdamW (no
weight decay) with lr 1e-2, 10 % linear warm-up and a cosine decay to 1e-4; batch 16; the loss
is the cross-entropy of the answer tokens only. The final mask keeps the heads with ``sigmoid(W)
>= 0.5``.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import Tensor
from tqdm.auto import tqdm

from lens_heads.core import (
    InputError,
    Task,
    answer_logits,
    collate,
    configure,
    get_task,
    head_shape,
    mask_hooks,
    pad_token_id,
)
from lens_heads.core.internal import (
    REFERENCE_SIZE,
    ModelLike,
    NonFiniteError,
    ablation_baseline,
    block_forward,
    check_pattern_capture,
    content_hash,
    head_outputs,
    model_fingerprint,
    model_name,
    partial_unembed_works,
    write_atomic_with,
)
from lens_heads.engine._objectives import (
    difference_gap,
    divergence_from_model,
    mean_difference_gap,
)
from lens_heads.engine._training_checkpoint import (
    CHECKPOINT_FILE,
    CHECKPOINT_FORMAT,
    CheckpointError,
    check_checkpoint,
    checkpoint_identity,
)
from lens_heads.engine._training_config import (
    CONTRASTED,
    TrainingConfig,
    _checked_initial,
    _trainable_heads,
    _uniform_gate_logits,
    gumbel_noise,
    lr_at,
    native_bf16,
    noise_scale_at,
    straight_through_mask,
    tau_at,
    top_k_straight_through,
    with_overrides,
)
from lens_heads.engine._training_data import (
    batch_indices,
    check_counterfactuals,
    encode_training,
    training_split,
)
from lens_heads.engine._training_result import (
    _HISTORY_COLUMNS,
    MaskTrainingResult,
    _ffn_hooks,
    _query_side_hooks,
)

__all__ = [
    "CheckpointError",
    "MaskTrainingResult",
    "TrainingConfig",
    "check_training",
    "gumbel_noise",
    "lr_at",
    "native_bf16",
    "straight_through_mask",
    "tau_at",
    "train_mask",
    "with_overrides",
]

logger = logging.getLogger(__name__)


# -- data --------------------------------------------------------------------------------------
def check_training(
    task: Task,
    config: TrainingConfig,
    *,
    model: Any = None,
    checkpoint_dir: str | os.PathLike[str] | None = None,
    resume: bool = False,
) -> Task:
    """Check a training without running (or loading) the model, and return its training split:
    the held-out part against the task, the batch and the shots against the training examples,
    the soft mask's heads and an existing checkpoint (refused without ``resume``; with it, one
    of another model, task or config) against ``model``, which may be a
    :class:`~lens_heads.core._model_shape.ModelShape` read before the weights."""
    device = getattr(getattr(model, "cfg", None), "device", None) or "cpu"
    config = config.resolve_precision(str(device))
    train = training_split(task, config)
    held_out = f" after holding out n_eval={config.n_eval}" if config.n_eval else ""
    if config.batch_size > len(train):
        raise InputError(
            f"batch_size {config.batch_size} is larger than the {len(train)} "
            f"training examples of task {task.name!r}{held_out}; use a smaller batch_size "
            "(or a smaller n_eval, or more examples)"
        )
    if config.shots > len(train) - 1:  # the demonstrations leave out the query itself
        raise InputError(
            f"shots={config.shots} demonstrations need more than the {len(train)} training "
            f"examples of task {task.name!r}{held_out}; use at most {len(train) - 1}"
        )
    if model is not None and config.soft and config.trainable is not None:
        _trainable_heads(config.trainable, *head_shape(model))
    folder = None if checkpoint_dir is None else Path(checkpoint_dir)
    if folder is not None and (folder / CHECKPOINT_FILE).is_file():
        if not resume:
            raise CheckpointError(
                f"{folder / CHECKPOINT_FILE} exists; pass resume=True (--resume) to continue it, "
                "or delete it / choose another checkpoint directory to start afresh"
            )
        if model is not None:
            check_checkpoint(
                folder / CHECKPOINT_FILE, checkpoint_identity(model, train, task.name), config
            )
    return train


# -- the trainer -------------------------------------------------------------------------------
class MaskTrainer:
    """The state of one training run (used by :func:`train_mask` and the benchmarks).

    ``step()`` performs one update; ``save_checkpoint``/``load_checkpoint`` persist everything a
    resumed run needs (W, AdamW state, the noise generator's state, the history so far).
    """

    def __init__(
        self,
        model: ModelLike,
        task: Task,
        config: TrainingConfig,
        initial: Tensor | None = None,
    ) -> None:
        self.model = model
        self.task = task
        self.device = torch.device(str(getattr(model.cfg, "device", "cpu") or "cpu"))
        config = config.resolve_precision(self.device)
        self.config = config
        self.train_set = check_training(task, config, model=model)
        check_counterfactuals(self.train_set, config)
        self.encoded, self.donors, self.contrasts = encode_training(model, self.train_set, config)
        self.pad_id = pad_token_id(model.tokenizer)
        self.shape = head_shape(model)
        reference = [example.prompt_tokens for example in self.encoded[:REFERENCE_SIZE]]
        self.baseline = None  # counterfactual ablation: each batch's donors (batch_baseline)
        if config.ablation != "counterfactual":
            self.baseline = ablation_baseline(
                model, config.ablation, reference, where="mask training"
            )
        self.generator = torch.Generator().manual_seed(config.seed % 2**63)
        n_layers, n_heads = self.shape
        init = torch.empty(n_layers, n_heads).normal_(
            config.init_mean, config.init_std, generator=self.generator
        )
        self.trainable: Tensor | None = None
        if config.gates == "sigmoid":
            init = _uniform_gate_logits(config.n_masks, n_layers, n_heads, self.generator)
        if initial is not None:
            init = _checked_initial(initial, tuple(init.shape))
        if config.soft:
            init = torch.ones(n_layers, n_heads)
            self.trainable = _trainable_heads(config.trainable, n_layers, n_heads).to(self.device)
        self.W = init.to(self.device).requires_grad_(True)
        self.ffn_W: Tensor | None = None
        parameters = [self.W]
        if config.ffn_masks:
            ffn = torch.empty(n_layers).normal_(
                config.init_mean, config.init_std, generator=self.generator
            )
            self.ffn_W = ffn.to(self.device).requires_grad_(True)
            parameters.append(self.ffn_W)
        self.optimizer = torch.optim.AdamW(
            parameters, lr=lr_at(0, config), weight_decay=config.weight_decay
        )
        self.step_index = 0
        self.history: list[tuple[int, float, float, float, int]] = []
        self.trajectory: list[Tensor] = [self._probabilities()]
        self.trajectory_steps: list[int] = [0]
        self.elapsed = 0.0
        self.partial = True
        self.fingerprint = self.train_set.fingerprint()
        self._checked = False

    # -- one update --------------------------------------------------------------------------
    def _autocast(self) -> Any:
        if self.config.precision == "bfloat16":
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return nullcontext()

    def _sample(self, weights: Tensor, batch: int) -> Tensor:
        shape = (batch, *weights.shape) if self.config.noise == "example" else tuple(weights.shape)
        noise = gumbel_noise(shape, self.generator).to(weights.device)
        noise = noise * noise_scale_at(self.step_index, self.config)
        tau = tau_at(self.step_index, self.config)
        if self.config.exact_budget and weights is self.W:
            return top_k_straight_through(weights, noise, tau, self.config.budget)
        return straight_through_mask(weights, noise, tau)

    def _soft_values(self) -> Tensor:
        """Soft mask: the multipliers, >= 0, exactly 1 on the heads not trained."""
        assert self.trainable is not None
        return torch.where(self.trainable, self.W.clamp_min(0), torch.ones_like(self.W))

    def _gates(self, batch: int) -> Tensor:
        """Sigmoid gates of the batch: ``[batch, L, H]`` for one seed, ``[seeds * batch, L, H]``
        for several (seed ``s`` gates rows ``s * batch`` to ``(s + 1) * batch - 1``)."""
        gates = torch.sigmoid(self.W)
        if gates.ndim == 2:
            return gates
        return gates.repeat_interleave(batch, dim=0)

    def _pull(self) -> Tensor:
        """The pull on the gates: ``gate_pull`` times each seed's mean clamped gate logit, summed
        over seeds (each seed feels the pull it would feel alone)."""
        clamp = self.config.pull_clamp
        per_seed = self.W.clamp(-clamp, clamp).flatten(-2).mean(dim=-1)
        return self.config.gate_pull * per_seed.sum()

    def _probabilities(self) -> Tensor:
        values = self._soft_values() if self.config.soft else torch.sigmoid(self.W)
        return values.detach().float().cpu()

    def batch(self, step: int) -> tuple[Tensor, Tensor]:
        """``(tokens, answer_mask)`` of batch ``step`` (right-padded)."""
        indices = batch_indices(step, len(self.encoded), self.config.batch_size, self.config.seed)
        tokens, answer_mask, _ = collate([self.encoded[i] for i in indices], self.pad_id)
        return tokens.to(self.device), answer_mask.to(self.device)

    def batch_contrasts(self, step: int) -> Tensor | None:
        """The objectives of ``CONTRASTED``: the contrast token of each example of batch
        ``step``."""
        if self.contrasts is None:
            return None
        indices = batch_indices(step, len(self.encoded), self.config.batch_size, self.config.seed)
        return torch.tensor([self.contrasts[i] for i in indices], device=self.device)

    def batch_baseline(self, step: int, width: int) -> Tensor | None:
        """Counterfactual ablation: every head's output on batch ``step``'s donors (right padded
        to ``width`` like the batch), ``[batch, pos, n_layers, n_heads, d_head]``; else None."""
        if self.donors is None:
            return None
        indices = batch_indices(step, len(self.encoded), self.config.batch_size, self.config.seed)
        rows = [self.donors[i] + [self.pad_id] * (width - len(self.donors[i])) for i in indices]
        return head_outputs(self.model, torch.tensor(rows, device=self.device))

    def loss(
        self,
        tokens: Tensor,
        answer_mask: Tensor,
        mask: Tensor,
        ffn: Tensor | None = None,
        baseline: Tensor | None = None,
        contrasts: Tensor | None = None,
    ) -> Tensor:
        """The loss of ``tokens`` under the head ``mask`` (and the MLP mask ``ffn``): the
        answer-token CE, with ``objective="model"`` the KL divergence from the unmasked model,
        with ``"difference"`` the relative squared gap of the logit difference against each
        row's ``contrasts`` token (:func:`difference_gap`); differentiable with respect to
        whatever the masks were computed from (the loss of :meth:`step`, and of any diagnosis
        that takes a gradient without updating)."""
        if self.config.query_side:
            hooks = _query_side_hooks(mask)
        else:
            hooks = mask_hooks(
                mask, self.model, baseline=self.baseline if baseline is None else baseline
            )
        if ffn is not None:
            hooks += _ffn_hooks(ffn)
        config = self.config
        blocks = block_forward(
            self.model, checkpoint=config.checkpoint_activations, compile=config.compile
        )
        with torch.enable_grad(), self._autocast(), blocks:
            logits = answer_logits(self.model, tokens, answer_mask, hooks, partial=self.partial)
        logits = logits.float()
        if config.objective != "answer":  # the unmasked model is the target
            with torch.no_grad(), self._autocast():
                reference = answer_logits(self.model, tokens, answer_mask, [], partial=self.partial)
        if config.objective in CONTRASTED:
            if contrasts is None:
                raise InputError(f"objective={config.objective!r} needs each row's contrast token")
            gap = difference_gap if config.objective == "difference" else mean_difference_gap
            return gap(logits, reference.float(), tokens, answer_mask, contrasts)
        if config.objective == "model":
            return divergence_from_model(logits, reference.float())
        return torch.nn.functional.cross_entropy(logits, tokens[answer_mask])

    def step(self) -> float:
        """One update; returns the batch's loss before the update (the answer-token CE, or the KL
        divergence from the unmasked model with ``objective="model"``)."""
        config, step = self.config, self.step_index
        tokens, answer_mask = self.batch(step)
        if not self._checked:
            self.partial = partial_unembed_works(self.model, tokens[:2], answer_mask[:2])
            self._checked = True
        lr = lr_at(step, config)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        seeds = self.W.shape[0] if self.W.ndim == 3 else 1
        if config.gates == "sigmoid":
            mask = self._gates(tokens.shape[0])
            tokens, answer_mask = tokens.repeat(seeds, 1), answer_mask.repeat(seeds, 1)
        elif config.soft:
            mask = self._soft_values()
        else:
            mask = self._sample(self.W, tokens.shape[0])
        ffn = None if self.ffn_W is None else self._sample(self.ffn_W, tokens.shape[0])
        baseline = self.batch_baseline(step, tokens.shape[1])
        if baseline is not None and seeds > 1:
            baseline = baseline.repeat(seeds, 1, 1, 1, 1)
        # every seed has the same answer tokens: the mean over the rows is the mean of the seeds'
        # losses, and ``seeds`` times it gives each seed the gradient of its own loss
        contrasts = self.batch_contrasts(step)
        if contrasts is not None and seeds > 1:
            contrasts = contrasts.repeat(seeds)
        loss = self.loss(tokens, answer_mask, mask, ffn, baseline, contrasts)
        if not bool(torch.isfinite(loss)):
            raise NonFiniteError(
                f"the training loss is not finite at step {step} (precision {config.precision}); "
                "train with precision='float32', and check that the task's answers are non-empty"
            )
        total = loss * seeds
        if config.gate_pull:
            total = total + self._pull()
        if config.sparsity:
            total = total + config.sparsity * torch.sigmoid(self.W).mean()
        if config.budget is not None and not config.exact_budget:  # keep prob. above budget
            excess = torch.sigmoid(self.W).mean() - config.budget / self.W.numel()
            total = total + config.budget_weight * torch.relu(excess)
        self.optimizer.zero_grad(set_to_none=True)
        total.backward()
        self.optimizer.step()
        if config.soft:
            with torch.no_grad():
                self.W.copy_(self._soft_values())
        self.step_index += 1
        probabilities = self._probabilities()
        kept = int((probabilities >= 0.5).sum())
        value = float(loss.detach())
        self.history.append((self.step_index, value, tau_at(step, config), lr, kept))
        if self.step_index % config.sample_every == 0 or self.step_index == config.steps:
            self.trajectory.append(probabilities)
            self.trajectory_steps.append(self.step_index)
        return value

    # -- checkpoints ---------------------------------------------------------------------------
    def _identity(self) -> dict[str, Any]:
        return checkpoint_identity(self.model, self.train_set, self.task.name)

    def save_checkpoint(self, directory: Path) -> Path:
        """Write ``checkpoint.safetensors`` atomically (tensors plus a JSON header)."""
        from safetensors.torch import save_file

        directory.mkdir(parents=True, exist_ok=True)
        tensors: dict[str, Tensor] = {
            "W": self.W.detach().cpu().contiguous(),
            "generator": self.generator.get_state(),
            "trajectory": torch.stack(self.trajectory),
            "history": torch.tensor(self.history, dtype=torch.float64).reshape(-1, 5),
        }
        if self.ffn_W is not None:
            tensors["ffn_W"] = self.ffn_W.detach().cpu().contiguous()
        state = self.optimizer.state_dict()["state"]
        for index, values in state.items():
            for key, value in values.items():
                tensors[f"adam.{index}.{key}"] = value.detach().cpu().reshape(value.shape or (1,))
        header = {
            "format": CHECKPOINT_FORMAT,
            "state": json.dumps(
                {
                    **self._identity(),
                    "config": self.config.to_dict(),
                    "step": self.step_index,
                    "elapsed": self.elapsed,
                    "trajectory_steps": self.trajectory_steps,
                    "partial": self.partial,
                    "checked": self._checked,
                }
            ),
        }
        return write_atomic_with(
            directory / CHECKPOINT_FILE, lambda tmp: save_file(tensors, tmp, header)
        )

    def load_checkpoint(self, path: Path) -> None:
        """Restore a checkpoint written by :meth:`save_checkpoint` for this model, task and
        config; anything else is a :class:`CheckpointError`."""
        from safetensors import safe_open

        state = check_checkpoint(path, self._identity(), self.config)
        with safe_open(str(path), framework="pt") as file:
            tensors = {key: file.get_tensor(key) for key in file.keys()}
        with torch.no_grad():
            self.W.copy_(tensors["W"].to(self.device))
            if self.ffn_W is not None:
                self.ffn_W.copy_(tensors["ffn_W"].to(self.device))
        self.generator.set_state(tensors["generator"])
        optimizer_state = self.optimizer.state_dict()
        restored: dict[int, dict[str, Tensor]] = {}
        for key, value in tensors.items():
            if key.startswith("adam."):
                _, index, name = key.split(".", 2)
                value = value.reshape(()) if name == "step" else value.to(self.device)
                restored.setdefault(int(index), {})[name] = value
        optimizer_state["state"] = restored
        self.optimizer.load_state_dict(optimizer_state)
        self.step_index = int(state["step"])
        self.elapsed = float(state["elapsed"])
        self.trajectory = list(tensors["trajectory"].unbind(0))
        self.trajectory_steps = [int(s) for s in state["trajectory_steps"]]
        self.history = [
            (int(r[0]), float(r[1]), float(r[2]), float(r[3]), int(r[4]))
            for r in tensors["history"].tolist()
        ]
        self.partial = bool(state["partial"])
        self._checked = bool(state["checked"])

    # -- the result ----------------------------------------------------------------------------
    def result(self, steps_this_session: int, session_seconds: float) -> MaskTrainingResult:
        history = pd.DataFrame(self.history, columns=list(_HISTORY_COLUMNS))
        history["step"] = history["step"].astype(int)
        history["kept"] = history["kept"].astype(int)
        per_step = session_seconds / steps_this_session if steps_this_session else math.nan
        return MaskTrainingResult(
            W=self.W.detach().float().cpu().clone(),
            trajectory=torch.stack(self.trajectory),
            trajectory_steps=list(self.trajectory_steps),
            history=history,
            config=self.config,
            model=model_name(self.model),
            task=self.task.name,
            timing={
                "seconds": self.elapsed,
                "seconds_per_step": per_step,
                "steps_this_session": float(steps_this_session),
            },
            ffn_W=None if self.ffn_W is None else self.ffn_W.detach().float().cpu().clone(),
            fingerprint={
                "model": model_fingerprint(self.model),
                "data": {"task": content_hash(self.task)},
            },
        )


def train_mask(
    model: ModelLike,
    task: Task | str | os.PathLike[str],
    config: TrainingConfig | None = None,
    *,
    checkpoint_dir: str | os.PathLike[str] | None = None,
    checkpoint_every: int = 50,
    resume: bool = False,
    progress: bool = True,
    callback: Callable[[int, float], None] | None = None,
    initial: Tensor | None = None,
    **overrides: Any,
) -> MaskTrainingResult:
    """Train a head mask on ``task`` (instruction-free ``input -> output`` pairs) for ``model``.

    The model is frozen while training (no weight gradients; ``requires_grad`` is restored
    afterwards). Prompts are the bare input in the chat template when the tokenizer has one,
    else ``{input}\\n\\n`` (``config.chat``, ``config.separator``); ``config.shots``
    demonstrations from the training split may precede it, and a hybrid multi-task set is
    simply a task (:func:`lens_heads.core.hybrid_few_shot` with ``split="train"``).

    With ``checkpoint_dir`` a checkpoint is written atomically every ``checkpoint_every`` steps
    and at the end; ``resume=True`` continues from it and ends with the same W as an
    uninterrupted run. A fresh run refuses to overwrite an existing checkpoint, and a
    checkpoint of another model, task or config is a :class:`CheckpointError`. ``callback(step,
    loss)`` runs after every step (after its checkpoint). ``initial``: the logits W starts from
    (default: the config's initial values), e.g. another fit's result.

    >>> import lens_heads as lh
    >>> model = lh.load_model("smollm2-135m-instruct")  # doctest: +SKIP
    >>> result = lh.train_mask(model, "capitalize", lh.TrainingConfig.short())  # doctest: +SKIP
    >>> result = lh.train_mask(model, "capitalize", steps=3)  # doctest: +SKIP
    >>> lh.evaluate(model, "capitalize", mask=result.mask, n_eval=40)  # doctest: +SKIP
    """
    config = configure(TrainingConfig, config, overrides, "train_mask")
    task = task if isinstance(task, Task) else get_task(task)
    if checkpoint_every < 1:
        raise InputError(f"checkpoint_every must be positive, got {checkpoint_every}")
    check_training(task, config, checkpoint_dir=checkpoint_dir, resume=resume)
    if config.query_side:
        check_pattern_capture(model)  # the mask acts on hook_pattern: check it once
    trainer = MaskTrainer(model, task, config, initial)
    folder = None if checkpoint_dir is None else Path(checkpoint_dir)
    if folder is not None and (folder / CHECKPOINT_FILE).is_file():
        trainer.load_checkpoint(folder / CHECKPOINT_FILE)
        logger.info("resuming %s at step %d", folder, trainer.step_index)
    elif resume:
        logger.info("no checkpoint to resume in %s; starting afresh", folder)

    frozen = [p for p in _parameters(model) if p.requires_grad]
    for parameter in frozen:
        parameter.requires_grad_(False)
    start_step = trainer.step_index
    started = time.perf_counter()
    bar = tqdm(
        total=config.steps,
        initial=start_step,
        desc=f"training mask: {task.name}",
        disable=not progress,
    )
    try:
        while trainer.step_index < config.steps:
            tick = time.perf_counter()
            loss = trainer.step()
            trainer.elapsed += time.perf_counter() - tick
            _, _, tau, lr, kept = trainer.history[-1]
            bar.update(1)
            bar.set_postfix(
                loss=f"{loss:.3f}",
                tau=f"{tau:.2f}",
                lr=f"{lr:.2g}",
                kept=f"{kept}/{trainer.W.numel()}",
            )
            done = trainer.step_index
            if folder is not None and (done % checkpoint_every == 0 or done == config.steps):
                trainer.save_checkpoint(folder)
            if callback is not None:
                callback(done, loss)
    finally:
        bar.close()
        for parameter in frozen:
            parameter.requires_grad_(True)
    steps_run = trainer.step_index - start_step
    return trainer.result(steps_run, time.perf_counter() - started)


def _parameters(model: Any) -> list[Tensor]:
    parameters = getattr(model, "parameters", None)
    return list(parameters()) if callable(parameters) else []
