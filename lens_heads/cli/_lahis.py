"""The LAHIS subcommands of ``lens-heads``: ``importance``, ``language-heads``,
``language-perplexity``, ``transfer`` and ``soft-mask-experiment`` (registered in
:func:`lens_heads.cli.build_parser`), and the ``--soft --heads`` options of ``train-mask``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lens_heads.cli import _common as common
from lens_heads.cli._options import add_settings, settings_from
from lens_heads.core import InputError
from lens_heads.core.internal import MissingFileError
from lens_heads.lahis import (
    ImportanceConfig,
    LanguageHeadsConfig,
    PerplexityConfig,
    SoftMaskConfig,
    TransferConfig,
    soft_mask_config,
)
from lens_heads.lahis.internal import METHODS

__all__ = ["COMMANDS", "add_soft_arguments", "trainable_from_args"]

#: where language-heads and its followers read texts from
_CORPUS_HELP = (
    "folder of <lang>.txt files or a TSV with a language header (default: the built-in "
    "en/fr/es/de/zh corpus)"
)
_HEADS_HELP = "folder written by language-heads"


#: the values of the importance settings' string fields
CHOICES = {"method": METHODS, "precision": ("auto", "float32", "bfloat16")}


# -- importance ------------------------------------------------------------------------------
def _add_importance(sub: Any) -> None:
    parser = sub.add_parser(
        "importance",
        help="gradient head importance (LAHIS) on a set of documents",
        description="Writes table.csv/table.md (heads by importance), result.json + "
        "tensors.safetensors (HeadImportance.load) and figure.html (heat map) to --out.",
    )
    common.add_model_argument(parser)
    source = parser.add_mutually_exclusive_group(required=True)
    common.add_inputs(source, "texts", "language")
    parser.add_argument(
        "--n-docs", type=common.positive, help="the first N documents (default: all)"
    )
    add_settings(parser, ImportanceConfig, skip=("progress",), choices=CHOICES)
    common.deprecated(parser, "--compute-dtype", "--precision", "precision")
    common.add_out_argument(parser)


def _cmd_importance(args: argparse.Namespace) -> int:
    from lens_heads.core.internal import warn_input
    from lens_heads.lahis import head_importance, load_texts_by_language

    common.check_model(args)
    if args.texts:
        lines = common.read_text(args.texts, "--texts").splitlines()
        texts = [line.strip() for line in lines if line.strip()]
        if not texts:
            raise InputError(f"--texts {args.texts} holds no documents; write one per line")
    else:
        corpus = load_texts_by_language()
        if args.language not in corpus:
            raise InputError(f"--language {args.language!r} is not one of {list(corpus)}")
        texts = corpus[args.language]
    if args.n_docs:
        if args.n_docs > len(texts):
            warn_input(f"--n-docs {args.n_docs}, but there are {len(texts)} documents: all used")
        texts = texts[: args.n_docs]
    config = settings_from(args, ImportanceConfig)
    return common.write_result(
        args,
        lambda model, out: head_importance(model, texts, config),
        show=lambda result: print(result.to_markdown(k=10)),
    )


def _texts_by_language(
    texts: str | None, languages: str | Sequence[str] | None
) -> dict[str, list[str]]:
    """--texts (default: the built-in corpus), narrowed to --languages (comma-separated)."""
    from lens_heads.lahis import load_texts_by_language

    found = load_texts_by_language(texts)
    if languages is None:
        return found
    if isinstance(languages, str):
        languages = languages.split(",")
    wanted = [lang.strip() for lang in languages if lang.strip()]
    missing = [lang for lang in wanted if lang not in found]
    if missing or not wanted:
        raise InputError(f"--languages {','.join(languages)!r}: {missing or 'none'} not in the "
                         f"texts ({list(found)})")  # fmt: skip
    return {lang: found[lang] for lang in wanted}


def _language_heads(folder: str, shape: Any) -> Any:
    """A folder written by language-heads, checked against the model's shape when known."""
    from lens_heads.core.internal import MaskShapeError
    from lens_heads.lahis import LanguageHeads

    heads = LanguageHeads.load(folder)
    if shape is not None and tuple(heads.shape) != (shape.n_layers, shape.n_heads):
        raise MaskShapeError(
            f"--heads {folder} holds heads of a {heads.shape[0]}x{heads.shape[1]} model "
            f"({heads.model}), not of {shape.name} ({shape.n_layers}x{shape.n_heads})"
        )
    return heads


