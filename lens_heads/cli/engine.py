"""``lens-heads eval`` and ``train-mask``: the settings table and mask training (the engine
every research line uses)."""

from __future__ import annotations

import argparse
from typing import Any

from lens_heads.cli import common
from lens_heads.cli import lahis as cli_lahis

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
    parser.add_argument("--task", required=True, help="built-in task name or a .json/.jsonl file")
    parser.add_argument("--mask", help="the trained mask M: " + common.MASK_HELP)
    parser.add_argument(
        "--other-mask", help="a mask trained on another model of the same shape (file or folder)"
    )
    parser.add_argument(
        "--settings",
        help="comma-separated, from original,instruction,random,mask,mask+instruction,other_mask "
        "(default: every setting the given masks allow)",
    )
    parser.add_argument(
        "--n-eval",
        type=common.positive,
        default=100,
        help="evaluate the last N examples (default 100)",
    )
    parser.add_argument("--split-seed", type=int, help="shuffle the task (seeded) before splitting")
    parser.add_argument(
        "--seeds", default="0,1,2", help="seeds of the random masks (comma-separated)"
    )
    parser.add_argument(
        "--shots", type=common.non_negative, default=0, help="k demonstrations from the train split"
    )
    parser.add_argument("--shot-seed", type=int, default=0, help="seed of the demonstrations")
    parser.add_argument(
        "--instruction",
        type=common.text,
        help="instruction text (for a task file without one)",
    )
    common.add_match_argument(parser)
    common.add_chat_argument(parser)
    parser.add_argument("--batch-size", type=common.positive, default=16)
    parser.add_argument(
        "--max-new-tokens", type=common.positive, help="default: 10 (words), 50 (sentences)"
    )
    parser.add_argument("--out", required=True, help="output directory")


def _cmd_eval(args: argparse.Namespace) -> int:
    from lens_heads.core.tasks import get_task
    from lens_heads.engine import check_evaluation, evaluate

    shape = common.check_model(args)
    seeds = _seeds(args.seeds)
    task = get_task(args.task, instruction=args.instruction, match=args.match)
    mask = common.mask_before_model(args.mask, shape)
    other = common.mask_before_model(args.other_mask, shape, "--other-mask")
    settings = check_evaluation(
        task,
        args.settings,
        mask_given=mask is not None,
        other_given=other is not None,
        random_seeds=seeds,
        n_eval=args.n_eval,
        split_seed=args.split_seed,
        shots=args.shots,
    )
    with common.writing(args.out) as out:
        model = common.load_model(args)
        result = evaluate(
            model,
            task,
            settings,
            mask=mask,
            other_mask=other,
            n_eval=args.n_eval,
            split_seed=args.split_seed,
            random_seeds=seeds,
            batch_size=args.batch_size,
            chat=common.chat_choice(args.chat),
            instruction=args.instruction,
            shots=args.shots,
            shot_seed=args.shot_seed,
            max_new_tokens=args.max_new_tokens,
        )
        for field in ("mask", "other_mask"):  # the files the masks came from
            if result.config.get(field) is not None:
                result.config[field]["file"] = getattr(args, field)
        written = result.save(out, png=True)
    print(result.to_markdown())
    common.print_written(written)
    return 0


def _seeds(text: str) -> list[int]:
    try:
        return [int(seed) for seed in text.split(",") if seed.strip()]
    except ValueError as error:
        raise ValueError(f"--seeds must be comma-separated integers, got {text!r}") from error


