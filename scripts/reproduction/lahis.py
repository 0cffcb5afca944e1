"""The LAHIS rows of docs/reproduction.md (the repository README, which reports no numbers)."""

from __future__ import annotations

from typing import Any

from reproduction import LEVEL, NOT_COVERED, Load, NotMeasured, Row, cite, holm, pval, table


# -- LAHIS (the repository README; it reports no numbers) ----------------------------------------
def _gradient_checks(load: Load) -> tuple[int, int, float, int]:
    """(rows of the newest compatibility matrix whose mask gradient equals finite differences,
    rows, largest error as a share of the tolerance, model families): a row is a family's tiny
    model in one configuration, and a family can have several (Llama twice, once asking for
    flash attention), so rows and families are counted apart."""
    matrix = load("compatibility")["rows"]
    rows = [row["results"]["gradient"] for row in matrix]
    families = len({row.get("key", index) for index, row in enumerate(matrix)})
    passed = sum(row["status"] == "pass" for row in rows)
    return passed, len(rows), max(row["max_diff"] or 0.0 for row in rows), families


def _gradient_verdict(load: Load) -> str:
    """The README gives the method and no numbers, so nothing of it can be reproduced; what can
    be checked is that the score is the gradient it claims to be, on every family."""
    passed, total, _, families = _gradient_checks(load)
    if passed == total:
        return (
            "not testable against the README (no numbers); the score is the exact mask gradient "
            f"on {passed} of {total} configurations of {families} families, and whether its ranks "
            "matter is the ppl row"
        )
    return (
        f"not reproduced: the mask gradient is wrong on {total - passed} of {total} "
        f"configurations of {families} families"
    )


def _gradient(load: Load) -> str:
    passed, total, worst, families = _gradient_checks(load)
    return (
        f"The mask gradient equals central finite differences on {passed} of {total} "
        f"configurations of {families} model families (largest error {worst:.2f} of the "
        "tolerance) [`results/compatibility`]"
    )


def _language_heads(load: Load) -> str:
    n = load("lahis_languages/gemma-3-270m")
    specific = "; ".join(f"{lang} {' '.join(h)}" for lang, h in n["heads"]["specific"].items())
    general = " ".join(n["heads"]["general"]) or "none"
    return (
        f"Gemma, `--n-docs 16` sentences per language, `--quantile 0.9`: general {general}; "
        f"specific {specific} "
        f"{cite(load, 'lahis_languages/gemma-3-270m')}"
    )


def _language_heads_verdict(load: Load) -> str:
    """Both kinds present (a head above the quantile for at least ``min_languages`` languages,
    and heads above it for one language only): reproduced in kind; one kind: partly; neither:
    not reproduced. Whether the specific heads matter for their language is the ppl row."""
    heads = load("lahis_languages/gemma-3-270m")["heads"]
    general = len(heads["general"])
    specific = sum(bool(found) for found in heads["specific"].values())
    languages = len(heads["specific"])
    word = (
        "reproduced in kind"
        if general and specific
        else "partly"
        if general or specific
        else "not reproduced"
    )
    return (
        f"{word}: {general} general heads, specific heads for {specific} of {languages} "
        "languages (no numbers to compare; the ppl row tests whether they matter)"
    )


SOFT_MASK = "soft_mask/gemma-3-270m-en-fr"
_SOFT_CE = "answer CE (no mask, top heads, random mean, random std)"
_SOFT_CHRF = "chrF++ (no mask, top heads, random mean, random std)"


def _soft_fractions(load: Load) -> dict[str, dict[str, Any]]:
    """Each stored fraction of the soft-mask run: ``{"0.02": numbers, ...}``."""
    n = load(SOFT_MASK)
    return {key.split(" ", 1)[1]: value for key, value in n.items() if key.startswith("fraction ")}


def _soft_mask(load: Load) -> str:
    cells = []
    for fraction, n in _soft_fractions(load).items():
        ce, chrf = n[_SOFT_CE], n[_SOFT_CHRF]
        trained = n["trained parameters"]
        cells.append(
            f"top {fraction} of the heads ({trained} trained multiplier"
            f"{'' if trained == 1 else 's'}, {n['steps']} steps, {n['held-out sentences']} "
            f"held-out sentences): answer CE {ce[0]:.3f} no mask, {ce[1]:.3f} top heads, "
            f"{ce[2]:.3f} ± {ce[3]:.3f} random heads; chrF++ {chrf[0]:.1f} / {chrf[1]:.1f} / "
            f"{chrf[2]:.1f} ± {chrf[3]:.1f}"
        )
    return "Gemma en→fr, " + "; ".join(cells) + f" {cite(load, SOFT_MASK)}"


