"""Token alignment heads: the measurements of docs/alignment.md that the analyses do not make.

    python scripts/alignment_extras.py --out runs/alignment-extras [--n 8] [--only control]

Two parts, each skipped when its folder exists (re-run to resume); once both are done,
``numbers.json`` (the stored result ``results/alignment_extras/gemma-3-270m``) is written from
their folders:

* ``across_models``: proportion and layers of alignment heads (en->fr, whole-sequence argmax,
  threshold 0.1) on the two offline models (Figures 3 and 4).
* ``control``: the top-6 en->fr heads removed against 6 random non-alignment heads (3 seeds), on
  the translation and on a non-translation control task (capitalize): does removing the alignment
  heads cost translation only (functional specificity, Figure 8)?

The consistency across pairs (Figure 5) and the ablation at each number of heads are measured
by ``python -m analyses.alignment_heads`` (``results/alignment_heads/gemma-3-270m``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import lens_heads as lh
from lens_heads.alignment import ablate_heads, alignment_heads_across_models
from lens_heads.core import save_figures, write_atomic

GEMMA = "gemma-3-270m"
#: what the provenance takes its seeds and data from: the translation, the control task and the
#: seeds of the random control heads
CONTROL_SEEDS = (0, 1, 2)
INPUTS = {"tasks": ("en-fr", "capitalize"), "random_seeds": CONTROL_SEEDS}


def across_models(out: Path, n: int) -> str:
    result = alignment_heads_across_models(["smollm2-135m-instruct", GEMMA], "en-fr", n=2 * n)
    result.save(out)
    save_figures(out, {"across_models": result.plot()})
    return result.to_frame().to_string()


def control(out: Path, n: int) -> str:
    model = lh.load_model(GEMMA)
    scores = lh.translation_scores(model, "en-fr", n_eval=2 * n)
    top = scores.top(6)
    result = ablate_heads(
        model,
        "en-fr",
        top,
        exclude=scores.alignment_heads(0.1),
        random_seeds=CONTROL_SEEDS,
        control_task="capitalize",
        n_eval=2 * n,
    )
    result.save(out)
    save_figures(out, {"ablation": result.plot()})
    return result.to_markdown()


PARTS = {"across_models": across_models, "control": control}


def numbers_of(out: Path, command: list[str], seconds: float) -> dict[str, Any]:
    """The stored result (``results/alignment_extras/gemma-3-270m``), read back from the two
    parts' folders, with the provenance of the command."""
    from lens_heads.alignment import AblationResult, AcrossModels
    from lens_heads.core import code_version, machine, run_record

    rows = AcrossModels.load(out / "across_models").rows
    ablated = AblationResult.load(out / "control")

    def settings(task: str, metric: str) -> dict[str, list[float | None]]:
        """Per setting, [mean, std over the random seeds (None for a single run)] of ``metric``
        on ``task``."""
        frame = ablated.to_frame(task)
        return {
            setting: [
                round(float(frame.loc[setting, metric]), 3),
                None
                if frame.loc[setting, "runs"] < 2
                else round(float(frame.loc[setting, f"{metric} std"]), 3),
            ]
            for setting in frame.index
        }

    control = next(task for task in ablated.runs["task"].unique() if task != ablated.task)
    return {
        "sparsity": {row["model"]: [row["n_alignment"], row["n_heads"]] for row in rows},
        "layers of heads above 0.1": {row["model"]: row["layers"] for row in rows},
        "layers": {row["model"]: row["n_layers"] for row in rows},
        "control": {
            "heads": ablated.heads,
            "seeds": len(ablated.controls),
            "translation": ablated.task,
            "control task": control,
            "translation chrF++ (mean, std over seeds)": settings(ablated.task, "chrf"),
            "control accuracy (mean, std over seeds)": settings(control, "accuracy"),
        },
        "provenance": {
            "command": " ".join(command),
            "code": code_version(),
            "machine": machine(),
            "precision": "float32",
            "seconds": round(seconds, 1),
            **run_record(INPUTS),
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
        seconds = sum(
            float(
                (args.out / name / "summary.md").read_text().rsplit("wall time: ", 1)[1].split()[0]
            )
            for name in PARTS
        )
        command = ["python", "scripts/alignment_extras.py", *sys.argv[1:]]
        numbers = numbers_of(args.out, command, seconds)
        write_atomic(args.out / "numbers.json", json.dumps(numbers, indent=2, default=str))


if __name__ == "__main__":
    main()
