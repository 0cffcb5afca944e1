"""Logit lens (Heads up! Table 41) and the top tokens at the last position (Table 4b).

>>> import lens_heads as lh
>>> model = lh.tiny_model(n_layers=2, n_heads=4)
>>> lens = logit_lens(model, "apple", top_k=3)
>>> lens.settings, lens.layers
(['original'], ['embed', 'L0', 'L1'])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor

from lens_heads.core import InputError, MaskLike, configure, markdown_table
from lens_heads.core.internal import (
    FolderResult,
    ModelLike,
    PromptLike,
    Run,
    check_prompt,
    check_top_k,
    lens_logits,
    model_name,
    run_stack,
    target_token_ids,
    token_ranks,
    token_text,
)
from lens_heads.heads_up._lens_config import LensConfig, TopTokensConfig

__all__ = ["LogitLensResult", "TopTokensResult", "logit_lens", "top_tokens"]


# -- logit lens (Table 41) -----------------------------------------------------------------------
def _settings(
    prompt: PromptLike | None,
    mask: MaskLike | None,
    instruction: str | None,
    settings: Mapping[str, Any] | None,
) -> dict[str, Run]:
    if settings is not None:
        if prompt is not None or mask is not None or instruction is not None:
            raise InputError(
                "give either settings={name: (prompt, mask[, instruction])} or prompt/mask/"
                "instruction, not both"
            )
        if not settings:
            raise InputError("settings is empty; give at least one {name: (prompt, mask)}")
        return {str(name): Run.of(spec) for name, spec in settings.items()}
    if prompt is None:
        raise InputError("no prompt given; pass a prompt (or settings=...)")
    runs = {"original": Run(prompt)}
    if instruction is not None:
        runs["instructed"] = Run(prompt, instruction=instruction)
    if mask is not None:
        runs["masked"] = Run(prompt, mask=mask)
    return runs


@dataclass(repr=False)
class LogitLensResult(FolderResult):
    """The logit lens of one or more settings at one position (Heads up! Table 41).

    Layer ``"embed"`` is the residual stream after the embedding (``blocks.0.hook_resid_pre``),
    ``"L{l}"`` after block ``l`` (``hook_resid_post``); the last one is the model's own output.
    Ranks are 1-based (rank 1 = the top token).

    >>> import lens_heads as lh
    >>> model = lh.tiny_model(n_layers=2, n_heads=4)
    >>> mask = lh.HeadMask.from_heads(["L0H1"], n_layers=2, n_heads=4)
    >>> lens = logit_lens(model, "apple", mask=mask, instruction="Repeat.", targets=["a"])
    >>> lens.settings, lens.layers
    (['original', 'instructed', 'masked'], ['embed', 'L0', 'L1'])
    >>> tuple(lens.target_probs.shape)
    (3, 3, 1)
    """

    _format: ClassVar[str] = "lens_heads.logit_lens/1"

    model: str
    settings: list[str]
    prompts: list[str]
    positions: list[int]
    layers: list[str]
    top_ids: Int[Tensor, "setting layer k"]
    top_probs: Float[Tensor, "setting layer k"]
    top_tokens: list[list[list[str]]]
    target_ids: list[int]
    targets: list[str]
    target_probs: Float[Tensor, "setting layer target"]
    target_ranks: Int[Tensor, "setting layer target"]
    final_norm: bool = True

    def to_frame(self) -> pd.DataFrame:
        """One row per (setting, layer): the top-1 token and its probability, the top-k tokens
        and, per target, ``P(target)`` and ``rank(target)``."""
        rows = []
        for s, setting in enumerate(self.settings):
            for depth, layer in enumerate(self.layers):
                row: dict[str, Any] = {
                    "setting": setting,
                    "layer": layer,
                    "depth": depth,
                    "top-1": self.top_tokens[s][depth][0],
                    "P(top-1)": float(self.top_probs[s, depth, 0]),
                    "top-k": " | ".join(self.top_tokens[s][depth]),
                }
                for t, target in enumerate(self.targets):
                    row[f"P({target})"] = float(self.target_probs[s, depth, t])
                    row[f"rank({target})"] = int(self.target_ranks[s, depth, t])
                rows.append(row)
        return pd.DataFrame(rows).set_index(["setting", "layer"])

    def top1_table(self) -> pd.DataFrame:
        """Table 41: layers as rows, settings as columns, ``token (probability)`` cells."""
        data = {
            setting: [
                f"{self.top_tokens[s][d][0]} ({float(self.top_probs[s, d, 0]):.2f})"
                for d in range(len(self.layers))
            ]
            for s, setting in enumerate(self.settings)
        }
        return pd.DataFrame(data, index=pd.Index(self.layers, name="layer"))

    def to_markdown(self) -> str:
        return markdown_table(self.top1_table())

    def top_overlap(self, a: str, b: str) -> list[int]:
        """Per layer, how many of the top-k tokens settings ``a`` and ``b`` share (Table 41's
        claim: the instructed and the masked run share many in the later layers).

        >>> import lens_heads as lh
        >>> model = lh.tiny_model(n_layers=2, n_heads=4)
        >>> lens = logit_lens(model, "apple", instruction="Repeat.", top_k=5)
        >>> lens.top_overlap("original", "original")
        [5, 5, 5]
        """
        first, second = self.top_ids[self.settings.index(a)], self.top_ids[self.settings.index(b)]
        return [len(set(x.tolist()) & set(y.tolist())) for x, y in zip(first, second, strict=True)]

    def plot(self) -> Any:
        """Heat map of each target's probability per layer (one row per setting), each cell
        annotated with the setting's top-1 token."""
        from lens_heads.heads_up._figures import logit_lens_figure

        return logit_lens_figure(
            self.target_probs,
            [[tokens[0] for tokens in per_layer] for per_layer in self.top_tokens],
            settings=self.settings,
            layers=self.layers,
            targets=self.targets,
            title=f"logit lens on {self.model}" + ("" if self.final_norm else " (no final norm)"),
        )


