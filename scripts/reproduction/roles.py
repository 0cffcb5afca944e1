"""The generated blocks of ``docs/roles.md``: the stored head-role runs and the side-by-side
benchmark with Causal Head Gating 0.1.0, in words and tables from their numbers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reproduction import Load, NotMeasured

#: the stored head-role runs the page shows: name -> result path
ROLE_RUNS = {
    "SmolLM2-135M-Instruct, capitalize": "roles/smollm2-135m-instruct-capitalize",
    "SmolLM2-135M-Instruct, country-capital": "roles/smollm2-135m-instruct-country-capital",
    "Gemma 3 270M, en-fr": "roles/gemma-3-270m-en-fr",
    "Gemma 3 270M, en-fr with two demonstrations": "roles/gemma-3-270m-en-fr-2-shot",
}
CHG_RUN = "roles_vs_chg/smollm2-135m-instruct"
#: the repeated timing of both tools in each precision, one per kind of CPU
CHG_TIMINGS = {
    "without native bf16": "roles_vs_chg/smollm2-135m-instruct-timing",
    "with native bf16": "roles_vs_chg/smollm2-135m-instruct-timing-native-bf16",
}
#: the stored runs of the gradient estimates' errors: name -> result path
ESTIMATE_RUNS = {
    f"{model}, {task}{', ' + part if part else ''}": (
        f"sweep_estimates/{path}-{task}{'-outside-mask' if part else ''}"
    )
    for model, path, task in (
        ("SmolLM2-135M-Instruct", "smollm2-135m-instruct", "capitalize"),
        ("SmolLM2-135M-Instruct", "smollm2-135m-instruct", "country-capital"),
        ("Gemma 3 270M", "gemma-3-270m", "en-fr"),
    )
    for part in ("", "the heads outside the mask")
}
FITS = ("free", "down", "up")


def _chrf(numbers: dict[str, Any], instructed: bool) -> tuple[float, float] | None:
    """chrF++ with all heads and without the interfering ones (sentence tasks), else None."""
    rows = {
        row["heads"]: row
        for row in numbers.get("evaluation", [])
        if row["instructed"] == instructed
        and isinstance(row.get("chrf"), float)
        and row["chrf"] == row["chrf"]  # not NaN
    }
    if {"all heads", "without interfering heads"} <= set(rows):
        return rows["all heads"]["chrf"], rows["without interfering heads"]["chrf"]
    return None


def _interference(numbers: dict[str, Any]) -> str:
    parts = []
    for prompts, effect in numbers.get("removing interfering heads", {}).items():
        before, after = effect["accuracy"]
        ce_before, ce_after = effect["answer CE"]
        verdict = (
            "is at least as accurate with a lower answer CE"
            if effect["better"]
            else "is not both at least as accurate and lower in answer CE"
        )
        given = "with the instruction" if prompts == "instructed" else "on the bare input"
        chrf = _chrf(numbers, prompts == "instructed")
        also = "" if chrf is None else f", chrF++ {chrf[0]:.1f} → {chrf[1]:.1f}"
        parts.append(
            f"{given} the model without its {effect['heads removed']} interfering "
            f"heads {verdict} (accuracy {before:.2f} → {after:.2f}, answer CE {ce_before:.2f} → "
            f"{ce_after:.2f}{also})"
        )
    return "; ".join(parts)


def _held_out(numbers: dict[str, Any]) -> str:
    return f"{numbers['settings']['n_eval']} held-out prompts, no significance test"


def _per_run(
    load: Load, runs: dict[str, str], render: Callable[[str, str, dict[str, Any]], str]
) -> list[str]:
    """``render(name, path, numbers)`` for each run of ``runs`` (name -> result path); a run
    not measured yet is a line that says so, with its command."""
    items = []
    for name, path in runs.items():
        try:
            numbers = load(path)
        except NotMeasured as missing:
            items.append(f"- **{name}**: {missing.cell()}.")
            continue
        items.append(render(name, path, numbers))
    return items


def _roles_line(name: str, path: str, numbers: dict[str, Any]) -> str:
    counts = ", ".join(f"{n} {c}" for c, n in numbers["counts"].items() if n)
    if "no majority" not in numbers["counts"]:  # stored before ties became a class of their own
        counts += " (a stored run from before the no-majority class: a tie counted as the class "
        counts += "named first)"
    settings = numbers["settings"]
    precision = numbers.get("provenance", {}).get("precision", "?")
    text = (
        f"- **{name}** (`results/{path}`, {precision}; {settings['steps']} + "
        f"{settings['pulled_steps']} + {settings['pulled_steps']} updates, "
        f"{settings['n_masks']} masks per fit): {counts}; {_mask_agreement(numbers)}"
    )
    if numbers.get("removing interfering heads"):
        text += f"; on {_held_out(numbers)}, " + _interference(numbers)
    return text + "."


def _mask_agreement(numbers: dict[str, Any]) -> str:
    """How far a run's masks agree with each other, beside chance (the run's kappa rows); a run
    stored before them has only the mean share of masks behind each head's majority, which is
    at least one half whatever the masks do, and says so."""
    rows = {row["compared"]: row for row in numbers.get("agreement between masks (kappa)", [])}
    if not rows:
        return (
            f"on average {numbers['mean agreement']:.0%} of the masks give a head its majority "
            "class (at least half by construction; this run stored no chance level or kappa)"
        )
    parts = []
    for compared, words in (
        ("single mask", "two single masks give a head the same class"),
        ("majority of half the masks", "the majorities of two halves of the masks agree"),
    ):
        if compared in rows:
            row = rows[compared]
            parts.append(
                f"{words} on {row['observed']:.0%} of the heads (chance {row['chance']:.0%}, "
                f"Cohen's kappa {row['kappa']:.2f})"
            )
    return "; ".join(parts)


def roles_runs(load: Load) -> str:
    """One line per stored run: the classes, the agreement of the masks, the settings, and
    what removing the interfering heads does."""
    return "\n".join(_per_run(load, ROLE_RUNS, _roles_line))


def chance_agreement(a: dict[str, int], b: dict[str, int]) -> float:
    """The agreement two labelings of the same heads reach by chance, given only each one's
    class counts: the sum over classes of the products of their shares (the chance of
    ``lens_heads.heads_up.cohen_kappa``, from stored counts: the docs check runs without torch).

    >>> chance_agreement({"x": 50, "y": 50}, {"x": 25, "y": 75})
    0.5
    """
    total_a, total_b = sum(a.values()), sum(b.values())
    return sum(a[c] / total_a * b.get(c, 0) / total_b for c in a)


def kappa(observed: float, chance: float) -> float:
    """Cohen's kappa: how much of the agreement chance leaves is reached."""
    return (observed - chance) / (1 - chance) if chance < 1 else float("nan")