# -- language heads --------------------------------------------------------------------------
def _add_language_heads(sub: Any) -> None:
    parser = sub.add_parser(
        "language-heads",
        help="language-specific and language-general heads (LAHIS)",
        description="Importance per language, the heads strictly above each language's "
        "quantile, general = in the sets of >= --min-languages languages. Writes table.csv, "
        "table.md, result.json + tensors.safetensors (LanguageHeads.load), figure.html.",
    )
    common.add_model_argument(parser)
    common.add_inputs(parser, texts={"help": _CORPUS_HELP})
    common.add_inputs(parser, "languages")
    add_settings(parser, LanguageHeadsConfig, skip=("importance.progress",), choices=CHOICES)
    common.deprecated(parser, "--compute-dtype", "--precision", "importance.precision")
    common.add_out_argument(parser)


def _cmd_language_heads(args: argparse.Namespace) -> int:
    from lens_heads.lahis import language_heads
    from lens_heads.lahis.internal import check_rule

    common.check_model(args)
    texts = _texts_by_language(args.texts, args.languages)
    config = settings_from(args, LanguageHeadsConfig)
    check_rule(config.quantile, config.min_languages, len(texts))
    return common.write_result(args, lambda model, out: language_heads(model, texts, config))


# -- the perplexity experiment ----------------------------------------------------------------
def _add_perplexity(sub: Any) -> None:
    parser = sub.add_parser(
        "language-perplexity",
        help="remove a language's specific heads: its perplexity vs other languages' and random",
        description="Reads language heads saved by `lens-heads language-heads` and writes "
        "table.csv, table.md, result.json and figure.html to --out.",
    )
    common.add_model_argument(parser)
    common.add_inputs(
        parser, heads={"required": True, "help": _HEADS_HELP}, texts={"help": _CORPUS_HELP}
    )
    add_settings(parser, PerplexityConfig, choices=CHOICES)
    common.deprecated(parser, "--seeds", "--random-seeds", "random_seeds", type=common.numbers(int))
    common.add_out_argument(parser)


def _cmd_perplexity(args: argparse.Namespace) -> int:
    from lens_heads.lahis import perplexity_experiment

    heads = _language_heads(args.heads, common.check_model(args))
    config = settings_from(args, PerplexityConfig)
    texts = _texts_by_language(args.texts, config.languages)
    for lang in config.languages or heads.languages:
        if lang not in heads.languages or lang not in texts:
            raise InputError(
                f"language {lang!r} is not in both the heads ({heads.languages}) and the texts "
                f"({list(texts)})"
            )
        if len(texts[lang]) <= config.skip:
            raise InputError(
                f"{lang}: {len(texts[lang])} documents, none left after --skip {config.skip}"
            )
    return common.write_result(
        args, lambda model, out: perplexity_experiment(model, heads, texts, config)
    )


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
    common.add_model_argument(parser)
    common.add_inputs(parser, heads={"help": _HEADS_HELP})
    add_settings(parser, TransferConfig, skip=("progress",), check=False)
    add_settings(parser, LanguageHeadsConfig, only=("quantile", "min_languages", "n_docs"))
    common.add_out_argument(parser)


def _cmd_transfer(args: argparse.Namespace) -> int:
    from lens_heads.core import parallel_corpus
    from lens_heads.lahis import attention_transfer, language_heads
    from lens_heads.lahis.internal import check_rule

    shape = common.check_model(args)
    heads = _language_heads(args.heads, shape) if args.heads else None
    rule = settings_from(args, LanguageHeadsConfig)
    if heads is None:
        check_rule(rule.quantile, rule.min_languages, len(parallel_corpus().languages))
    weaken = None if (args.weaken or "").lower() == "none" else args.weaken
    known = heads if heads is not None else parallel_corpus().languages
    config = settings_from(args, TransferConfig, weaken=weaken)
    config.check(known)
    with common.writing(args.out) as out:
        model = common.load_model(args)
        if heads is None:
            heads = language_heads(model, config=rule)
        result = attention_transfer(model, heads, config=config)
        written = result.save(out, png=True)
        if not args.heads:
            written += heads.save(out / "heads", png=False)
    print(result.to_markdown())
    common.print_written(written)
    return 0


