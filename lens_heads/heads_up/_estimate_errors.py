"""How far gradient estimates of a removal sweep are from the exact sweep, over a task's prompts
(issue 36): per prompt, :func:`sweep_estimates` on the task's held-out examples (bare prompts,
the answer's first token), plus what explains an estimate's errors head by head.

For each head of the order and each prompt, besides the exact step change and the two estimates:

* **alone** -- the answer-logit change of removing the head alone from the full model. The
  first-order estimate is the tangent of exactly this change, so ``|first order - alone|`` is
  the error of the linearisation (a gate the answer depends on non-linearly, e.g. a saturated
  softmax downstream), and ``|alone - exact|`` is what the heads removed before it change about
  its effect (interaction: backup heads, cancellation);
* **attention max** -- the head's largest attention weight from the last position in the full
  model; a head at or above ``saturation`` attends to one token (a saturated pattern).

A head's **failure** (for an estimate, over the prompts) is named by the larger of the two
error parts: ``linearisation`` or ``interaction``, with ``saturated`` added when its attention
is saturated on most prompts.

>>> import lens_heads as lh
>>> from lens_heads.core._tasks import Example, Task
>>> model = lh.tiny_model(n_layers=2, n_heads=4)
>>> task = Task("upper", tuple(Example(w, w.upper()) for w in "abcdefgh"))
>>> found = estimate_errors(model, task, ["L1H0", "L0H2", "L1H3"],
...                         EstimateErrorsConfig(n_eval=3, ig_steps=4, k=2, progress=False))
>>> list(found.to_frame()["estimate"])
['first order', 'integrated gradients']
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import pandas as pd
import torch
from scipy import stats
from torch import Tensor
from tqdm.auto import tqdm

from lens_heads.core import (
    InputError,
    Task,
    ablated,
    configure,
    format_head,
    get_task,
    has_chat_template,
    head_shape,
)
from lens_heads.core.internal import (
    ABLATIONS,
    AblationSetting,
    ChatSetting,
    FolderResult,
    HeldOutSetting,
    IntegratedGradientsSetting,
    ModelLike,
    ProgressSetting,
    TopKSetting,
    check_int,
    donor_prompts,
    head_outputs,
    model_name,
    own_checks,
)
from lens_heads.engine.internal import encode_prompts, task_baseline
from lens_heads.heads_up._sweep_gradients import answer_logit, sweep_estimates
from lens_heads.heads_up._sweep_inputs import OrderLike, removal_order

__all__ = ["ESTIMATES", "EstimateErrors", "EstimateErrorsConfig", "estimate_errors"]

#: the estimates compared with the exact sweep
ESTIMATES = ("first order", "integrated gradients")


@own_checks
@dataclass(frozen=True, kw_only=True)
class EstimateErrorsConfig(
    ChatSetting,
    ProgressSetting,
    IntegratedGradientsSetting.with_defaults(ig_steps=32),
    TopKSetting,
    AblationSetting,
    HeldOutSetting.with_defaults(n_eval=10),
):
    """Settings of :func:`estimate_errors`."""

    ALLOWED_ABLATIONS = ABLATIONS
    ABLATION_WHERE = "estimate_errors"

    max_heads: int | None = None
    """Estimate the first N heads of the order only (None: every head)."""
    saturation: float = 0.9
    """A head whose largest attention weight from the last position reaches it is saturated."""
    path_points: int = 41
    """Points at which the answer logit is read along integrated gradients' straight path (from
    every head kept to the order's heads all removed), to show how rough the integrand is."""

    def __post_init__(self) -> None:
        super().__post_init__()  # the shared parts' checks
        why = "each point is a forward pass per prompt"
        check_int("path_points", self.path_points, minimum=1, maximum=10_000, why=why)
        if self.max_heads is not None:
            check_int("max_heads", self.max_heads, minimum=2)
        if not 0 < self.saturation <= 1:
            raise InputError(f"saturation must lie in (0, 1], got {self.saturation}")


