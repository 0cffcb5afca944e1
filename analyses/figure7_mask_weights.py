"""Heads up! Figure 7: the trained mask's keep probability sigmoid(W) per layer x head, and
how many heads each layer keeps.

    python -m analyses.figure7_mask_weights --task capitalize --out runs/figure7

Resumable (the training stage is reused).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from analyses._common import (
    LazyModel,
    MaskedTaskConfig,
    command_line,
    help_of,
    markdown_table,
    mask_of,
    stages_of,
    write_outputs,
)
from lens_heads.engine import MaskTrainingResult


@dataclass
class Config(MaskedTaskConfig):
    out: str = field(default="runs/figure7", metadata=help_of("output folder"))


def per_layer(training: MaskTrainingResult) -> pd.DataFrame:
    """Heads kept and mean keep probability per layer."""
    probabilities = training.probabilities
    return pd.DataFrame(
        {
            "layer": range(probabilities.shape[0]),
            "kept": (probabilities >= 0.5).sum(dim=1).tolist(),
            "of": [probabilities.shape[1]] * probabilities.shape[0],
            "mean sigmoid(W)": probabilities.mean(dim=1).tolist(),
        }
    )


def run(config: Config) -> MaskTrainingResult:
    stages = stages_of(config)
    training = mask_of(config, stages, LazyModel(config.model))
    layers = per_layer(training)
    half = len(layers) // 2
    numbers = {
        "heads kept": training.mask.n_selected,
        "heads": int(training.W.numel()),
        "kept in the first half of the layers": int(layers["kept"][:half].sum()),
        "kept in the second half": int(layers["kept"][half:].sum()),
    }
    text = "\n".join(f"- {key}: {value}" for key, value in numbers.items())
    text += "\n\n" + markdown_table(layers, floatfmt=".3f", index=False)
    write_outputs(
        config.out,
        title=f"Figure 7: trained mask weights ({config.task}, {training.model})",
        markdown=text,
        figures={"figure7_mask_weights": training.plot_heatmap()},
        numbers=numbers,
    )
    return training


main = command_line(Config, run, __doc__)

if __name__ == "__main__":
    raise SystemExit(main())
