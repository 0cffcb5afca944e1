"""What a removal sweep records (:class:`SweepResult`): per step the heads removed, the tracked
tokens' ranks and logits, the greedy continuation and the hidden-state similarity to a reference
run (Heads up! Figures 2 and 5), with tables, figures and save/load."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor

from lens_heads.core import InputError, ResultRepr, save_figures, write_atomic
from lens_heads.core.internal import MissingFileError, write_atomic_with

__all__ = ["SIMILARITY_KINDS", "SweepResult", "plot_sweeps"]


_FORMAT = "lens_heads.removal_sweep/1"

#: The two hidden states compared with the reference run (Figure 5): the result's attribute and
#: the display name of each.
SIMILARITY_KINDS = {"resid_similarity": "decoder output", "attn_similarity": "attention output"}


# -- the result ----------------------------------------------------------------------------------
@dataclass(repr=False)
class SweepResult(ResultRepr):
    """What :func:`removal_sweep` measured, one row of each tensor per evaluated step.

    ``n_removed[i]`` heads (the first ones of ``order``) are removed at step ``i``. Tracked
    tokens (columns of ``ranks``/``logits``) are the target (role ``"target"``, first) and the
    ``top_k`` most likely tokens of the full model other than the target (role ``"original"``).
    Ranks are 1-based (``1 + #tokens with a strictly larger logit``) at the prompt's last
    position; ``logits`` are the raw logits there. ``top1_ids`` is the arg-max token,
    ``output_ids``/``outputs`` the greedy continuation (stop token excluded).
    ``resid_similarity``/``attn_similarity`` ``[n_steps, n_layers]`` are the cosine similarities of
    each layer's decoder output (``hook_resid_post``) and attention output (``hook_attn_out``) at
    the last position between the masked run and the full model on ``reference_prompt``.

    >>> result = SweepResult.example()
    >>> result.switch_step(stay=2), result.switch
    (2, 2)
    >>> result.outputs_table()["output"].tolist()
    ['banana', '…', 'Apple', '…', 'zzz']
    """

    model: str
    prompt: str
    order: list[str]
    n_removed: list[int]
    token_ids: list[int]
    tokens: list[str]
    roles: list[str]
    ranks: Int[Tensor, "n_steps n_tracked"]
    logits: Float[Tensor, "n_steps n_tracked"]
    top1_ids: list[int]
    top1_tokens: list[str]
    output_ids: list[list[int]]
    outputs: list[str]
    target: str | None = None
    target_id: int | None = None
    reference_prompt: str | None = None
    resid_similarity: Float[Tensor, "n_steps n_layers"] | None = None
    attn_similarity: Float[Tensor, "n_steps n_layers"] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n_steps, n_tracked = self.ranks.shape
        lengths = {
            "n_removed": len(self.n_removed),
            "top1_ids": len(self.top1_ids),
            "top1_tokens": len(self.top1_tokens),
            "output_ids": len(self.output_ids),
            "outputs": len(self.outputs),
            "logits": self.logits.shape[0],
        }
        wrong = {name: n for name, n in lengths.items() if n != n_steps}
        if wrong:
            raise InputError(f"ranks has {n_steps} steps but {wrong}")
        if not len(self.token_ids) == len(self.tokens) == len(self.roles) == n_tracked:
            raise InputError(
                f"{n_tracked} tracked columns but {len(self.token_ids)} token ids, "
                f"{len(self.tokens)} tokens and {len(self.roles)} roles"
            )
        for name in ("resid_similarity", "attn_similarity"):
            value = getattr(self, name)
            if value is not None and value.shape[0] != n_steps:
                raise InputError(f"{name} has {value.shape[0]} steps, expected {n_steps}")

    @classmethod
    def example(cls) -> SweepResult:
        """A small hand-made result (for documentation and tests): the target ``"Apple"`` is
        top-1 after 2 heads are removed and falls away again after 4."""
        ranks = torch.tensor([[12, 1], [3, 1], [1, 2], [1, 3], [1, 4], [90, 500]])
        return cls(
            model="tiny",
            prompt="apple",
            order=["L0H0", "L1H1", "L0H1", "L1H0", "L1H2"],
            n_removed=[0, 1, 2, 3, 4, 5],
            token_ids=[7, 9],
            tokens=["Apple", "banana"],
            roles=["target", "original"],
            ranks=ranks,
            logits=-ranks.float(),
            top1_ids=[9, 9, 7, 7, 7, 3],
            top1_tokens=["banana", "banana", "Apple", "Apple", "Apple", "z"],
            output_ids=[[9], [9], [7], [7], [7], [3, 3, 3]],
            outputs=["banana", "banana", "Apple", "Apple", "Apple", "zzz"],
            target="Apple",
            target_id=7,
        )

    # -- views --------------------------------------------------------------------------------
    @property
    def n_steps(self) -> int:
        return len(self.n_removed)

    @property
    def removed_heads(self) -> list[str]:
        """The head removed last to reach each step (``""`` at step 0)."""
        return [self.order[n - 1] if n > 0 else "" for n in self.n_removed]

    @property
    def target_ranks(self) -> list[int]:
        """The target's rank at every step."""
        if self.target_id is None:
            raise InputError("this sweep tracked no target; pass target= to removal_sweep")
        return self.ranks[:, self.roles.index("target")].tolist()

    def switch_step(self, stay: int = 3) -> int | None:
        """Heads removed at the first step from which the target is top-1 for ``stay``
        consecutive evaluated steps (with ``every > 1``, ``stay`` counts evaluated steps); None
        when that never happens.

        >>> SweepResult.example().switch_step(stay=4) is None
        True
        """
        if stay < 1:
            raise InputError(f"stay must be at least 1 step, got {stay}")
        top = [rank == 1 for rank in self.target_ranks]
        for index in range(len(top) - stay + 1):
            if all(top[index : index + stay]):
                return self.n_removed[index]
        return None

    @property
    def switch(self) -> int | None:
        """:meth:`switch_step` with ``stay=3``; None when no target was tracked."""
        return None if self.target_id is None else self.switch_step(3)

    def to_frame(self) -> pd.DataFrame:
        """Tidy table: one row per (step, tracked token) with ``step, n_removed, removed_head,
        token, token_id, role, rank, logit, top1, top1_id, output``."""
        rows = []
        ranks, logits = self.ranks.tolist(), self.logits.tolist()
        removed = self.removed_heads
        for step in range(self.n_steps):
            for column, token_id in enumerate(self.token_ids):
                rows.append(
                    {
                        "step": step,
                        "n_removed": self.n_removed[step],
                        "removed_head": removed[step],
                        "token": self.tokens[column],
                        "token_id": token_id,
                        "role": self.roles[column],
                        "rank": ranks[step][column],
                        "logit": logits[step][column],
                        "top1": self.top1_tokens[step],
                        "top1_id": self.top1_ids[step],
                        "output": self.outputs[step],
                    }
                )
        return pd.DataFrame(rows)

    def similarity_frame(self) -> pd.DataFrame:
        """Tidy cosine similarities: ``n_removed, layer, kind, cosine`` (``kind`` is
        ``"decoder output"`` or ``"attention output"``); empty without a reference prompt."""
        rows = []
        for attribute, kind in SIMILARITY_KINDS.items():
            values = getattr(self, attribute)
            if values is None:
                continue
            for step, row in enumerate(values.tolist()):
                for layer, cosine in enumerate(row):
                    rows.append(
                        {
                            "n_removed": self.n_removed[step],
                            "layer": layer,
                            "kind": kind,
                            "cosine": cosine,
                        }
                    )
        return pd.DataFrame(rows, columns=["n_removed", "layer", "kind", "cosine"])

    def outputs_table(self) -> pd.DataFrame:
        """Figure 2 right: the continuation at every step, with each run of consecutive identical
        continuations collapsed: its first step shows the text, the rest of the run is one row
        ``"a–b"`` with output ``"…"``. Columns ``n_removed`` (str), ``removed_head``, ``output``.
        """
        rows: list[dict[str, str]] = []
        removed = self.removed_heads
        start = 0
        while start < self.n_steps:
            end = start
            while end + 1 < self.n_steps and self.outputs[end + 1] == self.outputs[start]:
                end += 1
            rows.append(
                {
                    "n_removed": str(self.n_removed[start]),
                    "removed_head": removed[start],
                    "output": self.outputs[start],
                }
            )
            if end > start:
                first, last = self.n_removed[start + 1], self.n_removed[end]
                span = str(first) if first == last else f"{first}–{last}"
                rows.append({"n_removed": span, "removed_head": "…", "output": "…"})
            start = end + 1
        return pd.DataFrame(rows, columns=["n_removed", "removed_head", "output"])

    def outputs_markdown(self) -> str:
        """:meth:`outputs_table` as a GitHub markdown table (newlines shown as ``⏎``)."""

        def cell(text: str) -> str:
            return text.replace("|", "\\|").replace("\n", "⏎")

        lines = ["| heads removed | last removed | output |", "|---|---|---|"]
        for _, row in self.outputs_table().iterrows():
            lines.append(f"| {row['n_removed']} | {row['removed_head']} | {cell(row['output'])} |")
        title = f"**{self.prompt!r}** on **{self.model}**"
        if self.target is not None:
            title += f", target {self.target!r} (switch step: {self.switch})"
        return title + "\n\n" + "\n".join(lines) + "\n"

    def summary(self) -> dict[str, Any]:
        """Headline figures: steps, switch step, target rank at the start, best and end."""
        info: dict[str, Any] = {
            "model": self.model,
            "prompt": self.prompt,
            "heads_in_order": len(self.order),
            "steps": self.n_steps,
        }
        if self.target_id is not None:
            ranks = self.target_ranks
            best = min(range(len(ranks)), key=lambda i: (ranks[i], i))
            info.update(
                target=self.target,
                switch_step=self.switch,
                target_rank_start=ranks[0],
                target_rank_best=ranks[best],
                best_at_n_removed=self.n_removed[best],
                target_rank_end=ranks[-1],
            )
        return info

    # -- figures ------------------------------------------------------------------------------
    def plot_ranks(self) -> Any:
        """Figure 2 left: rank (log axis) of each tracked token against the heads removed."""
        from lens_heads.heads_up._figures import sweep_rank_figure

        return sweep_rank_figure(
            self.to_frame(), switch=self.switch, title=f"{self.prompt!r} on {self.model}"
        )

    def plot_similarity(self) -> Any:
        """Figure 5: per-layer cosine similarity to the reference run (darker = later layer)."""
        from lens_heads.heads_up._figures import sweep_similarity_figure

        if self.resid_similarity is None and self.attn_similarity is None:
            raise InputError("this sweep has no similarities: pass reference_prompt=")
        title = f"{self.prompt!r} vs {self.reference_prompt!r} on {self.model}"
        return sweep_similarity_figure(self.similarity_frame(), title=title)

    def plot(self) -> Any:
        """Same as :meth:`plot_ranks`."""
        return self.plot_ranks()

    # -- io -----------------------------------------------------------------------------------
    def save(self, directory: str | os.PathLike[str]) -> list[Path]:
        """Write ``sweep.json`` + ``sweep.safetensors`` (everything :meth:`load` needs),
        ``sweep.csv`` (:meth:`to_frame`), ``similarity.csv`` (with a reference prompt) and
        ``outputs.md``; each atomically."""
        from safetensors.torch import save_file

        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        tensors = {"ranks": self.ranks.contiguous(), "logits": self.logits.contiguous()}
        if self.resid_similarity is not None:
            tensors["resid_similarity"] = self.resid_similarity.contiguous()
        if self.attn_similarity is not None:
            tensors["attn_similarity"] = self.attn_similarity.contiguous()
        info = {
            "format": _FORMAT,
            "model": self.model,
            "prompt": self.prompt,
            "order": self.order,
            "n_removed": self.n_removed,
            "token_ids": self.token_ids,
            "tokens": self.tokens,
            "roles": self.roles,
            "top1_ids": self.top1_ids,
            "top1_tokens": self.top1_tokens,
            "output_ids": self.output_ids,
            "outputs": self.outputs,
            "target": self.target,
            "target_id": self.target_id,
            "reference_prompt": self.reference_prompt,
            "metadata": self.metadata,
            "summary": self.summary(),
        }
        written = [
            write_atomic_with(folder / "sweep.safetensors", lambda tmp: save_file(tensors, tmp)),
            write_atomic(folder / "sweep.json", json.dumps(info, indent=1, default=str)),
            write_atomic(folder / "sweep.csv", self.to_frame().to_csv(index=False)),
            write_atomic(folder / "outputs.md", self.outputs_markdown()),
        ]
        if self.resid_similarity is not None or self.attn_similarity is not None:
            frame = self.similarity_frame()
            written.append(write_atomic(folder / "similarity.csv", frame.to_csv(index=False)))
        return written

    def save_figures(self, directory: str | os.PathLike[str], *, png: bool = False) -> list[Path]:
        """Write ``ranks.html`` (and ``similarity.html`` with a reference prompt); ``.png`` too
        when ``png`` and kaleido can export (it needs a Chrome binary; a failure is logged)."""
        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        figures = {"ranks": self.plot_ranks()}
        if self.resid_similarity is not None or self.attn_similarity is not None:
            figures["similarity"] = self.plot_similarity()
        return save_figures(folder, figures, png=png)

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> SweepResult:
        """Read a result written by :meth:`save`."""
        from safetensors.torch import load_file

        folder = Path(directory)
        paths = [folder / "sweep.json", folder / "sweep.safetensors"]
        missing = [p.name for p in paths if not p.is_file()]
        if missing:
            raise MissingFileError(
                f"{folder} holds no saved sweep (missing {', '.join(missing)}); write one with "
                "SweepResult.save()"
            )
        try:
            info = json.loads(paths[0].read_text(encoding="utf-8"))
            if info.get("format") != _FORMAT:
                raise InputError(f"format tag {info.get('format')!r}, expected {_FORMAT!r}")
            tensors = load_file(str(paths[1]))
            return cls(
                model=info["model"],
                prompt=info["prompt"],
                order=list(info["order"]),
                n_removed=[int(n) for n in info["n_removed"]],
                token_ids=[int(t) for t in info["token_ids"]],
                tokens=list(info["tokens"]),
                roles=list(info["roles"]),
                ranks=tensors["ranks"],
                logits=tensors["logits"],
                top1_ids=[int(t) for t in info["top1_ids"]],
                top1_tokens=list(info["top1_tokens"]),
                output_ids=[[int(t) for t in row] for row in info["output_ids"]],
                outputs=list(info["outputs"]),
                target=info["target"],
                target_id=info["target_id"],
                reference_prompt=info["reference_prompt"],
                resid_similarity=tensors.get("resid_similarity"),
                attn_similarity=tensors.get("attn_similarity"),
                metadata=dict(info["metadata"]),
            )
        except (ValueError, KeyError, TypeError) as error:
            raise InputError(
                f"{folder} is not a readable sweep ({type(error).__name__}: {error}); re-create "
                "it with SweepResult.save()"
            ) from error


def plot_sweeps(
    sweeps: Mapping[str, SweepResult] | Sequence[SweepResult] | SweepResult,
    *,
    stay: int = 3,
    title: str | None = None,
) -> Any:
    """Figures 8 and 9: the target's rank along several removal sweeps on one plotly figure
    (e.g. the influential order beside the ascending-weight order, or the sweep of a
    negative-init mask), each switch step (:meth:`SweepResult.switch_step` with ``stay``)
    marked by a vertical line and reported in the legend and the title.

    ``sweeps``: ``{label: sweep}``, or a list (labelled by how each order was made).

    >>> a, b = SweepResult.example(), SweepResult.example()
    >>> fig = plot_sweeps({"ascending weight": a, "influential": b}, stay=2)
    >>> [trace.name for trace in fig.data]
    ['ascending weight (switch: 2 heads)', 'influential (switch: 2 heads)']
    """
    from lens_heads.heads_up._figures import sweep_overlay_figure

    if isinstance(sweeps, SweepResult):
        sweeps = [sweeps]
    if not isinstance(sweeps, Mapping):
        labels = [str(s.metadata.get("order_kind", "sweep")) for s in sweeps]
        labels = [
            f"{label} {i + 1}" if labels.count(label) > 1 else label
            for i, label in enumerate(labels)
        ]
        sweeps = dict(zip(labels, sweeps, strict=True))
    if not sweeps:
        raise InputError("no sweeps to plot: pass {label: SweepResult, ...}")
    untracked = [label for label, sweep in sweeps.items() if sweep.target_id is None]
    if untracked:
        raise InputError(
            f"sweeps {untracked} tracked no target; run removal_sweep with target=... to plot "
            "the target's rank"
        )
    curves = []
    for label, sweep in sweeps.items():
        curves.append(
            {
                "label": label,
                "n_removed": sweep.n_removed,
                "ranks": sweep.target_ranks,
                "switch": sweep.switch_step(stay),
                "target": sweep.target,
            }
        )
    if title is None:
        targets = sorted({str(sweep.target) for sweep in sweeps.values()})
        switches = ", ".join(
            f"{c['label']} {'none' if c['switch'] is None else c['switch']}" for c in curves
        )
        prompts = sorted({sweep.prompt for sweep in sweeps.values()})
        title = (
            f"{', '.join(map(repr, prompts))} -> target {', '.join(map(repr, targets))}: "
            f"switch step {switches}"
        )
    return sweep_overlay_figure(curves, title=title, stay=stay)
