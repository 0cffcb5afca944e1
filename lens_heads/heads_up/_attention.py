"""Attention on target (Heads up! Table 7): how much attention each head pays, from the final
position, to the tokens of a target word in the prompt -- bare, instructed and under a mask.

>>> import lens_heads as lh
>>> model = lh.tiny_model(n_layers=2, n_heads=4)
>>> mask = lh.HeadMask.from_heads(["L0H1", "L1H2"], n_layers=2, n_heads=4)
>>> result = lh.attention_on_target(model, ["pear, dog, cat"], ["pear"], mask=mask,
...                                 instruction="Output the fruit.")
>>> result.settings
['original', 'instructed', 'masked']
>>> tuple(result.scores.shape)
(3, 2, 4)
>>> list(result.means().columns)
['all heads', 'heads in M', 'heads in 1-M']

A head's score for one prompt is the attention weight of the final query position summed
over the target's tokens (``blocks.{l}.attn.hook_pattern``, query heads); the result
averages it over the prompts, like TransformerLens's ``head_detector`` scores. A target is
given as a word found in the prompt's input (its first whole-word occurrence) or as a
character span ``(start, end)`` of the input; a word split into several tokens counts all
of them (every token that overlaps the span). With ``candidates`` (the words the task chooses
from, e.g. ``candidate_words("pear, dog, cat")``) the score is normalised as in the paper's
Table 7: the attention on the target's tokens divided by the attention on all candidates'
tokens, so that a head attending uniformly to three words scores 1/3.

>>> normalised = lh.attention_on_target(model, ["pear, dog, cat"], ["pear"], mask=mask,
...     candidates=[candidate_words("pear, dog, cat")])
>>> bool(((normalised.per_prompt > 0) & (normalised.per_prompt < 1)).all())
True
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import pandas as pd
import torch
from jaxtyping import Float
from torch import Tensor

from lens_heads.core import (
    HeadMask,
    InputError,
    MaskSource,
    configure,
    format_head,
    head_shape,
    markdown_table,
    resolve_mask,
)
from lens_heads.core.internal import (
    ComputationError,
    FolderResult,
    ModelLike,
    capture,
    check_mask,
    check_prompts,
    encode_prompt,
    model_name,
    warn_input,
)
from lens_heads.heads_up._attention_config import AttentionConfig

__all__ = [
    "AttentionResult",
    "attention_on_target",
    "candidate_words",
    "extractive_targets",
    "target_token_span",
]

TargetSpec = str | tuple[int, int]


def _char_span(raw: str, target: TargetSpec, index: int) -> tuple[int, int]:
    """The character span of ``target`` in the raw input ``raw``."""
    where = f"prompt {index} ({raw[:40]!r})"
    if isinstance(target, str):
        if not target.strip():
            raise InputError(f"{where}: the target word is empty")
        found = re.search(rf"(?<!\w){re.escape(target)}(?!\w)", raw)
        if found is None:
            found = re.search(re.escape(target), raw)
        if found is None:
            raise InputError(
                f"{where}: target {target!r} does not occur in the prompt; give a word of the "
                "prompt or a character span (start, end)"
            )
        return found.start(), found.end()
    if len(target) != 2:
        raise InputError(f"{where}: a span is (start, end), got {target!r}")
    start, end = int(target[0]), int(target[1])
    if not 0 <= start < end <= len(raw):
        raise InputError(
            f"{where}: span ({start}, {end}) is outside the prompt of {len(raw)} characters; "
            f"give 0 <= start < end <= {len(raw)}"
        )
    return start, end


def target_token_span(
    model: ModelLike,
    prompt: str,
    target: TargetSpec,
    *,
    instruction: str | None = None,
    chat: bool | None = None,
) -> tuple[list[int], tuple[int, int]]:
    """``(tokens, (first, last + 1))``: the prompt as the model sees it (rendered like
    :func:`lens_heads.core._capture.encode_prompt`) and the token positions that overlap the target.

    >>> import lens_heads as lh
    >>> model = lh.tiny_model()
    >>> tokens, (lo, hi) = target_token_span(model, "dog, pear", "pear", chat=False)
    >>> model.tokenizer.decode(tokens[lo:hi])
    'pear'
    """
    return _locate_target(model, prompt, target, 0, instruction=instruction, chat=chat)


def _locate_target(
    model: ModelLike,
    prompt: str,
    target: TargetSpec,
    index: int,
    *,
    instruction: str | None,
    chat: bool | None,
) -> tuple[list[int], tuple[int, int]]:
    """:func:`target_token_span` of prompt number ``index`` (named in error messages)."""
    encoded = encode_prompt(model, prompt, chat=chat, instruction=instruction, offsets=True)
    if encoded.input_start is None or encoded.offsets is None:
        raise InputError(
            f"cannot locate the input {prompt[:40]!r} inside the rendered prompt (the chat "
            "template rewrites it); pass chat=False"
        )
    start, end = _char_span(prompt, target, index)
    start, end = start + encoded.input_start, end + encoded.input_start
    positions = [
        i
        for i, (lo, hi) in enumerate(encoded.offsets)
        if hi > lo and lo < end and hi > start  # the token overlaps the target's characters
    ]
    if not positions:
        raise InputError(f"no token of {encoded.text[:60]!r} covers the target {target!r}")
    return encoded.tokens, (positions[0], positions[-1] + 1)


@dataclass(repr=False)
class AttentionResult(FolderResult):
    """Attention on the target per setting and head: ``scores[setting, layer, head]`` (mean
    over prompts) and ``per_prompt[setting, prompt, layer, head]``.

    ``mask`` (when given) splits the heads into M and 1-M for :meth:`means` (Table 7).
    """

    _format: ClassVar[str] = "lens_heads.attention_on_target/1"

    model: str
    settings: list[str]
    prompts: list[str]
    targets: list[str]
    spans: list[list[tuple[int, int]]]  # [setting][prompt]: token positions [first, last + 1)
    per_prompt: Float[Tensor, "setting prompt n_layers n_heads"]
    mask: HeadMask | None = None
    #: "sequence" (attention over the whole prompt) or "candidates" (over the candidate words)
    normalized: str = "sequence"

    @property
    def scores(self) -> Float[Tensor, "setting n_layers n_heads"]:
        return self.per_prompt.mean(dim=1)

    def means(self) -> pd.DataFrame:
        """Table 7: the mean score over all heads, over the heads in M and over those in 1-M
        (the last two only with a mask), one row per setting."""
        scores = self.scores
        data: dict[str, list[float]] = {"all heads": scores.mean(dim=(1, 2)).tolist()}
        if self.mask is not None:
            selected = self.mask.selected
            data["heads in M"] = scores[:, selected].mean(dim=1).tolist()
            data["heads in 1-M"] = scores[:, ~selected].mean(dim=1).tolist()
        return pd.DataFrame(data, index=pd.Index(self.settings, name="setting"))

    def to_frame(self) -> pd.DataFrame:
        """One row per (setting, head): ``setting, layer, head, label, score`` and ``in_mask``."""
        rows = []
        scores = self.scores
        n_layers, n_heads = scores.shape[1:]
        for s, setting in enumerate(self.settings):
            for layer in range(n_layers):
                for head in range(n_heads):
                    row = {
                        "setting": setting,
                        "layer": layer,
                        "head": head,
                        "label": format_head(layer, head),
                        "score": float(scores[s, layer, head]),
                    }
                    if self.mask is not None:
                        row["in_mask"] = bool(self.mask.selected[layer, head])
                    rows.append(row)
        return pd.DataFrame(rows)

    def top_heads(self, setting: str | None = None, k: int = 10) -> pd.DataFrame:
        """The ``k`` heads with the highest score in ``setting`` (default: the first)."""
        setting = setting or self.settings[0]
        frame = self.to_frame()
        frame = frame[frame["setting"] == setting]
        return frame.sort_values("score", ascending=False, kind="stable").head(k)

    def to_markdown(self, digits: int = 4) -> str:
        title = f"**attention on target** on **{self.model}** ({len(self.prompts)} prompts)"
        return title + "\n\n" + markdown_table(self.means(), floatfmt=f".{digits}f") + "\n"

    def plot(self) -> Any:
        """Heat maps of the per-head scores, one panel per setting (heads of M outlined)."""
        from lens_heads.core.internal import head_score_figure

        return head_score_figure(
            self.scores,
            panels=self.settings,
            outline=None if self.mask is None else self.mask.selected,
            colorbar_title="attention on target",
            title=f"attention from the last position to the target on {self.model}",
        )

    def _to_saved(self) -> tuple[dict[str, Any], dict[str, Any]]:
        meta: dict[str, Any] = {
            "model": self.model,
            "settings": self.settings,
            "prompts": self.prompts,
            "targets": self.targets,
            "spans": self.spans,
            "normalized": self.normalized,
            "means": self.means().to_dict(orient="index"),  # for readers of result.json
        }
        tensors = {"per_prompt": self.per_prompt}
        if self.mask is not None:
            tensors["mask"] = self.mask.values
            meta["mask_alpha"] = self.mask.alpha
        return meta, tensors

    @classmethod
    def _from_saved(cls, meta: dict[str, Any], tensors: dict[str, Any]) -> AttentionResult:
        mask = tensors.get("mask")
        return cls(
            model=meta["model"],
            settings=list(meta["settings"]),
            prompts=list(meta["prompts"]),
            targets=list(meta["targets"]),
            spans=[[(int(a), int(b)) for a, b in row] for row in meta["spans"]],
            per_prompt=tensors["per_prompt"],
            mask=None if mask is None else HeadMask(mask, alpha=meta.get("mask_alpha", 0.0)),
            normalized=meta.get("normalized", "sequence"),  # results saved before it: sequence
        )


def _settings(
    mask: HeadMask | None, instruction: str | None, settings: Sequence[str] | None
) -> dict[str, tuple[HeadMask | None, str | None]]:
    """``{setting: (mask, instruction)}``."""
    available: dict[str, tuple[HeadMask | None, str | None]] = {"original": (None, None)}
    if instruction is not None:
        available["instructed"] = (None, instruction)
    if mask is not None:
        available["masked"] = (mask, None)
        if instruction is not None:
            available["masked+instructed"] = (mask, instruction)
    if settings is None:
        return {k: v for k, v in available.items() if k != "masked+instructed"}
    unknown = [s for s in settings if s not in available]
    if unknown:
        raise InputError(
            f"settings {unknown} are not available: 'instructed' needs instruction=, 'masked' "
            f"needs mask=; available here: {list(available)}"
        )
    return {s: available[s] for s in settings}


def attention_on_target(
    model: ModelLike,
    prompts: str | Sequence[str],
    targets: TargetSpec | Sequence[TargetSpec],
    config: AttentionConfig | None = None,
    *,
    mask: MaskSource | None = None,
    instruction: str | None = None,
    settings: Sequence[str] | None = None,
    candidates: Sequence[Sequence[str]] | None = None,
    **overrides: Any,
) -> AttentionResult:
    """Attention from each prompt's last position to its target's tokens, per head, in the
    settings ``original`` (bare input), ``instructed`` (with ``instruction``), ``masked``
    (under ``mask``) -- by default every one the arguments allow; ``"masked+instructed"`` on
    request.

    ``targets``: one per prompt, a word of the prompt's input (``"pear"``) or a character
    span ``(start, end)`` of it. Prompts are rendered as :func:`lens_heads.evaluate` renders
    them (chat template when the tokenizer has one); the target is located inside the rendered
    prompt, so instructed prompts attend to the same word. ``candidates`` (one list of words per
    prompt, the target among them) normalises each score over the candidates' tokens (Table 7).
    ``config`` (an :class:`AttentionConfig`; its fields also as keywords, ``batch_size=4``) says
    how the prompts run.
    """
    config = configure(AttentionConfig, config, overrides, "attention_on_target")
    chat = config.chat
    prompt_list = check_prompts(prompts)
    if isinstance(targets, str) or (
        isinstance(targets, tuple)
        and len(targets) == 2
        and all(isinstance(x, int) for x in targets)
    ):
        targets = [targets]  # one target; a tuple of words or spans is one target per prompt
    target_list = list(targets)
    if len(target_list) != len(prompt_list):
        raise InputError(
            f"{len(prompt_list)} prompts but {len(target_list)} targets; give one target each"
        )
    if candidates is not None:
        _check_candidates(candidates, target_list)
    mask = resolve_mask(mask, model)  # a mask file, folder or training result too
    check_mask(model, mask)
    runs = _settings(mask, instruction, settings)
    n_layers, n_heads = head_shape(model)
    results, spans = [], []
    for run_mask, run_instruction in runs.values():
        encoded = [
            _locate_target(model, p, t, i, instruction=run_instruction, chat=chat)
            for i, (p, t) in enumerate(zip(prompt_list, target_list, strict=True))
        ]
        tokens = [tokens for tokens, _ in encoded]
        token_spans = [span for _, span in encoded]
        last = [len(t) - 1 for t in tokens]
        pools = None  # per prompt: the token spans of every candidate word
        if candidates is not None:
            pools = [
                [
                    _locate_target(model, p, word, i, instruction=run_instruction, chat=chat)[1]
                    for word in words
                ]
                for i, (p, words) in enumerate(zip(prompt_list, candidates, strict=True))
            ]

        def reduce(
            pattern: Tensor,
            rows: Tensor,
            cols: Tensor,
            indices: Sequence[int],
            token_spans: list[tuple[int, int]] = token_spans,
            pools: list[list[tuple[int, int]]] | None = pools,
        ) -> Tensor:
            # pattern [b, head, q, k] -> the final query's row [b, head, k] -> sum over the span
            final = pattern[rows, :, cols, :].float()
            span = torch.zeros(final.shape[0], final.shape[-1], device=final.device)
            pool = torch.zeros_like(span)
            for row, index in enumerate(indices):
                lo, hi = token_spans[index]
                span[row, lo:hi] = 1.0
                for lo, hi in pools[index] if pools is not None else []:
                    pool[row, lo:hi] = 1.0
            on_target = (final * span[:, None, :]).sum(dim=-1)
            if pools is None:
                return on_target
            return on_target / (final * pool[:, None, :]).sum(dim=-1).clamp_min(1e-12)

        names = {f"blocks.{layer}.attn.hook_pattern": reduce for layer in range(n_layers)}
        captured = capture(
            model,
            tokens,
            last,
            names,
            mask=run_mask,
            batch_size=config.batch_size,
            progress=config.progress,
        )
        per_layer = [captured[f"blocks.{layer}.attn.hook_pattern"] for layer in range(n_layers)]
        results.append(torch.stack(per_layer, dim=1))  # [prompt, layer, head]
        spans.append(token_spans)
    per_prompt = torch.stack(results)
    if per_prompt.shape[-1] != n_heads:
        raise ComputationError(
            f"hook_pattern has {per_prompt.shape[-1]} heads but the model has {n_heads}"
        )
    return AttentionResult(
        model=model_name(model),
        settings=list(runs),
        prompts=prompt_list,
        targets=[t if isinstance(t, str) else f"{t[0]}:{t[1]}" for t in target_list],
        spans=spans,
        per_prompt=per_prompt,
        mask=mask,
        normalized="sequence" if candidates is None else "candidates",
    )


def candidate_words(prompt: str) -> list[str]:
    """The words a choose-a-word prompt offers (``"pear, dog, cat"`` -> three words).

    >>> candidate_words("pear, dog, cat")
    ['pear', 'dog', 'cat']
    """
    return [word.strip() for word in prompt.split(",") if word.strip()]


def _check_candidates(candidates: Sequence[Sequence[str]], targets: Sequence[Any]) -> None:
    if len(candidates) != len(targets):
        raise InputError(
            f"{len(targets)} targets but {len(candidates)} candidate lists; give one per prompt"
        )
    for index, (words, target) in enumerate(zip(candidates, targets, strict=True)):
        if isinstance(target, str) and target not in words:
            raise InputError(
                f"prompt {index}: the target {target!r} is not among its candidates {list(words)}"
            )


def extractive_targets(task: Any, n: int | None = None) -> tuple[list[str], list[str]]:
    """``(prompts, targets)`` of a choose-a-word task (the answer is a word of the input, as in
    ``fruit_v_animal_3``): the last ``n`` examples (all by default) whose answer is a word of
    the input. A task where that holds for fewer than half of the examples is not such a task
    (an error); skipped examples are a warning.

    >>> from lens_heads.core._tasks import get_task
    >>> prompts, targets = extractive_targets(get_task("fruit_v_animal_3"), n=2)
    >>> all(t in p for p, t in zip(prompts, targets))
    True
    """
    import re

    def is_word_of(example: Any) -> bool:
        pattern = rf"(?<!\w){re.escape(example.output.strip())}(?!\w)"
        return re.search(pattern, example.input) is not None

    examples = [e for e in task.examples if is_word_of(e)]
    if 2 * len(examples) < len(task.examples):
        raise InputError(
            f"task {task.name!r} is not extractive (a choose-a-word task): the answer is a word "
            "of the input "
            f"in {len(examples)} of its {len(task.examples)} examples; use a task such as "
            "fruit_v_animal_3 (or --prompt with --target)"
        )
    if len(examples) < len(task.examples):
        warn_input(
            f"task {task.name!r}: {len(task.examples) - len(examples)} examples skipped, their "
            "answer is not a word of the input"
        )
    if n is not None:
        if n < 1:
            raise InputError(f"n must be positive, got {n}")
        if n > len(examples):
            raise InputError(
                f"n={n} but task {task.name!r} has {len(examples)} examples whose answer is a "
                f"word of the input; ask for at most {len(examples)}"
            )
    chosen = examples if n is None else examples[-n:]
    return [e.input for e in chosen], [e.output for e in chosen]