def logit_lens(
    model: ModelLike,
    prompt: PromptLike | None = None,
    config: LensConfig | None = None,
    *,
    mask: MaskLike | None = None,
    instruction: str | None = None,
    settings: Mapping[str, Any] | None = None,
    targets: Sequence[str | int] | None = None,
    **overrides: Any,
) -> LogitLensResult:
    """Top-k tokens of the residual stream after the embedding and after every layer, and the
    probability and rank of ``targets``, for several settings side by side; ``config`` is a
    :class:`LensConfig` (its fields also as keywords: ``top_k=3``).

    Settings: ``original`` (``prompt``), ``instructed`` (with ``instruction``) and ``masked``
    (under ``mask``), or explicitly ``settings={"name": (prompt, mask[, instruction]), ...}``.
    ``targets`` are tokens (ids, or strings whose *first* token is used; ``"Apple"`` and
    ``" Apple"`` differ); by default the final top-1 token of each setting. The final norm is
    applied (``final_norm=False`` reproduces the reference code, which skipped it), so the last
    layer is the model's own prediction.

    >>> import lens_heads as lh
    >>> model = lh.tiny_model()
    >>> lens = logit_lens(model, "apple", top_k=3)
    >>> lens.top1_table().shape
    (3, 1)
    """
    config = configure(LensConfig, config, overrides, "logit_lens")
    top_k, position, chat = config.top_k, config.position, config.chat
    check_top_k(model, top_k)
    if prompt is not None:
        check_prompt(prompt, tokens=True)
    runs = _settings(prompt, mask, instruction, settings)
    tokenizer = model.tokenizer
    n_layers = int(model.cfg.n_layers)
    logits, prompts, positions = [], [], []
    for name, run in runs.items():
        encoded, absolute, acts = run_stack(
            model,
            Run(run.prompt, run.mask, run.instruction, name),
            position=position,
            chat=chat,
            hooks=("hook_resid_pre", "hook_resid_post"),
        )
        stack = torch.cat([acts["hook_resid_pre"][:1], acts["hook_resid_post"]])
        with torch.no_grad():
            logits.append(lens_logits(model, stack, apply_final_norm=config.final_norm).float())
        prompts.append(encoded.text)
        positions.append(absolute)
    all_logits = torch.stack(logits).cpu()  # [setting, layer, vocab]
    probs = all_logits.softmax(dim=-1)
    k = min(top_k, probs.shape[-1])
    top_probs, top_ids = probs.topk(k, dim=-1)
    if targets is None:
        target_ids = list(dict.fromkeys(int(i) for i in top_ids[:, -1, 0]))
    else:
        target_ids = target_token_ids(model, targets)
    index = torch.tensor(target_ids, dtype=torch.long)
    ranks = token_ranks(all_logits, index)  # [setting, layer, target]
    return LogitLensResult(
        model=model_name(model),
        settings=list(runs),
        prompts=prompts,
        positions=positions,
        layers=["embed"] + [f"L{layer}" for layer in range(n_layers)],
        top_ids=top_ids,
        top_probs=top_probs,
        top_tokens=[
            [[token_text(tokenizer, t) for t in layer] for layer in setting.tolist()]
            for setting in top_ids
        ],
        target_ids=target_ids,
        targets=[token_text(tokenizer, t) for t in target_ids],
        target_probs=probs[..., index],
        target_ranks=ranks,
        final_norm=config.final_norm,
    )


