"""One evaluation run, generated and scored: prompts encoded for a setting, greedy outputs
decoded in batches on the shared prefix's KV cache (optionally many masks stacked into one pass),
and the metrics of the settings table computed from them."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from lens_heads.core import (
    HeadMask,
    PromptFormat,
    Task,
    collate,
    encode_example,
    greedy_generate,
    head_shape,
    pad_token_id,
)
from lens_heads.core.internal import (
    FIXED,
    LOGITS_BUDGET_BYTES,
    REFERENCE_SIZE,
    EncodedExample,
    ModelLike,
    ablation_baseline,
    answer_rows_budget,
    check_ablation,
    check_context,
    decode_greedy,
    maybe_mask,
    newline_tokens,
    sample_shots,
    stop_token_ids,
    supports_kv_cache,
)

__all__ = [
    "EvaluationRun",
    "RunOutputs",
    "check_fits",
    "encode_prompts",
    "first_line_of",
    "generate_and_score",
    "generate_stacked",
    "score_run",
]


@dataclass(frozen=True)
class EvaluationRun:
    """One row of the settings table to compute: a setting, its random seed (-1 when none),
    the mask it runs under and whether its prompts carry the instruction."""

    setting: str
    seed: int
    mask: HeadMask | None
    instructed: bool


def check_fits(
    model: ModelLike, encoded: Sequence[EncodedExample], evaluation: Task, new_tokens: int
) -> None:
    """Each prompt plus its generated (or teacher-forced answer) tokens fits the context."""
    for index, (example, item) in enumerate(zip(evaluation.examples, encoded, strict=True)):
        check_context(
            model,
            len(item.prompt_tokens),
            new_tokens=max(new_tokens, len(item.answer_tokens)),
            what=f"evaluation example {index} ({example.input[:40]!r})",
        )


def encode_prompts(
    model: ModelLike,
    task: Task,
    *,
    instructed: bool,
    chat: bool,
    shots: int,
    shot_pool: Task | None,
    shot_seed: int,
    separator: str,
) -> list[EncodedExample]:
    tokenizer = model.tokenizer
    encoded = []
    for index, example in enumerate(task.examples):
        demos = ()
        if shots:
            assert shot_pool is not None
            demos = sample_shots(shot_pool, shots, seed=shot_seed * 100_003 + index)
        fmt = PromptFormat(
            chat=chat,
            instruction=task.instruction if instructed else None,
            shots=demos,
            separator=separator,
        )
        prompt = fmt.render(example.input, tokenizer)
        encoded.append(encode_example(tokenizer, prompt, example.output, chat=chat))
    return encoded


def task_baseline(
    model: ModelLike,
    ablation: str,
    train: Task | None,
    held_out: Task,
    *,
    chat: bool,
    separator: str = "\n\n",
    where: str = "evaluation",
) -> torch.Tensor | None:
    """The baseline a task's analysis gives removed heads (:mod:`lens_heads.core._ablation`):
    None for zero ablation; for mean, each head's mean output over the bare prompts of the first
    64 ``train`` examples (the ``held_out`` ones when the split leaves none), rendered like the
    evaluated prompts."""
    if ablation == "zero":
        check_ablation(ablation, allowed=FIXED, where=where)
        return None
    pool = held_out if train is None or not len(train) else train
    pool = replace(pool, examples=tuple(pool.examples[:REFERENCE_SIZE]))
    encoded = encode_prompts(
        model, pool, instructed=False, chat=chat, shots=0, shot_pool=None, shot_seed=0,
        separator=separator,
    )  # fmt: skip
    prompts = [example.prompt_tokens for example in encoded]
    return ablation_baseline(model, ablation, prompts, where=where)


def _logits_window(model: Any, tokens: torch.Tensor, keep: int) -> torch.Tensor:
    """Logits of the last ``keep`` positions. A ``TransformerBridge`` passes
    ``logits_to_keep`` to the Hugging Face model, which then unembeds only those positions
    (most of the cost of a forward pass with Gemma's 262k vocabulary); other models compute
    every position and the window is sliced."""
    try:
        logits = model(tokens, logits_to_keep=keep)
    except TypeError:  # e.g. a legacy HookedTransformer: refused at the call, before computing
        return model(tokens)[:, -keep:]
    if logits.shape[1] != keep:  # the keyword was accepted but ignored
        logits = logits[:, -keep:]
    return logits


@torch.inference_mode()
def _answer_nll(
    model: ModelLike,
    encoded: Sequence[EncodedExample],
    mask: HeadMask | None,
    batch_size: int,
    per_example_masks: Tensor | None = None,
) -> Float[Tensor, " n"]:
    """Mean answer-token CE of each example, teacher forced on right-padded batches (under
    ``mask``, or under each example's row of ``per_example_masks``).

    Only the window from the position before the earliest answer token to the end of the
    batch is unembedded; :func:`lens_heads.core._metrics.answer_ce` scores that window (the same
    answer tokens and predicting positions as the whole sequence)."""
    from lens_heads.core.internal import answer_ce

    pad_id = pad_token_id(model.tokenizer)
    d_vocab = int(model.cfg.d_vocab)
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i].tokens))

    def window(rows: Sequence[int]) -> int:
        width = max(len(encoded[i].tokens) for i in rows)
        return width - min(encoded[i].answer_start for i in rows) + 1

    result = torch.empty(len(encoded))
    start = 0
    with maybe_mask(model, mask):
        while start < len(order):
            # grow the batch while its logits window fits the budget
            stop = start + 1
            while stop < len(order) and stop - start < batch_size:
                rows = order[start : stop + 1]
                if len(rows) * window(rows) * d_vocab * 4 > LOGITS_BUDGET_BYTES:
                    break
                stop += 1
            indices = order[start:stop]
            tokens, answer_mask, _ = collate([encoded[i] for i in indices], pad_id)
            keep = window(indices)
            rows_masks = None if per_example_masks is None else per_example_masks[indices]
            with maybe_mask(model, rows_masks):
                logits = _logits_window(model, tokens.to(model.cfg.device), keep)
            losses = answer_ce(
                logits,
                tokens[:, -keep:].to(logits.device),
                answer_mask[:, -keep:].to(logits.device),
            )
            result[indices] = losses.detach().float().cpu()
            start = stop
    return result


def first_line_of(text: str) -> str:
    stripped = text.strip()
    return stripped.split("\n", 1)[0].strip() if stripped else ""


def generate_and_score(
    model: ModelLike,
    encoded: Sequence[EncodedExample],
    mask: HeadMask | None,
    max_new_tokens: int,
    batch_size: int,
    *,
    newline_stops: bool,
    on_rows: Callable[[int], None] | None = None,
    per_example_masks: Tensor | None = None,
) -> tuple[list[list[int]], Float[Tensor, " n"], list[int | None] | None]:
    """Greedy new tokens, mean answer CE and the stop token that ended each output (None: the
    token budget ran out; the whole list is None for a legacy model), under ``mask`` or, with
    ``per_example_masks`` ``[n, n_layers, n_heads]``, each row under its own (the prompts'
    shared prefix then runs once per distinct mask, and large batches drop finished rows).

    On a bridge the tokens and the CE come from one KV-cached pass per batch (the prompts'
    shared prefix run once, the answer teacher forced on the prompt's cache); a legacy
    ``HookedTransformer`` generates and scores separately. With ``newline_stops`` (only the first
    line is scored) generation also stops at a line-break token; rows whose output before it is
    blank are generated again without those stops, so the first non-empty line is the same as
    without them -- only faster (few-shot base models otherwise continue with new examples)."""
    prompts = [example.prompt_tokens for example in encoded]
    tokenizer = model.tokenizer
    stops = stop_token_ids(tokenizer, model)
    if newline_stops:
        stops = sorted(set(stops) | set(newline_tokens(tokenizer)))
    cached = supports_kv_cache(model)

    def run(rows: Sequence[int] | None = None) -> dict[str, Any]:
        """Keywords of a decoding call over all prompts, or over ``rows`` of them."""
        keywords: dict[str, Any] = dict(max_new_tokens=max_new_tokens, batch_size=batch_size)
        if per_example_masks is None:
            return {**keywords, "mask": mask}
        masks = per_example_masks if rows is None else per_example_masks[list(rows)]
        if not cached:  # greedy_generate: a 3-d mask is one mask per prompt
            return {**keywords, "mask": masks}
        stacked = {"prefix_per_mask": True, "drop_finished": True}
        return {**keywords, "mask": masks, **stacked}

    stopped_by: list[int | None] | None = None
    if cached:
        answers = [example.answer_tokens for example in encoded]
        decoded = decode_greedy(
            model, prompts, stops=stops, answers=answers, progress=on_rows or False, **run()
        )
        generated, losses, stopped_by = decoded.new_tokens, decoded.answer_ce, decoded.stopped_by
        assert losses is not None and stopped_by is not None
    else:
        generated = greedy_generate(model, prompts, stop_tokens=stops, **run())
        losses = _answer_nll(model, encoded, mask, batch_size, per_example_masks)
        if on_rows is not None:
            on_rows(len(encoded))
    blank = [
        i
        for i, tokens in enumerate(generated)
        if newline_stops
        and len(tokens) < max_new_tokens
        and not tokenizer.decode(tokens, skip_special_tokens=True).strip()
    ]
    if blank:
        retry = [prompts[i] for i in blank]
        if cached:
            again = decode_greedy(
                model, retry, stops=stop_token_ids(tokenizer, model), **run(blank)
            )
            assert stopped_by is not None and again.stopped_by is not None
            for i, tokens, stop in zip(blank, again.new_tokens, again.stopped_by, strict=True):
                generated[i], stopped_by[i] = tokens, stop
        else:
            for i, tokens in zip(blank, greedy_generate(model, retry, **run(blank)), strict=True):
                generated[i] = tokens
    return generated, losses, stopped_by


RunOutputs = tuple[list[list[int]], Float[Tensor, " n"], list[int | None] | None]


def generate_stacked(
    model: ModelLike,
    encoded: Sequence[EncodedExample],
    masks: Sequence[HeadMask | None],
    max_new_tokens: int,
    batch_size: int,
    *,
    newline_stops: bool,
    on_rows: Callable[[int], None] | None = None,
) -> list[RunOutputs]:
    """:func:`_generate_and_score` of each mask on the same prompts, in one decoding pass:
    the rows are (prompt, mask) pairs, prompt-major, each under its own multiplier.

    A batch holds ``batch_size`` prompts with all their masks, so it pads exactly as one
    mask's batch of the same prompts would, and each mask's shared prefix runs once."""
    if len(masks) == 1:
        return [
            generate_and_score(
                model,
                encoded,
                masks[0],
                max_new_tokens,
                batch_size,
                newline_stops=newline_stops,
                on_rows=on_rows,
            )
        ]
    shape = head_shape(model)
    factors = torch.stack([torch.ones(shape) if m is None else m.multiplier() for m in masks])
    n_masks = len(masks)
    if supports_kv_cache(model):  # whole prompts per batch, within the answer-logits budget
        budget = answer_rows_budget(model, [example.answer_tokens for example in encoded])
        batch_size = max(1, min(batch_size, budget // n_masks))
    generated, losses, stopped_by = generate_and_score(
        model,
        [example for example in encoded for _ in range(n_masks)],
        None,
        max_new_tokens,
        batch_size * n_masks,
        newline_stops=newline_stops,
        on_rows=on_rows,
        per_example_masks=factors.repeat(len(encoded), 1, 1),
    )
    return [
        (
            generated[k::n_masks],
            losses[k::n_masks],
            None if stopped_by is None else stopped_by[k::n_masks],
        )
        for k in range(n_masks)
    ]


def score_run(
    model: ModelLike,
    task: Task,
    evaluation: Task,
    encoded: Sequence[EncodedExample],
    run: EvaluationRun,
    outputs: RunOutputs,
    first_line: bool,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One run's metrics row and per-example records from its generated tokens and CE."""
    from lens_heads.core.internal import (
        bleu,
        chrf_pp,
        is_correct,
        is_echo,
        is_exact_match,
        rouge_l,
    )

    generated, losses, stopped_by = outputs
    tokenizer = model.tokenizer
    texts = [tokenizer.decode(tokens, skip_special_tokens=True) for tokens in generated]
    predictions = [first_line_of(text) if first_line else text.strip() for text in texts]
    answers = evaluation.outputs
    correct = [
        is_correct(p, e.output, e.match or task.match)
        for p, e in zip(predictions, evaluation.examples, strict=True)
    ]
    pairs = list(zip(texts, evaluation.examples, strict=True))
    exact = [is_exact_match(text, e.output) for text, e in pairs]
    echo = [is_echo(text, e.input, e.output) for text, e in pairs]
    n_answer = [len(e.answer_tokens) for e in encoded]
    total_heads = head_shape(model)[0] * head_shape(model)[1]
    heads = total_heads if run.mask is None else run.mask.n_selected
    total_nll = float(sum(loss * n for loss, n in zip(losses.tolist(), n_answer, strict=True)))
    metrics: dict[str, Any] = {
        "setting": run.setting,
        "seed": run.seed,
        "heads": heads,
        "accuracy": sum(correct) / len(correct),
        "exact_match": sum(exact) / len(exact),
        "echo_rate": sum(echo) / len(echo),
        "answer_ce": float(losses.mean()),
        "perplexity": math.exp(min(total_nll / sum(n_answer), 700.0)),
    }
    translation = task.kind == "translation"
    rouge = []
    if translation:
        for prediction, answer in zip(predictions, answers, strict=True):
            rouge.append(
                rouge_l(
                    tokenizer(prediction, add_special_tokens=False).input_ids,
                    tokenizer(answer, add_special_tokens=False).input_ids,
                )
                if prediction
                else 0.0
            )
        metrics["rouge_l"] = sum(rouge) / len(rouge)
        metrics["bleu"] = bleu(predictions, answers, target_lang=task.target_lang)
        metrics["chrf"] = chrf_pp(predictions, answers)
    records = []
    for index, example in enumerate(evaluation.examples):
        row = {
            "setting": run.setting,
            "seed": run.seed,
            "index": index,
            "input": example.input,
            "answer": example.output,
            "prompt": tokenizer.decode(encoded[index].prompt_tokens),
            "generated": texts[index],
            "ended_by": _ended_by(tokenizer, stopped_by, index),
            "prediction": predictions[index],
            "correct": bool(correct[index]),
            "exact": bool(exact[index]),
            "echo": bool(echo[index]),
            "answer_ce": float(losses[index]),
            "n_answer_tokens": n_answer[index],
            "boundary_merged": encoded[index].boundary_merged,
        }
        if translation:
            row["rouge_l"] = rouge[index]
        if example.source is not None:  # mixed sets (hybrid few-shot)
            row["source"] = example.source
        records.append(row)
    return metrics, records


def _ended_by(tokenizer: Any, stopped_by: list[int | None] | None, index: int) -> str | None:
    """How an output ended: its stop token as text (``<|im_end|>``, ``\\n``), ``"length"``
    when the token budget ran out, None when the decoder could not tell (legacy model)."""
    from lens_heads.core.internal import token_text

    if stopped_by is None:
        return None
    token = stopped_by[index]
    return "length" if token is None else token_text(tokenizer, int(token))
