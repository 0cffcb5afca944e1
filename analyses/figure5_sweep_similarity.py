"""Heads up! Figure 5: along the removal sweep of Figure 2, the cosine similarity of each
layer's output (decoder block and attention) at the last position to the full model's run on
the *instructed* prompt: removing the unselected heads moves the hidden states toward the
instructed ones.

    python -m analyses.figure5_sweep_similarity --model smollm2-135m-instruct --out runs/figure5

The same sweep as :mod:`analyses.figure2_sweep` (same options; pass ``--out`` of a Figure 2 run
to reuse its sweep). Resumable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from analyses import figure2_sweep
from analyses._common import LazyModel, command_line, help_of, mask_of, stages_of, write_outputs
from lens_heads.core import markdown_table
from lens_heads.heads_up import SweepResult


@dataclass
class Config(figure2_sweep.Config):
    out: str = field(default="runs/figure5", metadata=help_of("output folder"))


def run(config: Config) -> SweepResult:
    model = LazyModel(config.model)
    stages = stages_of(config, model)
    training = mask_of(config, stages, model)
    sweep = figure2_sweep.sweep_of(config, stages, model, training.W)
    frame = sweep.similarity_frame()
    table = frame.pivot_table(index="n_removed", columns="kind", values="cosine")
    rows = table.iloc[:: max(1, len(table) // 10)].reset_index()
    rows["n_removed"] = rows["n_removed"].astype(int)
    n_layers = int(frame["layer"].max()) + 1
    unselected = int(training.W.numel()) - training.mask.n_selected
    numbers: dict[str, Any] = {"prompt": sweep.prompt, "target": sweep.target}
    numbers |= {"switch_step": sweep.switch, "heads outside M": unselected}
    halves = {"later": (n_layers // 2, n_layers - 1), "earlier": (0, n_layers // 2 - 1)}
    for half, (first, last) in halves.items():
        chosen = frame[frame["layer"].between(first, last)]
        means = chosen.pivot_table(index="n_removed", columns="kind", values="cosine")
        before = means[means.index <= unselected]
        at_switch = means.loc[means.index >= (sweep.switch or 0)].iloc[0]
        numbers[f"{half} layers"] = {
            "layers": f"{first}-{last} (mean)",
            "start": means.iloc[0].round(4).to_dict(),
            "at the switch step": at_switch.round(4).to_dict(),
            "with the heads outside M removed": before.iloc[-1].round(4).to_dict(),
            "max while removing the heads outside M": before.max().round(4).to_dict(),
            "argmax (heads removed)": {k: int(v) for k, v in before.idxmax().items()},
            "end": means.iloc[-1].round(4).to_dict(),
        }
    text = (
        f"Cosine similarity to the instructed prompt, mean over layers, every "
        f"{max(1, len(table) // 10)}-th evaluated step:\n\n"
        f"{markdown_table(rows, floatfmt='.4f', index=False)}\n\n"
        + "\n\n".join(
            f"{half.capitalize()} half of the layers ({numbers[half + ' layers']['layers']}): "
            + "; ".join(f"{k} {v}" for k, v in list(numbers[half + " layers"].items())[1:])
            + "."
            for half in ("later", "earlier")
        )
    )
    write_outputs(
        config.out,
        title=f"Figure 5: similarity along the removal sweep ({config.task}, {sweep.model})",
        markdown=text,
        figures={"figure5_similarity": sweep.plot_similarity()},
        numbers=numbers,
    )
    return sweep


main = command_line(Config, run, __doc__)

if __name__ == "__main__":
    raise SystemExit(main())


#: a run on a tiny model (the tests add ``--steps 3 --n-eval 4 --no-progress --out DIR``) and
#: the figure it must write (tests/unit/tools/test_analyses_modules.py runs each analysis's)
EXAMPLE = (["--task", "capitalize", "--every", "8", "--max-new-tokens", "0"], "figure5_similarity")
