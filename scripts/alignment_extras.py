"""Token alignment heads: the measurements of docs/alignment.md that take longer than CI allows.

    python scripts/alignment_extras.py --out runs/alignment-extras [--n 8] [--only consistency]

Three parts, each skipped when its folder exists (re-run to resume); once all three are done,
``numbers.json`` (the stored result ``results/alignment_extras/gemma-3-270m``) is written from
their folders:

* ``consistency``: top-20 sets of every ordered pair of the built-in corpus (en, fr, es, de, zh:
  20 pairs) on Gemma 3 270M, their Jaccard matrix beside the random expectation (Figures 5, 28).
* ``across_models``: proportion and layers of alignment heads (en->fr, whole-sequence argmax,
  threshold 0.1) on the two offline models (Figure 6).
* ``ablation``: the top-6 en->fr heads removed vs 6 random non-alignment heads (3 seeds), with a
  non-translation control task (capitalize) for functional specificity (Figure 8).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import lens_heads as lh
from lens_heads.alignment.ablation import ablate_heads
from lens_heads.alignment.consistency import alignment_consistency, alignment_heads_across_models
from lens_heads.core.storage import save_figures, write_atomic

GEMMA = "gemma-3-270m"


def consistency(out: Path, n: int) -> str:
    model = lh.load_model(GEMMA)
    result = alignment_consistency(model, k=20, n=n, progress=True)
    result.save(out)
    save_figures(out, {"consistency": result.plot()})
    return result.to_markdown()


def across_models(out: Path, n: int) -> str:
    result = alignment_heads_across_models(["smollm2-135m-instruct", GEMMA], "en-fr", n=2 * n)
    result.save(out)
    save_figures(out, {"across_models": result.plot()})
    return result.to_frame().to_string()


def ablation(out: Path, n: int) -> str:
    model = lh.load_model(GEMMA)
    scores = lh.translation_scores(model, "en-fr", n_eval=2 * n)
    top = scores.top(6)
    result = ablate_heads(
        model,
        "en-fr",
        top,
        exclude=scores.alignment_heads(0.1),
        random_controls=3,
        control_task="capitalize",
        n_eval=2 * n,
    )
    result.save(out)
    save_figures(out, {"ablation": result.plot()})
    return result.to_markdown()


PARTS = {"consistency": consistency, "across_models": across_models, "ablation": ablation}


def numbers_of(out: Path, command: list[str]) -> dict[str, Any]:
    """The stored result (``results/alignment_extras/gemma-3-270m``), read back from the three
    parts' folders, with the provenance of the command."""
    from lens_heads.alignment.ablation import CATEGORIES, AblationResult
    from lens_heads.alignment.consistency import AcrossModels, Consistency
    from lens_heads.core.provenance import code_version, machine

    consistent = Consistency.load(out / "consistency")
    jaccard = consistent.jaccard.to_numpy().copy()
    np.fill_diagonal(jaccard, np.nan)
    least = np.nanmin(jaccard, axis=1)  # each pair's least similar other pair
    rows = AcrossModels.load(out / "across_models").rows
    ablated = AblationResult.load(out / "ablation")
    frame = ablated.to_frame()

    def four(metric: str) -> list[float]:
        return [
            round(float(frame.loc["unmasked", metric]), 1),
            round(float(frame.loc["ablated", metric]), 1),
            round(float(frame.loc["random", metric]), 1),
            round(float(frame.loc["random", f"{metric} std"]), 1),
        ]

    failures = ablated.failures()
    damaged = failures.loc["ablated"] if "ablated" in failures.index else None
    return {
        "sparsity": {row["model"]: [row["n_alignment"], row["n_heads"]] for row in rows},
        "layers of heads above 0.1": {row["model"]: row["layers"] for row in rows},
        "layers": {row["model"]: row["n_layers"] for row in rows},
        "consistency top-20 mean Jaccard": round(consistent.mean_off_diagonal(), 3),
        "random top-20 Jaccard": round(consistent.expected, 3),
        "least similar": [round(float(least.min()), 2), round(float(least.max()), 2)],
        "ablation chrF++ (unmasked, alignment heads, random mean, random std)": four("chrf"),
        "ablation BLEU (unmasked, alignment heads, random mean, random std)": four("bleu"),
        f"damaged outputs ({', '.join(CATEGORIES)})": [
            0 if damaged is None else int(damaged[name]) for name in CATEGORIES
        ],
        "seeds": len(ablated.controls),
        "k": len(ablated.heads),
        "provenance": {
            "command": " ".join(command),
            "code": code_version(),
            "machine": machine(),
            "precision": "float32",
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("runs/alignment-extras"))
    parser.add_argument("--n", type=int, default=8, help="pairs per ordered language pair")
    parser.add_argument("--only", choices=sorted(PARTS), help="run one part")
    args = parser.parse_args()
    for name, part in PARTS.items():
        folder = args.out / name
        if (args.only and name != args.only) or (folder / "summary.md").exists():
            continue
        start = time.perf_counter()
        text = part(folder, args.n)
        seconds = time.perf_counter() - start
        write_atomic(folder / "summary.md", f"{text}\n\nwall time: {seconds:.0f} s\n")
        print(f"## {name} ({seconds:.0f} s)\n\n{text}", flush=True)
    if all((args.out / name / "summary.md").exists() for name in PARTS):
        numbers = numbers_of(args.out, ["python", "scripts/alignment_extras.py", *sys.argv[1:]])
        write_atomic(args.out / "numbers.json", json.dumps(numbers, indent=2, default=str))


if __name__ == "__main__":
    main()
