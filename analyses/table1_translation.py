"""Heads up! Table 1 on translation: a head mask trained, without any instruction, on sentence
pairs of the built-in parallel corpus, evaluated on held-out sentences: Original (the bare
source), w/ instruction, w/ random M (as many heads, shuffled) and w/ M -- answer CE (what the
paper's tables call PPL), ROUGE-L, BLEU and chrF++, with the number of heads M keeps.

    python -m analyses.table1_translation --out runs/table1/gemma-3-270m
    python -m analyses.table1_translation --model smollm2-135m-instruct --pairs en-fr \\
        --out runs/table1/smollm2
    python -m analyses.table1_translation --shots 2 --out runs/table1/gemma-3-270m-2-shot

``--shots k`` puts k demonstrations (sentence pairs of the training split, without any
instruction) before every prompt, in training and in every evaluated setting: the instructed
baseline then sees the instruction and k examples, the mask k examples only. A base model that
does not follow a zero-shot instruction translates from demonstrations, so this is the
comparison that is not made against a floor.

The last ``--holdout`` sentences never train the mask; the last ``--n-eval`` of them are
evaluated, so Table 8 (:mod:`analyses.figure6_alpha` with ``--mask <out>/training_<pair>``) can
choose its alpha on the others. The paper (Llama3.1-8B-inst, XNLI, Table 1): M keeps 828-862 of
1,024 heads; w/ M matches or beats the instructed full model (PPL 0.504-1.322 against
0.550-1.303, ROUGE-L 0.401-0.748 against 0.414-0.599), and a random M of the same size raises
PPL above the original. It also reports that small models fail (Gemma2-2B-inst, 208 heads, on
every pair; Qwen2.5-0.5B-inst weak; Appendix C.1). Each claim is tested per pair, one-sided and
paired over the held-out sentences (:data:`LEVEL`). Resumable: each pair's training and
evaluation are stages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from scipy import stats

import lens_heads as lh
from analyses._common import (
    LEVEL,
    LazyModel,
    command_line,
    help_of,
    markdown_table,
    precision_field,
    stages_of,
    trained_mask,
    write_outputs,
)
from lens_heads.engine import EvaluationResult

#: The paper's Table 1, Llama3.1-8B-Instruct, for the pairs the built-in corpus has.
PAPER = {
    "en-zh": {"heads": 832, "ce original": 2.643, "ce instruction": 1.091, "ce random": 2.909,
              "ce mask": 1.017, "rouge original": 0.020, "rouge instruction": 0.539,
              "rouge mask": 0.589},
    "en-fr": {"heads": 860, "ce original": 2.172, "ce instruction": 0.619, "ce random": 2.370,
              "ce mask": 0.552, "rouge original": 0.082, "rouge instruction": 0.541,
              "rouge mask": 0.711},
    "en-es": {"heads": 846, "ce original": 2.319, "ce instruction": 0.550, "ce random": 2.762,
              "ce mask": 0.504, "rouge original": 0.069, "rouge instruction": 0.599,
              "rouge mask": 0.748},
    "en-de": {"heads": 862, "ce original": 2.314, "ce instruction": 0.627, "ce random": 2.482,
              "ce mask": 0.580, "rouge original": 0.069, "rouge instruction": 0.576,
              "rouge mask": 0.677},
}  # fmt: skip
PAPER_HEADS = 1024

ROWS = {  # table row -> (setting label, metric column)
    "answer CE, Original": ("Original", "answer CE (paper: PPL)"),
    "answer CE, w/ instruction": ("w/ instruction", "answer CE (paper: PPL)"),
    "answer CE, w/ random M": ("w/ random M", "answer CE (paper: PPL)"),
    "answer CE, w/ M": ("w/ M", "answer CE (paper: PPL)"),
    "ROUGE-L, Original": ("Original", "ROUGE-L"),
    "ROUGE-L, w/ instruction": ("w/ instruction", "ROUGE-L"),
    "ROUGE-L, w/ M": ("w/ M", "ROUGE-L"),
    "BLEU, Original": ("Original", "BLEU"),
    "BLEU, w/ instruction": ("w/ instruction", "BLEU"),
    "BLEU, w/ M": ("w/ M", "BLEU"),
}
PAPER_ROWS = {
    "answer CE, Original": "ce original",
    "answer CE, w/ instruction": "ce instruction",
    "answer CE, w/ random M": "ce random",
    "answer CE, w/ M": "ce mask",
    "ROUGE-L, Original": "rouge original",
    "ROUGE-L, w/ instruction": "rouge instruction",
    "ROUGE-L, w/ M": "rouge mask",
}


@dataclass
class Config:
    model: str = field(default="gemma-3-270m", metadata=help_of("model alias or path"))
    pairs: tuple[str, ...] = field(
        default=("en-fr", "en-de", "en-es", "en-zh"), metadata=help_of("translation tasks")
    )
    steps: int = field(default=200, metadata=help_of("training steps per mask"))
    lr: float = field(default=0.1, metadata=help_of("peak learning rate"))
    batch_size: int = field(default=8, metadata=help_of("training batch"))
    init_mean: float = field(default=4.0, metadata=help_of("mean of the W init (paper: 4)"))
    holdout: int = field(
        default=80, metadata=help_of("sentences held out of training (the last ones)")
    )
    n_eval: int = field(default=40, metadata=help_of("held-out sentences evaluated (the last)"))
    random_seeds: tuple[int, ...] = field(default=(0, 1), metadata=help_of("random-M seeds"))
    seed: int = field(default=0, metadata=help_of("training seed"))
    shots: int = field(default=0, metadata=help_of("demonstrations before every prompt"))
    precision: str = precision_field()
    progress: bool = field(default=True, metadata=help_of("progress bars"))
    out: str = field(default="runs/table1", metadata=help_of("output folder"))


def _per_sentence(evaluation: EvaluationResult, setting: str, column: str) -> pd.Series:
    """Each held-out sentence's value in ``setting`` (random M: the mean over its seeds)."""
    records = evaluation.records[evaluation.records["setting"] == setting]
    return records.groupby("index")[column].mean()


