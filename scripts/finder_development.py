"""Write ``lens_heads/data/finder_development.json``: every example that a stored head-finder run
read in any of its pairs -- held-out, training or calibration, as the prompt or as its
counterfactual donor -- on either offline model. Those runs chose between the benchmark's
variants and tuned their settings, so these examples are development data from then on; the
protocol's test part (``split="test"`` of :func:`lens_heads.finders.counterfactual_pairs`)
leaves out every example that shares an unordered ``{input, output}`` pair with one of them.

The pairs are drawn again exactly as each stored run drew them (its command's settings, seed 0,
the model's own tokenizer), so the record needs both offline models (a few minutes):

    python scripts/finder_development.py

IOI needs no record: the test part's prompts come from templates, names, places and objects
disjoint from every development prompt (``lens_heads/data/ioi_test.jsonl``).
"""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

import lens_heads as lh
from lens_heads.core import write_atomic
from lens_heads.finders import counterfactual_pairs

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "lens_heads" / "data" / "finder_development.json"


def _runs(results: Path) -> list[dict]:
    """Each stored run's model, tasks and pair settings, read from its command."""
    runs = []
    for path in sorted(results.glob("head_finders/*/numbers.json")):
        words = shlex.split(json.loads(path.read_text())["provenance"]["command"])
        value = {words[i][2:]: words[i + 1] for i in range(len(words) - 1) if words[i][:2] == "--"}
        runs.append(
            {
                "run": path.parent.name,
                "model": value["model"],
                "tasks": value["tasks"].split(","),
                "n_eval": int(value.get("n-eval", 200)),
                "eval": int(value.get("n-pairs", 40)),
                "train": int(value.get("n-train-pairs", 40)),
                "calibration": int(value.get("n-calibration-pairs", 0)),
            }
        )
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default=str(ROOT / "results"))
    args = parser.parse_args()
    runs = _runs(Path(args.results))
    read: dict[str, set[tuple[str, str]]] = {}
    for model_name in sorted({run["model"] for run in runs}):
        model = lh.load_model(model_name)
        for run in (run for run in runs if run["model"] == model_name):
            for task in (task for task in run["tasks"] if task != "ioi"):
                for part, n, skip in (
                    ("eval", run["eval"], 0),
                    ("train", run["train"], 0),
                    ("train", run["calibration"], run["train"]),
                ):
                    if not n:
                        continue
                    pairs = counterfactual_pairs(
                        model, task, part=part, n=n, n_eval=run["n_eval"], seed=0, skip=skip
                    )
                    for pair in pairs.pairs:
                        seen = read.setdefault(task, set())
                        seen.add((pair.text, pair.output))
                        seen.add((pair.counterfactual_text, pair.counterfactual_output))
            print(f"{run['run']}: read", {task: len(read.get(task, ())) for task in run["tasks"]})
    record = {
        "about": "examples a stored head-finder run read in a pair (development data); "
        "written by scripts/finder_development.py",
        "runs": sorted(run["run"] for run in runs),
        "tasks": {task: sorted(map(list, examples)) for task, examples in sorted(read.items())},
    }
    write_atomic(RECORD, json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {RECORD}: " + ", ".join(f"{t} {len(e)}" for t, e in sorted(read.items())))


if __name__ == "__main__":
    main()
