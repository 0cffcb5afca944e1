"""The analyses package on tiny models: the mask table trains, evaluates, combines and resumes."""

from __future__ import annotations

import json

from analyses import mask_table


def test_mask_table_trains_evaluates_and_reuses_finished_tasks(tmp_path, capsys):
    # the grid loads its models itself: a tiny model is a grid model spec (patching
    # lh.load_model would leave the real SmolLM2 loading here, in the unit tier)
    # a task file states its own instruction and match rule (its name lends it none)
    words = [f"w{chr(97 + i)}{chr(97 + j)}" for i in range(5) for j in range(5)]
    data = tmp_path / "capitalize.json"
    examples = [{"input": w, "output": w.capitalize()} for w in words]
    instruction = "Capitalize the first letter of the given word."
    data.write_text(
        json.dumps({"instruction": instruction, "match": "startswith", "examples": examples})
    )
    out = tmp_path / "table"
    argv = ["--model", "tiny-2x4", "--tasks", str(data), "--steps", "3", "--batch-size", "4"]
    argv += ["--holdout", "8", "--n-eval", "4", "--seeds", "0", "--out", str(out)]
    assert mask_table.main(argv) == 0
    loads = json.loads((out / "capitalize" / "cell.json").read_text())["worker"]["model_loads"]
    assert loads[-1].startswith("tiny-2x4|"), "the tiny model, not a real one, was loaded"
    printed = capsys.readouterr().out
    assert "| capitalize | startswith |" in printed and "Goals met (of 1 tasks)" in printed
    for name in ["training.json", "mask.safetensors", "eval/result.json", "trajectories.html"]:
        assert (out / "capitalize" / name).is_file(), name
    table = (out / "table.csv").read_text()
    assert table.startswith("task,match,n_eval,heads kept,heads,acc orig")
    numbers = json.loads((out / "numbers.json").read_text())
    assert [row["task"] for row in numbers["rows"]] == ["capitalize"]
    assert numbers["goals"]["tasks"] == 1 and numbers["steps"] == 3
    assert numbers["provenance"]["precision"] in {"float32", "bfloat16"}
    command = numbers["provenance"]["command"]
    assert command.startswith("python -m analyses.mask_table --model tiny-2x4")
    stamp = (out / "capitalize" / "training.json").stat().st_mtime_ns
    assert mask_table.main(argv) == 0, "a second run reuses the finished task"
    assert (out / "capitalize" / "training.json").stat().st_mtime_ns == stamp


def test_goals_are_counted_per_the_issue():
    import pandas as pd

    rows = pd.DataFrame(
        {
            "task": ["a", "b", "c"],
            "acc orig": [0.0, 0.0, 0.5],
            "acc instr": [0.1, 0.9, 0.15],
            "acc rand": [0.0, 0.1, 0.0],
            "acc M": [0.8, 0.3, 0.9],
            "CE orig": [4.0, 4.0, 2.0],
            "CE rand": [5.0, 1.0, 3.0],
            "CE M": [1.0, 1.5, 1.5],
        }
    )
    assert mask_table.summarize(rows) == {
        "tasks": 3,
        "CE goal met": 1,  # row 2: not below random M; row 3: not half the original
        "accuracy goal met": 2,  # row 2 is only 0.2 above random M
        "accuracy goal tasks": ["a", "c"],
        "CE goal tasks": ["a"],
        "largest random-M accuracy": 0.1,
        "instructed accuracy at most 0.15": 2,  # a and c (0.15 counts)
    }
