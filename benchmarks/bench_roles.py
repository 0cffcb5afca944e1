"""Head roles side by side with Causal Head Gating 0.1.0 (issue 36), a benchmark, not a test.

Same model (SmolLM2-135M-Instruct), task, training prompts, answer tokens, number of masks,
batch, updates, learning rate and pull; each tool runs in its own process (CHG in a separate
environment with ``nam-causal-head-gating`` 0.1.0 from the registry, made on first use in
``benchmarks/.chg-env``; it shares this environment's torch and transformers). Reported: the
seconds per update of each fit and their ratio, each process's peak RSS, Spearman's rank
correlation of the two tools' gates per fit (mean over masks), the share of heads both tools put
in the same class, and the answer CE of each fit's gates on held-out prompts, computed here for
both (CHG 0.1.0 reports an NLL of 0 after every update). CHG's collate trap is avoided by padding
with an id that occurs in no prompt. Gemma 3 270M is handed to CHG too, and its answer recorded.

    python -m benchmarks.bench_roles --out results/roles_vs_chg/smollm2-135m-instruct
    python -m benchmarks.run --only bench_roles            # the timing line of the table

Timing alone, in each precision each tool supports, repeated (every repeat starts both tools in
new processes; CHG runs in float32 with its autocast switched off through torch's own
``enabled=False``, the library unmodified):

    python -m benchmarks.bench_roles --timing --precision bfloat16,float32 --repeats 3 \\
        --updates 3 --out results/roles_vs_chg/smollm2-135m-instruct-timing
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from benchmarks.harness import BenchmarkResult, peak_rss_mb

ROOT = Path(__file__).resolve().parents[1]
CHG_ENV = ROOT / "benchmarks" / ".chg-env"
CHG_VERSION = "0.1.0"
MODEL = "smollm2-135m-instruct"
TASK = "capitalize"
#: what the provenance of a run takes its seeds and data from, with the record's ``settings``
INPUTS = {"task": TASK}


def chg_python() -> Path:
    """The separate environment's python (made, and CHG installed, when missing)."""
    python = CHG_ENV / "bin" / "python"
    if not python.is_file():
        subprocess.run(
            [sys.executable, "-m", "venv", "--system-site-packages", str(CHG_ENV)], check=True
        )
        subprocess.run(
            [str(CHG_ENV / "bin" / "pip"), "install", "--quiet", "einops",
             f"nam-causal-head-gating=={CHG_VERSION}", "--no-deps"],
            check=True,
        )  # fmt: skip
    return python


#: how both sides read their peak memory (``benchmarks.harness.peak_rss_mb``)
PEAK_SOURCE = "VmHWM of each process"
#: the precisions both tools are timed in (CHG: its CPU autocast on, or off)
PRECISIONS = ("bfloat16", "float32")


def settings(quick: bool, *, steps: int | None = None, precision: str = "bfloat16") -> Any:
    from lens_heads.heads_up import RolesConfig

    steps = steps or (10 if quick else 100)
    return RolesConfig(
        steps=steps, pulled_steps=steps, n_masks=4, batch_size=8, n_eval=40,
        precision=precision, evaluate=False,
    )  # fmt: skip


def _encoded(model: Any, task: Any, config: Any) -> tuple[torch.Tensor, torch.Tensor, int]:
    """The prompts and answer masks the trainer trains on, right-padded with an unused id."""
    from lens_heads.core._prompts import collate
    from lens_heads.engine._training import MaskTrainer

    trainer = MaskTrainer(model, task, config)
    used = {int(t) for example in trainer.encoded for t in example.tokens}
    pad = max(set(range(model.cfg.d_vocab)) - used)
    tokens, answers, _ = collate(trainer.encoded, pad)
    return tokens, answers, pad


def lens_side(out: str) -> None:
    """The lens_heads side, in its own process: the three fits, their seconds per update."""
    import lens_heads as lh
    from lens_heads.heads_up import head_roles

    given = json.loads((Path(out) / "lens_in.json").read_text())
    from lens_heads.heads_up import RolesConfig

    config = RolesConfig(**given["settings"])
    model = lh.load_model(MODEL)
    roles = head_roles(model, TASK, config)
    steps = {"free": config.training.steps, "down": config.pulled_steps, "up": config.pulled_steps}
    torch.save(
        {
            "gates": roles.gates,
            "seconds per update": {fit: roles.seconds[fit] / steps[fit] for fit in steps},
            "peak RSS (MiB)": peak_rss_mb(),
        },
        Path(out) / "lens_out.pt",
    )


