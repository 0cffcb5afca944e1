"""The LAHIS rows of docs/reproduction.md (the repository README, which reports no numbers)."""

from __future__ import annotations

from reproduction import NOT_COVERED, Load, Row, cite, table


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
    n = load("language_heads/gemma-3-270m")
    specific = "; ".join(f"{lang} {' '.join(h)}" for lang, h in n["specific"].items())
    return (
        f"Gemma, {n['docs per language']} sentences per language: general {' '.join(n['general'])}; "
        f"specific {specific} {cite(load, 'language_heads/gemma-3-270m')}"
    )


def _perplexity(load: Load) -> str:
    n = load("language_perplexity/gemma-3-270m")
    fr = n["perplexity change removing fr heads (fr, zh, en, random)"]
    en = n["perplexity change removing en heads (en, zh)"]
    return (
        f"Gemma, {n['held-out sentences']} held-out sentences: removing fr's heads fr {fr[0]:+.0%}"
        f" (random heads {fr[3]:+.0%}); removing en's heads en {en[0]:+.0%}, zh {en[1]:+.0%}; own "
        f"language rose most for {n['languages whose own perplexity rose most']} of "
        f"{n['languages']} {cite(load, 'language_perplexity/gemma-3-270m')}"
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


def _transfer(load: Load) -> str:
    n = load("attention_transfer/gemma-3-270m")
    fr = n["en-fr, 1 shot"]
    zh = n["en-zh, 0 shots"]
    chrf = fr["chrF++ (original, x3)"]
    return (
        f"Gemma en→fr, 1 shot, {fr['sentences']} sentences: chrF++ {chrf[0]:.1f} → {chrf[1]:.1f} "
        f"with ×3, off-target {fr['off-target rate (original, x3)'][0]} before and after; en→zh "
        f"zero-shot: off-target {zh['off-target rate (original, x3, x5)'][0]} in every setting "
        f"(the base model copies the input) {cite(load, 'attention_transfer/gemma-3-270m')}"
    )


def _transfer_verdict(load: Load) -> str:
    n = load("attention_transfer/gemma-3-270m")
    rates = n["en-fr, 1 shot"]["off-target rate (original, x3)"][:1]
    rates += n["en-zh, 0 shots"]["off-target rate (original, x3, x5)"][:1]
    chrf = n["en-fr, 1 shot"]["chrF++ (original, x3)"]
    return (
        f"not testable on this model: the off-target rate is {rates[0]:g} or {rates[1]:g} before "
        f"any transfer; the transfer changes chrF++ by {chrf[1] - chrf[0]:+.1f}"
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
            _perplexity,
            "no: 8 sentences, quantile 0.9",
            "partly: on fr and zh, not on en; random heads move perplexity as much",
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
            _transfer,
            "no: no off-target problem to fix in one setting, no instruction following in the other",
            _transfer_verdict,
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
