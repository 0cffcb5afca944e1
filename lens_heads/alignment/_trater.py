"""TRater data scoring (token alignment heads paper, eq. 4): per text, the mean over its
tokens of the cross-entropy with ``heads`` masked minus the cross-entropy of the full model.
Texts that lean on the alignment heads (parallel, bilingual text) score high.

>>> import lens_heads as lh
>>> model = lh.tiny_model()
>>> result = lh.trater_scores(model, ["the cat", "le chat et le chien"], ["L0H1"])
>>> tuple(result.scores.shape)
(2,)
>>> float(lh.trater_scores(model, ["the cat"], []).scores[0])
0.0
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import torch
from jaxtyping import Float
from torch import Tensor
from tqdm.auto import tqdm

from lens_heads.alignment._ablation import _removal, resolve_heads
from lens_heads.alignment._trater_config import TRaterConfig
from lens_heads.core import (
    HeadMask,
    InputError,
    LensHeadsError,
    configure,
    head_shape,
    markdown_table,
    pad_token_id,
    write_atomic,
)
from lens_heads.core.internal import (
    LOGITS_BUDGET_BYTES,
    FolderResult,
    InputTypeError,
    NonFiniteError,
    maybe_mask,
    model_name,
    read_text_file,
)

__all__ = ["TRaterResult", "load_texts", "trater_scores"]


class TextFileError(LensHeadsError, ValueError):
    """A texts file that cannot be read; the message names the line and the fix."""


def load_texts(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Texts from a CSV (a ``text`` column, optional ``lang`` and ``id``), JSONL (objects with
    ``text``, optional ``lang``/``id``) or plain text file (one text per line)."""
    path = Path(path)
    text = read_text_file(path, "texts file", error=TextFileError)
    if not text.strip():
        raise TextFileError(
            f"texts file {path} is empty; it should hold one text per line (.txt), a 'text' "
            "column (.csv) or objects with a 'text' field (.jsonl)"
        )
    if path.suffix == ".csv":
        frame = pd.read_csv(io.StringIO(text), keep_default_na=False)
    elif path.suffix == ".jsonl":
        rows = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise TextFileError(f"{path}:{number}: not valid JSON ({error.msg})") from error
            if not isinstance(rows[-1], dict):
                raise TextFileError(f"{path}:{number}: expected an object with a 'text' field")
        frame = pd.DataFrame(rows)
    else:
        frame = pd.DataFrame({"text": [line for line in text.splitlines() if line.strip()]})
    if "text" not in frame:
        raise TextFileError(f"{path}: no 'text' column/field (have {list(frame.columns)})")
    return frame


@dataclass(repr=False)
class TRaterResult(FolderResult):
    """Per-text TRater scores with the texts, their languages (if known) and token counts."""

    model: str
    heads: list[str]
    texts: list[str]
    languages: list[str]
    scores: Float[Tensor, " n_texts"]
    n_tokens: Float[Tensor, " n_texts"]
    config: dict[str, Any] = field(default_factory=dict)

    _format: ClassVar[str] = "lens_heads.trater/1"

    def to_frame(self) -> pd.DataFrame:
        """The ranked table: highest score first."""
        frame = pd.DataFrame(
            {
                "text": self.texts,
                "lang": self.languages,
                "score": self.scores.tolist(),
                "n_tokens": [int(n) for n in self.n_tokens.tolist()],
            }
        )
        frame.index.name = "id"
        return frame.sort_values("score", ascending=False, kind="stable")

    def select(self, fraction: float = 0.2, *, per_language: bool = True) -> pd.DataFrame:
        """The top ``fraction`` of texts by score (of each language with ``per_language``)."""
        if not 0 < fraction <= 1:
            raise InputError(f"fraction must lie in (0, 1], got {fraction}")
        frame = self.to_frame()
        groups = frame.groupby("lang", sort=True) if per_language else [("", frame)]
        parts = [part.head(max(1, round(fraction * len(part)))) for _, part in groups]
        return pd.concat(parts)

    def to_markdown(self, k: int = 10) -> str:
        top = self.to_frame().head(k)[["lang", "score", "text"]].reset_index(drop=True)
        top.insert(0, "rank", range(1, len(top) + 1))
        top["text"] = top["text"].str.slice(0, 80)
        title = f"**TRater** on **{self.model}**, heads {', '.join(self.heads) or '(none)'}\n"
        return title + "\n" + markdown_table(top, floatfmt=".4f", index=False, empty="") + "\n"

    def to_jsonl(self, path: str | os.PathLike[str]) -> Path:
        """Write the ranked table as JSONL (one object per text)."""
        rows = self.to_frame().reset_index().to_dict(orient="records")
        return write_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))

    def plot(self) -> Any:
        """Score distribution per language (box plots)."""
        import plotly.express as px

        figure = px.box(self.to_frame(), x="lang", y="score", points="all")
        figure.update_layout(title=f"TRater scores, {self.model}", template="plotly_white")
        return figure

    def save(self, directory: str | os.PathLike[str], *, png: bool = False) -> list[Path]:
        written = super().save(directory, png=png)
        return [*written, self.to_jsonl(Path(directory) / "scores.jsonl")]


