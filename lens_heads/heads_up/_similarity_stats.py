"""Heads up! Figure 4 over many prompts (:class:`SimilarityStats`): per layer the mean cosine of
each comparison with a 95 % t interval, and a paired test of whether the masked model's hidden
state sits closer to the instructed one than the original model's does."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import torch
from jaxtyping import Float
from torch import Tensor
from tqdm.auto import tqdm

from lens_heads.core import (
    InputError,
    MaskLike,
    Task,
    configure,
    get_task,
    markdown_table,
    write_atomic,
)
from lens_heads.core.internal import (
    HOOK_LABELS,
    FolderResult,
    ModelLike,
    check_prompts,
    cosine_by_layer,
    layer_activations,
    model_name,
)
from lens_heads.heads_up._readout_config import ReadoutConfig

__all__ = ["FIGURE4_COMPARISONS", "SimilarityStats", "figure4_stats"]

#: The three comparisons of Figure 4, as (name, (run a, run b)) with the run labels used below.
FIGURE4_COMPARISONS: dict[str, tuple[str, str]] = {
    "original vs instructed": ("original", "instructed"),
    "masked vs instructed": ("masked", "instructed"),
    "masked vs masked+instructed": ("masked", "masked+instructed"),
}


# -- Figure 4 over many prompts -------------------------------------------------------------------
@dataclass(repr=False)
class SimilarityStats(FolderResult):
    """Figure 4 over many prompts: ``cosine[prompt, comparison, hook, layer]`` for each prompt,
    summarised per layer by the mean and a 95 % t-interval over prompts, and by the paired test
    of the figure's claim over ``later_layers`` (default: the later half).

    The paired difference is, per prompt, the mean over ``later_layers`` of the decoder-output
    cosine ``masked vs instructed`` minus ``original vs instructed``: positive when the masked
    model's hidden state is closer to the instructed one than the original model's is (the
    paper's direction). :meth:`difference` reports its mean, 95 % interval, a paired t-test and
    how many prompts go each way.

    >>> import lens_heads as lh
    >>> model = lh.tiny_model(n_layers=2, n_heads=4)
    >>> mask = lh.HeadMask.from_heads(["L0H1"], n_layers=2, n_heads=4)
    >>> stats = lh.figure4_similarity(model, ["apple", "pear", "plum"], "Repeat.", mask)
    >>> difference = stats.difference()
    >>> difference["n_prompts"], difference["n_positive"] + difference["n_negative"] <= 3
    (3, True)
    >>> stats.to_frame().shape
    (2, 18)
    """

    _format: ClassVar[str] = "lens_heads.similarity_stats/1"

    model: str
    prompts: list[str]
    instruction: str
    comparisons: list[str]
    hooks: list[str]
    cosine: Float[Tensor, "prompt comparison hook n_layers"]
    later_layers: list[int]
    position: int = -1
    task: str | None = None

    @property
    def n_prompts(self) -> int:
        return int(self.cosine.shape[0])

    def mean(self) -> Float[Tensor, "comparison hook n_layers"]:
        return self.cosine.float().mean(dim=0)

    def ci95(self) -> tuple[Tensor, Tensor]:
        """Per-layer 95 % t-interval of the mean over prompts, ``(low, high)`` (NaN for one
        prompt)."""
        mean = self.mean()
        half = _t_half_width(self.cosine.float(), dim=0)
        return mean - half, mean + half

    def _column(self, comparison: str, hook: str) -> str:
        return f"{comparison} ({HOOK_LABELS.get(hook, hook)})"

    def to_frame(self) -> pd.DataFrame:
        """Index: layer. For each (comparison, hook) three columns: the mean over prompts and
        the 95 % interval's ``low`` and ``high``."""
        mean, (low, high) = self.mean(), self.ci95()
        data: dict[str, list[float]] = {}
        for c, comparison in enumerate(self.comparisons):
            for h, hook in enumerate(self.hooks):
                column = self._column(comparison, hook)
                data[f"{column} mean"] = mean[c, h].tolist()
                data[f"{column} low"] = low[c, h].tolist()
                data[f"{column} high"] = high[c, h].tolist()
        return pd.DataFrame(data, index=pd.RangeIndex(mean.shape[-1], name="layer"))

    def per_prompt_frame(self) -> pd.DataFrame:
        """One row per prompt: the mean cosine over ``later_layers`` of each (comparison,
        hook), and the paired difference."""
        later = self.cosine[..., self.later_layers].float().mean(dim=-1)
        data: dict[str, Any] = {"prompt": self.prompts}
        for c, comparison in enumerate(self.comparisons):
            for h, hook in enumerate(self.hooks):
                data[self._column(comparison, hook)] = later[:, c, h].tolist()
        data["difference"] = self._differences().tolist()
        return pd.DataFrame(data)

    def summary(self) -> pd.DataFrame:
        """Mean cosine over ``later_layers`` and over prompts: rows comparisons, columns hooks."""
        later = self.cosine[..., self.later_layers].float().mean(dim=(0, -1))
        return pd.DataFrame(
            later.tolist(),
            index=pd.Index(self.comparisons, name="comparison"),
            columns=[HOOK_LABELS.get(hook, hook) for hook in self.hooks],
        )

    def _differences(self, hook: str = "hook_resid_post") -> Float[Tensor, " prompt"]:
        if hook not in self.hooks:
            raise InputError(f"hook {hook!r} was not captured; have {self.hooks}")
        h = self.hooks.index(hook)
        masked = self.comparisons.index("masked vs instructed")
        original = self.comparisons.index("original vs instructed")
        later = self.cosine[:, :, h][..., self.later_layers].float().mean(dim=-1)
        return later[:, masked] - later[:, original]

    def difference(self, hook: str = "hook_resid_post") -> dict[str, Any]:
        """The paired difference masked~instructed minus original~instructed over
        ``later_layers`` (mean over prompts, 95 % t-interval, paired t-test, counts), with the
        two mean cosines it is the difference of."""
        from scipy import stats

        d = self._differences(hook).double()
        n = int(d.numel())
        mean = float(d.mean())
        half = float(_t_half_width(d, dim=0))
        if n > 1 and float(d.std()) > 0:
            test = stats.ttest_1samp(d.numpy(), 0.0)
            t, p = float(test.statistic), float(test.pvalue)
        else:
            t, p = math.nan, math.nan
        h = self.hooks.index(hook)
        later = self.cosine[:, :, h][..., self.later_layers].float().mean(dim=(0, -1))
        means = {c: float(later[i]) for i, c in enumerate(self.comparisons)}
        return {
            "hook": HOOK_LABELS.get(hook, hook),
            "layers": f"{self.later_layers[0]}-{self.later_layers[-1]}",
            "n_prompts": n,
            "masked vs instructed": means["masked vs instructed"],
            "original vs instructed": means["original vs instructed"],
            "mean": mean,
            "ci95_low": mean - half,
            "ci95_high": mean + half,
            "t": t,
            "p_value": p,
            "n_positive": int((d > 0).sum()),
            "n_negative": int((d < 0).sum()),
        }

    def verdict(self) -> str:
        """One sentence on the measured direction, whatever it is."""
        d = self.difference()
        direction = (
            "closer to the instructed state than the original model's (the paper's direction)"
            if d["mean"] > 0
            else "further from the instructed state than the original model's (against the "
            "paper's direction)"
        )
        significance = (
            "significant" if d["p_value"] < 0.05 else "not significant"
        ) + f" (paired t-test p = {d['p_value']:.3g})"
        return (
            f"Over {d['n_prompts']} prompts and layers {d['layers']}, the masked model's decoder "
            f"state is {direction}: mean difference {d['mean']:+.4f} (95 % CI "
            f"{d['ci95_low']:+.4f} .. {d['ci95_high']:+.4f}), {significance}; higher for "
            f"{d['n_positive']}/{d['n_prompts']} prompts."
        )

    def to_markdown(self) -> str:
        d = self.difference()
        lines = [
            f"Figure 4 over {self.n_prompts} prompts"
            + (f" of {self.task}" if self.task else "")
            + f" on {self.model}; instruction: {self.instruction!r}",
            "",
            markdown_table(self.summary(), floatfmt=".4f"),
            "",
            "paired difference (masked vs instructed) - (original vs instructed), "
            f"decoder, layers {d['layers']}:",
            "",
            markdown_table(pd.DataFrame([d]).set_index("hook"), floatfmt=".4g"),
            "",
            self.verdict(),
            "",
            markdown_table(self.to_frame(), floatfmt=".4f"),
        ]
        return "\n".join(lines) + "\n"

    def save(self, directory: str | os.PathLike[str], *, png: bool = False) -> list[Path]:
        """The result folder of :class:`FolderResult` plus ``per_prompt.csv``."""
        written = super().save(directory, png=png)
        frame = self.per_prompt_frame().to_csv(index=False)
        return [*written, write_atomic(Path(directory) / "per_prompt.csv", frame)]

    def plot(self) -> Any:
        """Mean cosine per layer with its 95 % band (decoder dark, attention light)."""
        from lens_heads.heads_up._figures import similarity_figure

        low, high = self.ci95()
        return similarity_figure(
            self.mean(),
            comparisons=self.comparisons,
            hooks=[HOOK_LABELS.get(hook, hook) for hook in self.hooks],
            band=(low, high),
            title=f"hidden-state similarity on {self.model}: mean of {self.n_prompts} prompts "
            "(95 % interval)",
        )


def _t_half_width(values: Tensor, dim: int) -> Tensor:
    """Half-width of the 95 % t-interval of the mean along ``dim`` (NaN for one value)."""
    from scipy import stats

    n = values.shape[dim]
    if n < 2:
        return torch.full_like(values.mean(dim=dim), math.nan)
    quantile = float(stats.t.ppf(0.975, n - 1))
    return quantile * values.std(dim=dim) / math.sqrt(n)


def _prompt_list(
    prompts: Sequence[str] | Task | str | os.PathLike[str], n_prompts: int | None
) -> tuple[list[str], Task | None]:
    task = None
    if isinstance(prompts, Task):
        task = prompts
    elif isinstance(prompts, (str, os.PathLike)):
        task = get_task(prompts)
    if task is not None:
        items = list(task.inputs)
    else:
        items = check_prompts(prompts)
    if n_prompts is not None:
        if n_prompts < 1:
            raise InputError(f"n_prompts must be positive, got {n_prompts}")
        if n_prompts > len(items):
            raise InputError(
                f"n_prompts={n_prompts} but {'task ' + repr(task.name) if task else 'the list'} "
                f"has {len(items)} prompts; ask for at most {len(items)}"
            )
        items = items[-n_prompts:]  # the held-out end of a task (Task.split holds out the last)
    if len(items) < 2:
        raise InputError(
            "Figure 4 over many prompts needs at least 2 (the paired test of one prompt is "
            "undefined); pass one prompt as a string for its per-layer curves"
        )
    return items, task


def figure4_stats(
    model: ModelLike,
    prompts: Sequence[str] | Task | str | os.PathLike[str],
    instruction: str | None,
    mask: MaskLike,
    config: ReadoutConfig | None = None,
    *,
    n_prompts: int | None = None,
    later_layers: Sequence[int] | range | None = None,
    **options: Any,
) -> SimilarityStats:
    """Figure 4 over many prompts (see :func:`figure4_similarity`); ``prompts`` is a list of
    inputs, a :class:`~lens_heads.core.Task`, or a task name or file (then ``instruction``
    defaults to the task's). ``n_prompts`` keeps the last n (a task's held-out end); ``config``
    (a :class:`ReadoutConfig`; its fields also as keywords) says where states are read."""
    config = configure(ReadoutConfig, config, options, "figure4_stats")
    position, hooks, chat = config.position, config.hooks, config.chat
    items, task = _prompt_list(prompts, n_prompts)
    if instruction is None:
        instruction = task.instruction if task is not None else None
    if not instruction:
        raise InputError(
            "Figure 4 compares with the instructed model: give an instruction (the task "
            f"{task.name!r} has none)"
            if task is not None
            else "give an instruction"
        )
    n_layers = int(model.cfg.n_layers)
    later = list(range(n_layers // 2, n_layers)) if later_layers is None else list(later_layers)
    bad = [layer for layer in later if not 0 <= int(layer) < n_layers]
    if bad or not later:
        raise InputError(f"later_layers {bad or later} are out of range [0, {n_layers})")
    settings = {
        "original": (None, None),
        "instructed": (None, instruction),
        "masked": (mask, None),
        "masked+instructed": (mask, instruction),
    }
    acts: dict[str, dict[str, Tensor]] = {}
    for label, (run_mask, run_instruction) in tqdm(
        settings.items(), desc="Figure 4 runs", disable=not config.progress
    ):
        acts[label] = layer_activations(
            model,
            items,
            mask=run_mask,
            position=position,
            hooks=hooks,
            chat=chat,
            instruction=run_instruction,
            batch_size=config.batch_size,
        )
    cosine = torch.stack(
        [
            torch.stack([cosine_by_layer(acts[a][h], acts[b][h]) for h in hooks], dim=1)
            for a, b in FIGURE4_COMPARISONS.values()
        ],
        dim=1,
    )
    return SimilarityStats(
        model=model_name(model),
        prompts=items,
        instruction=instruction,
        comparisons=list(FIGURE4_COMPARISONS),
        hooks=list(hooks),
        cosine=cosine,
        later_layers=[int(layer) for layer in later],
        position=position,
        task=task.name if task is not None else None,
    )