def _soft_mask_word(ce: list[float], chrf: list[float] | None) -> str:
    _, top, random_mean, random_std = ce
    if not top < random_mean - random_std:  # no gain, or one that random heads give as well
        return "not reproduced"
    if chrf is not None and chrf[1] < chrf[0] - chrf[3]:  # the translation itself got worse
        return "partly"
    return "reproduced"


def _soft_mask_verdict(load: Load) -> str:
    """Does the soft mask on the top heads improve the task? Per fraction: an answer CE below
    the random heads' mean by more than their spread, with chrF++ no lower than without a mask
    (by more than the random heads' chrF++ spread): reproduced; the CE gain with chrF++ falling:
    partly; a CE gain within the random heads' spread, or none: not reproduced (masking random
    heads does as well). The row: the fractions' word when they agree, else partly."""
    words, reasons = [], []
    for fraction, n in _soft_fractions(load).items():
        ce, chrf = n[_SOFT_CE], n.get(_SOFT_CHRF)
        words.append(_soft_mask_word(ce, chrf))
        also = "" if chrf is None else f"; chrF++ {chrf[0]:.1f} → {chrf[1]:.1f}"
        reasons.append(
            f"top {fraction}: CE {ce[0]:.3f} → {ce[1]:.3f} ({words[-1]}; random heads "
            f"{ce[2]:.3f} ± {ce[3]:.3f}{also})"
        )
    word = words[0] if len(set(words)) == 1 else "partly"
    return f"{word}: " + "; ".join(reasons)


def _languages(load: Load) -> dict[str, Any]:
    return load("lahis_languages/gemma-3-270m")


def perplexity_all(load: Load) -> str:
    n = _languages(load)
    paired = {row["masked"]: row for row in n["own versus random"]}
    cells = []
    for row in n["perplexity direction"]:
        test = paired.get(row["masked"], {})
        p = test.get("p (own heads cost more, one-sided Wilcoxon)")
        cells.append(
            f"{row['masked']} ({row['n_heads']} heads): own {row['own_rise']:+.0%}, largest other "
            f"{row['max_other_rise']:+.0%}, random {row['random_rise']:+.0%}"
            + ("" if p is None else f", p = {pval(p)}")
        )
    return (
        "Gemma, perplexity rise of each language with one language's specific heads removed (p: "
        "its own documents rise more than with random heads, paired one-sided): "
        + "; ".join(cells)
        + f" {cite(load, 'lahis_languages/gemma-3-270m')}"
    )


def perplexity_all_verdict(load: Load) -> str:
    """Each language's own heads, removed, raise its perplexity most (a count) and more than
    random heads (one one-sided test per language, Holm over the languages): all of both,
    reproduced; none of either, not reproduced; else partly."""
    n = _languages(load)
    most = n["languages whose own perplexity rose most"]
    tests = {
        str(row["masked"]): row["p (own heads cost more, one-sided Wilcoxon)"]
        for row in n["own versus random"]
    }
    significant = sum(p < LEVEL for p in holm(tests).values())
    total = n["languages"]
    if most == total and significant == total:
        word = "reproduced"
    else:
        word = "not reproduced" if most == 0 and significant == 0 else "partly"
    return (
        f"{word}: own language hurt most for {most} of {total}; its own heads cost more than "
        f"random ones for {significant} of {total} (Holm over the languages, level {LEVEL})"
    )


def transfer_all(load: Load) -> str:
    n = _languages(load)
    cells = []
    for target, rows in n["transfer"].items():
        parts = [
            f"{row['setting']}: off-target {row['off_target']:.2f}, chrF++ {row['chrf_pp']:.1f}"
            for row in rows
        ]
        cells.append(f"en→{target}: " + ", ".join(parts))
    return (
        "Gemma, one demonstration, target heads strengthened and source heads weakened: "
        + "; ".join(cells)
        + f" {cite(load, 'lahis_languages/gemma-3-270m')}"
    )