@dataclass(repr=False)
class EstimateErrors(FolderResult):
    """Per prompt (rows) and head of the order (columns): ``exact`` step changes of the answer
    logit, the ``first_order`` and ``integrated`` attributions, the change of removing the head
    ``alone``, and its ``attention_max``; ``path``: the answer logit at ``path_points`` evenly
    spaced points of the straight path integrated gradients integrate along (rows: prompts);
    ``cost``: forwards and backwards per prompt; ``seconds``: wall time of each part over all
    prompts."""

    model: str
    task: str
    order: list[str]
    exact: Tensor
    first_order: Tensor
    integrated: Tensor
    alone: Tensor
    attention_max: Tensor
    settings: dict[str, Any]
    path: Tensor | None = None
    cost: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    _format: ClassVar[str] = "lens_heads.estimate_errors/1"

    def _estimate(self, name: str) -> Tensor:
        return {"first order": self.first_order, "integrated gradients": self.integrated}[name]

    def to_frame(self) -> pd.DataFrame:
        """One row per estimate: the mean over prompts of Spearman's rank correlation with the
        exact step changes, the top-k overlap (of ``k``), the mean absolute error per step and
        of the total, the cost per prompt and the wall time."""
        k = int(self.settings["k"])
        rows = []
        for name in ESTIMATES:
            estimate = self._estimate(name)
            spearman = [
                float(stats.spearmanr(e, x).statistic) if len(x) > 2 else float("nan")
                for e, x in zip(estimate.tolist(), self.exact.tolist(), strict=True)
            ]
            overlap = [
                len(set(torch.topk(-x, min(k, len(x))).indices.tolist())
                    & set(torch.topk(-e, min(k, len(e))).indices.tolist()))
                for e, x in zip(estimate, self.exact, strict=True)
            ]  # fmt: skip
            rows.append(
                {
                    "estimate": name,
                    "spearman": float(pd.Series(spearman).mean()),
                    f"top-{k} overlap": float(pd.Series(overlap).mean()),
                    "abs error per step": float((estimate - self.exact).abs().mean()),
                    "abs error of the total": float(
                        (estimate.sum(1) - self.exact.sum(1)).abs().mean()
                    ),
                    "mean abs exact step": float(self.exact.abs().mean()),
                    "cost per prompt": self.cost.get(name, ""),
                    "seconds": self.seconds.get(name, float("nan")),
                    "seconds of the exact sweep": self.seconds.get("exact", float("nan")),
                }
            )
        return pd.DataFrame(rows)

    def path_roughness(self) -> dict[str, float]:
        """How the answer logit moves along the integrated-gradient path, mean over prompts:
        how far it travels (the sum of its absolute changes between the recorded points), how
        far apart its ends are, their ratio (far above 1: a rough integrand), and the share of
        the travel in the one segment that moves most (near 1: all the change happens in one
        short stretch, which a quadrature of few steps misses)."""
        if self.path is None:
            return {}
        steps = self.path.diff(dim=1).abs()
        travel = float(steps.sum(1).mean())
        ends = float((self.path[:, -1] - self.path[:, 0]).abs().mean())
        largest = float((steps.max(1).values / steps.sum(1).clamp_min(1e-9)).mean())
        return {
            "path travel": travel,
            "path ends apart": ends,
            "ratio": travel / max(ends, 1e-9),
            "largest segment share": largest,
        }

    def by_step(self) -> pd.DataFrame:
        """One row per step (head): mean exact change, each estimate's mean attribution and
        mean absolute error, the mean change alone and the mean attention maximum."""
        frame = pd.DataFrame(
            {
                "step": range(1, len(self.order) + 1),
                "head": self.order,
                "exact": self.exact.mean(0).tolist(),
                "alone": self.alone.mean(0).tolist(),
                "attention max": self.attention_max.mean(0).tolist(),
            }
        )
        for name in ESTIMATES:
            estimate = self._estimate(name)
            frame[name] = estimate.mean(0).tolist()
            frame[f"{name} abs error"] = (estimate - self.exact).abs().mean(0).tolist()
        return frame

    def failures(self, estimate: str = "first order", n: int = 10) -> pd.DataFrame:
        """The ``n`` heads where ``estimate`` errs most (mean absolute error over the prompts),
        each with the parts of its error and its failure: ``linearisation`` (the tangent misses
        the head's own removal), ``interaction`` (earlier removals change its effect), plus
        ``saturated`` when its attention reaches the saturation threshold on most prompts."""
        if estimate not in ESTIMATES:
            raise InputError(f"estimate must be one of {ESTIMATES}, got {estimate!r}")
        values = self._estimate(estimate)
        error = (values - self.exact).abs().mean(0)
        own = (values - self.alone).abs().mean(0)
        interaction = (self.alone - self.exact).abs().mean(0)
        saturated = (self.attention_max >= float(self.settings["saturation"])).float().mean(0)
        rows = []
        for index in torch.argsort(error, descending=True)[:n].tolist():
            kind = "linearisation" if own[index] >= interaction[index] else "interaction"
            if saturated[index] > 0.5:
                kind += ", saturated"
            rows.append(
                {
                    "head": self.order[index],
                    "step": index + 1,
                    "abs error": float(error[index]),
                    "linearisation part": float(own[index]),
                    "interaction part": float(interaction[index]),
                    "saturated share": float(saturated[index]),
                    "failure": kind,
                }
            )
        return pd.DataFrame(rows)

    def to_markdown(self) -> str:
        from lens_heads.core import markdown_table

        return markdown_table(self.to_frame(), floatfmt=".3g", index=False)

    def plot(self) -> Any:
        """Mean absolute error of each estimate at each step of the sweep, beside the mean
        absolute exact step change."""
        import plotly.graph_objects as go

        frame = self.by_step()
        figure = go.Figure()
        figure.add_scatter(
            x=frame["step"], y=self.exact.abs().mean(0).tolist(), name="|exact step|",
            mode="lines", line={"dash": "dot"},
        )  # fmt: skip
        for name in ESTIMATES:
            figure.add_scatter(x=frame["step"], y=frame[f"{name} abs error"], name=name)
        figure.update_layout(
            title=f"gradient estimates of a removal sweep: error per step ({self.model}, "
            f"{self.task}, {self.exact.shape[0]} prompts)",
            xaxis_title="heads removed",
            yaxis_title="mean |estimate - exact| (answer logit)",
            template="plotly_white",
        )
        return figure