# -- the soft-mask experiment ---------------------------------------------------------------
def _add_soft_mask_experiment(sub: Any) -> None:
    parser = sub.add_parser(
        "soft-mask-experiment",
        help="soft mask on a language's top heads vs no mask vs soft masks on random heads",
        description="Trains a soft mask (multipliers from 1) on the top --fraction heads of a "
        "language's importance ranking and one per seed on as many random heads, on --n-train "
        "examples of --task for --epochs epochs, then evaluates no mask and each mask on "
        "--n-eval held-out examples (answer CE, chrF++, BLEU). The ranking: --importance DIR "
        "(written by `lens-heads importance` or `language-heads`), else the importance of "
        "--language (default: the task's target) on --n-docs built-in corpus sentences that are "
        "not held out. Writes table.csv/table.md, result.json + tensors.safetensors "
        "(SoftMaskExperiment.load) and figure.html to --out, each condition's training and "
        "evaluation in a subfolder; a second run with the same arguments resumes.",
    )
    common.add_model_argument(parser)
    common.add_inputs(
        parser,
        "importance",
        task={"default": "en-fr", "help": "translation task (default en-fr)"},
        language={"help": "the language whose heads are ranked (default: the task's target)"},
    )
    parser.add_argument(
        "--n-docs",
        type=common.positive,
        default=32,
        help="corpus sentences for the importance (no DIR)",
    )
    add_settings(
        parser,
        SoftMaskConfig,
        only=(*SOFT_FIELDS, *(f"training.{name}" for name in SOFT_TRAINING_FIELDS)),
        sections={"training": "training"},
        defaults={"training": soft_mask_config()},
        choices={"precision": ("auto", "bfloat16", "float32", "bf16", "fp32")},
        check=False,
    )
    for old, new, dest, kind in (
        ("--lr", "--training-lr", "training.lr", common.finite),
        ("--shots", "--training-shots", "training.shots", common.non_negative),
        ("--seed", "--training-seed", "training.seed", int),
        ("--precision", "--training-precision", "training.precision", str),
        ("--eval-batch-size", "--batch-size", "batch_size", common.positive),
    ):
        common.deprecated(parser, old, new, dest, type=kind)
    common.deprecated(
        parser, "--n-random-seeds", "--random-seeds 0,1,...", "n_random_seeds",
        type=common.positive,
    )  # fmt: skip
    common.add_out_argument(parser, "output directory (resumable)")
    parser.checks.append(_soft_mask_settings)


#: the experiment's own settings on the command line (the rest: its inputs)
SOFT_FIELDS = (
    "fraction", "random_seeds", "n_train", "epochs", "n_eval", "split_seed", "batch_size",
    "max_new_tokens",
)  # fmt: skip
#: the fields of its soft training schedule a command line sets (``--training-lr``, ...)
SOFT_TRAINING_FIELDS = ("lr", "batch_size", "shots", "seed", "precision")


def _soft_mask_settings(args: argparse.Namespace) -> Any:
    """The :class:`SoftMaskConfig` of the command line: the soft schedule of
    :func:`soft_mask_config` with the ``--training-*`` values (its rate kept constant), the
    random seeds of ``--n-random-seeds`` where that old spelling is used."""
    from dataclasses import replace

    fixed = {}
    if getattr(args, "n_random_seeds", None) is not None:
        fixed["random_seeds"] = tuple(range(args.n_random_seeds))
    config = settings_from(
        args, SoftMaskConfig, sections={"training": "training"},
        bases={"training": soft_mask_config()}, **fixed,
    )  # fmt: skip
    training = config.base()
    return replace(config, training=replace(training, min_lr=training.lr))


def _ranking_before_model(args: argparse.Namespace, task: Any, shape: Any) -> tuple[Any, Any]:
    """``(ranking, None)`` read from ``--importance DIR`` (or a finished ``--out/importance``),
    else ``(None, documents)``: the --language corpus sentences to rank heads on, none of them
    held out. Checked against the model's shape when known, before the model loads."""
    import json

    from lens_heads.core.internal import MaskShapeError
    from lens_heads.lahis import HeadImportance, LanguageHeads, ranking_documents

    folder = Path(args.importance) if args.importance else Path(args.out) / "importance"
    if args.importance or (folder / "result.json").is_file():
        path = folder / "result.json"
        if not path.is_file():
            raise MissingFileError(
                f"--importance {folder} holds no result.json; write it with `lens-heads "
                "importance` or `lens-heads language-heads`"
            )
        tag = json.loads(common.read_text(str(path), "--importance")).get("format", "")
        kind = LanguageHeads if tag == LanguageHeads._format else HeadImportance
        ranking = kind.load(folder)
        if shape is not None and tuple(ranking.shape) != (shape.n_layers, shape.n_heads):
            raise MaskShapeError(
                f"--importance {folder} ranks the heads of a {ranking.shape[0]}x"
                f"{ranking.shape[1]} model, not of {shape.name}"
            )
        return ranking, None
    try:
        documents = ranking_documents(
            task, args.language, n_docs=args.n_docs, n_eval=args.n_eval, split_seed=args.split_seed
        )
    except InputError as error:  # the same error, naming the flag
        raise InputError(f"--{error}") from error
    return None, documents