def _like_for_like(numbers: dict, within: dict) -> str:
    """The agreement within each tool beside the agreement between them, compared the same way
    (the run's table when it stored one; else what the stored numbers allow)."""
    rows = numbers.get("agreement (kappa)")
    if not rows:
        return (
            f"Within one tool, two single masks agree on "
            f"{within['lens_heads masks with each other']:.0%} (lens_heads) and "
            f"{within['CHG masks with each other']:.0%} (CHG) of the heads: single masks, not "
            "majorities, so these are not comparable with the figure between the tools, and "
            "the run stored no gates to compare majorities of equal halves; the next run of "
            "`python -m benchmarks.bench_roles` stores them and a kappa table like for like."
        )
    lines = [
        "Like for like: single masks against single masks, and the majority class of half of "
        "one tool's masks against that of the other half (within a tool) or of half of the "
        "other tool's (between); a head whose masks tie has no majority. Chance is the "
        "agreement the compared class shares reach alone; the pairs are the compared pairs "
        "of masks or halves.",
        "",
        "| compared | where | agree | chance | Cohen's kappa | pairs |",
        "|---|---|---|---|---|---|",
    ]
    tools = {"within ours": "within lens_heads", "within theirs": "within CHG"}
    for row in rows:
        lines.append(
            f"| {row['compared']} | {tools.get(row['where'], row['where'])} | {row['observed']:.0%} | "
            f"{row['chance']:.0%} | {row['kappa']:.2f} | {row['pairs']} |"
        )
    return "\n".join(lines)