def claims(evaluation: EvaluationResult) -> dict[str, Any]:
    """One-sided paired p-values (Wilcoxon over sentences) of the paper's claims."""
    ce = {
        s: _per_sentence(evaluation, s, "answer_ce")
        for s in ("original", "instruction", "random", "mask")
    }

    def lower(a: str, b: str) -> float:
        return float(stats.wilcoxon(ce[a], ce[b].loc[ce[a].index], alternative="less").pvalue)

    found = {
        "M lowers CE below the original: p": lower("mask", "original"),
        "M lowers CE below the instructed model: p": lower("mask", "instruction"),
        "instructed model lowers CE below M: p": lower("instruction", "mask"),
        "random M raises CE above the original: p": lower("original", "random"),
    }
    found["M helps (CE below original)"] = found["M lowers CE below the original: p"] < LEVEL
    found["M matches or beats the instruction"] = (
        found["instructed model lowers CE below M: p"] >= LEVEL
    )
    found["random M hurts"] = found["random M raises CE above the original: p"] < LEVEL
    return found


def run(config: Config) -> dict[str, EvaluationResult]:
    model = LazyModel(config.model)
    stages = stages_of(config, model)
    evaluations, columns, numbers = {}, {}, {}
    for pair in config.pairs:
        task = lh.get_task(pair)
        training = trained_mask(
            stages, model, task, steps=config.steps, lr=config.lr, seed=config.seed,
            name=f"training_{pair}", progress=config.progress, n_eval=config.holdout,
            batch_size=config.batch_size, init_mean=config.init_mean, precision=config.precision,
            shots=config.shots,
        )  # fmt: skip

        def evaluate(where: Path, task: Any = task, mask: lh.HeadMask = training.mask) -> Any:
            result = lh.evaluate(
                model(), task, ["original", "instruction", "random", "mask"], mask=mask,
                n_eval=config.n_eval, random_seeds=config.random_seeds, progress=config.progress,
                shots=config.shots,
            )  # fmt: skip
            result.save(where)
            return result

        evaluation = stages(f"eval_{pair}", evaluate, EvaluationResult.load)
        evaluations[pair] = evaluation
        table = evaluation.to_frame()
        n_heads = training.W.numel()
        column = {"# of heads in M": f"{training.mask.n_selected} of {n_heads}"}
        column |= {row: float(table.loc[s, metric]) for row, (s, metric) in ROWS.items()}
        columns[pair] = column
        losses = training.history["loss"]
        numbers[pair] = {
            "heads kept": training.mask.n_selected,
            "heads": n_heads,
            "training loss first/last 10 steps": [
                float(losses.iloc[:10].mean()), float(losses.iloc[-10:].mean())
            ],
            "table": {row: value for row, value in column.items() if row != "# of heads in M"},
            "claims": claims(evaluation),
            "precision": training.config.precision,
            "shots": config.shots,
        }  # fmt: skip
    ours = pd.DataFrame(columns)
    paper = pd.DataFrame(
        {
            pair: {"# of heads in M": f"{PAPER[pair]['heads']} of {PAPER_HEADS}"}
            | {row: PAPER[pair][key] for row, key in PAPER_ROWS.items()}
            for pair in config.pairs
            if pair in PAPER
        }
    )
    verdicts = pd.DataFrame({pair: value["claims"] for pair, value in numbers.items()}).T
    text = (
        f"Masks trained without instruction ({config.steps} steps, batch {config.batch_size}, "
        f"lr {config.lr}, init {config.init_mean:g}, {config.shots} demonstrations) on the "
        "built-in corpus; "
        f"{config.n_eval} held-out sentences per pair; random M over seeds "
        f"{', '.join(map(str, config.random_seeds))}.\n\nOurs ({config.model}):\n\n"
        + markdown_table(ours.rename_axis("setting"), floatfmt=".3f", index=True)
        + "\n\nThe paper (Llama3.1-8B-inst, XNLI; its PPL is a mean answer cross-entropy):\n\n"
        + markdown_table(paper.rename_axis("setting"), floatfmt=".3f", index=True)
        + f"\n\nThe claims, one-sided Wilcoxon over sentences at {LEVEL}:\n\n"
        + markdown_table(verdicts, floatfmt=".3g", index=True)
    )
    write_outputs(
        config.out,
        title=f"Table 1 on translation ({config.model})",
        markdown=text,
        figures={f"eval_{pair}": evaluation.plot() for pair, evaluation in evaluations.items()},
        numbers=numbers,
    )
    return evaluations


main = command_line(Config, run, __doc__)

if __name__ == "__main__":
    raise SystemExit(main())


#: where this analysis runs on a tiny model (it needs more than the shared tiny-run example)
TESTED_BY = "tests/unit/tools/test_paper_experiments.py"
