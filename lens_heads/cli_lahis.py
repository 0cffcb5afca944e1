"""The LAHIS subcommands of ``lens-heads``: ``importance``, ``language-heads``,
``language-perplexity`` and ``transfer`` (registered in :func:`lens_heads.cli.build_parser`),
and the ``--soft --heads`` options of ``train-mask``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

__all__ = ["COMMANDS", "add_soft_arguments", "trainable_from_args"]


def _cli() -> Any:
    from lens_heads import cli

    return cli


def _floats(text: str, name: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError as error:
        raise ValueError(f"{name} must be comma-separated numbers, got {text!r}") from error


def _ints(text: str, name: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError as error:
        raise ValueError(f"{name} must be comma-separated integers, got {text!r}") from error


def _add_compute_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--method", default="lahis", choices=["lahis", "abs_grad", "taylor"])
    parser.add_argument("--n-docs", type=int, help="documents per language (default: all)")
    parser.add_argument("--batch-size", type=int, help="documents per batch (default: by tokens)")
    parser.add_argument("--max-tokens", type=int, help="truncate documents to this many tokens")
    parser.add_argument(
        "--compute-dtype",
        default="auto",
        choices=["auto", "float32", "bfloat16"],
        help="autocast: auto = bf16 where native",
    )


# -- importance ------------------------------------------------------------------------------
def _add_importance(sub: Any) -> None:
    parser = sub.add_parser(
        "importance",
        help="gradient head importance (LAHIS) on a set of documents",
        description="Writes table.csv/table.md (heads by importance), result.json + "
        "tensors.safetensors (HeadImportance.load) and figure.html (heat map) to --out.",
    )
    _cli()._add_model_argument(parser)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--texts", help="a text file, one document per line")
    source.add_argument("--language", help="a language of the built-in corpus (en fr es de zh)")
    _add_compute_arguments(parser)
    parser.add_argument("--out", required=True, help="output directory")


def _cmd_importance(args: argparse.Namespace) -> int:
    from lens_heads.importance import head_importance
    from lens_heads.languages import load_texts_by_language

    if args.texts:
        path = Path(args.texts)
        if not path.is_file():
            raise FileNotFoundError(f"--texts {path} does not exist")
        texts = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
        texts = [text for text in texts if text]
    else:
        corpus = load_texts_by_language()
        if args.language not in corpus:
            raise ValueError(f"--language {args.language!r} is not one of {list(corpus)}")
        texts = corpus[args.language]
    if args.n_docs:
        texts = texts[: args.n_docs]
    model = _cli()._load(args)
    result = head_importance(
        model,
        texts,
        method=args.method,
        batch_size=args.batch_size,
        max_tokens=args.max_tokens,
        dtype=args.compute_dtype,
    )
    written = result.save(args.out, png=True)
    print(result.to_markdown(k=10))
    _cli()._print_written(written)
    return 0


# -- language heads --------------------------------------------------------------------------
def _add_language_heads(sub: Any) -> None:
    parser = sub.add_parser(
        "language-heads",
        help="language-specific and language-general heads (LAHIS)",
        description="Importance per language, the heads strictly above each language's "
        "quantile, general = in the sets of >= --min-languages languages. Writes table.csv, "
        "table.md, result.json + tensors.safetensors (LanguageHeads.load), figure.html.",
    )
    _cli()._add_model_argument(parser)
    parser.add_argument(
        "--texts",
        help="folder of <lang>.txt files or a TSV with a language header (default: "
        "the built-in en/fr/es/de/zh corpus)",
    )
    parser.add_argument("--languages", help="comma-separated subset of the languages")
    parser.add_argument("--quantile", type=float, default=0.96)
    parser.add_argument("--min-languages", type=int, default=4)
    _add_compute_arguments(parser)
    parser.add_argument("--out", required=True, help="output directory")


def _cmd_language_heads(args: argparse.Namespace) -> int:
    from lens_heads.languages import language_heads, load_texts_by_language

    texts = load_texts_by_language(args.texts)
    if args.languages:
        wanted = [lang.strip() for lang in args.languages.split(",") if lang.strip()]
        missing = [lang for lang in wanted if lang not in texts]
        if missing:
            raise ValueError(f"--languages {missing} not in the texts ({list(texts)})")
        texts = {lang: texts[lang] for lang in wanted}
    model = _cli()._load(args)
    result = language_heads(
        model,
        texts,
        quantile=args.quantile,
        min_languages=args.min_languages,
        method=args.method,
        n_docs=args.n_docs,
        batch_size=args.batch_size,
        max_tokens=args.max_tokens,
        dtype=args.compute_dtype,
    )
    written = result.save(args.out, png=True)
    print(result.to_markdown())
    _cli()._print_written(written)
    return 0


# -- the perplexity experiment ----------------------------------------------------------------
def _add_perplexity(sub: Any) -> None:
    parser = sub.add_parser(
        "language-perplexity",
        help="remove a language's specific heads: its perplexity vs other languages' and random",
        description="Reads language heads saved by `lens-heads language-heads` and writes "
        "table.csv, table.md, result.json and figure.html to --out.",
    )
    _cli()._add_model_argument(parser)
    parser.add_argument("--heads", required=True, help="folder written by language-heads")
    parser.add_argument("--texts", help="as language-heads (default: the built-in corpus)")
    parser.add_argument("--languages", help="comma-separated subset")
    parser.add_argument("--n-docs", type=int, default=20, help="held-out documents per language")
    parser.add_argument("--skip", type=int, default=100, help="documents skipped (held out)")
    parser.add_argument("--seeds", default="0,1,2", help="seeds of the random heads")
    parser.add_argument("--out", required=True, help="output directory")


def _cmd_perplexity(args: argparse.Namespace) -> int:
    from lens_heads.language_experiments import perplexity_experiment
    from lens_heads.languages import LanguageHeads

    heads = LanguageHeads.load(args.heads)
    languages = [x.strip() for x in args.languages.split(",")] if args.languages else None
    model = _cli()._load(args)
    result = perplexity_experiment(
        model,
        heads,
        args.texts,
        languages=languages,
        n_docs=args.n_docs,
        skip=args.skip,
        seeds=_ints(args.seeds, "--seeds"),
    )
    written = result.save(args.out, png=True)
    print(result.to_markdown())
    _cli()._print_written(written)
    return 0


# -- attention transfer ---------------------------------------------------------------------
def _add_transfer(sub: Any) -> None:
    parser = sub.add_parser(
        "transfer",
        help="attention transfer: scale the target language's heads up, another's to 0",
        description="Translates --source -> --target without and with the scale; writes "
        "table.csv/table.md (off-target rate by langid, chrF++), result.json (outputs too) and "
        "figure.html to --out. --heads is a folder written by language-heads; without it the "
        "heads are computed first (--quantile, --min-languages, --n-docs).",
    )
    _cli()._add_model_argument(parser)
    parser.add_argument("--heads", help="folder written by language-heads")
    parser.add_argument("--source", default="en")
    parser.add_argument("--target", default="fr")
    parser.add_argument(
        "--weaken",
        default="source",
        help="language whose heads go to x0, 'source' (default) or 'none'",
    )
    parser.add_argument("--factors", default="3,5", help="comma-separated scales of the target")
    parser.add_argument("--n-eval", type=int, default=20)
    parser.add_argument("--shots", type=int, default=0)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--quantile", type=float, default=0.96)
    parser.add_argument("--min-languages", type=int, default=4)
    parser.add_argument("--n-docs", type=int, default=16, help="documents per language for heads")
    parser.add_argument("--out", required=True, help="output directory")


def _cmd_transfer(args: argparse.Namespace) -> int:
    from lens_heads.language_experiments import attention_transfer
    from lens_heads.languages import LanguageHeads, language_heads

    model = _cli()._load(args)
    if args.heads:
        heads = LanguageHeads.load(args.heads)
    else:
        heads = language_heads(
            model, quantile=args.quantile, min_languages=args.min_languages, n_docs=args.n_docs
        )
    weaken = None if args.weaken.lower() == "none" else args.weaken
    result = attention_transfer(
        model,
        heads,
        source=args.source,
        target=args.target,
        weaken=weaken,
        factors=_floats(args.factors, "--factors"),
        n_eval=args.n_eval,
        shots=args.shots,
        max_new_tokens=args.max_new_tokens,
    )
    written = result.save(args.out, png=True)
    if not args.heads:
        written += heads.save(Path(args.out) / "heads", png=False)
    print(result.to_markdown())
    _cli()._print_written(written)
    return 0


# -- train-mask --soft ------------------------------------------------------------------------
def add_soft_arguments(parser: argparse.ArgumentParser) -> None:
    """``--soft`` and ``--heads FILE|top:N`` (with ``--importance DIR``) for ``train-mask``."""
    parser.add_argument(
        "--soft",
        action="store_true",
        help="LAHIS soft mask: multipliers from 1 (>= 0), no noise; use with --heads",
    )
    parser.add_argument(
        "--heads",
        help="soft mask's trainable heads: a file of labels (L3H7 ...) or top:N of --importance",
    )
    parser.add_argument(
        "--importance", help="folder written by `lens-heads importance` (for --heads top:N)"
    )


def trainable_from_args(args: argparse.Namespace) -> tuple[str, ...] | None:
    """The trainable heads named by ``--heads`` (None when not given)."""
    spec = getattr(args, "heads", None)
    if spec is None:
        return None
    if not args.soft:
        raise ValueError("--heads names the trainable heads of a soft mask: add --soft")
    if spec.startswith("top:"):
        from lens_heads.importance import HeadImportance

        if not args.importance:
            raise ValueError("--heads top:N ranks heads by --importance DIR: give that folder")
        try:
            k = int(spec[4:])
        except ValueError as error:
            raise ValueError(f"--heads {spec!r}: N must be an integer, e.g. top:2") from error
        return tuple(HeadImportance.load(args.importance).top(k))
    path = Path(spec)
    if not path.is_file():
        raise FileNotFoundError(f"--heads {path}: no such file (or use top:N with --importance)")
    labels = path.read_text(encoding="utf-8").replace(",", " ").split()
    if not labels:
        raise ValueError(f"--heads {path} names no heads; write labels like L3H7, one per line")
    return tuple(labels)


COMMANDS = [
    ("importance", _add_importance, _cmd_importance),
    ("language-heads", _add_language_heads, _cmd_language_heads),
    ("language-perplexity", _add_perplexity, _cmd_perplexity),
    ("transfer", _add_transfer, _cmd_transfer),
]