def _held_out_losses(model: Any, task: Any, config: Any, gates: torch.Tensor) -> list[float]:
    """Mean answer CE on the held-out prompts of each fit's masks (``gates [fit, mask, L, H]``)."""
    from lens_heads.core._prompts import collate, pad_token_id
    from lens_heads.engine._training import MaskTrainer

    _, held_out = task.split(n_eval=config.training.n_eval)
    free = replace(config.training_of("free"), n_eval=0, batch_size=1)
    trainer = MaskTrainer(model, held_out, free)
    tokens, answers, _ = collate(trainer.encoded, pad_token_id(model.tokenizer))
    losses = []
    with torch.no_grad():
        for fit in gates:
            per_mask = [float(trainer.loss(tokens, answers, mask.float())) for mask in fit]
            losses.append(sum(per_mask) / len(per_mask))
    return losses


def _lens_attempt(spec: str) -> str:
    """What lens_heads' roles do on the model ``spec`` (a few updates): ``"runs"`` or the error."""
    import lens_heads as lh
    from lens_heads.heads_up import RolesConfig, head_roles

    tiny = RolesConfig(steps=2, pulled_steps=2, n_masks=2, batch_size=2, n_eval=4, evaluate=False)
    try:
        head_roles(lh.load_model(spec), TASK, tiny)
    except Exception as error:  # the point is to report it
        return f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
    return "runs"


def _other_models(folder: Path) -> dict[str, str]:
    """Gemma 3 270M and a tiny random checkpoint of every family of the compatibility matrix."""
    from lens_heads.core._families import FAMILIES, tiny_checkpoint
    from lens_heads.core._models import prepare_model

    found = {"gemma-3-270m": str(prepare_model("gemma-3-270m"))}
    for spec in FAMILIES:
        found[f"tiny {spec.key}"] = str(tiny_checkpoint(spec.key, folder / spec.key))
    return found


