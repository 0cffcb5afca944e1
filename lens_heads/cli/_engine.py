"""``lens-heads eval`` and ``train-mask``: the settings table and mask training (the engine
every research line uses)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from lens_heads.cli import _common as common
from lens_heads.cli import _lahis as cli_lahis
from lens_heads.cli._options import add_settings, settings_from
from lens_heads.core import InputError
from lens_heads.core.internal import FIXED
from lens_heads.engine import (
    EvaluationConfig,
    TrainingConfig,
    check_training,
    evaluate,
    train_or_resume,
)

__all__ = ["COMMANDS"]


# -- eval (issue 3) -----------------------------------------------------------------------------
def _add_eval(sub: Any) -> None:
    parser = sub.add_parser(
        "eval",
        help="evaluate a task bare, instructed and under head masks (Tables 1, 2 and 6)",
        description="Writes table.csv, table.md, per_seed.csv, records.csv, result.json and "
        "figure.html (figure.png too when kaleido can export) to --out.",
    )
    common.add_model_argument(parser)
    common.add_inputs(
        parser, task={"required": True}, mask={"help": "the trained mask M: " + common.MASK_HELP}
    )
    common.add_inputs(parser, "other_mask")
    parser.add_argument(
        "--settings",
        help="comma-separated, from original,instruction,random,mask,mask+instruction,other_mask "
        "(default: every setting the given masks allow)",
    )
    common.add_inputs(parser, instruction={"help": "instruction text (for a task file without it)"})
    common.add_match_argument(parser)
    add_settings(parser, EvaluationConfig, skip=("progress",), choices={"ablation": FIXED})
    common.deprecated(parser, "--seeds", "--random-seeds", "old_seeds")
    common.add_out_argument(parser)


def _cmd_eval(args: argparse.Namespace) -> int:
    from lens_heads.core import get_task

    shape = common.check_model(args)
    old = {} if args.old_seeds is None else {"random_seeds": _seeds(args.old_seeds, "--seeds")}
    config = settings_from(args, EvaluationConfig, **old)
    task = get_task(args.task, instruction=args.instruction, match=args.match)
    mask = common.mask_before_model(args.mask, shape)
    other = common.mask_before_model(args.other_mask, shape, "--other-mask")
    settings = config.check(
        task,
        args.settings,
        mask_given=mask is not None,
        other_given=other is not None,
        unseen=EvaluationConfig.unseen(task, mask, other),
    )

    def compute(model: Any, out: Path) -> Any:
        result = evaluate(
            model, task, settings, mask=mask, other_mask=other, instruction=args.instruction,
            config=config,
        )  # fmt: skip
        for field in ("mask", "other_mask"):  # the files the masks came from
            if result.config.get(field) is not None:
                result.config[field]["file"] = getattr(args, field)
        return result

    return common.write_result(args, compute)


def _seeds(text: str, flag: str = "--random-seeds") -> tuple[int, ...]:
    try:
        return tuple(int(seed) for seed in text.split(",") if seed.strip())
    except ValueError as error:
        raise InputError(f"{flag} must be comma-separated integers, got {text!r}") from error


# -- train-mask (issue 4) ------------------------------------------------------------------------
def _add_train_mask(sub: Any) -> None:
    parser = sub.add_parser(
        "train-mask",
        help="train a head mask on instruction-free task data (Heads up! §3.2)",
        description="Trains with TrainingConfig's defaults, the short CPU schedule (200 steps, "
        "batch 8, lr 0.1), as lens_heads.train_mask does, unless --paper is given "
        "(TrainingConfig.paper(): 6,250 steps, batch 16, lr 1e-2); flags override single "
        "fields. Writes mask.safetensors, training.json, training.safetensors, history.csv, "
        "heads.csv, trajectories/heatmap/loss figures "
        "(.html; .png when kaleido can export), checkpoints/ and eval/ (Original / w/ "
        "instruction / w/ random M / w/ M on held-out examples) to --out.",
        conflict_handler="resolve",
    )
    common.add_model_argument(parser)
    common.add_inputs(parser, task={"required": True})
    common.add_out_argument(parser)
    parser.add_argument("--paper", action="store_true", help="start from the paper's schedule")
    # each flag overrides one field of the schedule (None: the schedule's own value)
    add_settings(
        parser,
        TrainingConfig,
        only=_TRAINING_FLAGS,
        defaults=dict.fromkeys(_TRAINING_FLAGS),
        rename=_TRAINING_RENAMED,
        choices={
            "precision": common.PRECISION_CHOICES,
            "noise": ("example", "batch"),
            "answer_end": _ENDS,
            "ablation": FIXED,
        },
        check=False,  # the flags override the schedule; the command checks the result
    )
    _show_schedule_defaults(parser)
    # --dtype means the weights' dtype elsewhere; here it was the training precision
    common.deprecated(parser, "--dtype", "--precision", "precision")
    common.add_inputs(
        parser,
        instruction={"help": "instruction text for the 'w/ instruction' evaluation row (for a "
                     "task file without one; training never sees it)"},
    )  # fmt: skip
    common.add_match_argument(parser)
    parser.add_argument(
        "--checkpoint-every", type=common.positive, default=50, help="steps per checkpoint"
    )
    parser.add_argument("--resume", action="store_true", help="continue from --out/checkpoints")
    evaluation = parser.add_argument_group(
        "evaluation afterwards",
        "Original / w/ instruction / w/ random M / w/ M on the held-out examples (EvaluationConfig"
        "'s fields); --n-eval unset: every example held out by --holdout, 0: no evaluation",
    )
    add_settings(
        evaluation, EvaluationConfig, only=_EVALUATION_FLAGS,
        rename={"batch_size": "eval_batch_size"},
        defaults={"n_eval": None, "random_seeds": (0, 1), "batch_size": 16}, check=False,
    )  # fmt: skip
    common.deprecated(parser, "--seeds", "--random-seeds", "random_seeds", type=_seeds)
    for action in parser._actions:  # two counts of one held-out end: each says which it is
        if "--holdout" in action.option_strings:
            action.help = (
                "Examples held out of training: the task's last ones (TrainingConfig.n_eval); "
                f"the evaluation afterwards reads them [{TrainingConfig().n_eval}]"
            )
        elif "--n-eval" in action.option_strings:
            action.help = (
                "Of the examples --holdout keeps out of training, how many the evaluation "
                "afterwards reads (EvaluationConfig.n_eval; default: all of them)"
            )
    cli_lahis.add_soft_arguments(parser)  # --soft --heads FILE|top:N --importance DIR


def _show_schedule_defaults(parser: Any) -> None:
    """Each schedule flag's help ends with its default (``TrainingConfig()``'s, as in Python)
    and, where it differs, the paper's: the flags default to None so that they override only
    what is given, over either schedule."""
    short, paper = TrainingConfig().to_dict(), TrainingConfig.paper().to_dict()
    renamed = {new: old for old, new in _TRAINING_RENAMED.items()}
    for action in parser._actions:
        name = renamed.get(action.dest, action.dest)
        if name not in _TRAINING_FLAGS or action.help is None:
            continue
        value, paper_value = short[name], paper[name]
        shown = "none" if value is None else value
        also = "" if paper_value == value else f"; --paper: {paper_value}"
        action.help = f"{action.help.rstrip()} [{shown}{also}]"


#: the TrainingConfig fields train-mask sets from flags; one is named as elsewhere on the
#: command line (the held-out examples)
_TRAINING_FLAGS = (
    "steps", "lr", "batch_size", "seed", "init_mean", "noise", "sparsity", "shots", "answer_end",
    "n_eval", "split_seed", "precision", "ffn_masks", "query_side", "ablation",
    "checkpoint_activations", "compile",
)  # fmt: skip
_TRAINING_RENAMED = {"n_eval": "holdout"}
#: the EvaluationConfig fields of the evaluation train-mask runs afterwards
_EVALUATION_FLAGS = ("n_eval", "random_seeds", "batch_size")
_ENDS = ("auto", "turn", "eos", "separator", "none")


def _cmd_train_mask(args: argparse.Namespace) -> int:
    from lens_heads.core import get_task

    shape = common.check_model(args)
    seeds = args.random_seeds
    base = TrainingConfig.paper() if args.paper else TrainingConfig()
    config = settings_from(
        args,
        TrainingConfig,
        base=base,
        rename=_TRAINING_RENAMED,
        soft=args.soft or None,
        trainable=cli_lahis.trainable_from_args(args),
    )
    if args.n_eval is None:
        args.n_eval = config.n_eval  # every held-out example
    if args.n_eval > 0 and config.n_eval and args.n_eval > config.n_eval:
        raise InputError(
            f"--n-eval {args.n_eval} exceeds the {config.n_eval} examples held out of training "
            "(--holdout); evaluating more would score training examples"
        )
    if args.n_eval > 0 and config.n_eval == 0:
        raise InputError("--holdout 0 trains on every example: pass --n-eval 0 as well")
    task = get_task(args.task, instruction=args.instruction, match=args.match)
    out = common.check_out(args.out)
    checkpoints = out / "checkpoints"
    check_training(task, config, model=shape, checkpoint_dir=checkpoints, resume=args.resume)
    settings = ["original"] + (["instruction"] if task.instruction else [])
    settings += (["random"] if seeds and not config.soft else []) + ["mask"]
    evaluation_config = None
    if args.n_eval > 0:
        evaluation_config = EvaluationConfig(
            n_eval=args.n_eval,
            split_seed=config.split_seed,
            random_seeds=seeds,
            batch_size=args.eval_batch_size,
            chat=config.chat,
            shots=config.shots,
            separator=config.separator,
            ablation=config.ablation,
        )
        evaluation_config.check(task, settings, mask_given=True)
    with common.writing(out):
        model = common.load_model(args)
        result = train_or_resume(
            model, task, config, out, checkpoint_every=args.checkpoint_every
        )  # without --resume, check_training refused an earlier run's checkpoint above
        written = result.save(out) + result.save_figures(out, png=True)
        summary = result.summary()
        print(
            f"{task.name}: kept {summary['heads_kept']}/{summary['heads_total']} heads, final "
            f"loss {summary['final_loss']:.3f}, {summary['steps']} steps in "
            f"{summary['seconds']:.0f} s"
        )
        if evaluation_config is not None:
            if config.query_side or config.ffn_masks:
                print("note: the evaluation applies the head mask on hook_z only")
            evaluation = evaluate(model, task, settings, mask=result.mask, config=evaluation_config)
            written += evaluation.save(out / "eval", png=True)
            print(evaluation.to_markdown())
    common.print_written(written)
    return 0


COMMANDS = [
    ("eval", _add_eval, _cmd_eval),
    ("train-mask", _add_train_mask, _cmd_train_mask),
]


#: each command's examples, run by the tests (common.Examples: the placeholders)
EXAMPLES = {
    "eval": common.Examples(
        bad="--model {M} --task {dup} --out {out}",
        message="examples 0 and 1 repeat",
        good="--model {M} --task capitalize --n-eval 4",
    ),
    "train-mask": common.Examples(
        bad="--model {M} --task capitalize --lr 1e6 --out {out}",
        message="lr=1e+06 is far above",
        good="--model {M} --task capitalize --steps 2",
    ),
}
