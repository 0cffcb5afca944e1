"""Re-run the stored results: each folder of ``results/`` from its command, one job at a time, the
run's ``numbers.json`` (and ``summary.md``) copied over the stored one.

    python scripts/rerun_results.py --list                 # the plan, in order, with what it needs
    python scripts/rerun_results.py                        # every entry (hours on 2 cores)
    python scripts/rerun_results.py --only table1 --only figure6
    python scripts/rerun_results.py --results ../main/results   # run in a worktree, store in main

Entries run in the order listed, so a run finds the masks an earlier one trained (the float32
demo's ``training/`` folder is ``runs/demo-mask-float32``; Table 1's masks serve Figure 6 and
Table 4). A float32 result is re-run with ``--precision float32`` so that a CPU with native bf16
reproduces it; a bfloat16 one runs where the CPU computes bf16 natively (an entry that needs it
is skipped elsewhere, and says so). Run it from a clean checkout (a ``git worktree``) so that
edits made meanwhile never reach a running command.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = Path("runs/rerun")


@dataclass(frozen=True)
class Entry:
    """One stored result: where it goes under ``results/``, the command that makes it (run from
    the checkout's root), the folder the command writes and the kind of CPU it needs."""

    result: str
    command: str
    out: str
    bf16: bool = False  # runs only where the CPU computes bf16 natively
    #: runs only where it does not (a timing that stands for that kind of CPU)
    without_bf16: bool = False
    after: str = ""  # a shell step once it finished (e.g. linking a mask folder)
    #: cited by the docs before its first run: until it has run, the pages say "not yet
    #: measured" with the command (any other missing result fails the docs' check)
    pending: bool = False
    #: more files of the run kept beside its numbers (paths relative to the run's folder and to
    #: the stored result's: ``../plotly.min.js`` is the one plotly.js the atlas pages share)
    files: tuple[str, ...] = ()


#: what an atlas stores besides its numbers: its page, its per-head table, the shared plotly.js
ATLAS_FILES = ("atlas.html", "heads.csv", "../plotly.min.js")


def _analysis(name: str, out: str, *flags: str, precision: str = "float32") -> str:
    parts = ["python", "-m", f"analyses.{name}", *flags]
    if precision:
        parts += ["--precision", precision]
    return " ".join([*parts, "--no-progress", "--out", str(RUNS / out)])


def _roles(out: str, *flags: str, steps: int = 200, masks: int = 4) -> str:
    """A head-roles run: the three fits of ``steps`` updates each, ``masks`` per fit, bf16."""
    fits = ["--steps", str(steps), "--pulled-steps", str(steps), "--n-masks", str(masks)]
    return _analysis("head_roles", out, *flags, *fits, "--precision", "bfloat16", precision="")


DEMO_MASK = "runs/demo-mask-float32"
#: each stored head-finder leaderboard: its name under ``results/head_finders``, model and
#: tasks (on a 2-core CPU, about 50 minutes of methods for IOI and 100 for ``capitalize`` on
#: SmolLM2; issue 46 asks for IOI and three toolkit tasks on each model). A task added to a run
#: resumes the others only when the code that computed their stages is unchanged (``Stages``
#: recomputes a stage of other code), so each toolkit task is a run of its own beside IOI's.
#: Flags after the tasks go to the command: ``country-capital`` (179 examples) and ``antonym``
#: (281) hold out 80 (the default 200 is more than half of them, which ``Task.split`` refuses).
FINDER_RUNS = {
    "smollm2-135m-instruct": ("smollm2-135m-instruct", "ioi"),
    "gemma-3-270m": ("gemma-3-270m", "ioi"),
    "smollm2-135m-instruct-tasks": ("smollm2-135m-instruct", "capitalize"),
    "gemma-3-270m-tasks": ("gemma-3-270m", "capitalize"),
    **{
        f"{model}-{task}": (model, task, "--n-eval", "80")
        for model in ("smollm2-135m-instruct", "gemma-3-270m")
        for task in ("country-capital", "antonym")
    },
}
#: the head finders of the stored benchmarks (issue 46): the exact effects, the gradient
#: estimates, the three trained circuit masks (faithful, matching, warm-started from integrated
#: gradients), the Heads up! mask, two controls and three random
FINDER_METHODS = (
    "effects-counterfactual,effects-zero,attribution,integrated,faithful-mask,matching-mask,"
    "warm-mask,heads-up,induction,previous-token,random-0,random-1,random-2"
)

#: the logit-difference masks' runs (issue 46): each model and task of ``FINDER_RUNS`` again,
#: with the two masks trained on the logit difference beside integrated gradients (the
#: verdict's baseline) and a random floor, each run of its own (about 30 minutes for IOI on
#: SmolLM2 at one thread)
DIFFERENCE_RUNS = {f"{name}-difference": run for name, run in FINDER_RUNS.items()}
DIFFERENCE_METHODS = "integrated,difference-mask,warm-difference-mask,random-0"
#: the finders the leaderboards leave out (issue 46: every finder of the toolkit), on IOI on each
#: model, beside integrated gradients (the comparison's baseline) and a random floor: mean
#: ablation's exact effects, the share of several Heads up! masks, Causal Head Gating's gates,
#: LAHIS importance and the weights-only copying readout
OTHER_RUNS = {
    f"{model}-other-finders": (model, "ioi") for model in ("smollm2-135m-instruct", "gemma-3-270m")
}
OTHER_METHODS = "integrated,effects-mean,heads-up-share,chg,lahis,ov-copying,random-0"
#: the calibrated runs (issue 46): the difference masks with each size's circuit cut back on the
#: training pairs to the prefix nearest f = 1, beside integrated gradients plain and cut back the
#: same way (the like-for-like baseline), each model and task again
CALIBRATED_RUNS = {f"{name}-calibrated": run for name, run in FINDER_RUNS.items()}
CALIBRATED_METHODS = (
    "integrated,calibrated-integrated,calibrated-difference-mask,"
    "calibrated-warm-difference-mask,random-0"
)
#: the same calibrated runs with the cut made on 80 pairs of the training part that no method
#: trained on (``--n-calibration-pairs``), so that a mask fitted to its 40 training pairs is not
#: cut back by the same pairs: the one setting changed, the training pairs and masks the same.
#: ``country-capital`` has 58 pairs beside its 40 training pairs (98 with 80 held out)
CALIBRATION_PAIRS = {"country-capital": "58"}
SEPARATE_CUT_RUNS = {
    f"{name}-separate-cut": (*run, "--n-calibration-pairs", CALIBRATION_PAIRS.get(run[1], "80"))
    for name, run in FINDER_RUNS.items()
}

#: the exact-budget runs (issue 46): masks trained with every forward on exactly the budget's
#: heads towards the model's mean logit difference, started from integrated gradients by size
#: (``exact-mask``), beside integrated gradients and a random floor, each model and task again
#: (about 20 minutes for IOI on Gemma at two threads)
EXACT_RUNS = {f"{name}-exact": run for name, run in FINDER_RUNS.items()}
EXACT_METHODS = "integrated,exact-mask,random-0"
#: the exact-budget runs again with more training pairs (issue 46): with 40 pairs, 50 steps of
#: batch 8 show each pair to a mask ten times, and on SmolLM2 IOI the masks fit those pairs
#: better than the warm start while their held-out f falls. The masks' cost stays the same (the
#: steps and the batch are unchanged); integrated gradients read the same larger set. 160
#: pairs, or every training pair of ``country-capital`` (98 with 80 held out; 96 asked)
MORE_PAIRS = {"country-capital": "96"}
MORE_PAIRS_RUNS = {
    f"{name}-more-pairs": (*run, "--n-train-pairs", MORE_PAIRS.get(run[1], "160"))
    for name, run in FINDER_RUNS.items()
}
#: the exact-budget runs with each size's circuit chosen among its mask's steps (every fifth,
#: the warm start among them) on calibration pairs no method trained on (``selected-exact-mask``;
#: issue 46): the training pairs and the masks are those of the 40-pair runs, so the choice is
#: the one thing changed
SELECTED_RUNS = {
    f"{name}-selected": (*run, "--n-calibration-pairs", CALIBRATION_PAIRS.get(run[1], "80"))
    for name, run in FINDER_RUNS.items()
}
SELECTED_METHODS = "integrated,selected-exact-mask,random-0"

#: the protocol's runs (issue 70): each model and task of ``protocols/head_finders-1.toml``, every
#: method of the file at its three seeds on the test part (about one to two hours a run at one
#: thread on this CPU; run two at a time). Stored under ``results/head_finders/protocol-1``.
PROTOCOL = "protocols/head_finders-1.toml"
PROTOCOL_RUNS = {
    f"{model}-{task}": (model, task)
    for model in ("smollm2-135m-instruct", "gemma-3-270m")
    for task in ("ioi", "capitalize", "country-capital", "antonym")
}


def _protocol(name: str, model: str, task: str) -> Entry:
    """One model and task under the frozen protocol (issue 70)."""
    out = f"head-finders/protocol-1/{name}"
    command = _analysis(
        "finder_protocol", out, "--protocol", PROTOCOL, "--model", model, "--task", task,
        precision="",
    )  # fmt: skip
    return Entry(f"head_finders/protocol-1/{name}", command, str(RUNS / out), pending=True)


def _finder(name: str, methods: str, model: str, tasks: str, *flags: str) -> Entry:
    """A head-finder benchmark of ``model`` on ``tasks`` with ``methods`` (issue 46)."""
    command = _analysis(
        "head_finders", f"head-finders/{name}", "--model", model, "--tasks", tasks,
        "--methods", methods, "--mask-steps", "50", *flags, precision="auto",
    )  # fmt: skip
    return Entry(f"head_finders/{name}", command, str(RUNS / f"head-finders/{name}"), pending=True)


PLAN: tuple[Entry, ...] = (
    Entry(
        "demo/smollm2-135m-instruct-float32",
        f"lens-heads demo --precision fp32 --out {RUNS / 'demo-fp32'}",
        str(RUNS / "demo-fp32"),
        after=f"rm -rf {DEMO_MASK} && ln -s rerun/demo-fp32/training {DEMO_MASK}",
    ),
    Entry(
        "demo/smollm2-135m-instruct-bfloat16",
        f"lens-heads demo --precision bf16 --out {RUNS / 'demo-bf16'}",
        str(RUNS / "demo-bf16"),
        bf16=True,
    ),
    Entry(
        "figure7/smollm2-135m-instruct",
        _analysis("figure7_mask_weights", "figure7", "--mask", DEMO_MASK, precision=""),
        str(RUNS / "figure7"),
    ),
    Entry(
        "figure3/smollm2-135m-instruct-init4",
        _analysis("figure3_trajectories", "figure3-demo", "--mask", DEMO_MASK, precision=""),
        str(RUNS / "figure3-demo"),
    ),
    Entry(
        "figure3/smollm2-135m-instruct-init-1",
        _analysis(
            "figure3_trajectories",
            "figure3-init-1",
            "--init-mean",
            "-1",
            "--steps",
            "400",
            "--lr",
            "0.1",
        ),
        str(RUNS / "figure3-init-1"),
    ),
    Entry(
        "table41/smollm2-135m-instruct",
        _analysis("table41_overlap", "table41", "--words", "40", "--mask", DEMO_MASK, precision=""),
        str(RUNS / "table41"),
    ),
    Entry(
        "figure8_many_words/smollm2-135m-instruct",
        _analysis(
            "figure8_many_words",
            "figure8-words-e2",
            "--mask",
            DEMO_MASK,
            "--words",
            "12",
            "--every",
            "2",
            precision="",
        ),
        str(RUNS / "figure8-words-e2"),
    ),
    Entry(
        "figure4/smollm2-135m-instruct",
        _analysis("figure4_similarity", "figure4", "--mask", DEMO_MASK, precision=""),
        str(RUNS / "figure4"),
    ),
    Entry(
        "figure4/smollm2-135m-instruct-answer-only",
        _analysis("figure4_similarity", "figure4-answer-only", "--answer-end", "none"),
        str(RUNS / "figure4-answer-only"),
    ),
    Entry(
        "figure5/smollm2-135m-instruct",
        _analysis("figure5_sweep_similarity", "figure5", "--mask", DEMO_MASK, precision=""),
        str(RUNS / "figure5"),
    ),
    Entry(
        "figure6/smollm2-135m-instruct",
        _analysis(
            "figure6_alpha",
            "figure6/smollm2-capitalize",
            "--task",
            "capitalize",
            "--mask",
            DEMO_MASK,
            precision="",
        ),
        str(RUNS / "figure6/smollm2-capitalize"),
    ),
    Entry(
        "figure9/smollm2-135m-instruct",
        _analysis(
            "figure8_9_orders",
            "figure8-9",
            "--mask",
            DEMO_MASK,
            "--negative-mask",
            "data/masks/smollm2-135m-instruct/table6-init0/capitalize",
            precision="",
        ),
        str(RUNS / "figure8-9"),
    ),
    Entry(
        "mask_table/smollm2-135m-instruct-bfloat16",
        f"python -m analyses.mask_table --precision bfloat16 --out {RUNS / 'mask-table/smollm2'}",
        str(RUNS / "mask-table/smollm2"),
        bf16=True,
    ),
    Entry(
        "mask_table/smollm2-135m-instruct-answer-only-bfloat16",
        "python -m analyses.mask_table --precision bfloat16 --answer-end none "
        f"--out {RUNS / 'mask-table/smollm2-answer-only'}",
        str(RUNS / "mask-table/smollm2-answer-only"),
        bf16=True,
    ),
    Entry(
        "mask_table/gemma-3-270m-bfloat16",
        "python -m analyses.mask_table --model gemma-3-270m --precision bfloat16 "
        f"--out {RUNS / 'mask-table/gemma'}",
        str(RUNS / "mask-table/gemma"),
        bf16=True,
    ),
    Entry(
        "table5/smollm2-135m-instruct-bfloat16",
        "python -m analyses.table5_mask_stats --masks runs/rerun/mask-table/smollm2 --out "
        + str(RUNS / "table5/smollm2"),
        str(RUNS / "table5/smollm2"),
    ),
    *(
        Entry(
            f"table6/{model}-{name}-init0-bfloat16",
            f"python -m analyses.table6_pathways --model {model} --init-mean 0 --name {name} "
            + (f"--tasks {tasks} " if tasks else "")
            + f"--out {RUNS / 'table6' / f'{model}-{name}'}",
            str(RUNS / "table6" / f"{model}-{name}"),
            bf16=True,
        )
        for model, name, tasks in (
            ("smollm2-135m-instruct", "letter", ""),
            (
                "smollm2-135m-instruct",
                "choice",
                "color_v_animal_3,fruit_v_animal_3,object_v_concept_3",
            ),
            ("gemma-3-270m", "translation", ""),
        )
    ),
    Entry(
        "table7/smollm2-135m-instruct",
        _analysis("table7_attention", "table7"),
        str(RUNS / "table7"),
    ),
    Entry(
        "table1/gemma-3-270m",
        _analysis("table1_translation", "table1/gemma-3-270m", "--pairs", "en-fr,en-de"),
        str(RUNS / "table1/gemma-3-270m"),
    ),
    Entry(
        "figure6/gemma-3-270m-en-fr",
        _analysis(
            "figure6_alpha",
            "figure6/gemma-en-fr",
            "--model",
            "gemma-3-270m",
            "--task",
            "en-fr",
            "--mask",
            str(RUNS / "table1/gemma-3-270m/training_en-fr"),
            "--n-eval",
            "24",
            "--n-select",
            "24",
            precision="",
        ),
        str(RUNS / "figure6/gemma-en-fr"),
    ),
    Entry(
        "figure6/gemma-3-270m-en-de",
        _analysis(
            "figure6_alpha",
            "figure6/gemma-en-de",
            "--model",
            "gemma-3-270m",
            "--task",
            "en-de",
            "--mask",
            str(RUNS / "table1/gemma-3-270m/training_en-de"),
            "--n-eval",
            "24",
            "--n-select",
            "24",
            precision="",
        ),
        str(RUNS / "figure6/gemma-en-de"),
    ),
    Entry(
        "table4/gemma-3-270m",
        _analysis(
            "table4_top_tokens",
            "table4/gemma-3-270m",
            "--masks",
            str(RUNS / "table1/gemma-3-270m"),
        ),
        str(RUNS / "table4/gemma-3-270m"),
    ),
    Entry(
        "table1/gemma-3-270m-en-es-en-zh",
        _analysis("table1_translation", "table1/gemma-3-270m-es-zh", "--pairs", "en-es,en-zh"),
        str(RUNS / "table1/gemma-3-270m-es-zh"),
    ),
    Entry(
        "table1/gemma-3-270m-2-shot",
        _analysis(
            "table1_translation",
            "table1/gemma-3-270m-2-shot",
            "--pairs",
            "en-fr,en-de",
            "--shots",
            "2",
        ),
        str(RUNS / "table1/gemma-3-270m-2-shot"),
    ),
    *(
        Entry(
            f"figure6/gemma-3-270m-{pair}-2-shot",
            _analysis(
                "figure6_alpha",
                f"figure6/gemma-{pair}-2-shot",
                "--model",
                "gemma-3-270m",
                "--task",
                pair,
                "--mask",
                str(RUNS / f"table1/gemma-3-270m-2-shot/training_{pair}"),
                "--n-eval",
                "24",
                "--n-select",
                "24",
                "--shots",
                "2",
                precision="",
            ),
            str(RUNS / f"figure6/gemma-{pair}-2-shot"),
            pending=True,
        )
        for pair in ("en-fr", "en-de")
    ),
    Entry(
        "table1/smollm2-135m-instruct",
        _analysis(
            "table1_translation",
            "table1/smollm2-135m-instruct",
            "--model",
            "smollm2-135m-instruct",
            "--pairs",
            "en-fr",
        ),
        str(RUNS / "table1/smollm2-135m-instruct"),
    ),
    Entry(
        "alignment_heads/gemma-3-270m",
        _analysis("alignment_heads", "alignment-heads/gemma-3-270m", precision=""),
        str(RUNS / "alignment-heads/gemma-3-270m"),
    ),
    Entry(
        "lahis_languages/gemma-3-270m",
        _analysis("lahis_languages", "lahis-languages/gemma-3-270m", precision=""),
        str(RUNS / "lahis-languages/gemma-3-270m"),
    ),
    Entry(
        "soft_mask/gemma-3-270m-en-fr",
        _analysis("soft_mask", "soft-mask/gemma-3-270m-en-fr"),
        str(RUNS / "soft-mask/gemma-3-270m-en-fr"),
    ),
    Entry(
        "alignment_extras/gemma-3-270m",
        f"python scripts/alignment_extras.py --out {RUNS / 'alignment-extras'}",
        str(RUNS / "alignment-extras"),
    ),
    Entry(
        "atlas/smollm2-135m-instruct",
        _analysis(
            "head_atlas",
            "atlas/smollm2",
            "--model",
            "smollm2-135m-instruct",
            "--n-eval",
            "10",
            "--n-reference",
            "20",
            "--masks",
            str(RUNS / "mask-table/smollm2"),
            "--sweep",
            str(RUNS / "demo-fp32/sweep"),
            precision="",
        ),
        str(RUNS / "atlas/smollm2"),
        pending=True,
        files=ATLAS_FILES,
    ),
    Entry(
        "atlas/gemma-3-270m",
        _analysis(
            "head_atlas",
            "atlas/gemma",
            "--model",
            "gemma-3-270m",
            "--task",
            "en-fr",
            "--n-eval",
            "10",
            "--n-reference",
            "20",
            "--masks",
            str(RUNS / "table1/gemma-3-270m"),
            "--scores",
            str(RUNS / "alignment-heads/gemma-3-270m/scores_en-fr"),
            "--language-heads",
            str(RUNS / "lahis-languages/gemma-3-270m/heads"),
            precision="",
        ),
        str(RUNS / "atlas/gemma"),
        files=ATLAS_FILES,
    ),
    Entry(
        "roles/smollm2-135m-instruct-capitalize",
        _roles("roles/smollm2-capitalize", "--task", "capitalize"),
        str(RUNS / "roles/smollm2-capitalize"),
        bf16=True,
        pending=True,
    ),
    Entry(
        "roles/smollm2-135m-instruct-country-capital",
        _roles("roles/smollm2-country-capital", "--task", "country-capital"),
        str(RUNS / "roles/smollm2-country-capital"),
        bf16=True,
        pending=True,
    ),
    Entry(
        "roles/gemma-3-270m-en-fr",
        _roles(
            "roles/gemma-en-fr", "--model", "gemma-3-270m", "--task", "en-fr", steps=100, masks=2
        ),
        str(RUNS / "roles/gemma-en-fr"),
        bf16=True,
        pending=True,
    ),
    Entry(
        "roles/gemma-3-270m-en-fr-2-shot",
        _roles(
            "roles/gemma-en-fr-2-shot",
            "--model",
            "gemma-3-270m",
            "--task",
            "en-fr",
            "--shots",
            "2",
            steps=100,
            masks=2,
        ),
        str(RUNS / "roles/gemma-en-fr-2-shot"),
        bf16=True,
        pending=True,
    ),
    *(_finder(name, FINDER_METHODS, *run) for name, run in FINDER_RUNS.items()),
    *(_finder(name, DIFFERENCE_METHODS, *run) for name, run in DIFFERENCE_RUNS.items()),
    *(_finder(name, CALIBRATED_METHODS, *run) for name, run in CALIBRATED_RUNS.items()),
    *(_finder(name, CALIBRATED_METHODS, *run) for name, run in SEPARATE_CUT_RUNS.items()),
    *(_finder(name, EXACT_METHODS, *run) for name, run in EXACT_RUNS.items()),
    *(_finder(name, EXACT_METHODS, *run) for name, run in MORE_PAIRS_RUNS.items()),
    *(_finder(name, SELECTED_METHODS, *run) for name, run in SELECTED_RUNS.items()),
    *(_protocol(name, *run) for name, run in PROTOCOL_RUNS.items()),
    *(_finder(name, OTHER_METHODS, *run) for name, run in OTHER_RUNS.items()),
    Entry(
        "roles_vs_chg/smollm2-135m-instruct",
        "python -m benchmarks.bench_roles --out runs/rerun/roles-vs-chg",
        str(RUNS / "roles-vs-chg"),
        bf16=True,
        pending=True,
    ),
    *(
        Entry(
            f"roles_vs_chg/smollm2-135m-instruct-timing{suffix}",
            "python -m benchmarks.bench_roles --timing --precision bfloat16,float32 --repeats 3 "
            f"--updates 3 --out runs/rerun/roles-vs-chg-timing{out}",
            str(RUNS / f"roles-vs-chg-timing{out}"),
            bf16=native,
            without_bf16=not native,
            pending=True,
        )  # one timing per kind of CPU: the docs say which tool is faster on each
        for suffix, out, native in (("", "", False), ("-native-bf16", "-native", True))
    ),
    *(
        Entry(
            f"sweep_estimates/{model}-{task}{suffix}",
            _analysis(
                "sweep_estimate_errors",
                f"sweep-estimates/{model}-{task}{suffix}",
                "--model",
                model,
                "--task",
                task,
                "--mask",
                mask,
                *(["--outside-mask"] if suffix else []),
            ),
            str(RUNS / f"sweep-estimates/{model}-{task}{suffix}"),
            pending=True,
        )
        for model, task, mask in (
            ("smollm2-135m-instruct", "capitalize", DEMO_MASK),
            (
                "smollm2-135m-instruct",
                "country-capital",
                str(RUNS / "mask-table/smollm2/country-capital"),
            ),
            ("gemma-3-270m", "en-fr", str(RUNS / "table1/gemma-3-270m/training_en-fr")),
        )
        for suffix in ("", "-outside-mask")
    ),
    Entry(
        "table3/smollm2-135m-instruct",
        _analysis(
            "table3_few_shot",
            "table3/smollm2-135m-instruct",
            "--unseen",
            "country-capital",
            "--per-task",
        ),
        str(RUNS / "table3/smollm2-135m-instruct"),
    ),
)


def native_bf16() -> bool:
    from lens_heads.engine import native_bf16 as native

    return native("cpu")


def run(entry: Entry, results: Path, log: Path) -> bool:
    """Run one entry; copy its numbers (and summary) into ``results``; True when stored."""
    if entry.bf16 and not native_bf16():
        print(f"skip {entry.result}: needs a CPU with native bf16", flush=True)
        return False
    if entry.without_bf16 and native_bf16():
        print(f"skip {entry.result}: times a CPU without native bf16, and this one has it")
        return False
    print(f"run  {entry.result}: {entry.command}", flush=True)
    started = time.monotonic()
    with open(log, "a", encoding="utf-8") as output:
        output.write(f"\n=== {entry.result}: {entry.command}\n")
        output.flush()
        done = subprocess.run(shlex.split(entry.command), cwd=ROOT, stdout=output, stderr=output)
    minutes = (time.monotonic() - started) / 60
    if done.returncode != 0:
        print(f"FAIL {entry.result} after {minutes:.1f} min (exit {done.returncode}; {log})")
        return False
    if entry.after:
        subprocess.run(entry.after, shell=True, cwd=ROOT, check=True)
    target = results / entry.result
    target.mkdir(parents=True, exist_ok=True)
    for name in ("numbers.json", "summary.md"):
        source = ROOT / entry.out / name
        if source.is_file():
            shutil.copyfile(source, target / name)
        elif name == "numbers.json":
            print(f"FAIL {entry.result}: the run wrote no {source}")
            return False
    for name in entry.files:
        source, copy = ROOT / entry.out / name, target / name
        if not source.is_file():
            print(f"FAIL {entry.result}: the run wrote no {source}")
            return False
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, copy)
    record_wall_time(target / "numbers.json", minutes * 60)
    print(f"done {entry.result} in {minutes:.1f} min -> {target}", flush=True)
    return True


