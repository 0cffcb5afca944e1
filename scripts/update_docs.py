"""Write every number-bearing block of the README and the docs from the stored results.

A generated block sits between two markers in a markdown file::

    <!-- generated: demo_table -->
    ...written by this script...
    <!-- end generated -->

and its content is the block's function (``BLOCKS``) applied to the stored results under
``results/`` (each a ``numbers.json`` that records its command, code version, machine and
precision). ``python scripts/update_docs.py`` rewrites the blocks; ``--check`` writes nothing
and exits 1 when a block differs from what its results give, or cites a result that is missing
(the test suite runs it, so a number typed by hand into a block fails the tests).

Numbers inside sentences are inline snippets (``<!-- value PATH KEY... -->``, see
:mod:`prose_numbers`), rewritten the same way; ``--check`` also reports every measured-looking
number typed in prose or in a notebook's markdown, and every notebook that holds outputs. A
transcribed record (``source``: numbers once typed by hand, no run behind them) cannot be cited:
a block that loads one fails, and a row of ``docs/reproduction.md`` says "not yet measured" with
the command that would measure it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
import prose_numbers  # noqa: E402
from prose_numbers import documents, hand_typed_tables, typed_in_prose  # noqa: E402
from reproduction import (  # noqa: E402
    NotMeasured,
    alignment,
    devices,
    finders,
    heads_up,
    lahis,
    roles,
    scale,
)
from reproduction.heads_up_results import DEMO_RUNS  # noqa: E402

RESULTS = ROOT / "results"
_BLOCK = re.compile(
    r"(<!-- generated: (?P<name>[\w.-]+)(?: (?P<arg>[\w./-]+))? -->\n)(?P<body>.*?)"
    r"(?P<end><!-- end generated -->)",
    re.S,
)


class ResultMissing(LookupError):
    """A block cites a stored result that is not in ``results/``."""


def load(path: str, results: Path) -> dict[str, Any]:
    """The stored ``results/<path>/numbers.json`` (``compatibility``: the matrix of the newest
    stored transformers release); :class:`~reproduction.NotMeasured` for a transcription."""
    if path == COMPATIBILITY:
        return compatibility_runs(results)[-1]
    file = results / path / "numbers.json"
    if not file.is_file():
        planned = _planned().get(path)
        if planned is not None:  # in the re-run plan, not run yet: the page says so
            raise NotMeasured(path, planned, "has not been run yet")
        raise ResultMissing(f"{file.relative_to(results.parent)} is missing")
    numbers = json.loads(file.read_text(encoding="utf-8"))
    if numbers.get("source"):
        command = numbers.get("provenance", {}).get("command", "")
        raise NotMeasured(path, command)
    return numbers


def _planned() -> dict[str, str]:
    """Result path -> command of the entries of ``scripts/rerun_results.py``'s plan that the
    docs cite before their first run (``pending``)."""
    from rerun_results import PLAN

    return {entry.result: entry.command for entry in PLAN if entry.pending}


def libraries(machine: dict[str, Any]) -> str:
    """The library versions a machine record names (issue 32), as the docs print them."""
    found = machine.get("libraries") or {}
    names = ("torch", "transformers", "transformer-lens", "lens_heads")
    return ", ".join(f"{name} {found[name]}" for name in names if name in found)


def _machine(numbers: dict[str, Any]) -> str:
    machine = numbers.get("machine") or {}
    bf16 = "native bf16" if machine.get("native_bf16") else "no native bf16"
    versions = libraries(machine)
    versions = f"; {versions}" if versions else ""
    threads = machine.get("threads", "?")
    plural = "" if threads == 1 else "s"
    return f"{machine.get('cpu', 'unknown CPU')} ({bf16}, {threads} thread{plural}{versions})"


# -- blocks ---------------------------------------------------------------------------------------
_DEMO_COLUMNS = ("heads", "accuracy", "exact match", "echo rate", "answer CE (paper: PPL)")


def demo_table(results: Path) -> str:
    """The demo's settings table for each stored run, with its CPU and precision."""
    lines = [
        "| run | setting | heads | accuracy (paper's rule) | exact match | echo rate "
        "| answer CE (paper: PPL) | ended at end-of-turn |",
        "|---|---|---|---|---|---|---|---|",
    ]
    notes = []
    for path in DEMO_RUNS:
        numbers = load(path, results)
        run = f"{numbers['precision']}, {_machine(numbers)}"
        number = "{:g}" if numbers.get("source") else "{:.3f}"  # transcribed: as printed there
        ended = numbers.get("ended_at_end_of_turn", {})
        keys = {"Original": "original", "w/ instruction": "instruction"}
        keys |= {"w/ random M": "random", "w/ M": "mask"}
        for label, row in numbers["evaluation"].items():
            cells = [f"{int(row['heads'])}"]
            for column in _DEMO_COLUMNS[1:]:
                std = row.get(f"{column} std")
                text = number.format(row[column])
                cells.append(text if std is None else f"{text} ± {number.format(std)}")
            fraction = ended.get(keys.get(label, ""))
            cells.append("" if fraction is None else number.format(fraction))
            lines.append(f"| {run} | {label} | " + " | ".join(cells) + " |")
            run = '"'
        if numbers.get("source"):
            notes.append(f"{numbers['precision']}: {numbers['source']}")
    text = "\n".join(lines)
    return text + ("\n\n" + "\n".join(f"- {note}" for note in notes) if notes else "")