def roles_vs_chg(load: Load) -> str:
    """The side-by-side benchmark: per fit, the seconds per update of each tool and their
    ratio, the rank correlation of the gates and the held-out answer CE; then memory, the class
    agreement and which models each tool runs on."""
    try:
        numbers = load(CHG_RUN)
    except NotMeasured as missing:
        return f"Causal Head Gating side by side: {missing.cell()}."
    settings = numbers["settings"]
    lines = [
        f"SmolLM2-135M-Instruct, {numbers['task']}, {numbers['training prompts']} training "
        f"prompts, {settings['n_masks']} masks per fit, batch {settings['batch_size']}, "
        f"{settings['steps']} updates per fit, learning rate {settings['lr']:g}, pull "
        f"{settings['pull']:g}, {numbers['autocast']}; CHG {numbers['CHG version']} "
        f"(`results/{CHG_RUN}`).",
        "",
        "| fit | seconds per update: lens_heads | CHG | CHG / lens_heads | Spearman of the gates "
        "| held-out answer CE: lens_heads | CHG |",
        "|---|---|---|---|---|---|---|",
    ]
    for fit in FITS:
        row = numbers["fits"][fit]
        seconds, held = row["seconds per update"], row["held-out answer CE"]
        lines.append(
            f"| {fit} | {seconds['lens_heads']:.2f} | {seconds['CHG']:.2f} | "
            f"{row['CHG / lens_heads time per update']:.2f} | "
            f"{row['spearman of the mean gates']:.2f} | {held['lens_heads']:.3f} | "
            f"{held['CHG']:.3f} |"
        )
    memory = numbers["peak RSS (MiB)"]
    if numbers.get("peak RSS read from"):
        peaks = (
            f"Peak memory: {memory['lens_heads']} MiB (lens_heads) and {memory['CHG']} MiB "
            "(CHG), each process's own."
        )
    else:  # read with ru_maxrss, which Linux carries from the parent into each child
        peaks = (
            "Peak memory is not shown for this run: it was read with ru_maxrss, which on Linux "
            "includes the parent process's resident set, so both tools reported at least the "
            "parent's; the next run reads each process's own."
        )
    classes = numbers["classes"]
    mine = ", ".join(f"{n} {c}" for c, n in classes["lens_heads"].items() if n)
    theirs = ", ".join(f"{n} {c}" for c, n in classes["CHG"].items() if n)
    within = numbers["per-mask class agreement"]
    ratio = numbers["CHG / lens_heads time per update (all fits)"]
    faster = "at least as fast as" if ratio >= 1 else "slower than"
    observed = numbers["class agreement"]
    chance = chance_agreement(classes["lens_heads"], classes["CHG"])
    no_majority = "no majority" in classes["lens_heads"]
    ties = "a tie is no majority" if no_majority else "a tie going to the class named first"
    lines += [
        "",
        f"Over the three fits lens_heads is {faster} CHG per update (CHG takes {ratio:.2f} times "
        f"as long). {peaks} Classes: lens_heads {mine}; CHG {theirs}. The two tools' majority "
        f"classes (each over its {settings['n_masks']} masks, {ties}) agree on {observed:.0%} of "
        f"the heads, where the two tools' class shares alone would agree on {chance:.0%}: "
        f"Cohen's kappa {kappa(observed, chance):.2f}.",
        "",
        _like_for_like(numbers, within),
        "",
        "| model | lens_heads | CHG 0.1.0 |",
        "|---|---|---|",
    ]
    for model, answer in numbers["other models"].items():
        cells = [answer[tool].replace("|", "/") for tool in ("lens_heads", "CHG")]
        lines.append(f"| {model} | {cells[0]} | {cells[1]} |")
    return "\n".join([*lines, "", chg_timing(load)])


