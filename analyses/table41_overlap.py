"""Heads up! Table 41 over many words: do the instructed and the masked run share their top-5
tokens in the later layers? For each held-out word with a one-token answer, the logit lens
(final norm applied) of the original, instructed and masked runs; per layer, how many of the
top-5 tokens two runs share. The paper (Llama3.1-8B-inst, one sentence, Appendix C.4): in
layers 22-30 of 32 the instructed and masked runs share 2-3 of their top-5 tokens while the
original and masked share 0-1 (counted from its Table 41), and both the instructed and the
masked run reach the answer at the output. The later layers here are the same share of the
depth (from 22/32 of the layers to the one before the last). The verdict is a one-sided
Wilcoxon test over words on the mean overlap in those layers.

    python -m analyses.table41_overlap --mask demo-report/training --out runs/table41

Each word is a resumable stage.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
from scipy import stats

import lens_heads as lh
from analyses._common import (
    LEVEL,
    LazyModel,
    MaskedTaskConfig,
    command_line,
    help_of,
    markdown_table,
    mask_of,
    stages_of,
    write_outputs,
)
from analyses.figure8_many_words import words_of
from lens_heads.core import has_chat_template, write_atomic


@dataclass
class Config(MaskedTaskConfig):
    #: each word is its own stage: a re-run with more (or fewer) words reuses the finished ones
    UNSTORED: ClassVar[tuple[str, ...]] = ("words",)

    words: int = field(default=40, metadata=help_of("held-out words (one-token answers)"))
    out: str = field(default="runs/table41", metadata=help_of("output folder"))


def later_layers(n_layers: int) -> range:
    """The layers of the claim: from 22/32 of the depth to the one before the output layer.

    >>> later_layers(32), later_layers(30), later_layers(2)
    (range(22, 31), range(21, 29), range(1, 2))
    """
    start = round(22 / 32 * n_layers)
    return range(start, max(n_layers - 1, start + 1))


def word_row(model: Any, mask: lh.HeadMask, task: Any, example: Any) -> dict[str, Any]:
    lens = lh.logit_lens(
        model, example.input, mask=mask, instruction=task.instruction, top_k=5,
        targets=[example.output], chat=has_chat_template(model.tokenizer),
    )  # fmt: skip
    n_layers = len(lens.layers) - 1  # the first entry is the embedding
    later = [1 + layer for layer in later_layers(n_layers)]
    with_instruction = lens.top_overlap("instructed", "masked")
    with_original = lens.top_overlap("original", "masked")
    final = {s: lens.top_tokens[i][-1][0] for i, s in enumerate(lens.settings)}
    return {
        "word": example.input,
        "answer": example.output,
        "overlap instructed~masked": sum(with_instruction[d] for d in later) / len(later),
        "overlap original~masked": sum(with_original[d] for d in later) / len(later),
        **{f"{s} top-1 at output": token for s, token in final.items()},
        **{
            f"{s} answers": int(lens.target_ranks[i, -1, 0]) == 1
            for i, s in enumerate(lens.settings)
        },
    }


def run(config: Config) -> pd.DataFrame:
    model = LazyModel(config.model)
    stages = stages_of(config, model)
    training = mask_of(config, stages, model)
    task = config.task_object()
    rows = []
    for index, example in enumerate(words_of(config, model)):  # type: ignore[arg-type]

        def compute(where: Path, example: Any = example) -> dict[str, Any]:
            row = word_row(model(), training.mask, task, example)
            write_atomic(where / "row.json", json.dumps(row))
            return row

        load = lambda where: json.loads((where / "row.json").read_text())  # noqa: E731
        rows.append(stages(f"words/{index:03d}", compute, load))
    table = pd.DataFrame(rows)
    shared, baseline = table["overlap instructed~masked"], table["overlap original~masked"]
    differences = (shared - baseline).to_numpy()
    p_value = (
        float(stats.wilcoxon(differences, alternative="greater").pvalue)
        if (differences != 0).any()
        else 1.0
    )
    verdict = {
        "words": len(table),
        "mean top-5 overlap in the later layers, instructed~masked": float(shared.mean()),
        "mean top-5 overlap in the later layers, original~masked": float(baseline.mean()),
        "p (instructed~masked larger, one-sided Wilcoxon)": p_value,
        "supported": p_value < LEVEL,
        "instructed run answers at the output": int(table["instructed answers"].sum()),
        "masked run answers at the output": int(table["masked answers"].sum()),
        "original run answers at the output": int(table["original answers"].sum()),
    }
    n_layers = training.W.shape[0]
    layers = later_layers(n_layers)
    text = (
        f"Top-5 overlap averaged over layers {layers.start}-{layers.stop - 1} of {n_layers} "
        f"(the paper: 22-30 of 32).\n\n"
        + markdown_table(pd.DataFrame([verdict]), floatfmt=".3g", index=False)
        + "\n\n"
        + markdown_table(table, floatfmt=".2f", index=False)
    )
    write_outputs(
        config.out,
        title=f"Table 41 over {len(table)} words ({config.task}, {config.model})",
        markdown=text,
        numbers={"verdict": verdict, "rows": rows, "later layers": [layers.start, layers.stop - 1]},
    )
    return table


main = command_line(Config, run, __doc__)

if __name__ == "__main__":
    raise SystemExit(main())


#: where this analysis runs on a tiny model (it needs more than the shared tiny-run example)
TESTED_BY = "tests/unit/tools/test_paper_experiments.py"