def record_wall_time(numbers: Path, seconds: float) -> None:
    """Give a stored run's provenance the command's wall time when the command recorded none
    (the analyses that write ``numbers.json`` themselves time no stages)."""
    import json

    stored = json.loads(numbers.read_text(encoding="utf-8"))
    provenance = stored.get("provenance")
    if isinstance(provenance, dict) and provenance.get("seconds") is None:
        provenance["seconds"] = round(seconds, 1)
        numbers.write_text(json.dumps(stored, indent=2, default=str) + "\n", encoding="utf-8")


def _chosen(part: str, result: str) -> bool:
    """Whether ``--only part`` picks ``result``: its whole name picks that entry alone (so that
    ``head_finders/gemma-3-270m`` is not also its ``-difference`` run), any other part of a
    name every entry containing it.

    >>> _chosen("head_finders/gemma-3-270m", "head_finders/gemma-3-270m-difference")
    False
    >>> _chosen("figure4", "figure4/smollm2-135m-instruct-answer-only")
    True
    """
    if any(part == entry.result for entry in PLAN):
        return part == result
    return part in result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--only",
        action="append",
        help="entries whose result contains this (a result's whole name: that entry alone)",
    )
    parser.add_argument("--list", action="store_true", help="print the plan and stop")
    parser.add_argument("--results", type=Path, default=ROOT / "results")
    args = parser.parse_args(argv)
    plan = [e for e in PLAN if not args.only or any(_chosen(part, e.result) for part in args.only)]
    if args.list:
        for entry in plan:
            needs = "  [bf16]" if entry.bf16 else "  [no native bf16]" if entry.without_bf16 else ""
            print(f"{entry.result}{needs}\n    {entry.command}")
        return 0
    (ROOT / RUNS).mkdir(parents=True, exist_ok=True)
    log = ROOT / RUNS / "log.txt"
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    failed = [entry.result for entry in plan if not run(entry, args.results, log)]
    print(f"rerun: {len(plan) - len(failed)} of {len(plan)} stored; failed or skipped: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
