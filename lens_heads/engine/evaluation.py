"""The settings comparison of the paper's Tables 1, 2 and 6: a task evaluated bare, instructed,
under a trained head mask M, a random mask of the same size, and a mask of another model.

>>> import lens_heads as lh
>>> from lens_heads.core.tasks import Example, Task
>>> model = lh.tiny_model(n_layers=2, n_heads=4)
>>> task = Task("upper", tuple(Example(w, w.upper()) for w in "abcdefgh"), instruction="Upper.")
>>> mask = lh.HeadMask.from_heads(["L0H1", "L1H2"], n_layers=2, n_heads=4)
>>> result = lh.evaluate(model, task, mask=mask, n_eval=4, random_seeds=(0, 1), progress=False)
>>> list(result.to_frame().index)
['Original', 'w/ instruction', 'w/ random M', 'w/ M', 'w/ M + instruction']
>>> result.to_frame()["heads"].tolist()
[8, 8, 2, 2, 2]
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from jaxtyping import Float
from torch import Tensor
from tqdm.auto import tqdm

from lens_heads.core.checks import check_context, check_int
from lens_heads.core.decoding import (
    LOGITS_BUDGET_BYTES,
    answer_rows_budget,
    decode_greedy,
    supports_kv_cache,
)
from lens_heads.core.generation import greedy_generate, stop_token_ids
from lens_heads.core.hooks import maybe_mask
from lens_heads.core.masks import HeadMask
from lens_heads.core.models import ModelLike, head_shape, model_name
from lens_heads.core.prompts import (
    EncodedExample,
    PromptFormat,
    collate,
    encode_example,
    pad_token_id,
    sample_shots,
)
from lens_heads.core.storage import save_figures, write_atomic
from lens_heads.core.tables import mean_std_table
from lens_heads.core.tasks import Task, get_task

__all__ = ["METRICS", "SETTINGS", "EvaluationResult", "evaluate"]

#: Setting keys, in table order, with the row labels of the paper's tables.
SETTINGS: dict[str, str] = {
    "original": "Original",
    "instruction": "w/ instruction",
    "random": "w/ random M",
    "mask": "w/ M",
    "mask+instruction": "w/ M + instruction",
    "other_mask": "w/ M of another model",
}

#: Metric keys with their column names. "accuracy" uses the paper's match rule (startswith /
#: contains), which counts an echo of the input as correct; "exact_match" (the first answer
#: segment equals the answer) and "echo_rate" (the output repeats the input) sit beside it
#: (:func:`lens_heads.core.metrics.is_exact_match`, :func:`lens_heads.core.metrics.is_echo`).
#: "answer_ce" is what the paper's tables call PPL: the mean cross-entropy of the answer tokens
#: (not exp of it); "perplexity" is the true one,
#: ``exp(total answer-token NLL / number of answer tokens)``.
METRICS: dict[str, str] = {
    "accuracy": "accuracy",
    "exact_match": "exact match",
    "echo_rate": "echo rate",
    "answer_ce": "answer CE (paper: PPL)",
    "perplexity": "perplexity",
    "rouge_l": "ROUGE-L",
    "bleu": "BLEU",
    "chrf": "chrF++",
}
WORD_METRICS = ("accuracy", "exact_match", "echo_rate", "answer_ce", "perplexity")
TRANSLATION_METRICS = (*WORD_METRICS, "rouge_l", "bleu", "chrf")

_MASK_SETTINGS = {"random": "mask", "mask": "mask", "mask+instruction": "mask"}
_INSTRUCTED = {"instruction", "mask+instruction"}


# -- the result ----------------------------------------------------------------------------------
@dataclass
class EvaluationResult:
    """Per-example records and per-run metrics of :func:`evaluate`.

    ``records`` has one row per (setting, seed, example): ``input``, ``answer``, ``prompt``, the raw
    ``generated`` text, ``ended_by`` (the stop token that ended it, e.g. ``<|im_end|>``, or
    ``"length"``), the scored ``prediction`` (its first line), ``correct`` (the paper's
    rule), ``exact`` (exact match), ``echo`` (the output repeats the input), ``answer_ce``,
    ``n_answer_tokens``, ``boundary_merged`` and, for translation, ``rouge_l``. ``runs`` has one
    row per (setting, seed) with ``heads`` and each metric key of :data:`METRICS`; the random
    setting has one run per seed, every other setting one run (seed -1).

    >>> result = EvaluationResult.example()
    >>> float(result.to_frame().loc["w/ random M", "accuracy"])
    0.5
    """

    model: str
    task: str
    kind: str
    settings: list[str]
    runs: pd.DataFrame
    records: pd.DataFrame
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def metrics(self) -> list[str]:
        """The metric keys of this task kind that the runs have, in column order (results
        saved before exact match and the echo rate existed lack those two)."""
        keys = TRANSLATION_METRICS if self.kind == "translation" else WORD_METRICS
        return [key for key in keys if key in self.runs.columns]

    @classmethod
    def example(cls) -> EvaluationResult:
        """A small hand-made result (for documentation and tests)."""
        runs = pd.DataFrame(
            [
                {"setting": "original", "seed": -1, "heads": 8, "accuracy": 0.25},
                {"setting": "random", "seed": 0, "heads": 2, "accuracy": 0.25},
                {"setting": "random", "seed": 1, "heads": 2, "accuracy": 0.75},
                {"setting": "mask", "seed": -1, "heads": 2, "accuracy": 1.0},
            ]
        )
        runs["answer_ce"] = [2.0, 3.0, 4.0, 1.0]
        runs["perplexity"] = [math.exp(v) for v in runs["answer_ce"]]
        records = pd.DataFrame(columns=["setting", "seed", "index", "correct"])
        return cls("tiny", "upper", "word", ["original", "random", "mask"], runs, records)

    # -- views --------------------------------------------------------------------------------
    def per_seed_frame(self) -> pd.DataFrame:
        """One row per (setting, seed) with the column names of :meth:`to_frame`."""
        frame = self.runs.copy()
        frame.insert(0, "label", [SETTINGS[key] for key in frame["setting"]])
        return frame.rename(columns={key: METRICS[key] for key in self.metrics})

    def to_frame(self) -> pd.DataFrame:
        """The table: one row per setting (index: the paper's row labels), the number of heads
        kept and each metric; settings with several seeds show the mean and a ``... std``
        column (sample standard deviation over seeds; NaN for single runs)."""
        rows = []
        for key in self.settings:
            runs = self.runs[self.runs["setting"] == key]
            row: dict[str, Any] = {"setting": SETTINGS[key], "heads": int(runs["heads"].iloc[0])}
            row["seeds"] = len(runs)
            for metric in self.metrics:
                values = runs[metric].astype(float)
                row[METRICS[metric]] = float(values.mean())
                row[f"{METRICS[metric]} std"] = float(values.std()) if len(values) > 1 else math.nan
            rows.append(row)
        return pd.DataFrame(rows).set_index("setting")

    def to_markdown(self, digits: int = 3) -> str:
        """The table as GitHub markdown, ``mean ± std`` for settings with several seeds."""
        metrics = [METRICS[m] for m in self.metrics]
        table = mean_std_table(self.to_frame(), metrics, keep=["heads"], digits=digits)
        n = self.config.get("n_eval", "?")
        title = f"**{self.task}** on **{self.model}** ({n} examples"
        seeds = self.config.get("random_seeds")
        if "random" in self.settings and seeds:
            title += f"; random M over seeds {', '.join(map(str, seeds))}"
        return title + ")\n\n" + table + "\n"

    def predictions(self, setting: str, seed: int | None = None) -> pd.DataFrame:
        """The per-example records of one setting (one seed of the random setting)."""
        if setting not in self.settings:
            raise KeyError(f"setting {setting!r} was not evaluated; have {self.settings}")
        rows = self.records[self.records["setting"] == setting]
        if seed is not None:
            rows = rows[rows["seed"] == seed]
        return rows.reset_index(drop=True)

    def plot(self) -> Any:
        """Grouped bars: one panel per metric, one bar per setting (error bars: std over seeds)."""
        from lens_heads.core.figures import evaluation_figure

        return evaluation_figure(
            self.to_frame(),
            [METRICS[m] for m in self.metrics],
            title=f"{self.task} on {self.model}",
        )

    # -- io -----------------------------------------------------------------------------------
    def save(self, directory: str | os.PathLike[str], *, png: bool = False) -> list[Path]:
        """Write ``table.csv``, ``table.md``, ``per_seed.csv``, ``records.csv``, ``result.json``
        (everything :meth:`load` needs) and ``figure.html`` (and ``figure.png`` when ``png``
        and kaleido can export: it needs a Chrome binary; a failure is logged, not raised).
        Each file is written atomically."""
        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        written = [
            write_atomic(folder / "table.csv", self.to_frame().to_csv()),
            write_atomic(folder / "table.md", self.to_markdown()),
            write_atomic(folder / "per_seed.csv", self.per_seed_frame().to_csv(index=False)),
            write_atomic(folder / "records.csv", self.records.to_csv(index=False)),
        ]
        payload = {
            "format": "lens_heads.evaluation/1",
            "model": self.model,
            "task": self.task,
            "kind": self.kind,
            "settings": self.settings,
            "config": self.config,
            "runs": self.runs.to_dict(orient="records"),
            "records": self.records.to_dict(orient="records"),
        }
        written.append(
            write_atomic(folder / "result.json", json.dumps(payload, indent=1, default=str))
        )
        written += save_figures(folder, {"figure": self.plot()}, png=png)
        return written

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> EvaluationResult:
        """Read a result written by :meth:`save`."""
        path = Path(directory) / "result.json"
        if not path.is_file():
            raise FileNotFoundError(f"{path} does not exist; is {directory} an evaluation folder?")
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
            if payload.get("format") != "lens_heads.evaluation/1":
                raise ValueError(f"format tag {payload.get('format')!r}")
            return cls(
                model=payload["model"],
                task=payload["task"],
                kind=payload["kind"],
                settings=list(payload["settings"]),
                runs=pd.DataFrame(payload["runs"]),
                records=pd.DataFrame(payload["records"]),
                config=dict(payload["config"]),
            )
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(
                f"{path} is not a readable evaluation result ({type(error).__name__}: {error}); "
                "re-create it with EvaluationResult.save()"
            ) from error


# -- evaluation ------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Run:
    setting: str
    seed: int
    mask: HeadMask | None
    instructed: bool


def _resolve_mask(
    value: HeadMask | str | os.PathLike[str] | None, model: ModelLike
) -> HeadMask | None:
    from lens_heads.core.checks import resolve_mask

    return resolve_mask(value, model)  # a mask file or a train-mask output folder


def _check_arguments(*, batch_size: Any, n_eval: Any, max_new_tokens: Any) -> None:
    check_int("batch_size", batch_size, minimum=1)
    check_int("n_eval", n_eval, minimum=1)
    if max_new_tokens is not None:
        check_int("max_new_tokens", max_new_tokens, minimum=1)


def _check_fits(
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


def _plan(
    settings: Sequence[str],
    mask: HeadMask | None,
    other_mask: HeadMask | None,
    random_seeds: Sequence[int],
    task: Task,
) -> list[_Run]:
    runs = []
    for setting in settings:
        if setting not in SETTINGS:
            raise ValueError(
                f"unknown setting {setting!r}; choose from {', '.join(SETTINGS)} (comma-separated "
                "on the command line)"
            )
        if setting in _INSTRUCTED and not task.instruction:
            raise ValueError(
                f"setting {setting!r} needs an instruction but task {task.name!r} has none; pass "
                "instruction=... (--instruction on the command line)"
            )
        if setting in _MASK_SETTINGS and mask is None:
            raise ValueError(
                f"setting {setting!r} needs the trained mask M: pass mask=HeadMask or a mask file "
                "(--mask FILE on the command line)"
            )
        if setting == "other_mask" and other_mask is None:
            raise ValueError(
                "setting 'other_mask' needs a mask trained on another model of the same shape: "
                "pass other_mask= (--other-mask FILE on the command line)"
            )
        if setting == "random":
            if not random_seeds:
                raise ValueError("setting 'random' needs at least one seed in random_seeds")
            assert mask is not None
            runs += [
                _Run(setting, s, HeadMask.random_like(mask, seed=s), False) for s in random_seeds
            ]
        elif setting == "other_mask":
            runs.append(_Run(setting, -1, other_mask, False))
        else:
            runs.append(
                _Run(
                    setting, -1, mask if setting in _MASK_SETTINGS else None, setting in _INSTRUCTED
                )
            )
    return runs


def _default_settings(mask: HeadMask | None, other: HeadMask | None, task: Task) -> list[str]:
    settings = ["original"] + (["instruction"] if task.instruction else [])
    if mask is not None:
        settings += ["random", "mask"] + (["mask+instruction"] if task.instruction else [])
    if other is not None:
        settings.append("other_mask")
    return settings


def _encode(
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
    batch is unembedded; :func:`lens_heads.core.metrics.answer_ce` scores that window (the same
    answer tokens and predicting positions as the whole sequence)."""
    from lens_heads.core.metrics import answer_ce

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


def _first_line(text: str) -> str:
    stripped = text.strip()
    return stripped.split("\n", 1)[0].strip() if stripped else ""


def _newline_tokens(tokenizer: Any) -> list[int]:
    """Ids of the tokens that are only whitespace with a line break (``"\\n"``, ``"\\n\\n"``...)."""
    found = []
    for piece, index in tokenizer.get_vocab().items():
        if "\n" in piece or "Ċ" in piece or "<0x0A>" in piece:  # raw, byte-level, SentencePiece
            text = tokenizer.decode([index])
            if text and not text.strip() and "\n" in text:
                found.append(int(index))
    return sorted(found)


def _generate_and_score(
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
    stops = stop_token_ids(tokenizer)
    if newline_stops:
        stops = sorted(set(stops) | set(_newline_tokens(tokenizer)))
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
        return {**keywords, "per_example_masks": masks, **stacked}

    stopped_by: list[int | None] | None = None
    if cached:
        answers = [example.answer_tokens for example in encoded]
        decoded = decode_greedy(
            model, prompts, stops=stops, answers=answers, on_rows=on_rows, **run()
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
            again = decode_greedy(model, retry, stops=stop_token_ids(tokenizer), **run(blank))
            assert stopped_by is not None and again.stopped_by is not None
            for i, tokens, stop in zip(blank, again.new_tokens, again.stopped_by, strict=True):
                generated[i], stopped_by[i] = tokens, stop
        else:
            for i, tokens in zip(blank, greedy_generate(model, retry, **run(blank)), strict=True):
                generated[i] = tokens
    return generated, losses, stopped_by


def evaluate(
    model: ModelLike,
    task: Task | str | os.PathLike[str],
    settings: Sequence[str] | str | None = None,
    *,
    mask: HeadMask | str | os.PathLike[str] | None = None,
    other_mask: HeadMask | str | os.PathLike[str] | None = None,
    n_eval: int = 100,
    split_seed: int | None = None,
    random_seeds: Sequence[int] = (0, 1, 2),
    batch_size: int = 16,
    chat: bool | None = None,
    instruction: str | None = None,
    shots: int = 0,
    shot_seed: int = 0,
    separator: str = "\n\n",
    max_new_tokens: int | None = None,
    first_line: bool = True,
    stack_masks: bool = False,
    progress: bool = True,
) -> EvaluationResult:
    """Evaluate ``task`` on its last ``n_eval`` examples under each setting.

    Settings (rows of the paper's Tables 1, 2 and 6): ``"original"`` (bare input, no mask),
    ``"instruction"``, ``"random"`` (a random mask with as many heads as ``mask``, one run per
    seed of ``random_seeds``), ``"mask"``, ``"mask+instruction"`` and ``"other_mask"`` (a mask
    trained on another model of the same shape). By default: every setting the arguments allow.

    Each run generates greedily in left-padded batches (``task.max_new_tokens``: 10 for word
    tasks, 50 for sentences) and scores the first line of the output with the task's match
    rule; the answer CE is computed teacher forced under the same mask, on the prompt's KV cache.
    Prompts use the model's chat template when its tokenizer has one (``chat=None``), else the
    base-model format ``{input}\\n\\n``; ``shots=k`` prepends k demonstrations drawn (seeded by
    ``shot_seed``, per example) from the task's training split.

    ``stack_masks=True`` decodes the runs that share a prompt set (e.g. Original, the random
    masks and M, all uninstructed) in one pass with one per-example mask per row: fewer,
    larger batches; the same generations and scores, the answer CE to float rounding (a
    matrix product's sums may depend on how many rows its batch has).

    >>> import lens_heads as lh
    >>> model = lh.load_model("smollm2-135m-instruct")  # doctest: +SKIP
    >>> lh.evaluate(model, "country-capital", n_eval=40).to_frame()  # doctest: +SKIP
    """
    task = task if isinstance(task, Task) else get_task(task, instruction=instruction)
    if instruction is not None and task.instruction != instruction:
        from dataclasses import replace

        task = replace(task, instruction=instruction)
    _check_arguments(batch_size=batch_size, n_eval=n_eval, max_new_tokens=max_new_tokens)
    mask_ = _resolve_mask(mask, model)
    other_ = _resolve_mask(other_mask, model)
    if isinstance(settings, str):
        settings = [s.strip() for s in settings.split(",") if s.strip()]
    chosen = list(settings) if settings is not None else _default_settings(mask_, other_, task)
    if not chosen:
        raise ValueError(f"no settings to evaluate; choose from {', '.join(SETTINGS)}")
    if len(set(chosen)) != len(chosen):
        raise ValueError(f"settings repeat: {chosen}")
    plan = _plan(chosen, mask_, other_, random_seeds, task)
    run_rows, record_rows, config = _run_plan(
        model,
        task,
        plan,
        n_eval=n_eval,
        split_seed=split_seed,
        batch_size=batch_size,
        chat=chat,
        shots=shots,
        shot_seed=shot_seed,
        separator=separator,
        max_new_tokens=max_new_tokens,
        first_line=first_line,
        stack_masks=stack_masks,
        progress=progress,
    )
    config["random_seeds"] = list(random_seeds) if "random" in chosen else []
    config["mask"] = _mask_info(mask, mask_)
    config["other_mask"] = _mask_info(other_mask, other_)
    return EvaluationResult(
        model=model_name(model),
        task=task.name,
        kind=task.kind,
        settings=chosen,
        runs=pd.DataFrame(run_rows),
        records=pd.DataFrame(record_rows),
        config=config,
    )


_Outputs = tuple[list[list[int]], Float[Tensor, " n"], list[int | None] | None]


def _run_plan(
    model: ModelLike,
    task: Task,
    plan: Sequence[_Run],
    *,
    n_eval: int,
    split_seed: int | None,
    batch_size: int,
    chat: bool | None,
    shots: int,
    shot_seed: int,
    separator: str,
    max_new_tokens: int | None,
    first_line: bool,
    stack_masks: bool,
    progress: bool,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """Generate and score every run of ``plan`` on the task's held-out examples: ``(runs,
    records, config)`` rows of :class:`EvaluationResult`. With ``stack_masks`` the runs that
    share a prompt set are decoded together, one per-example mask per row."""
    train, evaluation = task.split(n_eval=n_eval, seed=split_seed)
    if chat is None:
        from lens_heads.core.prompts import has_chat_template

        chat = has_chat_template(model.tokenizer)
    if shots < 0:
        raise ValueError(f"shots must be >= 0, got {shots}")
    new_tokens = task.max_new_tokens if max_new_tokens is None else max_new_tokens
    prompts: dict[bool, list[EncodedExample]] = {}
    for instructed in dict.fromkeys(run.instructed for run in plan):  # every prompt, before compute
        prompts[instructed] = _encode(
            model,
            evaluation,
            instructed=instructed,
            chat=chat,
            shots=shots,
            shot_pool=train,
            shot_seed=shot_seed,
            separator=separator,
        )
        _check_fits(model, prompts[instructed], evaluation, new_tokens)
    # the bar counts examples over all settings (a setting can take minutes)
    bar = tqdm(
        total=len(plan) * len(evaluation),
        desc=f"evaluating {task.name}",
        unit="example",
        disable=not progress,
    )
    decode = dict(newline_stops=first_line, on_rows=bar.update)
    outputs: dict[int, _Outputs] = {}
    if stack_masks:
        for instructed, encoded in prompts.items():
            members = [i for i, run in enumerate(plan) if run.instructed == instructed]
            bar.set_postfix_str(f"{len(members)} runs stacked")
            stacked = _generate_stacked(
                model, encoded, [plan[i].mask for i in members], new_tokens, batch_size, **decode
            )
            outputs.update(zip(members, stacked, strict=True))
    else:
        for i, run in enumerate(plan):
            bar.set_postfix_str(f"{run.setting}" + (f" seed {run.seed}" if run.seed >= 0 else ""))
            outputs[i] = _generate_and_score(  # the CE raises if not finite
                model, prompts[run.instructed], run.mask, new_tokens, batch_size, **decode
            )
    bar.close()
    run_rows: list[dict[str, Any]] = []
    record_rows: list[dict[str, Any]] = []
    for i, run in enumerate(plan):
        metrics, records = _score_run(
            model, task, evaluation, prompts[run.instructed], run, outputs[i], first_line
        )
        run_rows.append(metrics)
        record_rows += records
    config = {
        "n_eval": len(evaluation),
        "split_seed": split_seed,
        "batch_size": batch_size,
        "chat": chat,
        "shots": shots,
        "shot_seed": shot_seed,
        "separator": separator,
        "max_new_tokens": new_tokens,
        "first_line": first_line,
        "match": task.match,
        "instruction": task.instruction,
        "stack_masks": stack_masks,
    }
    return run_rows, record_rows, config


def _generate_stacked(
    model: ModelLike,
    encoded: Sequence[EncodedExample],
    masks: Sequence[HeadMask | None],
    max_new_tokens: int,
    batch_size: int,
    *,
    newline_stops: bool,
    on_rows: Callable[[int], None] | None = None,
) -> list[_Outputs]:
    """:func:`_generate_and_score` of each mask on the same prompts, in one decoding pass:
    the rows are (prompt, mask) pairs, prompt-major, each under its own multiplier.

    A batch holds ``batch_size`` prompts with all their masks, so it pads exactly as one
    mask's batch of the same prompts would, and each mask's shared prefix runs once."""
    if len(masks) == 1:
        return [
            _generate_and_score(
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
    generated, losses, stopped_by = _generate_and_score(
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


def _score_run(
    model: ModelLike,
    task: Task,
    evaluation: Task,
    encoded: Sequence[EncodedExample],
    run: _Run,
    outputs: _Outputs,
    first_line: bool,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One run's metrics row and per-example records from its generated tokens and CE."""
    from lens_heads.core.metrics import bleu, chrf_pp, is_correct, is_echo, is_exact_match, rouge_l

    generated, losses, stopped_by = outputs
    tokenizer = model.tokenizer
    texts = [tokenizer.decode(tokens, skip_special_tokens=True) for tokens in generated]
    predictions = [_first_line(text) if first_line else text.strip() for text in texts]
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
    from lens_heads.core.prompts import token_text

    if stopped_by is None:
        return None
    token = stopped_by[index]
    return "length" if token is None else token_text(tokenizer, int(token))


def _mask_info(source: Any, mask: HeadMask | None) -> dict[str, Any] | None:
    if mask is None:
        return None
    info: dict[str, Any] = {"heads": mask.n_selected, "alpha": mask.alpha}
    if not isinstance(source, HeadMask):
        info["file"] = os.fspath(source)
    for key in ("model", "task"):
        if key in mask.metadata:
            info[key] = mask.metadata[key]
    return info