def _attention_max(model: ModelLike, tokens: Sequence[int]) -> Tensor:
    """Each head's largest attention weight from the last position, full model: ``[L, H]``."""
    n_layers, _ = head_shape(model)
    names = {f"blocks.{layer}.attn.hook_pattern" for layer in range(n_layers)}
    with torch.no_grad():
        _, cache = model.run_with_cache(
            torch.tensor([list(tokens)], device=model.cfg.device), names_filter=names.__contains__
        )
    return torch.stack(
        [cache[f"blocks.{layer}.attn.hook_pattern"][0, :, -1].max(-1).values for layer in
         range(n_layers)]
    ).float().cpu()  # fmt: skip


def estimate_errors(
    model: ModelLike,
    task: Task | str,
    order: OrderLike,
    config: EstimateErrorsConfig | None = None,
    **overrides: Any,
) -> EstimateErrors:
    """The removal sweep of ``order`` (heads, a mask or trained weights, as
    :func:`lens_heads.removal_sweep` takes it) on each of the task's last ``n_eval``
    examples, exactly and by each gradient estimate (``config``'s fields also as keywords,
    ``n_eval=4``); see the module for what is recorded."""
    config = configure(EstimateErrorsConfig, config, overrides, "estimate_errors")
    task = task if isinstance(task, Task) else get_task(task)
    heads = removal_order(model, order)
    if config.max_heads is not None:
        heads = heads[: config.max_heads]
    if len(heads) < 2:
        raise InputError("the order has fewer than 2 heads: nothing to compare step by step")
    train, evaluation = task.split(n_eval=config.n_eval)
    chat = has_chat_template(model.tokenizer) if config.chat is None else config.chat
    encode = dict(instructed=False, chat=chat, shots=0, shot_pool=None, shot_seed=0)
    encoded = encode_prompts(model, evaluation, separator="\n\n", **encode)
    fixed = config.ablation if config.ablation != "resample" else "zero"
    baseline = task_baseline(model, fixed, train, evaluation, chat=chat, where="estimate_errors")
    donors = None
    if config.ablation == "resample":  # a donor of the same length per prompt, checked up front
        pool = train if train is not None and len(train) else evaluation
        bare = encode_prompts(model, pool, separator="\n\n", **encode)
        donors = donor_prompts([e.prompt_tokens for e in encoded], [e.prompt_tokens for e in bare])
    labels = [format_head(*head) for head in heads]
    n_layers, n_heads = head_shape(model)
    parts: dict[str, list[Tensor]] = {
        name: [] for name in ("exact", "first", "ig", "alone", "path")
    }
    last = torch.ones(n_layers, n_heads)
    for layer, head in heads:
        last[layer, head] = 0.0
    t = torch.linspace(0.0, 1.0, config.path_points)[:, None, None]
    path_masks = 1.0 + t * (last - 1.0)
    saturation: list[Tensor] = []
    seconds = dict.fromkeys(("exact", *ESTIMATES, "alone", "path", "attention"), 0.0)
    bar = tqdm(encoded, desc="estimate errors", disable=not config.progress)
    for index, example in enumerate(bar):
        tokens, answer = example.prompt_tokens, example.answer_tokens[0]
        if donors is not None:  # the donor runs with the same appended answer (causal: unread)
            baseline = head_outputs(model, torch.tensor([[*donors[index], answer]]))
        with ablated(model, baseline):
            found = sweep_estimates(model, tokens, answer, labels, steps=config.ig_steps)
            for name, value in found.seconds.items():
                seconds[name] += value
            started = time.perf_counter()
            single = torch.ones(len(heads) + 1, n_layers, n_heads)
            for row, (layer, head) in enumerate(heads, start=1):
                single[row, layer, head] = 0.0
            with torch.no_grad():
                logits = answer_logit(model, tokens, answer, single).cpu()
            seconds["alone"] += time.perf_counter() - started
            started = time.perf_counter()
            with torch.no_grad():
                parts["path"].append(answer_logit(model, tokens, answer, path_masks).cpu())
            seconds["path"] += time.perf_counter() - started
            started = time.perf_counter()
            attention = _attention_max(model, tokens)
            seconds["attention"] += time.perf_counter() - started
            parts["exact"].append(torch.tensor(found.exact))
            parts["first"].append(torch.tensor(found.first_order))
            parts["ig"].append(torch.tensor(found.integrated))
            parts["alone"].append(logits[1:] - logits[0])
            saturation.append(torch.stack([attention[layer, head] for layer, head in heads]))
    bar.close()
    return EstimateErrors(
        model=model_name(model),
        task=task.name,
        order=labels,
        exact=torch.stack(parts["exact"]),
        first_order=torch.stack(parts["first"]),
        integrated=torch.stack(parts["ig"]),
        alone=torch.stack(parts["alone"]),
        attention_max=torch.stack(saturation),
        path=torch.stack(parts["path"]),
        settings={k: v for k, v in asdict(config).items() if k != "progress"} | {"chat": chat},
        cost={
            "exact": f"{len(heads)} forwards",
            "first order": "1 forward and 1 backward",
            "integrated gradients": f"1 forward and 1 backward of {config.ig_steps} rows",
            "alone": f"{len(heads)} forwards",
            "path": f"{config.path_points} forwards",
        },
        seconds={name: round(value, 3) for name, value in seconds.items()},
    )