@torch.inference_mode()
def _token_ce(
    model: Any, encoded: Sequence[list[int]], mask: HeadMask | None, batch_size: int
) -> list[Tensor]:
    """Per-token CE of each text (positions 1..n-1), on right-padded batches."""
    pad = pad_token_id(model.tokenizer)
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    result: list[Tensor] = [torch.empty(0)] * len(encoded)
    d_vocab = int(model.cfg.d_vocab)
    start = 0
    with maybe_mask(model, mask):
        while start < len(order):
            stop = start + 1
            while stop < len(order) and stop - start < batch_size:
                width = len(encoded[order[stop]])
                if (stop - start + 1) * width * d_vocab * 4 > LOGITS_BUDGET_BYTES:
                    break
                stop += 1
            rows = order[start:stop]
            width = max(len(encoded[i]) for i in rows)
            tokens = torch.full((len(rows), width), pad, dtype=torch.long)
            for row, index in enumerate(rows):
                tokens[row, : len(encoded[index])] = torch.tensor(encoded[index])
            logits = model(tokens.to(model.cfg.device)).float()
            # every position on flat, contiguous rows (the last one's target is a dummy, dropped):
            # a class dimension in the middle (``transpose(1, 2)``) or a sliced copy of the
            # logits costs 3-6x more for the CE with a 262k vocabulary on a CPU
            targets = torch.roll(tokens, -1, dims=1).to(logits.device)
            losses = torch.nn.functional.cross_entropy(
                logits.view(-1, logits.shape[-1]), targets.view(-1), reduction="none"
            )
            losses = losses.view(targets.shape)[:, :-1].cpu()
            if not torch.isfinite(losses).all():
                raise NonFiniteError("non-finite cross-entropy in TRater; use float32")
            for row, index in enumerate(rows):
                result[index] = losses[row, : len(encoded[index]) - 1]
            start = stop
    return result


def trater_scores(
    model: Any,
    texts: Sequence[str] | pd.DataFrame | str | os.PathLike[str],
    heads: Any,
    config: TRaterConfig | None = None,
    *,
    languages: Sequence[str] | None = None,
    **overrides: Any,
) -> TRaterResult:
    """TRater score of each text: ``mean_i [CE(masked, x_i) - CE(model, x_i)]`` over the
    text's predicted tokens, with ``heads`` (labels, a :class:`HeadMask` of the heads to mask,
    or a file) removed through the ``hook_z`` mask. ``texts`` is a list, a DataFrame with a
    ``text`` column (and ``lang``), or a CSV/JSONL/text file (:func:`load_texts`). Texts are
    scored in right-padded batches (no attention mask needed), equal to one at a time; with
    no heads every score is exactly 0. ``config`` (a :class:`TRaterConfig`; its fields also as
    keywords, ``batch_size=4``) says how the texts run.
    """
    config = configure(TRaterConfig, config, overrides, "trater_scores")
    if isinstance(texts, (str, os.PathLike)):
        texts = load_texts(texts)
    if isinstance(texts, pd.DataFrame):
        frame = texts
        if languages is None and "lang" in frame:
            languages = [str(x) for x in frame["lang"]]
        texts = [str(x) for x in frame["text"]]
    if not isinstance(texts, Sequence) or not all(isinstance(text, str) for text in texts):
        raise InputTypeError("texts must be a list of strings, a DataFrame with 'text' or a file")
    texts = list(texts)
    if not texts:
        raise InputError("no texts to score")
    if languages is not None and len(languages) != len(texts):
        raise InputError(f"got {len(languages)} languages for {len(texts)} texts")
    labels = resolve_heads(heads, model)
    tokenizer = model.tokenizer
    encoded = []
    n_ctx = int(getattr(model.cfg, "n_ctx", 0) or 0)
    for index, text in enumerate(texts):
        if not text.strip():
            raise InputError(f"text {index} is empty; remove it")
        ids = list(tokenizer(text).input_ids)
        if len(ids) < 2:
            raise InputError(f"text {index} ({text!r}) has fewer than two tokens; nothing to score")
        if n_ctx and len(ids) > n_ctx:
            raise InputError(
                f"text {index} has {len(ids)} tokens, more than the model's context of {n_ctx}; "
                "split it into shorter texts"
            )
        encoded.append(ids)
    n_layers, n_heads = head_shape(model)
    size = config.batch_size
    bar = tqdm(total=2, desc="TRater", disable=not config.progress, leave=False)
    clean = _token_ce(model, encoded, None, size)
    bar.update()
    masked = _token_ce(model, encoded, _removal(labels, n_layers, n_heads), size)
    bar.update()
    bar.close()
    scores = torch.stack([(m - c).mean() for m, c in zip(masked, clean, strict=True)])
    return TRaterResult(
        model=model_name(model),
        heads=labels,
        texts=texts,
        languages=list(languages) if languages is not None else [""] * len(texts),
        scores=scores.float(),
        n_tokens=torch.tensor([float(len(c)) for c in clean]),
        config={"batch_size": size},
    )
