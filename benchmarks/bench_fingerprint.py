"""What a model's fingerprint costs (issue 43): every resumable stage checks the loaded model's
fingerprint (a hash of its configuration, weights and tokenizer), computed once per load; it
must stay a small fraction of the load it follows."""

from __future__ import annotations

import statistics
import time

from benchmarks.harness import BenchmarkResult


def _seconds(function: object) -> tuple[float, object]:
    start = time.perf_counter()
    value = function()  # type: ignore[operator]
    return time.perf_counter() - start, value


def bench_fingerprint_against_the_load(quick: bool) -> list[BenchmarkResult]:
    """Fingerprint of SmolLM2 and of Gemma 3 270M (uncached) against loading the model from
    the weights cache with its guards (target <= 0.1x); the remembered fingerprint's cost too."""
    import lens_heads as lh
    from lens_heads.core import _fingerprints as fingerprints

    results = []
    for alias in ("smollm2-135m-instruct", "gemma-3-270m"):
        lh.load_model(alias)  # fill the weights cache first: the load timed is a cached one
        pairs, parts = [], {}
        for _ in range(2 if quick else 5):
            load, model = _seconds(lambda alias=alias: lh.load_model(alias))
            tensors = [*model.parameters(), *model.buffers()]
            timed = {
                "weights": lambda tensors=tensors: fingerprints._weights_hash(tensors),
                "tokenizer": lambda model=model: fingerprints._tokenizer_hash(model.tokenizer),
                "config": lambda model=model: fingerprints._config_hash(model),
                "whole": lambda model=model: fingerprints.model_fingerprint(model),
                "remembered": lambda model=model: fingerprints.model_fingerprint(model),
            }
            for name, part in timed.items():  # "whole" computes it, "remembered" reads it
                parts.setdefault(name, []).append(_seconds(part)[0])
            pairs.append((load, parts["whole"][-1]))
        nbytes = sum(t.numel() * t.element_size() for t in model.parameters())
        results.append(
            BenchmarkResult(
                name=f"model fingerprint / cached load ({alias})",
                baseline_s=statistics.median(load for load, _ in pairs),
                candidate_s=statistics.median(whole for _, whole in pairs),
                ratio=statistics.median(whole / load for load, whole in pairs),
                target=0.1,
                pairs=len(pairs),
                extra={
                    "weights MiB": round(nbytes / 2**20, 1),
                    "seconds (median)": {
                        k: round(statistics.median(v), 4) for k, v in parts.items()
                    },
                },
            )
        )
    return results
