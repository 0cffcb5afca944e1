"""The head atlas of a model (issue 35), with the questions it answers across the research lines:

* **successor heads**: the strongest OV successor score against its chance level;
* **do the Heads up! masks keep the induction heads?** the share of masks keeping the top induction
  heads against the share keeping the other heads (one-sided Mann-Whitney);
* **are the alignment heads the language-specific heads?** the overlap of the top translation-score
  heads with LAHIS's specific heads against its random expectation (hypergeometric tail);
* **does the weights-only en→fr readout predict the translation score?** Spearman's rank
  correlation (MAPS reports 0.71 for Llama-3.1-8B);
* and the agreement of every pair of measures (Spearman, permutation p, Holm, top-k overlap).

    python -m analyses.head_atlas --model smollm2-135m-instruct \\
        --masks runs/mask-table/smollm2 --sweep demo-report/sweep --out runs/atlas/smollm2
    python -m analyses.head_atlas --model gemma-3-270m --task none \\
        --scores runs/alignment-heads/gemma-3-270m/scores_en-fr \\
        --language-heads runs/lahis-languages/gemma-3-270m/heads --out runs/atlas/gemma

Resumable (the atlas's stages); writes ``atlas/`` (``lh.HeadAtlas.load``), ``numbers.json`` and
``summary.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from scipy import stats

import lens_heads as lh
from analyses._common import (
    DEFAULT_MODEL,
    command_line,
    help_of,
    markdown_table,
    note_mask_precision,
    record_precision,
    write_outputs,
)
from lens_heads.atlas import AtlasConfig, HeadAtlas, head_atlas
from lens_heads.core import write_atomic, write_plotly_js

#: how many top heads the questions compare
TOP = 5


@dataclass(frozen=True)
class Config(AtlasConfig):
    #: the tasks lens_heads.atlas.builtin_relations reads (copying and capitalisation, en→fr
    #: words, country→capital), whatever the settings
    READS: ClassVar[tuple[str, ...]] = ("capitalize", "english-french", "country-capital")

    model: str = field(default=DEFAULT_MODEL, metadata=help_of("model alias or path"))
    progress: bool = field(default=True, metadata=help_of("progress bars"))
    out: str = field(default="runs/atlas", metadata=help_of("output folder"))


def _top(values: Any, k: int = TOP) -> list[int]:
    order = np.argsort(-np.nan_to_num(np.asarray(values, float), nan=-np.inf), kind="stable")
    return order[:k].tolist()


def questions(atlas: HeadAtlas) -> dict[str, Any]:
    """The cross-line answers the atlas's columns allow (a question whose columns are absent is
    left out)."""
    frame = atlas.frame
    found: dict[str, Any] = {}
    if "OV successor" in frame:
        best = int(np.nanargmax(frame["OV successor"]))
        found["successor"] = {
            "best head": frame["label"][best],
            "score": float(frame["OV successor"][best]),
            # a score over a few dozen pairs ties often: every head at the top one
            "heads at the top score": [
                label
                for label, value in zip(frame["label"], frame["OV successor"], strict=True)
                if value == frame["OV successor"][best]
            ],
            "chance": atlas.chance.get("OV successor"),
            "pairs": atlas.settings.get("readout pairs", {}).get("successor"),
            "heads at least twice chance": int(
                (frame["OV successor"] >= 2 * atlas.chance.get("OV successor", np.inf)).sum()
            ),
        }
    masks = "Heads up! share of masks keeping it"
    if masks in frame and "induction" in frame:
        top = _top(frame["induction"])
        rest = [i for i in range(len(frame)) if i not in top]
        kept = frame[masks].to_numpy(float)
        test = stats.mannwhitneyu(kept[top], kept[rest], alternative="greater")
        found["masks keep the induction heads"] = {
            "top induction heads": [frame["label"][i] for i in top],
            "share of masks keeping them (mean)": float(kept[top].mean()),
            "share keeping the other heads (mean)": float(kept[rest].mean()),
            "p (kept more often, one-sided Mann-Whitney)": float(test.pvalue),
        }
    score = next((c for c in frame if c.startswith("translation score")), None)
    if score is not None and "LAHIS specific to" in frame:
        top = set(_top(frame[score]))
        specific = set(np.flatnonzero(frame["LAHIS specific to"].fillna("").astype(str) != ""))
        n, k, m = len(frame), len(top), len(specific)
        both = len(top & specific)
        found["alignment heads are language-specific heads"] = {
            "top translation-score heads": [frame["label"][i] for i in sorted(top)],
            "language-specific heads": m,
            "in both": both,
            "expected at random": k * m / n,
            "p (overlap at least this, hypergeometric)": float(
                stats.hypergeom.sf(both - 1, n, m, k)
            ),
        }
    if score is not None and "OV en→fr word" in frame:
        pair = frame[[score, "OV en→fr word"]].dropna()
        found["OV en→fr predicts the translation score"] = {
            "spearman": float(stats.spearmanr(pair[score], pair["OV en→fr word"]).statistic),
            "heads": len(pair),
            "pairs": atlas.settings.get("readout pairs", {}).get("en→fr word"),
            "MAPS on Llama-3.1-8B": 0.71,
        }
    return found


def record_precisions(config: Config) -> None:
    """The provenance's precision: the training precision of the Heads up! masks the atlas
    reads (the page's rule for commands that use masks); float32 when it reads none (the
    atlas's own forward passes run in float32 and it trains nothing)."""
    folders = (
        sorted(path.parent for path in Path(config.masks).glob("**/training.json"))
        if (config.masks)
        else []
    )
    for folder in folders:
        note_mask_precision(folder)
    if not folders:
        record_precision("float32")


def write_page(atlas: HeadAtlas, out: str | Path, table: Any) -> None:
    """The stored form of the atlas: ``atlas.html`` and ``heads.csv`` (one row per head) in
    ``out``, the page loading the plotly.js that every atlas of ``out``'s parent shares
    (``../plotly.min.js``, as ``results/atlas/`` keeps it)."""
    folder = Path(out)
    write_atomic(
        folder / "atlas.html", atlas.to_html(plotly_js="../plotly.min.js", agreement=table)
    )
    write_plotly_js(folder.parent)
    write_atomic(folder / "heads.csv", atlas.to_frame().to_csv(index=False))


def run(config: Config) -> HeadAtlas:
    record_precisions(config)
    model = lh.load_model(config.model)
    settings = {f.name: getattr(config, f.name) for f in fields(AtlasConfig)}
    atlas = head_atlas(model, AtlasConfig(**settings), out=config.out, progress=config.progress)
    table = atlas.agreement()
    answers = questions(atlas)
    write_page(atlas, config.out, table)
    text = (
        "The interactive page: [atlas.html](atlas.html) (every head × measure in a sortable "
        "table, a card per head, the agreement matrix); one row per head: "
        "[heads.csv](heads.csv).\n\n"
        f"{len(atlas.frame)} heads, measures: {', '.join(atlas.measures)}.\n\n"
        + "\n".join(f"- {sentence}" for sentence in atlas.agreement_sentences(table))
        + "\n\n"
        + "\n".join(f"- **{q}**: {a}" for q, a in answers.items())
        + "\n\n"
        + markdown_table(table, floatfmt=".3g", index=False)
    )
    write_outputs(
        config.out,
        title=f"Head atlas of {atlas.model}",
        markdown=text,
        numbers={
            "model": atlas.model,
            "heads": len(atlas.frame),
            "measures": atlas.measures,
            "chance": atlas.chance,
            "readout pairs": atlas.settings.get("readout pairs"),
            "questions": answers,
            "agreement": table.to_dict(orient="records"),
        },
    )
    return atlas


main = command_line(Config, run, __doc__)

if __name__ == "__main__":
    raise SystemExit(main())


#: a run on a tiny model (the tests add ``--n-eval 4 --no-progress --out DIR``) and its figure
EXAMPLE = (
    ["--n-reference", "4", "--n-sequences", "2", "--length", "4", "--permutations", "10",
     "--bootstrap", "10", "--k", "3"],
    "atlas",
)  # fmt: skip