def compare_with_chg(quick: bool) -> dict[str, Any]:
    """Run both tools and return the record (see the module)."""
    from scipy import stats

    import lens_heads as lh
    from lens_heads.core._models import prepare_model
    from lens_heads.core._provenance import machine
    from lens_heads.heads_up._roles_result import FITS, classify

    config = settings(quick)
    task = lh.get_task(TASK)
    model = lh.load_model(MODEL)
    tokens, answers, pad = _encoded(model, task, config.training_of("free"))
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work)
        others = _other_models(folder / "others")
        chg_settings = config.flat()
        torch.save(
            {
                "input_ids": tokens,
                "loss_masks": answers,
                "pad": pad,
                "model": str(prepare_model(MODEL)),
                "settings": chg_settings,
                "others": others,
            },
            folder / "chg_in.pt",
        )
        (folder / "lens_in.json").write_text(json.dumps({"settings": config.flat()}))
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "benchmarks.bench_roles", "--side", "lens", "--out", work],
            check=True, cwd=ROOT,
        )  # fmt: skip
        lens_wall = time.perf_counter() - started
        started = time.perf_counter()
        subprocess.run(
            [str(chg_python()), str(ROOT / "benchmarks" / "chg_side.py"),
             str(folder / "chg_in.pt"), str(folder / "chg_out.pt")],
            check=True, cwd=ROOT,
        )  # fmt: skip
        chg_wall = time.perf_counter() - started
        ours = torch.load(folder / "lens_out.pt")
        theirs = torch.load(folder / "chg_out.pt")
        lens_others = {name: _lens_attempt(where) for name, where in others.items()}
    record: dict[str, Any] = {
        "model": MODEL,
        "task": TASK,
        "settings": config.flat(),
        "training prompts": len(tokens),
        "CHG version": theirs["version"],
        "machine": machine(),
        "autocast": "bfloat16 (CHG autocasts on the CPU; lens_heads trains with bfloat16)",
        "wall seconds": {"lens_heads": round(lens_wall, 1), "CHG": round(chg_wall, 1)},
        "peak RSS (MiB)": {
            "lens_heads": round(ours["peak RSS (MiB)"]),
            "CHG": round(theirs["peak RSS (MiB)"]),
        },
        #: how the peaks were read: each process's own high-water mark (earlier runs read
        #: ru_maxrss, which included the parent's resident set; the docs do not show those)
        "peak RSS read from": PEAK_SOURCE,
        "fits": {},
        "other models": {
            name: {"lens_heads": lens_others[name], "CHG": theirs["other models"][name]}
            for name in others
        },
    }
    ours_classes = classify(ours["gates"], config.threshold)
    theirs_classes = classify(theirs["gates"], config.threshold)
    held = {
        "lens_heads": _held_out_losses(model, task, config, ours["gates"]),
        "CHG": _held_out_losses(model, task, config, theirs["gates"]),
    }
    for index, fit in enumerate(FITS):
        mine, other = ours["gates"][index].mean(0), theirs["gates"][index].mean(0)
        record["fits"][fit] = {
            "seconds per update": {
                "lens_heads": ours["seconds per update"][fit],
                "CHG": theirs["seconds per update"][fit],
            },
            "CHG / lens_heads time per update": theirs["seconds per update"][fit]
            / ours["seconds per update"][fit],
            "spearman of the mean gates": float(
                stats.spearmanr(mine.flatten(), other.flatten()).statistic
            ),
            "held-out answer CE": {name: held[name][index] for name in held},
        }
    from lens_heads.heads_up._roles_result import CLASSES, MAJORITY_CLASSES, HeadRoles

    majority = {
        name: HeadRoles(MODEL, TASK, gates, config.threshold).classes
        for name, gates in (("lens_heads", ours["gates"]), ("CHG", theirs["gates"]))
    }
    record["class agreement"] = float((majority["lens_heads"] == majority["CHG"]).float().mean())
    record["classes"] = {
        name: {c: int((value == i).sum()) for i, c in enumerate(MAJORITY_CLASSES)}
        for name, value in majority.items()
    }
    from lens_heads.heads_up import agreement_table

    # like for like, with chance beside it (ties: no majority); "ours" is lens_heads
    table = agreement_table(ours_classes, theirs_classes, len(CLASSES))
    record["agreement (kappa)"] = table
    single = {row["where"]: row["observed"] for row in table if row["compared"] == "single mask"}
    record["per-mask class agreement"] = {  # the share two masks of one tool agree on
        "lens_heads masks with each other": single.get("within ours", float("nan")),
        "CHG masks with each other": single.get("within theirs", float("nan")),
    }
    record["gates"] = {  # [fit, mask, layer, head], so that every statistic can be recomputed
        "lens_heads": ours["gates"].float().round(decimals=4).tolist(),
        "CHG": theirs["gates"].float().round(decimals=4).tolist(),
    }
    total = {name: sum(record["fits"][f]["seconds per update"][name] for f in FITS)
             for name in ("lens_heads", "CHG")}  # fmt: skip
    record["CHG / lens_heads time per update (all fits)"] = total["CHG"] / total["lens_heads"]
    return record


def _run_sides(folder: Path, config: Any, chg_input: dict[str, Any]) -> tuple[dict, dict]:
    """Both tools once, each in a new process, on ``config``; their outputs."""
    (folder / "lens_in.json").write_text(json.dumps({"settings": config.flat()}))
    torch.save(chg_input | {"settings": config.flat()}, folder / "chg_in.pt")
    subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_roles", "--side", "lens", "--out", str(folder)],
        check=True, cwd=ROOT,
    )  # fmt: skip
    subprocess.run(
        [str(chg_python()), str(ROOT / "benchmarks" / "chg_side.py"),
         str(folder / "chg_in.pt"), str(folder / "chg_out.pt")],
        check=True, cwd=ROOT,
    )  # fmt: skip
    return torch.load(folder / "lens_out.pt"), torch.load(folder / "chg_out.pt")


def faster(totals: dict[str, list[float]]) -> str:
    """The tool whose slowest repeat is faster than the other's fastest (seconds per update,
    the three fits summed); ``"neither"`` when their ranges overlap."""
    (a, first), (b, second) = totals.items()
    if max(first) < min(second):
        return a
    if max(second) < min(first):
        return b
    return "neither"


