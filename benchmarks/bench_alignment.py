"""Token alignment heads benchmarks (issue 13): teacher-forced translation scores and TRater,
batched vs one at a time, on Gemma 3 270M; greedy-decoding scores' wall time beside teacher
forcing; peak memory of batched vs single-pair scoring (separate processes)."""

from __future__ import annotations

import json
import subprocess
import sys

from benchmarks.harness import BenchmarkResult, compare, time_call

PAIRS = 100

#: run in a child process; the peaks are its own (VmHWM: ru_maxrss would keep the parent's)
_MEMORY_SCRIPT = """
import json, lens_heads as lh
from benchmarks.harness import peak_rss_mb
model = lh.load_model("gemma-3-270m")
lh.translation_scores(model, "en-fr", n=1)  # warm up: lazily built buffers
base = peak_rss_mb()
lh.translation_scores(model, "en-fr", n={n}, batch_size={batch})
peak = peak_rss_mb()
print(json.dumps({{"base": base, "peak": peak}}))
"""


def _peak_rss(n: int, batch: int) -> dict[str, float]:
    code = _MEMORY_SCRIPT.format(n=n, batch=batch)
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def bench_translation_scores_batching(quick: bool) -> BenchmarkResult:
    """Teacher-forced scores of 100 built-in en-fr pairs (two-shot): batch 16 vs one pair at
    a time (target >= 4x), identical scores; peak RSS of the batched run vs scoring one pair."""
    import torch

    import lens_heads as lh

    model = lh.load_model("gemma-3-270m")
    outcomes: dict[int, lh.TranslationScores] = {}
    pairs = 32 if quick else PAIRS

    def run(batch_size: int) -> None:
        outcomes[batch_size] = lh.translation_scores(model, "en-fr", n=pairs, batch_size=batch_size)

    lh.translation_scores(model, "en-fr", n=2)  # warm up
    result = compare(
        f"translation scores, {pairs} en-fr pairs: one at a time / batched 16 (Gemma 3 270M)",
        lambda: run(1),
        lambda: run(16),
        target=4.0,
        repeats=3,  # a run takes well under a minute
        warmup=0,
        speedup=True,
    )
    one, batched = outcomes[1], outcomes[16]
    result.same_outputs = bool(torch.equal(one.sentence_hits, batched.sentence_hits))
    single = _peak_rss(1, 1)
    full = _peak_rss(pairs, 16)
    result.extra.update(
        {
            "pairs": len(batched.sources),
            "queries": batched.n_queries,
            "identical sentence hits": bool(torch.equal(one.sentence_hits, batched.sentence_hits)),
            "heads > 0.1": len(batched.alignment_heads(0.1)),
            "peak RSS MiB (one pair, all pairs batched)": (
                round(single["peak"]),
                round(full["peak"]),
            ),
            "peak RSS ratio (target <= 1.5)": round(full["peak"] / single["peak"], 3),
        }
    )
    return result


def bench_greedy_scores(quick: bool) -> BenchmarkResult:
    """Greedy-decoding scores (KV-cached decoder + SimAligner where the output differs from the
    reference) of the same pairs: wall time next to teacher forcing (reported; target <= 20x)."""
    import lens_heads as lh

    model = lh.load_model("gemma-3-270m")
    n = 32 if quick else PAIRS
    holder: dict[str, lh.TranslationScores] = {}
    forced = time_call(lambda: lh.translation_scores(model, "en-fr", n=n))

    def greedy() -> None:
        holder["g"] = lh.translation_scores(model, "en-fr", n=n, decoding="greedy")

    greedy_s = time_call(greedy)
    scores = holder["g"]
    return BenchmarkResult(
        name=f"greedy-decoding scores / teacher forced, {n} en-fr pairs (Gemma 3 270M)",
        baseline_s=forced,
        candidate_s=greedy_s,
        ratio=greedy_s / forced,
        target=20.0,
        extra={
            "outputs equal to the reference (gold alignments)": scores.settings["n_gold_aligned"],
            "heads > 0.1 (greedy)": len(scores.alignment_heads(0.1)),
            "top 6 (greedy)": scores.top(6),
        },
    )


def bench_trater_batching(quick: bool) -> BenchmarkResult:
    """TRater over 200 texts (built-in sentences, bilingual and monolingual): batch 16 vs one
    at a time (target >= 4x); the scores must agree within 1e-4, else the benchmark fails. One
    pair: the one-at-a-time run alone takes about two minutes."""
    import torch

    import lens_heads as lh
    from lens_heads.core._tasks import parallel_corpus

    model = lh.load_model("gemma-3-270m")
    corpus = parallel_corpus()
    texts = [f"{corpus.sentences['en'][i]}\n{corpus.sentences['fr'][i]}" for i in range(100)]
    texts += [f"{corpus.sentences['en'][i]}\n{corpus.sentences['en'][i + 100]}" for i in range(100)]
    heads = ["L3H3", "L7H0", "L7H1", "L6H0", "L9H3", "L10H2"]
    outcomes: dict[int, lh.TRaterResult] = {}

    def run(batch_size: int) -> None:
        outcomes[batch_size] = lh.trater_scores(model, texts, heads, batch_size=batch_size)

    lh.trater_scores(model, texts[:2], heads)  # warm up
    result = compare(
        "TRater, 200 texts: one at a time / batched 16 (Gemma 3 270M)",
        lambda: run(1),
        lambda: run(16),
        target=4.0,
        repeats=1,
        warmup=0,
        speedup=True,
    )
    one, batched = outcomes[1].scores, outcomes[16].scores
    result.same_outputs = bool(torch.allclose(one, batched, atol=1e-4))
    result.extra.update(
        {
            "texts": len(texts),
            "max |score difference|": float((one - batched).abs().max()),
            "equal within 1e-4": bool(torch.allclose(one, batched, atol=1e-4)),
            "mean score bilingual, monolingual": (
                round(float(batched[:100].mean()), 4),
                round(float(batched[100:].mean()), 4),
            ),
        }
    )
    return result
