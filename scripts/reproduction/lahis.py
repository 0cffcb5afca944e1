"""The LAHIS rows of docs/reproduction.md (the repository README, which reports no numbers)."""

from __future__ import annotations

from typing import Any

from reproduction import LEVEL, NOT_COVERED, Load, Row, cite, pval, table


# -- LAHIS (the repository README; it reports no numbers) ----------------------------------------
def _gradient(load: Load) -> str:
    n = load("compatibility")
    rows = [row["results"]["gradient"] for row in n["rows"]]
    passed = sum(row["status"] == "pass" for row in rows)
    worst = max(row["max_diff"] or 0.0 for row in rows)
    return (
        f"The mask gradient equals central finite differences on {passed} of {len(rows)} model "
        f"families (largest error {worst:.2f} of the tolerance) [`results/compatibility`]"
    )


def _language_heads(load: Load) -> str:
    n = load("lahis_languages/gemma-3-270m")
    specific = "; ".join(f"{lang} {' '.join(h)}" for lang, h in n["heads"]["specific"].items())
    general = " ".join(n["heads"]["general"]) or "none"
    return (
        f"Gemma, 16 sentences per language, quantile 0.9: general {general}; specific {specific} "
        f"{cite(load, 'lahis_languages/gemma-3-270m')}"
    )


def _soft_mask(load: Load) -> str:
    n = load("soft_mask/gemma-3-270m-en-fr")
    ce = n["answer CE (no mask, top head, random mean, random std)"]
    chrf = n["chrF++ (no mask, top head, random mean, random std)"]
    return (
        f"Gemma en→fr, {n['trained parameters']} trained multiplier, {n['steps']} steps, "
        f"{n['held-out sentences']} held-out sentences: answer CE {ce[0]} no mask, {ce[1]} top head, "
        f"{ce[2]} ± {ce[3]} random head; chrF++ {chrf[0]} / {chrf[1]} / {chrf[2]} ± {chrf[3]} "
        f"{cite(load, 'soft_mask/gemma-3-270m-en-fr')}"
    )


def _soft_mask_verdict(load: Load) -> str:
    n = load("soft_mask/gemma-3-270m-en-fr")
    ce = n["answer CE (no mask, top head, random mean, random std)"]
    inside = abs(ce[1] - ce[2]) <= ce[3]
    return "not reproduced here" + (" (inside the random heads' spread)" if inside else "")


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
    n = _languages(load)
    most = n["languages whose own perplexity rose most"]
    significant = sum(
        row["p (own heads cost more, one-sided Wilcoxon)"] < LEVEL for row in n["own versus random"]
    )
    total = n["languages"]
    word = "reproduced" if most == total and significant == total else "partly"
    return (
        f"{word}: own language hurt most for {most} of {total}; its own heads cost more than "
        f"random ones at {LEVEL} for {significant} of {total}"
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


def transfer_all_verdict(load: Load) -> str:
    n = _languages(load)
    fewer = lower_chrf = testable = 0
    for rows in n["transfer"].values():
        base = next(r for r in rows if r["setting"] == "original")
        scaled = [r for r in rows if r["setting"] != "original"]
        if base["off_target"] > 0:
            testable += 1
            fewer += any(r["off_target"] < base["off_target"] for r in scaled)
        lower_chrf += all(r["chrf_pp"] < base["chrf_pp"] for r in scaled)
    if not testable:
        return (
            "not testable on this model: no off-target output to reduce; the transfer lowers "
            f"chrF++ on {lower_chrf} of {len(n['transfer'])} targets"
        )
    return (
        f"{'partly' if fewer else 'not reproduced'}: fewer off-target outputs on {fewer} of "
        f"{testable} targets that had any; chrF++ lower on {lower_chrf} of {len(n['transfer'])}"
    )


LAHIS: list[tuple[str, Row]] = [
    (
        "README: importance",
        Row(
            "One forward and one backward pass rank every head's importance for a language.",
            "No numbers in the README (Aya-23-8B, Llama-3.2-3B, Mistral-7B-v0.1).",
            _gradient,
            "yes in method",
            "reproduced (the method; the README reports no numbers to compare)",
        ),
    ),
    (
        "README: language heads",
        Row(
            "Some heads matter for one language, others for many.",
            "No numbers (languages en zh hi vi es, 1,000 documents).",
            _language_heads,
            "no: other languages, 16 documents",
            "reproduced in kind (no numbers to compare)",
        ),
    ),
    (
        "README: ppl, ppl-cross",
        Row(
            "Removing a language's heads hurts that language's perplexity most.",
            "No numbers.",
            perplexity_all,
            "no: other languages, 20 held-out sentences each, heads at quantile 0.9",
            perplexity_all_verdict,
        ),
    ),
    (
        "README: head mask",
        Row(
            "A soft mask of about 20 multipliers on language heads improves XQuAD accuracy.",
            "20 parameters; no accuracy given.",
            _soft_mask,
            "no: translation instead of XQuAD, 1 parameter instead of 20",
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
            "no: a base model with one demonstration, 20 sentences per target",
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