# -- train-mask (issue 4) ------------------------------------------------------------------------
def _add_train_mask(sub: Any) -> None:
    parser = sub.add_parser(
        "train-mask",
        help="train a head mask on instruction-free task data (Heads up! §3.2)",
        description="Trains with the short CPU schedule (TrainingConfig.short(): 200 steps, "
        "batch 8, lr 0.1) unless --paper is given (6,250 steps, batch 16, lr "
        "1e-2); flags override single fields. Writes mask.safetensors, training.json, "
        "training.safetensors, history.csv, heads.csv, trajectories/heatmap/loss figures "
        "(.html; .png when kaleido can export), checkpoints/ and eval/ (Original / w/ "
        "instruction / w/ random M / w/ M on held-out examples) to --out.",
        conflict_handler="resolve",
    )
    common.add_model_argument(parser)
    precision = dict(choices=["auto", "bf16", "fp32", "bfloat16", "float32"])
    parser.add_argument(
        "--precision",
        default=None,
        **precision,
        help="training precision: bf16 = bfloat16 autocast on the fp32 weights, fp32 = full "
        "precision, auto (default) = bf16 where the hardware computes it natively, else fp32",
    )
    # --dtype means the weights' dtype elsewhere; here it was the training precision
    common.deprecated(parser, "--dtype", "--precision", "precision", **precision)
    parser.add_argument("--task", required=True, help="built-in task name or a .json/.jsonl file")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--paper", action="store_true", help="start from the paper's schedule")
    parser.add_argument("--steps", type=common.positive, help="training steps")
    parser.add_argument("--lr", type=common.finite, help="peak learning rate")
    parser.add_argument("--batch-size", type=common.positive, help="examples per step")
    parser.add_argument("--seed", type=int, help="seed of init, noise and batches")
    parser.add_argument(
        "--init-mean", type=common.finite, help="mean of the W init (paper 4; Table 6: -3)"
    )
    parser.add_argument(
        "--noise",
        choices=["example", "batch"],
        help="Gumbel noise drawn per example (the paper's, default) or once per batch",
    )
    parser.add_argument(
        "--sparsity", type=common.finite, help="weight of the mean sigmoid(W) penalty"
    )
    parser.add_argument(
        "--shots", type=common.non_negative, help="k demonstrations before each training input"
    )
    parser.add_argument(
        "--answer-end",
        choices=["auto", "turn", "eos", "separator", "none"],
        help="what closes each training target after the answer: auto (default) = the chat "
        "template's end-of-turn token for chat models, EOS for base models; none = the answer "
        "alone (masked outputs then run on)",
    )
    parser.add_argument(
        "--instruction",
        type=common.text,
        help="instruction text for the 'w/ instruction' evaluation row (for a task file "
        "without one; training never sees it)",
    )
    common.add_match_argument(parser)
    parser.add_argument(
        "--holdout",
        type=common.non_negative,
        help="examples held out of training (default 100; 0 = none)",
    )
    parser.add_argument("--split-seed", type=int, help="shuffle the task (seeded) before splitting")
    parser.add_argument("--ffn-masks", action="store_true", help="experimental: MLP masks too")
    parser.add_argument(
        "--query-side", action="store_true", help="experimental: mask inside the softmax"
    )
    parser.add_argument(
        "--checkpoint-every", type=common.positive, default=50, help="steps per checkpoint"
    )
    parser.add_argument("--resume", action="store_true", help="continue from --out/checkpoints")
    parser.add_argument(
        "--n-eval",
        type=common.non_negative,
        help="held-out examples to evaluate afterwards (default: all held out, 100 like eval's "
        "--n-eval; 0: no evaluation)",
    )
    parser.add_argument("--seeds", default="0,1", help="seeds of the random masks")
    parser.add_argument("--eval-batch-size", type=common.positive, default=16)
    cli_lahis.add_soft_arguments(parser)  # --soft --heads FILE|top:N --importance DIR


def _cmd_train_mask(args: argparse.Namespace) -> int:
    from lens_heads.core.tasks import get_task
    from lens_heads.engine import (
        TrainingConfig,
        check_evaluation,
        check_training,
        evaluate,
        train_mask,
        with_overrides,
    )

    shape = common.check_model(args)
    seeds = _seeds(args.seeds)
    base = TrainingConfig() if args.paper else TrainingConfig.short()
    config = with_overrides(
        base,
        steps=args.steps,
        lr=args.lr,
        batch_size=args.batch_size,
        seed=args.seed,
        init_mean=args.init_mean,
        noise=args.noise,
        sparsity=args.sparsity,
        shots=args.shots,
        answer_end=args.answer_end,
        n_eval=args.holdout,
        split_seed=args.split_seed,
        dtype=args.precision,
        ffn_masks=args.ffn_masks or None,
        query_side=args.query_side or None,
        soft=args.soft or None,
        trainable=cli_lahis.trainable_from_args(args),
    )
    if args.n_eval is None:
        args.n_eval = config.n_eval  # every held-out example
    if args.n_eval > 0 and config.n_eval and args.n_eval > config.n_eval:
        raise ValueError(
            f"--n-eval {args.n_eval} exceeds the {config.n_eval} examples held out of training "
            "(--holdout); evaluating more would score training examples"
        )
    if args.n_eval > 0 and config.n_eval == 0:
        raise ValueError("--holdout 0 trains on every example: pass --n-eval 0 as well")
    task = get_task(args.task, instruction=args.instruction, match=args.match)
    out = common.check_out(args.out)
    checkpoints = out / "checkpoints"
    check_training(task, config, model=shape, checkpoint_dir=checkpoints, resume=args.resume)
    settings = ["original"] + (["instruction"] if task.instruction else [])
    settings += (["random"] if seeds and not config.soft else []) + ["mask"]
    if args.n_eval > 0:
        check_evaluation(
            task,
            settings,
            mask_given=True,
            random_seeds=seeds,
            n_eval=args.n_eval,
            split_seed=config.split_seed,
            shots=config.shots,
        )
    with common.writing(out):
        model = common.load_model(args)
        result = train_mask(
            model,
            task,
            config,
            checkpoint_dir=out / "checkpoints",
            checkpoint_every=args.checkpoint_every,
            resume=args.resume,
        )
        written = result.save(out) + result.save_figures(out, png=True)
        summary = result.summary()
        print(
            f"{task.name}: kept {summary['heads_kept']}/{summary['heads_total']} heads, final "
            f"loss {summary['final_loss']:.3f}, {summary['steps']} steps in "
            f"{summary['seconds']:.0f} s"
        )
        if args.n_eval > 0:
            if config.query_side or config.ffn_masks:
                print("note: the evaluation applies the head mask on hook_z only")
            evaluation = evaluate(
                model,
                task,
                mask=result.mask,
                n_eval=args.n_eval,
                split_seed=config.split_seed,
                random_seeds=seeds,
                batch_size=args.eval_batch_size,
                chat=config.chat,
                shots=config.shots,
                separator=config.separator,
                settings=settings,
            )
            written += evaluation.save(out / "eval", png=True)
            print(evaluation.to_markdown())
    common.print_written(written)
    return 0


COMMANDS = [
    ("eval", _add_eval, _cmd_eval),
    ("train-mask", _add_train_mask, _cmd_train_mask),
]
