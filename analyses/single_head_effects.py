"""Exact single-head effects: the answer CE of a task's held-out examples with each head alone
removed, against the full model -- the ground truth that cheaper per-head measures (mask
weights, gradients, translation scores) can be held against.

    python -m analyses.single_head_effects --task capitalize --n-eval 40 --out runs/effects

Every head is removed (``hook_z`` x 0) in its own rows of a batch (one mask per row), the answer
teacher forced after the bare prompt (the chat template when the model has one), so one run
scores all heads; the result is resumable (the effects are a stage).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import torch

import lens_heads as lh
from analyses._common import (
    DEFAULT_MODEL,
    LazyModel,
    command_line,
    help_of,
    markdown_table,
    stages_of,
    write_outputs,
)
from lens_heads.core import (
    answer_logits,
    collate,
    encode_example,
    has_chat_template,
    pad_token_id,
    write_atomic,
)


@dataclass
class Config:
    model: str = field(default=DEFAULT_MODEL, metadata=help_of("model alias or path"))
    task: str = field(default="capitalize", metadata=help_of("task name or file"))
    n_eval: int = field(default=40, metadata=help_of("held-out examples (the last N)"))
    batch_size: int = field(default=32, metadata=help_of("rows per forward pass"))
    progress: bool = field(default=True, metadata=help_of("progress bars"))
    out: str = field(default="runs/single-head-effects", metadata=help_of("output folder"))


def head_effects(model: object, task: lh.Task, batch_size: int) -> pd.DataFrame:
    """One row per head: the mean answer CE over ``task``'s examples with that head removed,
    and its rise over the full model's."""
    n_layers, n_heads = lh.head_shape(model)
    chat = has_chat_template(model.tokenizer)
    encoded = [
        encode_example(model.tokenizer, example.input, example.output, chat=chat)
        for example in task.examples
    ]
    tokens, answers, _ = collate(encoded, pad_token_id(model.tokenizer))
    masks = torch.ones(n_layers * n_heads + 1, n_layers, n_heads)
    for index in range(n_layers * n_heads):  # row 0: the full model
        masks[index + 1].view(-1)[index] = 0.0
    rows = [(m, e) for m in range(len(masks)) for e in range(len(encoded))]
    losses = torch.empty(len(rows))
    with torch.no_grad():
        for start in range(0, len(rows), batch_size):
            chunk = rows[start : start + batch_size]
            which = torch.tensor([m for m, _ in chunk])
            examples = torch.tensor([e for _, e in chunk])
            hooks = lh.mask_hooks(masks[which], model)
            batch, mask = tokens[examples], answers[examples]
            logits = answer_logits(model, batch, mask, hooks, partial=False).float()
            token_ce = torch.nn.functional.cross_entropy(logits, batch[mask], reduction="none")
            owner = mask.nonzero(as_tuple=True)[0]  # row-major, as answer_logits orders them
            total = torch.zeros(len(chunk)).index_add_(0, owner, token_ce)
            losses[start : start + len(chunk)] = total / mask.sum(dim=1)
    per_mask = losses.view(len(masks), len(encoded)).mean(dim=1)
    base = float(per_mask[0])
    return pd.DataFrame(
        {
            "head": [f"L{i // n_heads}H{i % n_heads}" for i in range(n_layers * n_heads)],
            "layer": [i // n_heads for i in range(n_layers * n_heads)],
            "answer CE without it": per_mask[1:].tolist(),
            "rise": (per_mask[1:] - base).tolist(),
        }
    ).assign(**{"full model": base})


def run(config: Config) -> pd.DataFrame:
    model = LazyModel(config.model)
    stages = stages_of(config, model)
    held_out = lh.get_task(config.task).split(n_eval=config.n_eval)[1]

    def compute(where: Path) -> pd.DataFrame:
        table = head_effects(model(), held_out, config.batch_size)
        write_atomic(where / "effects.csv", table.to_csv(index=False))
        return table

    table = stages("effects", compute, lambda where: pd.read_csv(where / "effects.csv"))
    top = table.sort_values("rise", ascending=False).head(5)
    numbers = {
        "full model answer CE": float(table["full model"].iloc[0]),
        "examples": len(held_out),
        "heads": len(table),
        "largest rises": dict(zip(top["head"], top["rise"].round(4), strict=True)),
        "heads whose removal lowers the CE": int((table["rise"] < 0).sum()),
    }
    head_index = table["head"].str.split("H").str[1].astype(int)
    grid = table.assign(index=head_index).pivot(index="layer", columns="index", values="rise")
    figure = go.Figure(go.Heatmap(z=grid.values, x=list(grid.columns), y=list(grid.index)))
    figure.update_layout(title="answer CE rise with the head removed", xaxis_title="head")
    write_outputs(
        config.out,
        title=f"Single-head effects ({config.task}, {config.model})",
        markdown=markdown_table(top.drop(columns=["full model"]), floatfmt=".4f", index=False),
        figures={"single_head_effects": figure},
        numbers=numbers,
    )
    return table


#: a run on a tiny model and the figure it must write (the tests run it: test_analyses_modules)
EXAMPLE = (["--task", "capitalize"], "single_head_effects")

main = command_line(Config, run, __doc__)

if __name__ == "__main__":
    raise SystemExit(main())
