"""CLI commands of the token-alignment-heads line (registered in :mod:`lens_heads.cli`).

lens-heads translation-scores --model gemma-3-270m --pairs en-fr,en-de [--decoding greedy]
                              [--alignments FILE] --out results/ts
lens-heads ablate-heads --model gemma-3-270m --task en-fr --heads top:6 --out results/ablate
lens-heads trater --model gemma-3-270m --texts texts.jsonl --heads top:20 --out results/trater
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from lens_heads.alignment import ScoreConfig, TRaterConfig
from lens_heads.alignment.internal import ABLATION, CHOICES
from lens_heads.cli import _common as common
from lens_heads.cli._options import add_settings, settings_from
from lens_heads.core import InputError
from lens_heads.engine import EvaluationConfig

__all__ = ["COMMANDS"]


def _add_score_arguments(parser: argparse.ArgumentParser) -> None:
    add_settings(
        parser,
        ScoreConfig,
        only=("decoding", "query", "argmax_over", "average", "shots", "n_eval", "batch_size"),
        choices=CHOICES,
    )
    common.deprecated(parser, "--n", "--n-eval", "n_eval", type=common.positive)


def _add_translation_scores(sub: Any) -> None:

    parser = sub.add_parser(
        "translation-scores",
        help="translation score of every head per language pair (token alignment heads)",
        description="Writes, per pair, a folder with table.csv, table.md, result.json, "
        "tensors.safetensors (TranslationScores.load), figure.html (Figure 4) and "
        "distribution.html (Figure 3); summary.md and summary.csv list the alignment heads.",
    )
    common.add_model_argument(parser)
    common.add_inputs(parser, "pairs", "alignments", pairs={"required": True})
    parser.add_argument(
        "--threshold",
        type=common.probability,
        default=0.1,
        help="alignment-head threshold (a translation score in [0, 1])",
    )
    _add_score_arguments(parser)
    common.add_out_argument(parser)


def _cmd_translation_scores(args: argparse.Namespace) -> int:
    import pandas as pd

    from lens_heads.alignment import translation_scores
    from lens_heads.alignment.internal import check_pairs
    from lens_heads.core import write_atomic

    common.check_model(args)
    config = settings_from(args, ScoreConfig, progress=True)
    pairs = [p.strip() for p in args.pairs.split(",") if p.strip()]
    if not pairs:
        raise InputError(f"--pairs {args.pairs!r} names no pair; e.g. en-fr,en-de or a file")
    repeated = sorted({pair for pair in pairs if pairs.count(pair) > 1})
    if repeated:
        raise InputError(f"--pairs names {', '.join(repeated)} more than once")
    if args.alignments and len(pairs) != 1:
        raise InputError("--alignments goes with exactly one --pairs entry")
    for pair in pairs:  # names, files, alignments, shots: before the model loads
        check_pairs(pair, alignments=args.alignments, shots=args.shots, n=args.n_eval)
    with common.writing(args.out) as out:
        model = common.load_model(args)
        rows, written, text = [], [], []
        for pair in pairs:
            scores = translation_scores(model, pair, alignments=args.alignments, config=config)
            name = Path(pair).stem if Path(pair).is_file() else pair
            written += scores.save(out / name, png=True)
            heads = scores.alignment_heads(args.threshold)
            rows.append(
                {
                    "pair": pair,
                    "sentences": len(scores.sources),
                    "queries": scores.n_queries,
                    "chance": scores.chance,
                    "alignment_heads": len(heads),
                    "heads": " ".join(heads),
                    "top5": " ".join(scores.top(5)),
                }
            )
            text.append(scores.to_markdown())
        summary = pd.DataFrame(rows)
        written.append(write_atomic(out / "summary.csv", summary.to_csv(index=False)))
        written.append(write_atomic(out / "summary.md", "\n".join(text)))
    print("\n".join(text))
    common.print_written(written)
    return 0


def _add_top_k_scores(parser: argparse.ArgumentParser) -> None:
    """The translation scores behind ``--heads top:K`` (ScoreConfig's fields, ``--scores-*``)."""
    group = parser.add_argument_group(
        "top:K heads", "with --heads top:K: the translation scores that rank the heads"
    )
    add_settings(group, ScoreConfig, only=("n_eval", "shots"), prefix="scores",
                 defaults={"n_eval": 100})  # fmt: skip
    common.deprecated(
        parser, "--scores-n", "--scores-n-eval", "scores_n_eval", type=common.positive
    )


def _heads_before_model(value: str, shape: Any, pair: str, args: argparse.Namespace) -> Any:
    """``--heads``: ``top:K`` (K checked; the pair's scores come after the model loads) as the
    int K, or labels / a labels file / a mask file resolved to labels, before the model loads."""
    from lens_heads.alignment.internal import check_pairs, resolve_heads

    total = shape.n_layers * shape.n_heads if shape is not None else None
    k = common.top_k_of(value, total)
    if k is not None:
        check_pairs(pair, n=args.scores_n_eval, shots=args.scores_shots)
        return k
    try:
        return resolve_heads(value, shape)
    except ValueError as error:
        raise InputError(f"--heads: {error}") from error


def _heads_argument(heads: Any, model: Any, pair: str, args: argparse.Namespace) -> tuple:
    """``(heads, alignment heads to exclude from random controls)``: for ``top:K`` the top K of
    the translation scores of ``pair`` on its first --scores-n-eval pairs."""
    if not isinstance(heads, int):
        return heads, None
    from lens_heads.alignment import translation_scores

    scores = translation_scores(
        model, pair, n_eval=args.scores_n_eval, shots=args.scores_shots, progress=True
    )
    return scores.top(heads), scores.alignment_heads(0.1)


def _add_ablate_heads(sub: Any) -> None:

    parser = sub.add_parser(
        "ablate-heads",
        help="BLEU/chrF++ with heads removed vs random heads removed (Figure 8)",
        description="Writes table.csv, table.md (with failure categories), result.json "
        "(AblationResult.load) and figure.html to --out.",
    )
    common.add_model_argument(parser)
    common.add_inputs(
        parser,
        task={"required": True, "help": "translation pair (en-fr) or task file"},
        heads={"required": True, "help": "top:K (by translation score), labels, or a file"},
    )
    common.add_inputs(parser, "control_task")
    _add_top_k_scores(parser)
    # every run's evaluation: ablate_heads' own defaults (ABLATION: two shots, seeds 0, 1, 2)
    add_settings(
        parser, EvaluationConfig, only=ABLATE_FIELDS,
        defaults={name: getattr(ABLATION, name) for name in ABLATE_FIELDS},
    )  # fmt: skip
    common.deprecated(
        parser, "--random-controls", "--random-seeds 0,1,...", "random_controls",
        type=common.non_negative,
    )  # fmt: skip
    common.add_out_argument(parser)


#: the evaluation settings ablate-heads takes from its command line
ABLATE_FIELDS = ("n_eval", "random_seeds", "shots", "max_new_tokens", "batch_size", "chat")


def _cmd_ablate_heads(args: argparse.Namespace) -> int:
    from lens_heads.alignment import ablate_heads
    from lens_heads.core import get_task

    shape = common.check_model(args)
    fixed = {}
    if args.random_controls is not None:  # the old spelling: a count of seeds 0, 1, ...
        fixed["random_seeds"] = tuple(range(args.random_controls))
    config = settings_from(args, EvaluationConfig, base=ABLATION, **fixed)
    task = get_task(args.task)
    control = get_task(args.control_task) if args.control_task else None
    for current in (task, control):
        if current is not None:
            current.split(n_eval=args.n_eval)  # held out: the last --n-eval examples
    heads = _heads_before_model(args.heads, shape, args.task, args)

    def compute(model: Any, out: Path) -> Any:
        chosen, alignment = _heads_argument(heads, model, args.task, args)
        return ablate_heads(
            model, task, chosen, exclude=alignment, control_task=control, config=config
        )

    return common.write_result(args, compute)


def _add_trater(sub: Any) -> None:

    parser = sub.add_parser(
        "trater",
        help="TRater data scores: CE with alignment heads masked minus CE (eq. 4)",
        description="Writes table.csv (ranked), scores.jsonl, table.md, result.json "
        "(TRaterResult.load), figure.html and selected.csv (top fraction per language).",
    )
    common.add_model_argument(parser)
    common.add_inputs(
        parser,
        texts={"required": True, "help": "CSV/JSONL with 'text' (+ 'lang'), or .txt"},
        heads={"required": True},
    )
    parser.add_argument("--pair", default="en-fr", help="pair whose scores rank heads for top:K")
    _add_top_k_scores(parser)
    common.deprecated(parser, "--shots", "--scores-shots", "scores_shots", type=common.non_negative)
    parser.add_argument(
        "--select", type=common.fraction, default=0.2, help="top fraction per language"
    )
    add_settings(parser, TRaterConfig, skip=("progress",))  # --batch-size
    common.add_out_argument(parser)


def _cmd_trater(args: argparse.Namespace) -> int:
    from lens_heads.alignment import trater_scores
    from lens_heads.alignment.internal import load_texts
    from lens_heads.core import write_atomic

    config = settings_from(args, TRaterConfig, progress=True)
    shape = common.check_model(args)
    texts = load_texts(args.texts)
    heads = _heads_before_model(args.heads, shape, args.pair, args)
    with common.writing(args.out) as out:
        model = common.load_model(args)
        heads, _ = _heads_argument(heads, model, args.pair, args)
        result = trater_scores(model, texts, heads, config)
        written = result.save(out, png=True)
        selected = result.select(args.select)
        written.append(write_atomic(out / "selected.csv", selected.to_csv()))
    print(result.to_markdown())
    common.print_written(written)
    return 0


COMMANDS = [
    ("translation-scores", _add_translation_scores, _cmd_translation_scores),
    ("ablate-heads", _add_ablate_heads, _cmd_ablate_heads),
    ("trater", _add_trater, _cmd_trater),
]


#: each command's examples, run by the tests (common.Examples: the placeholders)
EXAMPLES = {
    "translation-scores": common.Examples(
        bad="--model {M} --pairs {pairs} --alignments {bad_json} --out {out}",
        message="align.json:1: not valid JSON",
        good="--model {M} --pairs en-fr",
    ),
    "ablate-heads": common.Examples(
        bad="--model {M} --task en-fr --heads L2H0 --out {out}",
        message="head L2H0 is out of range for a model with 2 layers x 4 heads",
        good="--model {M} --task en-fr --heads L0H1 --n-eval 4",
    ),
    "trater": common.Examples(
        bad="--model {M} --texts {empty} --heads L0H1 --out {out}",
        message="empty.txt is empty",
        good="--model {M} --texts {texts} --heads L0H1",
    ),
}
