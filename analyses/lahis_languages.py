"""LAHIS (Xin Liu et al. 2025) on one model, every language at once: the language heads of the
built-in five-language corpus, the perplexity of every language with each language's specific
heads removed (the README's ``ppl`` / ``ppl-cross`` experiments) against as many random heads,
and attention transfer into French and Chinese with one demonstration, without and with the
target's heads strengthened (x3, x5) and the source's weakened (x0): off-target rate and chrF++.

    python -m analyses.lahis_languages --out runs/lahis-languages/gemma-3-270m

The README reports no numbers; its claims are that removing a language's heads hurts that
language most and that transfer reduces off-target output. A paired one-sided Wilcoxon test
over documents says, per language, whether its own perplexity rose more than with random heads.
Resumable: the heads, the perplexity experiment and each transfer are stages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
from scipy import stats

from analyses._common import (
    LazyModel,
    command_line,
    help_of,
    markdown_table,
    stages_of,
    write_outputs,
)
from lens_heads.lahis import (
    LanguageHeads,
    PerplexityExperiment,
    TransferResult,
    attention_transfer,
    language_heads,
    perplexity_experiment,
)


@dataclass
class Config:
    READS: ClassVar[tuple[str, ...]] = ("lens_heads/data/parallel.jsonl",)  # its sentences

    model: str = field(default="gemma-3-270m", metadata=help_of("model alias or path"))
    n_docs: int = field(default=16, metadata=help_of("sentences per language for the heads"))
    quantile: float = field(default=0.9, metadata=help_of("quantile of a language's head set"))
    min_languages: int = field(default=4, metadata=help_of("languages of a general head"))
    ppl_docs: int = field(default=20, metadata=help_of("held-out sentences per language"))
    skip: int = field(default=100, metadata=help_of("corpus sentences skipped before them"))
    seeds: tuple[int, ...] = field(default=(0, 1, 2), metadata=help_of("random head sets"))
    targets: tuple[str, ...] = field(default=("fr", "zh"), metadata=help_of("transfer targets"))
    n_eval: int = field(default=20, metadata=help_of("sentences per transfer"))
    shots: int = field(default=1, metadata=help_of("demonstrations per transfer prompt"))
    progress: bool = field(default=True, metadata=help_of("progress bars"))
    out: str = field(default="runs/lahis-languages", metadata=help_of("output folder"))


def own_versus_random(result: PerplexityExperiment) -> pd.DataFrame:
    """Per masked language: the mean CE rise of its own documents with its heads removed and with
    random heads, and the one-sided paired Wilcoxon p-value that its own heads cost more."""
    rows = []
    documents = result.documents
    for language, group in documents.groupby("masked", sort=False):
        own = group[group["evaluated"] == language]
        if own.empty:
            continue
        rise = own["ce_masked"] - own["ce_base"]
        random_rise = own["ce_random"] - own["ce_base"]
        test = stats.wilcoxon(rise, random_rise, alternative="greater")
        rows.append(
            {
                "masked": language,
                "own CE rise": float(rise.mean()),
                "random CE rise": float(random_rise.mean()),
                "p (own heads cost more, one-sided Wilcoxon)": float(test.pvalue),
            }
        )
    return pd.DataFrame(rows)


def run(config: Config) -> dict[str, Any]:
    model = LazyModel(config.model)
    stages = stages_of(config, model)

    def heads_of(where: Path) -> LanguageHeads:
        result = language_heads(
            model(), n_docs=config.n_docs, quantile=config.quantile,
            min_languages=config.min_languages, progress=config.progress,
        )  # fmt: skip
        result.save(where)
        return result

    heads = stages("heads", heads_of, LanguageHeads.load)

    def perplexity(where: Path) -> PerplexityExperiment:
        result = perplexity_experiment(
            model(), heads, n_docs=config.ppl_docs, skip=config.skip, random_seeds=config.seeds,
        )  # fmt: skip
        result.save(where)
        return result

    ppl = stages("perplexity", perplexity, PerplexityExperiment.load)
    transfers = {}
    for target in config.targets:

        def transfer(where: Path, target: str = target) -> TransferResult:
            result = attention_transfer(
                model(), heads, source="en", target=target, n_eval=config.n_eval,
                shots=config.shots, progress=config.progress,
            )  # fmt: skip
            result.save(where)
            return result

        transfers[target] = stages(f"transfer_en-{target}", transfer, TransferResult.load)
    direction = ppl.direction()
    paired = own_versus_random(ppl)
    numbers = {
        "model": ppl.model,
        "heads": {"general": heads.general_labels, "specific": heads.specific},
        "perplexity direction": direction.to_dict(orient="records"),
        "own versus random": paired.to_dict(orient="records"),
        "languages whose own perplexity rose most": int(direction["own_hurt_most"].sum()),
        "languages": len(direction),
        "transfer": {t: r.to_frame().to_dict(orient="records") for t, r in transfers.items()},
        "transfer sentences": config.n_eval,
    }
    text = (
        f"{ppl.model}: heads from {config.n_docs} sentences per language (quantile "
        f"{config.quantile}); perplexity on {config.ppl_docs} held-out sentences per language.\n\n"
        + ppl.to_markdown()
        + "\n\n## Own heads against random heads (paired over documents)\n\n"
        + markdown_table(paired, floatfmt=".3g", index=False)
        + "\n\n## Attention transfer (the README: fewer off-target outputs)\n\n"
        + "\n\n".join(r.to_markdown() for r in transfers.values())
    )
    figures = {"perplexity": ppl.plot()}
    figures |= {f"transfer_en-{t}": r.plot() for t, r in transfers.items()}
    write_outputs(
        config.out,
        title=f"LAHIS language heads on {ppl.model}",
        markdown=text,
        figures=figures,
        numbers=numbers,
    )
    return numbers


main = command_line(Config, run, __doc__)

if __name__ == "__main__":
    raise SystemExit(main())


#: where this analysis runs on a tiny model (it needs more than the shared tiny-run example)
TESTED_BY = "tests/unit/tools/test_paper_experiments.py"
