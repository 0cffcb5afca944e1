"""Heads up! Table 4 on translation: what a translation mask makes the model say, and which
tokens it puts on top at the last input position, beside the instructed model. For each pair,
held-out sentences of the built-in corpus: the greedy output without instruction under the
pair's mask (Table 1's ``training_<pair>`` folder, trained here when missing) and with the
instruction and no mask, whether each output is in the target language (langid among the corpus
languages), and the top tokens of the final layer in the original, instructed and masked runs.

    python -m analyses.table4_top_tokens --masks runs/table1/gemma-3-270m --out runs/table4

The paper (Table 4, Qwen2.5 instruct models of several sizes, one sentence): the smallest model
fails in kind -- it answers the sentence or stays in English under the en-de mask, whose top
token at the output is "I" while the instructed run's is "Ich" -- and larger models translate.
Resumable: each pair's mask and table are stages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

import lens_heads as lh
from analyses._common import (
    LazyModel,
    command_line,
    help_of,
    markdown_table,
    precision_field,
    stages_of,
    trained_mask,
    write_outputs,
)
from lens_heads.core import (
    CORPUS_LANGUAGES,
    PromptFormat,
    has_chat_template,
    identify_language,
    write_atomic,
)


@dataclass
class Config:
    model: str = field(default="gemma-3-270m", metadata=help_of("model alias or path"))
    pairs: tuple[str, ...] = field(default=("en-fr", "en-de"), metadata=help_of("pairs"))
    masks: str | None = field(
        default=None, metadata=help_of("folder holding Table 1's training_<pair> folders")
    )
    steps: int = field(default=200, metadata=help_of("training steps when a mask is missing"))
    lr: float = field(default=0.1, metadata=help_of("peak learning rate when training"))
    holdout: int = field(default=80, metadata=help_of("sentences held out of training"))
    sentences: int = field(default=8, metadata=help_of("held-out sentences shown"))
    top_k: int = field(default=5, metadata=help_of("top tokens per run"))
    max_new_tokens: int = field(default=32, metadata=help_of("greedy tokens per output"))
    precision: str = precision_field()
    progress: bool = field(default=True, metadata=help_of("progress bars"))
    out: str = field(default="runs/table4", metadata=help_of("output folder"))


def pair_table(config: Config, model: Any, task: Any, mask: lh.HeadMask) -> pd.DataFrame:
    """One row per held-out sentence: outputs, their language, and the top tokens per run."""
    chat = has_chat_template(model.tokenizer)
    held_out = task.split(config.holdout)[1].examples[: config.sentences]
    bare, instructed = (
        PromptFormat(chat=chat),
        PromptFormat(chat=chat, instruction=task.instruction),
    )
    inputs = [e.input for e in held_out]
    render = [bare.render(x, model.tokenizer) for x in inputs]
    told = [instructed.render(x, model.tokenizer) for x in inputs]
    options = dict(max_new_tokens=config.max_new_tokens, chat=False)
    masked = lh.generate(model, render, mask=mask, **options)
    with_instruction = lh.generate(model, told, **options)
    rows = []
    for i, example in enumerate(held_out):
        top = lh.top_tokens(
            model,
            settings={"original": (render[i], None), "instructed": (told[i], None),
                      "masked": (render[i], mask)},
            top_k=config.top_k, chat=False,
        ).to_frame()  # fmt: skip
        row: dict[str, Any] = {"input": example.input, "reference": example.output}
        for name, outputs in (("masked", masked), ("instructed", with_instruction)):
            text = outputs[i].text.strip().split("\n")[0]
            row[f"{name} output"] = text
            row[f"{name} language"] = identify_language(text, CORPUS_LANGUAGES) if text else ""
        for setting in ("original", "instructed", "masked"):
            tokens = top[top["setting"] == setting]["token"].tolist()
            row[f"top {config.top_k}, {setting}"] = " ".join(repr(t) for t in tokens)
        rows.append(row)
    return pd.DataFrame(rows)


def run(config: Config) -> dict[str, Any]:
    model = LazyModel(config.model)
    stages = stages_of(config, model)
    numbers: dict[str, Any] = {}
    sections = []
    for pair in config.pairs:
        task = lh.get_task(pair)
        training = trained_mask(
            stages, model, task, steps=config.steps, lr=config.lr, name=f"training_{pair}",
            mask=None if config.masks is None else str(Path(config.masks) / f"training_{pair}"),
            progress=config.progress, n_eval=config.holdout, precision=config.precision,
        )  # fmt: skip

        def compute(where: Path, task: Any = task, mask: lh.HeadMask = training.mask) -> Any:
            table = pair_table(config, model(), task, mask)
            write_atomic(where / "table.json", table.to_json(orient="records", force_ascii=False))
            return table

        def load(where: Path) -> pd.DataFrame:
            return pd.read_json(where / "table.json", orient="records")

        table = stages(f"table_{pair}", compute, load)
        target = task.target_lang
        numbers[pair] = {
            "heads kept": training.mask.n_selected,
            "sentences": len(table),
            "masked outputs in the target language": int(
                (table["masked language"] == target).sum()
            ),
            "instructed outputs in the target language": int(
                (table["instructed language"] == target).sum()
            ),
            "rows": table.to_dict(orient="records"),
        }
        sections.append(
            f"## {pair} ({training.mask.n_selected} heads kept)\n\n"
            + markdown_table(table, index=False)
        )
    write_outputs(
        config.out,
        title=f"Table 4: outputs and top tokens of translation masks ({config.model})",
        markdown="\n\n".join(sections),
        figures={},
        numbers=numbers,
    )
    return numbers


main = command_line(Config, run, __doc__)

if __name__ == "__main__":
    raise SystemExit(main())


#: where this analysis runs on a tiny model (it needs more than the shared tiny-run example)
TESTED_BY = "tests/unit/tools/test_paper_experiments.py"