def _off_target_tests(load: Load) -> dict[tuple[str, str], tuple[int, int, int, float, float]]:
    """Per (target, scaled setting): (off-target outputs without transfer, with it, sentences,
    one-sided Fisher p for fewer, for more), from the stored rates and the sentence count."""
    from scipy.stats import fisher_exact

    n = _languages(load)
    if "transfer sentences" not in n:  # stored before the count was: no counts to test
        command = n.get("provenance", {}).get("command", "")
        raise NotMeasured(
            "lahis_languages/gemma-3-270m", command, "records no sentence count for the transfer"
        )
    sentences = n["transfer sentences"]
    tests = {}
    for target, rows in n["transfer"].items():
        base = next(r for r in rows if r["setting"] == "original")
        before = round(base["off_target"] * sentences)
        for row in rows:
            if row["setting"] == "original":
                continue
            after = round(row["off_target"] * sentences)
            table = [[after, sentences - after], [before, sentences - before]]
            fewer = fisher_exact(table, alternative="less").pvalue
            more = fisher_exact(table, alternative="greater").pvalue
            tests[(target, row["setting"])] = (before, after, sentences, fewer, more)
    return tests


def transfer_all_verdict(load: Load) -> str:
    """The README's direction: fewer off-target outputs with the transfer. Per target and factor
    a one-sided Fisher test on the off-target counts (Holm over the family); every target that
    had off-target output significantly fewer: reproduced; some: partly; none: not reproduced
    (or not testable when no target had any). Rises and chrF++ are reported beside it."""
    n = _languages(load)
    tests = _off_target_tests(load)
    testable = {target for (target, _), (before, *_) in tests.items() if before > 0}
    fewer = holm({f"{t} {s}": test[3] for (t, s), test in tests.items() if t in testable})
    more = holm({f"{t} {s}": test[4] for (t, s), test in tests.items()})
    fewer_targets = {key.split()[0] for key, p in fewer.items() if p < LEVEL}
    rose = sorted(key for key, p in more.items() if p < LEVEL)
    lower_chrf = sum(
        all(r["chrf_pp"] < rows[0]["chrf_pp"] for r in rows if r["setting"] != "original")
        for rows in n["transfer"].values()
    )
    counts = "; ".join(
        f"en→{t} {s}: {before} → {after} of {total}"
        for (t, s), (before, after, total, _, _) in tests.items()
    )
    if not testable:
        word = "not testable on this model: no off-target output to reduce"
    elif len(fewer_targets) == len(testable):
        word = "reproduced"
    else:
        word = "partly" if fewer_targets else "not reproduced"
    return (
        f"{word}: off-target outputs significantly fewer (one-sided Fisher, Holm, {LEVEL}) on "
        f"{len(fewer_targets)} of {len(testable)} targets that had any, significantly more on "
        f"{', '.join(rose) or 'none'} ({counts}); chrF++ lower under every factor on "
        f"{lower_chrf} of {len(n['transfer'])} targets"
    )


LAHIS: list[tuple[str, Row]] = [
    (
        "README: importance",
        Row(
            "One forward and one backward pass rank every head's importance for a language.",
            "No numbers in the README (Aya-23-8B, Llama-3.2-3B, Mistral-7B-v0.1).",
            _gradient,
            "yes in method",
            _gradient_verdict,
        ),
    ),
    (
        "README: language heads",
        Row(
            "Some heads matter for one language, others for many.",
            "No numbers (languages en zh hi vi es, 1,000 documents).",
            _language_heads,
            "no: other languages, `--n-docs 16` sentences",
            _language_heads_verdict,
        ),
    ),
    (
        "README: ppl, ppl-cross",
        Row(
            "Removing a language's heads hurts that language's perplexity most.",
            "No numbers.",
            perplexity_all,
            "no: other languages, `--ppl-docs 20` held-out sentences each, heads at "
            "`--quantile 0.9`",
            perplexity_all_verdict,
        ),
    ),
    (
        "README: head mask",
        Row(
            "A soft mask of about 20 multipliers on language heads improves XQuAD accuracy.",
            "20 parameters; no accuracy given.",
            _soft_mask,
            "no: translation instead of XQuAD, fewer trained multipliers than the paper's",
            _soft_mask_verdict,
        ),
    ),
    (
        "README: attention transfer",
        Row(
            "Strengthening the target language's heads steers generation into the target "
            "language (fewer off-target outputs).",
            "No numbers.",
            transfer_all,
            lambda load: (
                "no: a base model with one demonstration, "
                f"{load('lahis_languages/gemma-3-270m')['transfer sentences']} sentences per target"
            ),
            transfer_all_verdict,
        ),
    ),
    (
        "README: general_head, off_target_lan",
        Row(
            "Experiments on removing language-general heads and on off-target languages.",
            "No numbers.",
            "Not covered as named experiments (`LanguageHeads.general` gives the heads).",
            "",
            NOT_COVERED,
        ),
    ),
]


def lahis_table(load: Load) -> str:
    return table(LAHIS, load)