# -- top tokens at the last position (Table 4b) --------------------------------------------------
@dataclass(repr=False)
class TopTokensResult(FolderResult):
    """The top tokens at one position in several settings, with their logits and how far each
    token moved relative to the ``reference`` setting (Heads up! Table 4b).

    ``reference_ranks[s, i]`` is the rank, in the reference setting, of the ``i``-th top
    token of setting ``s``; ``rank change`` in :meth:`to_frame` is ``reference rank - rank``
    (positive: the token moved up).

    >>> import lens_heads as lh
    >>> model = lh.tiny_model(n_layers=2, n_heads=4)
    >>> table = top_tokens(model, "apple", mask=lh.HeadMask.zeros(model), top_k=3)
    >>> table.settings, tuple(table.top_ids.shape)
    (['original', 'masked'], (2, 3))
    >>> table.to_frame().query("setting == 'original'")["rank change"].tolist()
    [0, 0, 0]
    """

    _format: ClassVar[str] = "lens_heads.top_tokens/1"

    model: str
    settings: list[str]
    prompts: list[str]
    reference: str
    top_ids: Int[Tensor, "setting k"]
    top_logits: Float[Tensor, "setting k"]
    reference_ranks: Int[Tensor, "setting k"]
    tokens: list[list[str]]

    def to_frame(self) -> pd.DataFrame:
        """One row per (setting, rank): ``token, token_id, logit, reference rank, rank change``."""
        rows = []
        for s, setting in enumerate(self.settings):
            for i, token in enumerate(self.tokens[s]):
                reference_rank = int(self.reference_ranks[s, i])
                rows.append(
                    {
                        "setting": setting,
                        "rank": i + 1,
                        "token": token,
                        "token_id": int(self.top_ids[s, i]),
                        "logit": float(self.top_logits[s, i]),
                        "reference rank": reference_rank,
                        "rank change": reference_rank - (i + 1),
                    }
                )
        return pd.DataFrame(rows)

    def to_markdown(self) -> str:
        """Table 4b: rank as rows, one column per setting, ``token (logit, ↑n)`` cells."""

        def cell(s: int, i: int) -> str:
            change = int(self.reference_ranks[s, i]) - (i + 1)
            moved = "" if change == 0 else (f", ↑{change}" if change > 0 else f", ↓{-change}")
            return f"{self.tokens[s][i]} ({float(self.top_logits[s, i]):.2f}{moved})"

        k = self.top_ids.shape[1]
        data = {setting: [cell(s, i) for i in range(k)] for s, setting in enumerate(self.settings)}
        frame = pd.DataFrame(data, index=pd.RangeIndex(1, k + 1, name="rank"))
        note = f"rank changes relative to {self.reference!r}"
        return markdown_table(frame) + f"\n\n({note})\n"

    def plot(self) -> Any:
        """Horizontal bars of the top logits per setting, labelled with the rank change."""
        from lens_heads.heads_up._figures import top_tokens_figure

        return top_tokens_figure(self.to_frame(), title=f"top tokens on {self.model}")


def top_tokens(
    model: ModelLike,
    prompt: PromptLike | None = None,
    config: TopTokensConfig | None = None,
    *,
    mask: MaskLike | None = None,
    instruction: str | None = None,
    settings: Mapping[str, Any] | None = None,
    reference: str | None = None,
    **overrides: Any,
) -> TopTokensResult:
    """Top-``k`` tokens and logits at ``position`` in each setting (``original``,
    ``instructed`` with ``instruction``, ``masked`` under ``mask``, or ``settings={name: (prompt,
    mask[, instruction])}``), with each token's rank in the ``reference`` setting (default: the
    first) -- Heads up! Table 4b. ``config``: a :class:`TopTokensConfig` (``top_k``,
    ``position``, ``chat``; its fields also as keywords).
    """
    config = configure(TopTokensConfig, config, overrides, "top_tokens")
    position, top_k, chat = config.position, config.top_k, config.chat
    check_top_k(model, top_k)
    if prompt is not None:
        check_prompt(prompt, tokens=True)
    runs = _settings(prompt, mask, instruction, settings)
    reference = reference or next(iter(runs))
    if reference not in runs:
        raise InputError(f"reference {reference!r} is not one of the settings {list(runs)}")
    logits, prompts = [], []
    for name, run in runs.items():
        encoded, _, acts = run_stack(
            model,
            Run(run.prompt, run.mask, run.instruction, name),
            position=position,
            chat=chat,
            hooks=("hook_resid_post",),
        )
        with torch.no_grad():
            logits.append(lens_logits(model, acts["hook_resid_post"][-1]).float().cpu())
        prompts.append(encoded.text)
    stacked = torch.stack(logits)  # [setting, vocab]
    k = min(top_k, stacked.shape[-1])
    top_logits, top_ids = stacked.topk(k, dim=-1)
    reference_logits = stacked[list(runs).index(reference)]
    reference_ranks = torch.stack([token_ranks(reference_logits, ids) for ids in top_ids])
    return TopTokensResult(
        model=model_name(model),
        settings=list(runs),
        prompts=prompts,
        reference=reference,
        top_ids=top_ids,
        top_logits=top_logits,
        reference_ranks=reference_ranks,
        tokens=[[token_text(model.tokenizer, int(t)) for t in row] for row in top_ids],
    )