def _cmd_soft_mask_experiment(args: argparse.Namespace) -> int:
    from lens_heads.core import Fingerprint, claim_folder, get_task
    from lens_heads.lahis import head_importance, soft_mask_experiment

    shape = common.check_model(args)
    out = common.check_out(args.out)
    task = get_task(args.task)
    config = _soft_mask_settings(args)
    config.check(task)
    ranking, documents = _ranking_before_model(args, task, shape)
    with common.writing(out):
        model = common.load_model(args)
        written = []
        if args.importance is None:  # the ranking is a stage of --out: of this model only
            own = Fingerprint.of(
                model,
                {"language": args.language, "n_docs": args.n_docs, "n_eval": args.n_eval,
                 "split_seed": args.split_seed, "task": task.name},
                {"task": task},
            )  # fmt: skip
            claim_folder(
                out / "importance",
                own,
                record="fingerprint.json",
                what="a head-importance ranking",
                remedy="choose another --out, or delete its importance folder to rank again",
            )
        if ranking is None:
            ranking = head_importance(model, documents)
            written += ranking.save(out / "importance", png=False)
        result = soft_mask_experiment(
            model, task, ranking, language=args.language, out=out, config=config
        )
        written += result.save(out, png=True)
    print(result.to_markdown())
    common.print_written(written)
    return 0


# -- train-mask --soft ------------------------------------------------------------------------
def add_soft_arguments(parser: argparse.ArgumentParser) -> None:
    """``--soft`` and ``--heads FILE|top:N`` (with ``--importance DIR``) for ``train-mask``."""
    parser.add_argument(
        "--soft",
        action="store_true",
        help="LAHIS soft mask: multipliers from 1 (>= 0), no noise; use with --heads",
    )
    common.add_inputs(
        parser,
        heads={"help": "soft mask's trainable heads: a file of labels (L3H7 ...) or top:N of "
               "--importance"},
        importance={"help": "folder written by `lens-heads importance` (for --heads top:N)"},
    )  # fmt: skip


def trainable_from_args(args: argparse.Namespace) -> tuple[str, ...] | None:
    """The trainable heads named by ``--heads`` (None when not given)."""
    spec = getattr(args, "heads", None)
    if spec is None:
        return None
    if not args.soft:
        raise InputError("--heads names the trainable heads of a soft mask: add --soft")
    k = common.top_k_of(spec)
    if k is not None:
        from lens_heads.lahis import HeadImportance

        if not args.importance:
            raise InputError("--heads top:N ranks heads by --importance DIR: give that folder")
        return tuple(HeadImportance.load(args.importance).top(k))
    path = Path(spec)
    if not path.exists():
        raise MissingFileError(f"--heads {path}: no such file (or use top:N with --importance)")
    labels = common.read_text(spec, "--heads").replace(",", " ").split()
    if not labels:
        raise InputError(f"--heads {path} names no heads; write labels like L3H7, one per line")
    return tuple(labels)


COMMANDS = [
    ("importance", _add_importance, _cmd_importance),
    ("language-heads", _add_language_heads, _cmd_language_heads),
    ("language-perplexity", _add_perplexity, _cmd_perplexity),
    ("transfer", _add_transfer, _cmd_transfer),
    ("soft-mask-experiment", _add_soft_mask_experiment, _cmd_soft_mask_experiment),
]


#: each command's examples, run by the tests (common.Examples: the placeholders)
EXAMPLES = {
    "importance": common.Examples(
        bad="--model {M} --texts {latin1} --out {out}",
        message="latin1.txt is not UTF-8 text (byte 6",
        good="--model {M} --language fr",
    ),
    "language-heads": common.Examples(
        bad="--model {M} --languages fr --out {out}",
        message="min_languages=4 exceeds the 1 language(s)",
        good="--model {M}",
    ),
    "language-perplexity": common.Examples(
        bad="--model {M} --heads {wide_heads} --out {out}",
        message="holds heads of a 3x4 model",
        good="--model {M} --heads {heads} --skip 0",
    ),
    "transfer": common.Examples(
        bad="--model {M} --factors 3,1e30 --out {out}",
        message="factor 1e+30",
        good="--model {M} --heads {heads}",
    ),
    "soft-mask-experiment": common.Examples(
        bad="--model {M} --language xx --out {out}",
        message="--language 'xx' is not in the built-in corpus",
        good="--model {M} --n-train 8 --n-eval 4",
    ),
}