def demo_summary(results: Path) -> str:
    """One paragraph on the float32 demo run: what the mask keeps and how its outputs end."""
    numbers = load(DEMO_RUNS[0], results)
    n = numbers["n_eval"]
    mask = numbers["evaluation"]["w/ M"]
    ended = numbers["ended_at_end_of_turn"]["mask"]
    training = numbers["training"]
    return (
        f"On {_machine(numbers)}, in {numbers['precision']} (`{numbers['command']}`), the mask "
        f"keeps {training['heads_kept']} of {training['heads_total']} heads after "
        f"{training['steps']} steps ({training['seconds']:.0f} s of training). Under it "
        f"{round(mask['exact match'] * n)} of {n} held-out words are capitalized exactly and "
        f"{round(mask['echo rate'] * n)} echoed unchanged; {round(ended * n)} of {n} masked "
        "outputs end at the end-of-turn token."
    )


COMPATIBILITY = "compatibility"
_COMPATIBILITY_COLUMNS = devices.MATRIX_CHECKS


def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def compatibility_runs(results: Path) -> list[dict[str, Any]]:
    """Every stored matrix (one per transformers release), oldest release first."""
    from packaging.version import Version

    files = sorted((results / COMPATIBILITY).glob("transformers-*/numbers.json"))
    if not files:
        raise ResultMissing(f"{COMPATIBILITY}/transformers-*/numbers.json is missing")
    runs = [json.loads(file.read_text(encoding="utf-8")) for file in files]
    pinned = _pinned_torch()

    def order(run: dict[str, Any]) -> tuple[Version, bool, Version]:
        versions = run["versions"]  # CI's own torch last: the newest run is CI's environment
        torch = versions["torch"]
        return Version(versions["transformers"]), torch == pinned, Version(torch)

    return sorted(runs, key=order)


def _pinned_torch() -> str:
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith("torch=="):
            return line.strip().split("==", 1)[1]
    return ""


def _cell(results: list[tuple[str, dict[str, Any]]]) -> str:
    """``pass`` when every environment passes, else each environment's verdict."""
    if all(result["status"] == "pass" for _, result in results):
        return "pass"
    return "; ".join(
        f"{version}: " + ("pass" if r["status"] == "pass" else f"**{r['status']}**: {r['detail']}")
        for version, r in results
    )