def time_both(precisions: tuple[str, ...], repeats: int, updates: int) -> dict[str, Any]:
    """Seconds per update of each tool's three fits, ``repeats`` times in each precision, with
    the median, the range and which tool is faster (:func:`faster`)."""
    import statistics

    import lens_heads as lh
    from lens_heads.core._models import prepare_model
    from lens_heads.core._provenance import machine
    from lens_heads.heads_up._roles_result import FITS

    task = lh.get_task(TASK)
    model = lh.load_model(MODEL)
    tokens, answers, pad = _encoded(model, task, settings(False).training_of("free"))
    del model
    record: dict[str, Any] = {
        "model": MODEL,
        "task": TASK,
        "training prompts": len(tokens),
        "updates per fit": updates,
        "repeats": repeats,
        "machine": machine(),
        "rule": "faster: the slowest repeat of one tool beats the fastest of the other "
        "(seconds per update, three fits summed); else neither",
        "precisions": {},
    }
    chg_input = {"input_ids": tokens, "loss_masks": answers, "pad": pad, "others": {},
                 "model": str(prepare_model(MODEL))}  # fmt: skip
    for precision in precisions:
        config = settings(False, steps=updates, precision=precision)
        per_fit: dict[str, dict[str, list[float]]] = {"lens_heads": {}, "CHG": {}}
        for _ in range(repeats):
            with tempfile.TemporaryDirectory() as work:
                ours, theirs = _run_sides(Path(work), config, chg_input | {"precision": precision})
            for name, out in (("lens_heads", ours), ("CHG", theirs)):
                for fit in FITS:
                    per_fit[name].setdefault(fit, []).append(out["seconds per update"][fit])
        totals = {
            name: [sum(fits[f][i] for f in FITS) for i in range(repeats)]
            for name, fits in per_fit.items()
        }
        medians = {name: statistics.median(values) for name, values in totals.items()}
        record["precisions"][precision] = {
            "seconds per update, per fit and repeat": per_fit,
            "seconds per update, three fits summed": totals,
            "median": medians,
            "range": {name: [min(v), max(v)] for name, v in totals.items()},
            "CHG / lens_heads (medians)": medians["CHG"] / medians["lens_heads"],
            "faster": faster(totals),
        }
    return record


def bench_roles_against_chg(quick: bool) -> BenchmarkResult:
    """Seconds per update, CHG 0.1.0 against lens_heads' roles (the three fits summed); target:
    lens_heads at least as fast (ratio >= 1)."""
    record = compare_with_chg(quick)
    fits = record["fits"]
    lens = sum(f["seconds per update"]["lens_heads"] for f in fits.values())
    chg = sum(f["seconds per update"]["CHG"] for f in fits.values())
    return BenchmarkResult(
        "head roles, seconds per update (3 fits): CHG 0.1.0 / lens_heads (SmolLM2)",
        chg,
        lens,
        chg / lens,
        target=1.0,
        extra={
            "peak RSS (MiB)": record["peak RSS (MiB)"],
            "spearman per fit": {
                fit: round(value["spearman of the mean gates"], 3) for fit, value in fits.items()
            },
            "class agreement": round(record["class agreement"], 3),
            "CHG on Gemma 3 270M": record["other models"]["gemma-3-270m"]["CHG"],
        },
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--side", choices=("lens",), help="(internal) run one side")
    parser.add_argument("--quick", action="store_true", help="10 updates per fit")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--timing", action="store_true", help="time both tools only")
    parser.add_argument(
        "--precision", default="bfloat16", help=f"with --timing: of {', '.join(PRECISIONS)}"
    )
    parser.add_argument("--repeats", type=int, default=3, help="with --timing: runs per tool")
    parser.add_argument("--updates", type=int, default=10, help="with --timing: per fit")
    args = parser.parse_args(argv)
    precisions = tuple(args.precision.split(","))
    if unknown := set(precisions) - set(PRECISIONS):
        parser.error(f"--precision: {sorted(unknown)} unknown; use {', '.join(PRECISIONS)}")
    if args.repeats < 1 or args.updates < 1:
        parser.error("--repeats and --updates must be at least 1")
    if args.side == "lens":
        lens_side(args.out)
        return 0
    from analyses._common import provenance_of
    from lens_heads.core._storage import write_atomic

    started = time.monotonic()
    if args.timing:
        record = time_both(precisions, args.repeats, args.updates)
    else:
        record = compare_with_chg(args.quick)
    command = ["python", "-m", "benchmarks.bench_roles", *(argv or sys.argv[1:])]
    precision = "+".join(precisions) if args.timing else "bfloat16"
    inputs = {**INPUTS, **record.get("settings", {})}
    record["provenance"] = provenance_of(command, started, inputs) | {"precision": precision}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "numbers.json", json.dumps(record, indent=2, default=str))
    print(json.dumps({k: v for k, v in record.items() if k != "machine"}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
