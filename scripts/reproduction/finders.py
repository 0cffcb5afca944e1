"""The generated block of ``docs/finders.md`` (issue 46): each stored head-finder benchmark's
leaderboard, the random floor beside MIB's, and the page's verdict on the faithfulness-trained
mask, computed from the stored numbers by the rule the page states."""

from __future__ import annotations

from typing import Any

from reproduction import Load, NotMeasured

#: the stored benchmarks the page shows: model -> result path
FINDER_RUNS = {
    "SmolLM2-135M-Instruct": "head_finders/smollm2-135m-instruct",
    "Gemma 3 270M": "head_finders/gemma-3-270m",
}
#: the verdict's rule: the faithfulness-trained mask's CMD is at least this much lower (relative)
#: than integrated gradients' (NAP-IG), in the same run
TARGET = 0.30


def _interval(row: dict[str, Any], key: str) -> str:
    low, high = row.get(f"{key} low"), row.get(f"{key} high")
    if row.get(key) is None:
        return "--"
    if low is None or high is None:
        return f"{row[key]:.3f}"
    return f"{row[key]:.3f} [{low:.3f}, {high:.3f}]"


def _p(value: Any) -> str:
    if value is None:
        return ""
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def verdict(methods: dict[str, dict[str, Any]]) -> str:
    """The rule: ``faithful-mask`` meets the target when its CMD is at least :data:`TARGET`
    (relative) below ``integrated``'s, and the paired comparison says the difference is not
    chance (its Holm-corrected p below the run's level is shown beside it)."""
    mask, integrated = methods.get("faithful-mask"), methods.get("integrated")
    if not mask or not integrated or mask.get("CMD") is None or integrated.get("CMD") is None:
        return "not judged: the run has no faithful-mask or no integrated ranking"
    if integrated["CMD"] <= 0:
        return "not judged: integrated gradients' CMD is 0 (nothing to improve on)"
    gain = (integrated["CMD"] - mask["CMD"]) / integrated["CMD"]
    met = "**met**" if gain >= TARGET else "**not met**"
    direction = "lower" if gain >= 0 else "higher"
    return (
        f"{met}: the trained mask's CMD is {100 * abs(gain):.0f} % {direction} than integrated "
        f"gradients' ({mask['CMD']:.3f} against {integrated['CMD']:.3f}; the target: at least "
        f"{100 * TARGET:.0f} % lower)"
    )


def leaderboard(load: Load) -> str:
    """Per stored model and task: each method's CPR and CMD with their 95 % bootstrap intervals,
    its comparison with the best gradient method (Holm), its cost, the random floor and the
    verdict."""
    blocks = []
    for label, path in FINDER_RUNS.items():
        try:
            numbers = load(path)
        except NotMeasured as missing:
            blocks.append(f"**{label}**: {missing.cell()}.")
            continue
        provenance = numbers.get("provenance", {})
        lines = [
            f"**{label}** (`{provenance.get('command', '?')}`; source "
            f"{provenance.get('code', {}).get('source', '?')}; "
            f"{provenance.get('machine', {}).get('cpu', '?')}).",
        ]
        for task, methods in numbers["tasks"].items():
            methods = dict(methods)
            pairs = methods.pop("pairs", None)
            lines += [
                "",
                f"*{task}* ({pairs} held-out pairs; lower CMD is better; p: paired bootstrap of "
                "the CMD difference with the best gradient method, Holm across the task's methods)",
                "",
                "| method | CPR | CMD | CMD - best gradient | p (Holm) | seconds | forwards |",
                "|---|---|---|---|---|---|---|",
            ]
            for name, row in methods.items():
                versus = row.get("vs gradient")
                lines.append(
                    f"| {name} | {_interval(row, 'CPR')} | {_interval(row, 'CMD')} "
                    f"| {'' if versus is None else f'{versus:+.3f}'} | {_p(row.get('p (Holm)'))} "
                    f"| {row['seconds']:.1f} | {int(row['forwards'] or 0)} |"
                )
            randoms = [row["CMD"] for name, row in methods.items() if name.startswith("random-")]
            if randoms:
                lines += [
                    "",
                    f"Random rankings ({len(randoms)} seeds): CMD {min(randoms):.3f} to "
                    f"{max(randoms):.3f} (MIB's leaderboard puts random near 0.7 at the edge "
                    "level; a sanity line, not a like-for-like number).",
                ]
            lines += [
                "",
                f"Verdict (faithful-mask against integrated gradients): {verdict(methods)}.",
            ]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)