def compatibility_table(results: Path) -> str:
    """The matrix of family x check (``scripts/compatibility_matrix.py``) in every stored
    environment (``scripts/library_envs.py matrix``: the lowest and the newest transformers of
    the tested range), with each environment's versions."""
    runs = compatibility_runs(results)
    header = [
        "family",
        "papers' models",
        "kept in the tiny model",
        *_COMPATIBILITY_COLUMNS.values(),
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    rows = {(row["key"], row["attention"]): row for row in runs[-1]["rows"]}
    for key, row in rows.items():
        cells = [row["name"], row["papers"], row["peculiarity"]]
        for check in _COMPATIBILITY_COLUMNS:
            per_run = []
            for run in runs:
                [found] = [r for r in run["rows"] if (r["key"], r["attention"]) == key]
                versions = run["versions"]
                label = versions["transformers"]
                if versions["torch"] != _pinned_torch():
                    label += f" with torch {versions['torch']}"
                per_run.append((label, found["results"][check]))
            cells.append(_cell(per_run))
        lines.append("| " + " | ".join(map(_escape, cells)) + " |")
    environments = [
        "| transformers | transformer-lens | torch | cells passed | largest logit difference "
        "| largest pattern difference | mask gradient (of tolerance) | machine | source |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        summary, versions = devices.matrix_summary(run), run["versions"]
        environments.append(
            f"| {versions['transformers']} | {versions['transformer-lens']} | {versions['torch']} "
            f"| {summary['passed']} of {summary['cells']} | {summary['logits']:.1e} "
            f"| {summary['pattern']:.1e} | {summary['gradient']:.2f} | {_machine(run)} "
            f"| {run['code']['source']} |"
        )
    return (
        "\n".join(lines)
        + "\n\nA cell says `pass` when the check passes under every release below; otherwise "
        + "it gives each release's verdict. The environments (`python scripts/library_envs.py "
        + "matrix`; logit differences relative to their size):\n\n"
        + "\n".join(environments)
    )


def compatibility_unsupported(results: Path) -> str:
    """The error a user gets for an architecture TransformerLens has no adapter for."""
    example = compatibility_runs(results)[-1]["unsupported_example"]
    return f"```text\nUnsupportedModelError: {example['error']}\n```"


def readme_mask_table(results: Path) -> str:
    """The README's one-line summary of the 18-task mask table."""
    from reproduction.heads_up_results import MASK_TABLE, MASK_TABLE_ANSWER_ONLY

    n = load(MASK_TABLE, results)
    goals = n["goals"]
    try:
        other = load(MASK_TABLE_ANSWER_ONLY, results)["goals"]["accuracy goal met"]
        answer_only = f"{other} with answer-only targets, `results/{MASK_TABLE_ANSWER_ONLY}`"
    except NotMeasured as missing:
        answer_only = f"answer-only targets {missing.cell()}"
    return (
        f"SmolLM2, {goals['tasks']} word tasks, {n['steps']} steps each: masks beat the original "
        f"model and random masks by at least 0.3 accuracy on {goals['accuracy goal met']} tasks "
        f"with the end-of-turn target ({answer_only}; {numbers_source(n)}, `results/{MASK_TABLE}`)."
    )


def readme_alignment(results: Path) -> str:
    """The README's sentence on token alignment heads: sparsity, then the ablation's verdict at
    the paper's share of heads (the one the page judges) before the larger ablation."""
    path = "alignment_heads/gemma-3-270m"
    n = load(path, results)
    share = n["activity mean"]["alignment heads"]
    rows = {(r["heads ablated"], r["setting"]): r for r in n["ablation"]}
    verdict = alignment.ablation_ours_verdict(lambda p: load(p, results))
    word = verdict.split(" (", 1)[0]
    at_share, largest = alignment.paper_k(n), max(heads for heads, _ in rows)
    paper_heads = round(alignment.PAPER_SHARE * alignment.LLAMA_HEADS)

    def cut(k: int) -> str:
        base, ablated, rand = rows[(k, "unmasked")], rows[(k, "ablated")], rows[(k, "random")]
        return (
            f"removing the top {k} takes en→fr chrF++ from {base['chrf']:.1f} to "
            f"{ablated['chrf']:.1f}, against {rand['chrf']:.1f} ± {rand['chrf std']:.1f} for {k} "
            "random other heads"
        )

    return (
        f"On Gemma 3 270M (20 ordered pairs of the built-in corpus) {share:.1%} of the heads pass "
        f"0.1 on average. At the paper's share of heads ({at_share} of {n['heads']}, as its "
        f"{paper_heads} of Llama-3.1-8B's {alignment.LLAMA_HEADS:,}) its ablation result is "
        f"**{word}**: {cut(at_share)}. At {largest / n['heads']:.1%} of the heads, "
        f"{cut(largest)} ({numbers_source(n)}; the paper's numbers beside these are in "
        "docs/reproduction.md)."
    )


def notebook_claims(results: Path) -> str:
    """The sentence of docs/reproduction.md on what each notebook does with the claim it
    illustrates (issue 70, item 11), read from the notebooks themselves
    (:func:`prose_numbers.notebook_stance`), so it stays true when one changes."""
    notebooks = sorted((results.parent).glob(prose_numbers.NOTEBOOKS))
    tours = [path.stem for path in notebooks if path.stem in prose_numbers.WITHOUT_CLAIM]
    stances = {
        path.stem: prose_numbers.notebook_stance(path)
        for path in notebooks
        if path.stem not in tours
    }

    def named(stance: str | None) -> list[str]:
        return [f"`{name}`" for name, found in stances.items() if found == stance]

    asserting, showing, neither = named("asserts"), named("shows"), named(None)
    text = (
        f"The {len(stances)} notebooks in `notebooks/` run the analyses on small settings; CI "
        "executes every one, and the committed files carry no outputs, so none can go stale. "
        f"{len(asserting)} assert the claim they illustrate from their own numbers, in a code "
        f"cell marked `{prose_numbers.CLAIM_MARK}`: {', '.join(asserting) or 'none'}. "
        f"{len(showing)} show without judging, because one word, one mask or one training run "
        f'cannot settle the claim: each says so ("{prose_numbers.WITHOUT_JUDGING}") in a '
        "markdown cell and in a printed line, and its claim's verdict is in the rows above, "
        "computed from the stored runs: "
        f"{', '.join(showing) or 'none'}."
    )
    if neither:
        text += f" {len(neither)} do neither yet: {', '.join(neither)}."
    for name in tours:
        text += f" `{name}` {prose_numbers.WITHOUT_CLAIM[name]}."
    return text


#: the stored head atlases (issue 35), by the name the docs give the model
ATLASES = {
    "SmolLM2-135M-Instruct": "atlas/smollm2-135m-instruct",
    "Gemma 3 270M": "atlas/gemma-3-270m",
}


def _top_heads(successor: dict[str, Any]) -> str:
    """Who holds the top successor score: every head tied at it where the run stored them, else
    the first (atlases stored before the ties were kept)."""
    tied = successor.get("heads at the top score")
    if tied is None:
        return f"first at it: {successor['best head']}; ties were not stored"
    return ", ".join(tied) if len(tied) <= 3 else f"{len(tied)} heads tie at it"


def _atlas_answers(questions: dict[str, Any]) -> list[str]:
    parts = []
    if s := questions.get("successor"):
        parts.append(
            f"the top OV successor score is {s['score']:.2f} ({_top_heads(s)}) against "
            f"{s['chance']:.2f} at chance ({s['pairs']} single-token pairs; "
            f"{s['heads at least twice chance']} heads reach twice chance)"
        )
    if k := questions.get("masks keep the induction heads"):
        parts.append(
            f"the masks keep the top induction heads ({', '.join(k['top induction heads'])}) in "
            f"{k['share of masks keeping them (mean)']:.0%} of cases against "
            f"{k['share keeping the other heads (mean)']:.0%} for the other heads (one-sided p = "
            f"{k['p (kept more often, one-sided Mann-Whitney)']:.2g})"
        )
    if a := questions.get("alignment heads are language-specific heads"):
        parts.append(
            f"{a['in both']} of the top {len(a['top translation-score heads'])} translation-score "
            f"heads {'is a' if a['in both'] == 1 else 'are'} LAHIS language-specific "
            f"head{'' if a['in both'] == 1 else 's'}, {a['expected at random']:.1f} expected at "
            "random (p = "
            f"{a['p (overlap at least this, hypergeometric)']:.2g})"
        )
    if o := questions.get("OV en→fr predicts the translation score"):
        parts.append(
            f"the weights-only en→fr readout ranks heads like the translation score with "
            f"Spearman {o['spearman']:.2f} over {o['heads']} heads ({o['pairs']} word pairs; MAPS "
            f"reports {o['MAPS on Llama-3.1-8B']} on Llama-3.1-8B)"
        )
    return parts


def atlas_questions(results: Path) -> str:
    """Per stored atlas, the cross-line questions it answers, in words from its numbers."""
    lines = []
    for name, path in ATLASES.items():
        try:
            numbers = load(path, results)
        except NotMeasured as missing:
            lines.append(f"- **{name}**: {missing.cell()}.")
            continue
        answers = _atlas_answers(numbers["questions"]) or ["no cross-line question applies"]
        source = f"`results/{path}`, {numbers_source(numbers)}"
        lines.append(
            f"- **{name}** ({numbers['heads']} heads; {source}): "
            + "; ".join(answers)
            + f". {_atlas_page_link(results, path)}"
        )
    return "\n".join(lines)


def _atlas_page_link(results: Path, path: str) -> str:
    """Links to a stored atlas's page and per-head table, or how to store them (the atlases
    run before pages were stored kept only their numbers)."""
    if (results / path / "atlas.html").is_file() and (results / path / "heads.csv").is_file():
        return (
            f"Open [its page](../results/{path}/atlas.html) or [its per-head table]"
            f"(../results/{path}/heads.csv)."
        )
    return (
        f"Its page is not stored yet (`python scripts/rerun_results.py --only {path}` stores it)."
    )


def atlas_agreement(results: Path) -> str:
    """Per stored atlas, the pairs of measures that agree after Holm and how many pairs do."""
    lines = []
    for name, path in ATLASES.items():
        try:
            rows = load(path, results)["agreement"]
        except NotMeasured as missing:
            lines.append(f"**{name}**: {missing.cell()}.")
            continue
        tested = [r for r in rows if r.get("p (Holm)") is not None]
        agree = [r for r in tested if r.get("agree")]
        lines.append(
            f"**{name}**: {len(agree)} of {len(tested)} pairs of measures agree (positive "
            "Spearman, Holm p below 0.01)."
        )
        if agree:
            lines += [
                "",
                "| first | second | Spearman [95 % interval] | Holm p | top-k overlap (random) |",
                "|---|---|---|---|---|",
            ]
            lines += [
                f"| {r['first']} | {r['second']} | {r['spearman']:.2f} [{r['ci low']:.2f}, "
                f"{r['ci high']:.2f}] | {_holm_cell(r)} | {r['top-k overlap']} "
                f"({r['random overlap']:.1f}) |"
                for r in sorted(agree, key=lambda r: -r["spearman"])
            ]
        lines.append("")
    return "\n".join(lines).rstrip("\n")


def _holm_cell(row: dict[str, Any]) -> str:
    """A pair's Holm p; "≤" where its permutation p is at the floor of its permutations (no
    permuted correlation reached the observed one: the p is a bound, not a value)."""
    floor = row["p"] <= 1.0 / (row["permutations"] + 1) * (1 + 1e-9)
    return f"{'≤ ' if floor else ''}{row['p (Holm)']:.2g}"


BENCHMARKS = "benchmarks"


def benchmark_table(results: Path) -> str:
    """Every stored benchmark: both timings, the ratio against its target, whether the two sides
    gave the same outputs, and the machine (CPU, native bf16, the precision training used)."""
    summary = load(BENCHMARKS, results)
    lines = [
        "| benchmark | baseline → candidate | ratio | target | met | same outputs |",
        "|---|---|---|---|---|---|",
    ]
    machines = []
    for entry in summary["results"]:
        sense = "≥" if entry.get("higher_is_better") else "≤"
        if entry.get("higher_is_better"):
            passed = entry["ratio"] >= entry["target"]
        else:
            passed = entry["ratio"] <= entry["target"]
        passed = passed and entry.get("same_outputs") is not False
        same = {True: "yes", False: "**no**", None: "—"}[entry.get("same_outputs")]
        timing = f"{entry['baseline_s']:.2f} s → {entry['candidate_s']:.2f} s"
        ratio = f"{entry['ratio']:.2f}" if entry["ratio"] >= 0.1 else f"{entry['ratio']:.1g}"
        if "(MiB" in entry["name"]:  # a memory bound: the ratio is MiB, the candidate the run
            timing, ratio = f"(the run took {entry['candidate_s']:.0f} s)", f"{ratio} MiB"
        lines.append(
            f"| {_escape(entry['name'])} | {timing} | {ratio} | {sense} {entry['target']:g} | "
            f"{'yes' if passed else '**no**'} "
            f"| {same} |"
        )
        machine = entry.get("machine") or summary.get("machine") or {}
        if machine not in machines:
            machines.append(machine)
    described = "; ".join(
        f"{_machine({'machine': m})}, training precision "
        f"{'bfloat16' if m.get('native_bf16') else 'float32'}"
        for m in machines
    )
    codes = sorted(
        {(e.get("code") or summary.get("code", {})).get("source", "?") for e in summary["results"]}
    )
    code = ", ".join(codes)
    return "\n".join(lines) + (
        f"\n\nMeasured on {described} (source {code}); both sides of each ratio were timed in the "
        "same run on that machine. Stored result: "
        "`results/benchmarks/numbers.json`."
    )


def results_index(results: Path) -> str:
    """Every stored result: its command, machine, library versions, precision, wall time and
    whether transcribed."""
    lines = [
        "| result | command | machine | libraries | precision | wall time | kind |",
        "|---|---|---|---|---|---|---|",
    ]
    for file in sorted(results.glob("**/numbers.json")):
        numbers = json.loads(file.read_text(encoding="utf-8"))
        provenance = numbers.get("provenance", {})
        command = provenance.get("command") or numbers.get("command", "")
        machine = provenance.get("machine") or numbers.get("machine") or {}
        precision = provenance.get("precision") or numbers.get("precision", "")
        seconds = provenance.get("seconds")
        wall = f"{seconds / 60:.1f} min" if seconds else ""
        kind = "transcribed" if numbers.get("source") else "stored run"
        where = file.parent.relative_to(results).as_posix() or "."
        gpu = f" + {machine['cuda']}" if machine.get("cuda") else ""
        cells = [f"`{where}`", f"`{command}`" if command else "", machine.get("cpu", "") + gpu]
        cells += [libraries(machine) or "not recorded", precision or "", wall, kind]
        lines.append("| " + " | ".join(_escape(str(c)) for c in cells) + " |")
    return "\n".join(lines)


def numbers_source(numbers: dict[str, Any]) -> str:
    """Where a stored result came from, for a sentence: its precision, and transcribed or not."""
    precision = numbers.get("precision") or numbers.get("provenance", {}).get("precision", "?")
    return f"{precision}, transcribed" if numbers.get("source") else precision


def _pages(render: Callable[..., str]) -> Callable[[Path], str]:
    """A block of the :mod:`reproduction` package, its results read from ``results``."""

    def block(results: Path) -> str:
        return render(lambda path: load(path, results))

    block.__doc__ = render.__doc__
    return block


BLOCKS: dict[str, Callable[[Path], str]] = {
    "readme_mask_table": readme_mask_table,
    "readme_alignment": readme_alignment,
    "notebook_claims": notebook_claims,
    "benchmark_table": benchmark_table,
    "results_index": results_index,
    "reproduction_heads_up": _pages(heads_up.heads_up_table),
    "reproduction_alignment": _pages(alignment.alignment_table),
    "reproduction_lahis": _pages(lahis.lahis_table),
    "demo_table": demo_table,
    "demo_summary": demo_summary,
    "compatibility_table": compatibility_table,
    "compatibility_unsupported": compatibility_unsupported,
    "atlas_questions": atlas_questions,
    "atlas_agreement": atlas_agreement,
    "roles_runs": _pages(roles.roles_runs),
    "roles_vs_chg": _pages(roles.roles_vs_chg),
    "sweep_estimates": _pages(roles.sweep_estimates),
    "gpu_check": devices.gpu_check,
    "scale_cpu": scale.cpu_table,
    "scale_gpu": scale.gpu_table,
    "scale_gpu_plan": scale.gpu_plan,
    "finders_leaderboard": _pages(finders.leaderboard),
    "finders_difference": _pages(finders.difference_table),
    "finders_calibrated": _pages(finders.calibrated_table),
    "finders_separate_cut": _pages(finders.separate_cut_table),
    "finders_exact": _pages(finders.exact_table),
    "finders_more_pairs": _pages(finders.more_pairs_table),
    "finders_selected": _pages(finders.selected_table),
    "finders_other": _pages(finders.other_finders),
    "readme_finders": _pages(finders.protocol_summary),
    "finders_protocol": _pages(finders.protocol_table),
    "finders_protocol_settings": _pages(finders.protocol_settings),
    "finders_development": _pages(finders.readme_summary),
}


# -- the command ----------------------------------------------------------------------------------
def render(text: str, results: Path, where: str = "") -> tuple[str, list[str]]:
    """``text`` with every generated block rewritten; the names of the blocks that changed."""
    changed: list[str] = []

    def replace(match: re.Match[str]) -> str:
        name, arg = match["name"], match["arg"]
        if arg is None and name in BLOCKS:
            body = BLOCKS[name](results)
        else:
            raise KeyError(
                f"{where}: unknown generated block {match[1].strip()}; known: {sorted(BLOCKS)}"
            )
        body = body.rstrip("\n") + "\n"
        if body != match["body"]:
            changed.append(f"{where}: {name}" + (f" {arg}" if arg else ""))
        return match[1] + body + match["end"]

    text = _BLOCK.sub(replace, text)
    text, values = prose_numbers.render_values(text, lambda path: load(path, results))
    return text, changed + [f"{where}: value {spec}" for spec in values]


def update(root: Path = ROOT, results: Path | None = None, *, check: bool = False) -> list[str]:
    """Rewrite (or with ``check`` only compare) every generated block under ``root``; the blocks
    that differ from their results."""
    results = results or root / "results"
    stale: list[str] = []
    failures: list[Exception] = []
    for path in documents(root):  # every document, so that one failing leaves the others done
        text = path.read_text(encoding="utf-8")
        try:
            new, changed = render(text, results, str(path.relative_to(root)))
        except (ResultMissing, NotMeasured, KeyError, prose_numbers.SnippetError) as error:
            failures.append(error)
            continue
        stale += changed
        if changed and not check:
            path.write_text(new, encoding="utf-8")
    if failures:  # the first, with the others named in its message
        first = failures[0]
        if len(failures) > 1:
            first.args = (f"{first}; and: " + "; ".join(map(str, failures[1:])),)
        raise first
    return stale


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 if stale")
    args = parser.parse_args(argv)
    failed = False
    try:
        stale = update(check=args.check)
    except (ResultMissing, NotMeasured, KeyError, prose_numbers.SnippetError) as error:
        print(f"error: {error}", file=sys.stderr)
        stale, failed = [], True
    for block in stale:
        print(("stale: " if args.check else "updated: ") + block)
    typed = hand_typed_tables(ROOT)
    for table in typed:
        print(table + " (store it under results/ and cite it with a generated block)")
    prose = typed_in_prose(ROOT)
    for line in prose:
        print(line + " (an inline value snippet, a paper snippet, code, or leave it out)")
    stanceless = prose_numbers.notebooks_without_a_stance(ROOT)
    for line in stanceless:
        print(line)
    return 2 if failed else 1 if (args.check and stale) or typed or prose or stanceless else 0


if __name__ == "__main__":
    raise SystemExit(main())