def chg_timing(load: Load) -> str:
    """The repeated timings, one per kind of CPU: per precision the median seconds per update of
    each tool (three fits summed), the range of the repeats and which tool is faster by the
    run's rule; then, per CPU, how much longer bfloat16 takes than float32 and the winners."""
    measured, missing = {}, []
    for kind, path in CHG_TIMINGS.items():
        try:
            measured[path] = load(path)
        except NotMeasured as absent:
            missing.append(f"on a CPU {kind}: {absent.cell()}")
    if not measured:
        return "Repeated timing in each precision: " + "; ".join(missing) + "."
    first = next(iter(measured.values()))
    lines = [
        f"Repeated timing ({', '.join(f'`results/{path}`' for path in measured)}): "
        f"{first['repeats']} repeats per tool and precision, each in new processes, "
        f"{first['updates per fit']} updates per fit (each fit's set-up included, so these "
        "seconds per update are not those of the table above). Faster means the slowest repeat "
        "of one tool beats the fastest of the other.",
        "",
        "| CPU | precision | lens_heads: median s per update, three fits summed (range) | CHG | "
        "CHG / lens_heads | faster |",
        "|---|---|---|---|---|---|",
    ]
    where = []
    for numbers in measured.values():
        cpu = numbers["machine"]
        native = "native bf16" if cpu.get("native_bf16") else "no native bf16"
        name = f"{cpu.get('cpu', 'unnamed CPU')} ({native})"
        runs = numbers["precisions"]
        for precision, row in runs.items():
            cells = [
                f"{row['median'][tool]:.2f} "
                f"({row['range'][tool][0]:.2f}-{row['range'][tool][1]:.2f})"
                for tool in ("lens_heads", "CHG")
            ]
            lines.append(
                f"| {name} | {precision} | {cells[0]} | {cells[1]} | "
                f"{row['CHG / lens_heads (medians)']:.2f} | {row['faster']} |"
            )
        winners = ", ".join(f"{row['faster']} in {precision}" for precision, row in runs.items())
        slower = ""
        if {"bfloat16", "float32"} <= set(runs):
            ratios = ", ".join(
                f"{tool} {runs['bfloat16']['median'][tool] / runs['float32']['median'][tool]:.1f}"
                for tool in ("lens_heads", "CHG")
            )
            slower = f"; bfloat16 takes this many times as long as float32 (medians): {ratios}"
        where.append(f"on {name}, faster: {winners}{slower}")
    lines += ["", "Per CPU: " + "; ".join(where + missing) + "."]
    return "\n".join(lines)


def _estimate_words(rows: dict[str, dict[str, Any]], k: int) -> str:
    """Which estimate ranks the steps more like the exact sweep, and how far integrated
    gradients' sum is from the exact total change (which it equals in the limit of many steps)."""
    first, ig = rows["first order"], rows["integrated gradients"]
    better = "integrated gradients" if ig["spearman"] > first["spearman"] else "the first order"
    return (
        f"{better} ranks the steps more like the exact sweep (mean Spearman "
        f"{first['spearman']:.2f} first order, {ig['spearman']:.2f} integrated gradients; top-{k} "
        f"overlap {first[f'top-{k} overlap']:.1f} and {ig[f'top-{k} overlap']:.1f}); the "
        f"integrated gradients' sum misses the exact total change by "
        f"{ig['abs error of the total']:.2f} on average, where a step changes the answer logit "
        f"by {ig['mean abs exact step']:.2f} on average"
    )


def _estimates_block(name: str, path: str, numbers: dict[str, Any]) -> str:
    k = int(numbers["settings"]["k"])
    rows = {row["estimate"]: row for row in numbers["table"]}
    exact_seconds = numbers["seconds"]["exact"]
    lines = [
        f"- **{name}** (`results/{path}`; {numbers['prompts']} held-out prompts, "
        f"{numbers['heads in the order']} heads removed in ascending trained weight, "
        f"{numbers['settings']['ablation']} ablation): {_estimate_words(rows, k)}.",
        "",
        f"  | estimate | Spearman | top-{k} overlap | abs error per step | abs error of the "
        "total | cost per prompt | seconds (exact sweep) |",
        "  |---|---|---|---|---|---|---|",
    ]
    for estimate, row in rows.items():
        lines.append(
            f"  | {estimate} | {row['spearman']:.2f} | {row[f'top-{k} overlap']:.1f} | "
            f"{row['abs error per step']:.3f} | {row['abs error of the total']:.3f} | "
            f"{row['cost per prompt']} | {row['seconds']:.1f} ({exact_seconds:.1f}) |"
        )
    kinds = []
    for estimate, counts in numbers["failure kinds"].items():
        ranked = sorted(counts.items(), key=lambda item: -item[1])
        kinds.append(f"{estimate}: " + ", ".join(f"{n} {kind}" for kind, n in ranked))
    lines += ["", "  What explains each head's error (the larger part): " + "; ".join(kinds)]
    travel = numbers.get("path")
    if travel:
        lines += [
            "",
            f"  Along the integrated gradients' path the answer logit travels "
            f"{travel['path travel']:.1f} on average between ends {travel['path ends apart']:.1f} "
            f"apart ({travel['ratio']:.1f} times as far)"
            + (
                f"; the segment that moves most holds {share:.0%} of that travel."
                if (share := travel.get("largest segment share")) is not None
                else "."
            ),
        ]
    return "\n".join(lines)


def sweep_estimates(load: Load) -> str:
    """Per stored run: the error table of both estimates with their cost and time beside the
    exact sweep's, the comparison in words, and what explains the largest errors."""
    return "\n\n".join(_per_run(load, ESTIMATE_RUNS, _estimates_block))
