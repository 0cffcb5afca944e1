"""Hidden-state similarity between settings, layer by layer (Heads up! Figure 4).

* :func:`layer_similarity` -- cosine similarity per layer between pairs of runs of one prompt.
* :func:`figure4_similarity` -- the three comparisons of Figure 4 for one prompt
  (:class:`SimilarityResult`) or, given many prompts (a list or a task), their per-layer mean
  with a 95 % interval and the paired test of the figure's claim (:class:`SimilarityStats`):
  is the masked model's state closer to the instructed one than the original model's is?

>>> import lens_heads as lh
>>> model = lh.tiny_model(n_layers=2, n_heads=4)
>>> mask = lh.HeadMask.from_heads(["L0H1"], n_layers=2, n_heads=4)
>>> stats = figure4_similarity(model, ["apple", "pear", "plum"], "Repeat.", mask)
>>> stats.n_prompts, tuple(stats.cosine.shape)
(3, (3, 3, 2, 2))
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import pandas as pd
import torch
from jaxtyping import Float
from torch import Tensor
from tqdm.auto import tqdm

from lens_heads.core import HeadMask, InputError, MaskLike, Task, configure, markdown_table
from lens_heads.core.internal import (
    HOOK_LABELS,
    FolderResult,
    InputTypeError,
    ModelLike,
    Run,
    check_prompt,
    cosine_by_layer,
    lens_logits,
    model_name,
    run_stack,
    token_text,
)
from lens_heads.heads_up._readout_config import HiddenStatesConfig, ReadoutConfig
from lens_heads.heads_up._similarity_stats import (
    FIGURE4_COMPARISONS,
    SimilarityStats,
    figure4_stats,
)

__all__ = [
    "FIGURE4_COMPARISONS",
    "SimilarityResult",
    "SimilarityStats",
    "figure4_similarity",
    "layer_similarity",
]


# -- layer similarity (Figure 4) -----------------------------------------------------------------
@dataclass(repr=False)
class SimilarityResult(FolderResult):
    """Per-layer cosine similarity of hidden states at one position between pairs of runs
    (Heads up! Figure 4): ``cosine[comparison, hook, layer]``.

    ``top1[run]`` is the logit-lens top-1 token after each layer of each run (final norm
    applied); ``label_runs`` name the (up to two) runs whose tokens label the x axis.

    >>> import lens_heads as lh
    >>> model = lh.tiny_model(n_layers=2, n_heads=4)
    >>> mask = lh.HeadMask.from_heads(["L0H1"], n_layers=2, n_heads=4)
    >>> result = figure4_similarity(model, "apple", "Repeat the word.", mask)
    >>> result.comparisons
    ['original vs instructed', 'masked vs instructed', 'masked vs masked+instructed']
    >>> result.to_frame().shape
    (2, 8)
    """

    _format: ClassVar[str] = "lens_heads.similarity/1"

    model: str
    comparisons: list[str]
    pairs: list[tuple[str, str]]
    hooks: list[str]
    cosine: Float[Tensor, "comparison hook n_layers"]
    top1: dict[str, list[str]]
    label_runs: list[str]
    position: int = -1

    def _column(self, comparison: str, hook: str) -> str:
        return f"{comparison} ({HOOK_LABELS.get(hook, hook)})"

    def to_frame(self) -> pd.DataFrame:
        """Index: layer. One column per (comparison, hook) -- ``"... (decoder)"`` for
        ``hook_resid_post``, ``"... (attention)"`` for ``hook_attn_out`` -- and the top-1
        token columns ``"top-1 <run>"`` of the labelled runs."""
        n_layers = self.cosine.shape[-1]
        data: dict[str, Any] = {}
        for c, comparison in enumerate(self.comparisons):
            for h, hook in enumerate(self.hooks):
                data[self._column(comparison, hook)] = self.cosine[c, h].tolist()
        for run in self.label_runs:
            data[f"top-1 {run}"] = self.top1[run]
        return pd.DataFrame(data, index=pd.RangeIndex(n_layers, name="layer"))

    def summary(self, layers: Sequence[int] | range | None = None) -> pd.DataFrame:
        """Mean cosine over ``layers`` (default: all): rows comparisons, columns hooks.

        ``result.summary(range(15, 30))`` gives the later-half means of Figure 4 on SmolLM2."""
        n_layers = self.cosine.shape[-1]
        chosen = list(range(n_layers)) if layers is None else [int(layer) for layer in layers]
        bad = [layer for layer in chosen if not 0 <= layer < n_layers]
        if bad or not chosen:
            raise InputError(f"layers {bad or chosen} are out of range [0, {n_layers})")
        means = self.cosine[:, :, chosen].mean(dim=-1)
        return pd.DataFrame(
            means.tolist(),
            index=pd.Index(self.comparisons, name="comparison"),
            columns=[HOOK_LABELS.get(hook, hook) for hook in self.hooks],
        )

    def to_markdown(self) -> str:
        return markdown_table(self.to_frame(), floatfmt=".4f")

    def plot(self) -> Any:
        """Cosine per layer: dark lines for decoder outputs, light lines for attention outputs,
        the logit-lens top-1 tokens of the labelled runs under each layer number."""
        from lens_heads.heads_up._figures import similarity_figure

        n_layers = self.cosine.shape[-1]
        ticks = [
            "<br>".join([str(layer)] + [self.top1[run][layer] for run in self.label_runs])
            for layer in range(n_layers)
        ]
        return similarity_figure(
            self.cosine,
            comparisons=self.comparisons,
            hooks=[HOOK_LABELS.get(hook, hook) for hook in self.hooks],
            tick_labels=ticks,
            tick_title="layer" + "".join(f" / top-1 {run}" for run in self.label_runs),
            title=f"hidden-state similarity on {self.model}",
        )

    @classmethod
    def _from_saved(cls, meta: dict[str, Any], tensors: dict[str, Any]) -> SimilarityResult:
        meta["pairs"] = [tuple(pair) for pair in meta["pairs"]]
        return cls(**meta, **tensors)


def _same_run(a: Run, b: Run) -> bool:
    if a is b:
        return True
    same_prompt = isinstance(a.prompt, str) and a.prompt == b.prompt
    if a.mask is None or b.mask is None:
        same_mask = a.mask is b.mask
    elif isinstance(a.mask, HeadMask) and isinstance(b.mask, HeadMask):
        same_mask = a.mask == b.mask
    else:
        same_mask = a.mask is b.mask
    return same_prompt and same_mask and a.instruction == b.instruction


def layer_similarity(
    model: ModelLike,
    run_a: Any = None,
    run_b: Any = None,
    config: HiddenStatesConfig | None = None,
    *,
    comparisons: Mapping[str, tuple[Any, Any]] | None = None,
    label_runs: Sequence[str] | None = None,
    **overrides: Any,
) -> SimilarityResult:
    """Cosine similarity per layer of ``hook_resid_post`` (decoder outputs) and
    ``hook_attn_out`` (attention outputs) at ``position`` between two runs, or between each
    pair of ``comparisons={"name": (run_a, run_b)}``. A run is ``(prompt, mask or None)``,
    ``(prompt, mask, instruction)`` or a :class:`Run`; runs with the same label (``original``,
    ``instructed``, ``masked``, ``masked+instructed`` or ``Run(name=...)``) must be the same
    run and are computed once. ``config``: a :class:`HiddenStatesConfig` (``hooks``,
    ``position``, ``chat``, ``progress``; its fields also as keywords).

    >>> import lens_heads as lh
    >>> model = lh.tiny_model()
    >>> same = layer_similarity(model, ("apple", None), Run("apple", name="again"))
    >>> same.cosine.round(decimals=4).tolist()
    [[[1.0, 1.0], [1.0, 1.0]]]
    """
    config = configure(HiddenStatesConfig, config, overrides, "layer_similarity")
    position, hooks, chat, progress = config.position, config.hooks, config.chat, config.progress
    if comparisons is None:
        if run_a is None or run_b is None:
            raise InputError("give two runs (run_a, run_b) or comparisons={name: (run_a, run_b)}")
        a, b = Run.of(run_a), Run.of(run_b)
        if a.label == b.label and not _same_run(a, b):
            a, b = (
                Run(a.prompt, a.mask, a.instruction, "A"),
                Run(b.prompt, b.mask, b.instruction, "B"),
            )
        pairs = {f"{a.label} vs {b.label}": (a, b)}
    else:
        if run_a is not None or run_b is not None:
            raise InputError("give either run_a/run_b or comparisons=..., not both")
        if not comparisons:
            raise InputError("comparisons is empty; give at least one {name: (run_a, run_b)}")
        pairs = {str(n): (Run.of(x), Run.of(y)) for n, (x, y) in comparisons.items()}
    runs: dict[str, Run] = {}
    for a, b in pairs.values():
        for run in (a, b):
            known = runs.setdefault(run.label, run)
            if not _same_run(known, run):
                raise InputError(
                    f"two different runs are both called {run.label!r}; name them with "
                    "Run(prompt, mask, instruction, name=...)"
                )
    captured = list(dict.fromkeys([*hooks, "hook_resid_post"]))
    stacks: dict[str, dict[str, Tensor]] = {}
    top1: dict[str, list[str]] = {}
    for label, run in tqdm(runs.items(), desc="runs", disable=not progress or len(runs) < 3):
        _, _, stacks[label] = run_stack(model, run, position=position, chat=chat, hooks=captured)
        with torch.no_grad():
            ids = lens_logits(model, stacks[label]["hook_resid_post"]).argmax(dim=-1)
        top1[label] = [token_text(model.tokenizer, int(i)) for i in ids]
    cosine = torch.stack(
        [
            torch.stack([cosine_by_layer(stacks[a.label][h], stacks[b.label][h]) for h in hooks])
            for a, b in pairs.values()
        ]
    )
    if label_runs is None:
        first_a, first_b = next(iter(pairs.values()))
        label_runs = list(dict.fromkeys([first_a.label, first_b.label]))
    unknown = [run for run in label_runs if run not in runs]
    if unknown:
        raise InputError(f"label_runs {unknown} are not runs of this comparison ({list(runs)})")
    return SimilarityResult(
        model=model_name(model),
        comparisons=list(pairs),
        pairs=[(a.label, b.label) for a, b in pairs.values()],
        hooks=list(hooks),
        cosine=cosine,
        top1=top1,
        label_runs=list(label_runs),
        position=position,
    )


def _figure4_one(
    model: ModelLike, prompt: str, instruction: str, mask: MaskLike, config: ReadoutConfig
) -> SimilarityResult:
    runs = {
        "original": Run(prompt),
        "instructed": Run(prompt, instruction=instruction),
        "masked": Run(prompt, mask),
        "masked+instructed": Run(prompt, mask, instruction),
    }
    return layer_similarity(  # a ReadoutConfig is a HiddenStatesConfig: it passes as it is
        model,
        config=config,
        comparisons={name: (runs[a], runs[b]) for name, (a, b) in FIGURE4_COMPARISONS.items()},
        label_runs=["instructed", "masked"],
    )


def figure4_similarity(
    model: ModelLike,
    prompt: str | Sequence[str] | Task,
    instruction: str | None,
    mask: MaskLike,
    config: ReadoutConfig | None = None,
    *,
    n_prompts: int | None = None,
    later_layers: Sequence[int] | range | None = None,
    **overrides: Any,
) -> SimilarityResult | SimilarityStats:
    """The three comparisons of Heads up! Figure 4: original vs instructed, masked vs
    instructed, masked vs masked + instructed, per layer.

    * One prompt (a string): a :class:`SimilarityResult`, the x axis labelled with the
      logit-lens top-1 tokens of the instructed and the masked runs.
    * Many prompts (a list of inputs or a :class:`~lens_heads.core.Task`): a
      :class:`SimilarityStats` -- per-layer mean and 95 % interval over prompts and the paired
      test of the figure's claim over the later half of the layers (``n_prompts`` and
      ``later_layers`` as in :func:`figure4_stats`). Its per-prompt cosines equal the
      single-prompt calls'. To name a task by string use :func:`figure4_stats`, since a string
      here is one prompt.

    ``config``: a :class:`ReadoutConfig` (``hooks``, ``position``, ``chat``, ``progress``,
    ``batch_size``; its fields also as keywords).

    >>> import lens_heads as lh
    >>> model = lh.tiny_model()
    >>> result = figure4_similarity(model, "apple", "Repeat.", lh.HeadMask.ones(model))
    >>> bool(result.summary().loc["masked vs instructed", "decoder"] < 1.0)
    True
    """
    if not isinstance(prompt, (str, Task, Sequence)):
        raise InputTypeError(
            f"prompt must be a string, a list of strings or a Task, got {type(prompt).__name__}"
        )
    config = configure(ReadoutConfig, config, overrides, "figure4_similarity")
    if isinstance(prompt, str):
        check_prompt(prompt)
        many = {"n_prompts": n_prompts, "later_layers": later_layers}
        if any(value is not None for value in many.values()) or "batch_size" in overrides:
            given = [name for name, value in many.items() if value is not None]
            raise InputTypeError(
                f"{given + sorted(set(overrides) & {'batch_size'})} apply to many prompts; pass "
                "a list of prompts or a Task"
            )
        if instruction is None:
            raise InputError("Figure 4 compares with the instructed model: give an instruction")
        return _figure4_one(model, prompt, instruction, mask, config)
    return figure4_stats(
        model, prompt, instruction, mask, config, n_prompts=n_prompts, later_layers=later_layers
    )
