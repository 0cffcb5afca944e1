"""Heads up! Figure 7: the trained mask's keep probability sigmoid(W) per layer x head, how
many heads each half of the layers keeps (the paper: slightly more in the later half) and how
many key-value groups the mask removes whole, against random removal (the paper: none in a
pattern; :func:`lens_heads.heads_up.kv_groups_removed`).

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
from lens_heads.heads_up import kv_groups_removed


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
    model = LazyModel(config.model)
    stages = stages_of(config, model)
    training = mask_of(config, stages, model)
    layers = per_layer(training)
    n_kv_heads = getattr(model().cfg, "n_key_value_heads", None) or training.W.shape[1]
    half = len(layers) // 2
    numbers = {
        "heads kept": training.mask.n_selected,
        "heads": int(training.W.numel()),
        "kept in the first half of the layers": int(layers["kept"][:half].sum()),
        "kept in the second half": int(layers["kept"][half:].sum()),
        "KV groups removed whole": kv_groups_removed(training.mask, n_kv_heads).to_dict(),
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


#: a run on a tiny model (the tests add ``--steps 3 --n-eval 4 --no-progress --out DIR``) and
#: the figure it must write (tests/unit/tools/test_analyses_modules.py runs each analysis's)
EXAMPLE = (["--task", "capitalize"], "figure7_mask_weights")
