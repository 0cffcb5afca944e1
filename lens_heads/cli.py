"""The ``lens-heads`` command.

Each subcommand is a ``_cmd_<name>(args)`` function plus an ``_add_<name>(subparsers)`` that
declares its arguments; :data:`COMMANDS` lists them in the order ``--help`` shows.

    lens-heads demo --out demo-report      # the end-to-end demo on the offline default model
    lens-heads models [--prepare ALIAS]
    lens-heads generate --model smollm2-135m-instruct --prompt "apple" --chat [--mask m.safetensors]
    lens-heads tasks
    lens-heads eval --model smollm2-135m-instruct --task country-capital --mask m.safetensors
                    --out results/country-capital
    lens-heads train-mask --model smollm2-135m-instruct --task capitalize --steps 200
                          --out results/capitalize [--resume]
    lens-heads sweep --model smollm2-135m-instruct --mask results/capitalize --prompt apple
                     --target Apple --reference-instruction "Capitalize the given word."
                     --out results/sweep-apple
    lens-heads logit-lens --model smollm2-135m-instruct --prompt apple --mask results/capitalize
                          --instruction "Capitalize the given word." --out results/lens-apple
    lens-heads similarity --model smollm2-135m-instruct --prompt apple --mask results/capitalize
                          --instruction "Capitalize the given word." --out results/fig4-apple
    lens-heads attention --model smollm2-135m-instruct --task fruit_v_animal_3 --mask m.safetensors
                         --out results/table7
    lens-heads grid docs/grids/laptop.toml --out runs/laptop [--address auto|ray://...|local]
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lens_heads import cli_lahis
from lens_heads.cli_alignment import ALIGNMENT_COMMANDS
from lens_heads.cli_grid import add_grid, cmd_grid

__all__ = ["main"]


def _add_model_argument(parser: argparse.ArgumentParser, default: str | None = None) -> None:
    parser.add_argument(
        "--model",
        default=default,
        required=default is None,
        help="alias (smollm2-135m-instruct, gemma-3-270m), .gguf file, checkpoint dir or HF id",
    )
    parser.add_argument(
        "--dtype", default="float32", choices=["float32", "bfloat16"], help="weights dtype"
    )


_MASK_HELP = "head-mask file, or a train-mask output folder (its mask.safetensors)"


def _load(args: argparse.Namespace) -> Any:
    import torch

    from lens_heads.models import load_model

    return load_model(args.model, dtype=getattr(torch, args.dtype))


def _load_mask(path: str | None, model: Any) -> Any:
    """A head-mask file, or the ``mask.safetensors`` of a train-mask output folder."""
    from lens_heads._checks import resolve_mask

    return resolve_mask(path, model)


def _chat_choice(value: str) -> bool | None:
    return {"auto": None, "yes": True, "no": False}[value]


def _add_chat_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--chat",
        choices=["auto", "yes", "no"],
        nargs="?",
        const="yes",
        default="auto",
        help="use the chat template: auto (default: when the tokenizer has one), yes (also "
        "plain --chat) or no",
    )


def _resolve_chat(args: argparse.Namespace, model: Any) -> bool:
    """``--chat auto`` resolved: the chat template when the model's tokenizer has one."""
    from lens_heads.prompts import has_chat_template

    chat = _chat_choice(args.chat)
    return has_chat_template(model.tokenizer) if chat is None else chat


# -- argument checks: before any model loads (issue 17) ------------------------------------------
def _int_at_least(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    parse.__name__ = f"integer >= {minimum}"
    return parse


_positive = _int_at_least(1)
_non_negative = _int_at_least(0)


def _finite(text: str) -> float:
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def _deprecated(parser: Any, old: str, new: str, dest: str, const: Any = None, **kw: Any) -> None:
    """Keep ``old`` as a deprecated spelling of ``new``: it sets ``dest`` and says so once."""

    class Alias(argparse.Action):
        def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
            print(f"lens-heads: {old} is deprecated; use {new}", file=sys.stderr)
            setattr(namespace, self.dest, const if const is not None else values)

    nargs = {"nargs": 0} if const is not None else {}
    parser.add_argument(old, dest=dest, action=Alias, help=f"deprecated: use {new}", **nargs, **kw)


def _check_out(path: str | Path) -> Path:
    """Refuse an ``--out`` that cannot become a writable folder, before any compute."""
    import os

    out = Path(path)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file; give a folder (existing or new)")
    existing = out
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ValueError(f"--out {out}: {existing} is a file, so the folder cannot be created")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"--out {out}: {existing} is not writable; choose another folder")
    return out


# -- models -----------------------------------------------------------------------------------
def _add_match_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--match",
        choices=["startswith", "contains"],
        help="the accuracy rule (default: the task's own; for a task file, the paper's rule by "
        "its name: startswith for capitalize*, lowercase*, next_*, prev_*, *_v_*_N, choose_*, "
        "conll2003_*, contains otherwise)",
    )


def _add_models(sub: Any) -> None:
    parser = sub.add_parser("models", help="list the offline model aliases; --prepare caches one")
    parser.add_argument("--prepare", metavar="ALIAS", help="dequantize and cache this alias now")


def _cmd_models(args: argparse.Namespace) -> int:
    from lens_heads.models import MODEL_ALIASES, cache_dir, cached_aliases, prepare_model

    if args.prepare:
        directory = prepare_model(args.prepare)
        print(f"{args.prepare}: cached at {directory}")
        return 0
    cached = cached_aliases()
    print(f"cache: {cache_dir()}")
    for alias, source in MODEL_ALIASES.items():
        installed = "installed" if source.installed() else f"not installed ({source.install})"
        state = "cached" if cached[alias] else "not cached"
        print(f"{alias:24s} {installed}; {state}\n{'':24s} {source.description}")
    return 0


# -- generate ---------------------------------------------------------------------------------
def _add_generate(sub: Any) -> None:
    parser = sub.add_parser("generate", help="greedy generation, optionally under a head mask")
    _add_model_argument(parser)
    parser.add_argument("--prompt", action="append", required=True, help="repeat for a batch")
    parser.add_argument("--mask", help=_MASK_HELP)
    _add_chat_argument(parser)
    parser.add_argument("--max-new-tokens", type=_positive, default=30)


def _cmd_generate(args: argparse.Namespace) -> int:
    from lens_heads.generation import generate

    model = _load(args)
    mask = _load_mask(args.mask, model)
    chat = _resolve_chat(args, model)
    outputs = generate(model, args.prompt, chat=chat, max_new_tokens=args.max_new_tokens, mask=mask)
    for prompt, output in zip(args.prompt, outputs, strict=True):
        print(f"> {prompt}\n{output.text}")
    return 0


# -- tasks (issue 3) ----------------------------------------------------------------------------
def _add_tasks(sub: Any) -> None:
    parser = sub.add_parser("tasks", help="list the built-in tasks (examples, kind, match rule)")
    parser.add_argument("--kind", choices=["word", "translation"], help="only this kind")


def _cmd_tasks(args: argparse.Namespace) -> int:
    from lens_heads.tasks import get_task, list_tasks

    print(f"{'task':28s} {'examples':>8s}  {'kind':11s} {'match':10s} instruction")
    for name in list_tasks(args.kind):
        task = get_task(name)
        instruction = (task.instruction or "")[:60]
        print(f"{name:28s} {len(task):8d}  {task.kind:11s} {task.match:10s} {instruction}")
    return 0


# -- eval (issue 3) -----------------------------------------------------------------------------
def _add_eval(sub: Any) -> None:
    parser = sub.add_parser(
        "eval",
        help="evaluate a task bare, instructed and under head masks (Tables 1, 2 and 6)",
        description="Writes table.csv, table.md, per_seed.csv, records.csv, result.json and "
        "figure.html (figure.png too when kaleido can export) to --out.",
    )
    _add_model_argument(parser)
    parser.add_argument("--task", required=True, help="built-in task name or a .json/.jsonl file")
    parser.add_argument("--mask", help="the trained mask M: " + _MASK_HELP)
    parser.add_argument(
        "--other-mask", help="a mask trained on another model of the same shape (file or folder)"
    )
    parser.add_argument(
        "--settings",
        help="comma-separated, from original,instruction,random,mask,mask+instruction,other_mask "
        "(default: every setting the given masks allow)",
    )
    parser.add_argument(
        "--n-eval", type=_positive, default=100, help="evaluate the last N examples (default 100)"
    )
    parser.add_argument("--split-seed", type=int, help="shuffle the task (seeded) before splitting")
    parser.add_argument(
        "--seeds", default="0,1,2", help="seeds of the random masks (comma-separated)"
    )
    parser.add_argument(
        "--shots", type=_non_negative, default=0, help="k demonstrations from the train split"
    )
    parser.add_argument("--shot-seed", type=int, default=0, help="seed of the demonstrations")
    parser.add_argument("--instruction", help="instruction text (for a task file without one)")
    _add_match_argument(parser)
    _add_chat_argument(parser)
    parser.add_argument("--batch-size", type=_positive, default=16)
    parser.add_argument(
        "--max-new-tokens", type=_positive, help="default: 10 (words), 50 (sentences)"
    )
    parser.add_argument("--out", required=True, help="output directory")


def _cmd_eval(args: argparse.Namespace) -> int:
    from lens_heads.evaluate import evaluate
    from lens_heads.tasks import get_task

    try:
        seeds = [int(seed) for seed in args.seeds.split(",") if seed.strip()]
    except ValueError as error:
        raise ValueError(f"--seeds must be comma-separated integers, got {args.seeds!r}") from error
    task = get_task(args.task, instruction=args.instruction, match=args.match)
    _check_out(args.out)
    model = _load(args)
    result = evaluate(
        model,
        task,
        args.settings,
        mask=args.mask,
        other_mask=args.other_mask,
        n_eval=args.n_eval,
        split_seed=args.split_seed,
        random_seeds=seeds,
        batch_size=args.batch_size,
        chat=_chat_choice(args.chat),
        instruction=args.instruction,
        shots=args.shots,
        shot_seed=args.shot_seed,
        max_new_tokens=args.max_new_tokens,
    )
    written = result.save(output_dir(args.out), png=True)
    print(result.to_markdown())
    _print_written(written)
    return 0


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
    _add_model_argument(parser)
    precision = dict(choices=["auto", "bf16", "fp32", "bfloat16", "float32"])
    parser.add_argument(
        "--precision",
        default=None,
        **precision,
        help="training precision: bf16 = bfloat16 autocast on the fp32 weights, fp32 = full "
        "precision, auto (default) = bf16 where the hardware computes it natively, else fp32",
    )
    # --dtype means the weights' dtype elsewhere; here it was the training precision
    _deprecated(parser, "--dtype", "--precision", "precision", **precision)
    parser.add_argument("--task", required=True, help="built-in task name or a .json/.jsonl file")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--paper", action="store_true", help="start from the paper's schedule")
    parser.add_argument("--steps", type=_positive, help="training steps")
    parser.add_argument("--lr", type=_finite, help="peak learning rate")
    parser.add_argument("--batch-size", type=_positive, help="examples per step")
    parser.add_argument("--seed", type=int, help="seed of init, noise and batches")
    parser.add_argument(
        "--init-mean", type=_finite, help="mean of the W init (paper 4; Table 6: -3)"
    )
    parser.add_argument(
        "--noise",
        choices=["example", "batch"],
        help="Gumbel noise drawn per example (the paper's, default) or once per batch",
    )
    parser.add_argument("--sparsity", type=_finite, help="weight of the mean sigmoid(W) penalty")
    parser.add_argument(
        "--shots", type=_non_negative, help="k demonstrations before each training input"
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
        help="instruction text for the 'w/ instruction' evaluation row (for a task file "
        "without one; training never sees it)",
    )
    _add_match_argument(parser)
    parser.add_argument(
        "--holdout",
        type=_non_negative,
        help="examples held out of training (default 100; 0 = none)",
    )
    parser.add_argument("--split-seed", type=int, help="shuffle the task (seeded) before splitting")
    parser.add_argument("--ffn-masks", action="store_true", help="experimental: MLP masks too")
    parser.add_argument(
        "--query-side", action="store_true", help="experimental: mask inside the softmax"
    )
    parser.add_argument(
        "--checkpoint-every", type=_positive, default=50, help="steps per checkpoint"
    )
    parser.add_argument("--resume", action="store_true", help="continue from --out/checkpoints")
    parser.add_argument(
        "--n-eval",
        type=_non_negative,
        help="held-out examples to evaluate afterwards (default: all held out, 100 like eval's "
        "--n-eval; 0: no evaluation)",
    )
    parser.add_argument("--seeds", default="0,1", help="seeds of the random masks")
    parser.add_argument("--eval-batch-size", type=_positive, default=16)
    cli_lahis.add_soft_arguments(parser)  # --soft --heads FILE|top:N --importance DIR


def _cmd_train_mask(args: argparse.Namespace) -> int:
    from lens_heads.evaluate import evaluate
    from lens_heads.models import load_model
    from lens_heads.tasks import get_task
    from lens_heads.training import TrainingConfig, train_mask, with_overrides

    try:
        seeds = [int(seed) for seed in args.seeds.split(",") if seed.strip()]
    except ValueError as error:
        raise ValueError(f"--seeds must be comma-separated integers, got {args.seeds!r}") from error
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
    _check_out(args.out)
    model = load_model(args.model)
    out = output_dir(args.out)
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
        f"{task.name}: kept {summary['heads_kept']}/{summary['heads_total']} heads, final loss "
        f"{summary['final_loss']:.3f}, {summary['steps']} steps in {summary['seconds']:.0f} s"
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
            settings=["original"]
            + (["instruction"] if task.instruction else [])
            + (["random"] if seeds and not config.soft else [])
            + ["mask"],
        )
        written += evaluation.save(out / "eval", png=True)
        print(evaluation.to_markdown())
    _print_written(written)
    return 0


# -- sweep (issue 5) -----------------------------------------------------------------------------
def _add_sweep(sub: Any) -> None:
    parser = sub.add_parser(
        "sweep",
        help="remove heads one by one; track token ranks, outputs, similarity (Figures 2, 5)",
        description="Writes sweep.csv, sweep.json + sweep.safetensors (SweepResult.load), "
        "outputs.md (Figure 2 right), similarity.csv, ranks.html and similarity.html (.png too "
        "when kaleido can export) to --out.",
    )
    _add_model_argument(parser)
    order = parser.add_mutually_exclusive_group(required=True)
    order.add_argument(
        "--mask",
        help="removal order: a train-mask output folder (or its training.safetensors: ascending "
        "trained weight W, the paper's order) or a head-mask file (ascending value)",
    )
    order.add_argument("--heads", help="explicit removal order, e.g. L3H7,L0H1,L12H4")
    order.add_argument(
        "--influential",
        action="store_true",
        help="Appendix C.3.1: heads ordered by the target-rank gain each causes alone",
    )
    parser.add_argument("--prompt", required=True, help="the input text, e.g. apple")
    parser.add_argument("--target", help="the expected answer; its first token is tracked")
    parser.add_argument("--reference-prompt", help="full-model run to compare with (Figure 5)")
    parser.add_argument(
        "--reference-instruction",
        help="instead of --reference-prompt: the prompt in the instruction template (Table 10)",
    )
    parser.add_argument("--influential-k", type=_positive, help="re-order only the first K heads")
    parser.add_argument(
        "--top-k", type=_non_negative, default=5, help="original top tokens to track"
    )
    parser.add_argument(
        "--max-new-tokens",
        type=_non_negative,
        default=20,
        help="tokens of each step's continuation (0: no continuations)",
    )
    _deprecated(
        parser, "--generate-tokens", "--max-new-tokens", "max_new_tokens", type=_non_negative
    )
    parser.add_argument("--every", type=_positive, default=1, help="evaluate every K-th step")
    parser.add_argument(
        "--stay", type=_positive, default=3, help="steps the target must stay top-1"
    )
    parser.add_argument(
        "--batch-size", type=_positive, help="steps per forward pass (default: auto)"
    )
    _add_chat_argument(parser)
    _deprecated(parser, "--no-chat", "--chat no", "chat", const="no")
    parser.add_argument("--out", required=True, help="output directory")


def _sweep_order(args: argparse.Namespace, model: Any) -> Any:
    """The ``order`` argument of removal_sweep from --mask / --heads / --influential."""
    import warnings

    from lens_heads.training import MaskTrainingResult

    if args.influential:
        return "influential"
    if args.heads:
        return [label.strip() for label in args.heads.split(",") if label.strip()]
    path = Path(args.mask)
    if path.is_dir() or path.name == "training.safetensors":
        folder = path if path.is_dir() else path.parent
        if (folder / "training.safetensors").is_file():
            return MaskTrainingResult.load(folder).W
    mask = _load_mask(args.mask, model)
    if mask.is_binary:
        warnings.warn(
            f"{path} is a binary mask: the heads outside it go first, each group in head-index "
            "order; pass the train-mask output folder to remove heads in ascending weight W",
            stacklevel=2,
        )
    return mask


def _cmd_sweep(args: argparse.Namespace) -> int:
    from lens_heads.prompts import INSTRUCTION_TEMPLATE
    from lens_heads.sweep import removal_sweep

    if args.reference_prompt and args.reference_instruction:
        raise ValueError("give --reference-prompt or --reference-instruction, not both")
    reference = args.reference_prompt
    if args.reference_instruction:
        reference = INSTRUCTION_TEMPLATE.format(
            instruction=args.reference_instruction, input=args.prompt
        )
    _check_out(args.out)
    model = _load(args)
    result = removal_sweep(
        model,
        args.prompt,
        _sweep_order(args, model),
        target=args.target,
        track_top_k=args.top_k,
        reference_prompt=reference,
        generate_tokens=args.max_new_tokens,
        every=args.every,
        chat=_resolve_chat(args, model),
        batch_size=args.batch_size,
        influential_k=args.influential_k,
    )
    result.metadata["stay"] = args.stay
    out = output_dir(args.out)
    written = result.save(out) + result.save_figures(out, png=True)
    print(result.outputs_markdown())
    summary = result.summary()
    if result.target_id is not None:
        switch = result.switch_step(args.stay)
        print(
            f"target {result.target!r}: rank {summary['target_rank_start']} with the full model, "
            f"best {summary['target_rank_best']} after {summary['best_at_n_removed']} heads, "
            f"{summary['target_rank_end']} after all {len(result.order)}; switch step "
            f"(top-1 for {args.stay} steps): {switch}"
        )
    _print_written(written)
    return 0


# -- logit-lens, similarity, attention (issue 6) ------------------------------------------------
def _add_logit_lens(sub: Any) -> None:
    parser = sub.add_parser(
        "logit-lens",
        help="logit lens per layer, original / instructed / masked (Table 41), top tokens (4b)",
        description="Writes table.csv, table.md (top-1 token per layer and setting), "
        "result.json, tensors.safetensors and figure.html to --out, and the top tokens at the "
        "last position with their rank change (Table 4b) to --out/top_tokens.",
    )
    _add_model_argument(parser)
    parser.add_argument("--prompt", required=True, help="the input text, e.g. apple")
    parser.add_argument("--mask", help=_MASK_HELP)
    parser.add_argument("--instruction", help="add the instructed setting (Table 10 template)")
    parser.add_argument(
        "--target", action="append", help="token whose probability to follow (repeatable)"
    )
    parser.add_argument("--top-k", type=_positive, default=5, help="top tokens per layer")
    parser.add_argument("--position", type=int, default=-1, help="token position (-1: last)")
    parser.add_argument(
        "--no-final-norm",
        action="store_true",
        help="skip the final norm (the HeadsUp reference's lens; not the model's own output)",
    )
    _add_chat_argument(parser)
    parser.add_argument("--out", required=True, help="output directory")


def _cmd_logit_lens(args: argparse.Namespace) -> int:
    from lens_heads.lens import logit_lens, top_tokens

    _check_out(args.out)
    model = _load(args)
    mask = _load_mask(args.mask, model)
    common = dict(mask=mask, instruction=args.instruction, chat=_chat_choice(args.chat))
    lens = logit_lens(
        model,
        args.prompt,
        position=args.position,
        top_k=args.top_k,
        apply_final_norm=not args.no_final_norm,
        targets=args.target,
        **common,
    )
    out = output_dir(args.out)
    written = lens.save(out, png=True)
    table = top_tokens(model, args.prompt, position=args.position, top_k=10, **common)
    written += table.save(out / "top_tokens", png=True)
    print(lens.to_markdown())
    print("\n" + table.to_markdown())
    _print_written(written)
    return 0


def _add_similarity(sub: Any) -> None:
    parser = sub.add_parser(
        "similarity",
        help="per-layer cosine similarity of hidden states between settings (Figure 4)",
        description="The three comparisons of Figure 4 -- original vs instructed, masked vs "
        "instructed, masked vs masked+instructed -- of hook_resid_post (decoder) and "
        "hook_attn_out (attention) at one position. One --prompt: the curves of that prompt. "
        "Several --prompt or a --task: the per-layer mean with a 95%% interval and the paired "
        "test of masked~instructed minus original~instructed over the later layers. Writes "
        "table.csv, table.md, result.json, tensors.safetensors and figure.html to --out.",
    )
    _add_model_argument(parser)
    parser.add_argument(
        "--prompt", action="append", help="an input text, e.g. apple (repeat for many prompts)"
    )
    parser.add_argument(
        "--task", help="take the prompts from a built-in task or a .json/.jsonl task file"
    )
    parser.add_argument(
        "--n-prompts",
        type=_positive,
        default=40,
        help="with --task: its last N inputs (default 40)",
    )
    parser.add_argument(
        "--instruction", help="the task instruction (default with --task: the task's own)"
    )
    parser.add_argument("--mask", required=True, help=_MASK_HELP)
    parser.add_argument("--position", type=int, default=-1, help="token position (-1: last)")
    parser.add_argument(
        "--layers",
        help="layers to average (printed summary; the paired test with many prompts), e.g. "
        "15-29 (default: all for one prompt, the later half for many)",
    )
    _add_chat_argument(parser)
    parser.add_argument("--out", required=True, help="output directory")


def _layer_range(text: str | None) -> range | None:
    if not text:
        return None
    try:
        first, _, last = text.partition("-")
        layers = range(int(first), int(last or first) + 1)
    except ValueError as error:
        raise ValueError(f"--layers must look like 15-29 or 7, got {text!r}") from error
    if layers.start < 0 or not layers:
        raise ValueError(f"--layers must be a non-empty range of layer indices, got {text!r}")
    return layers


def _cmd_similarity(args: argparse.Namespace) -> int:
    from lens_heads.similarity import figure4_similarity, figure4_stats

    if bool(args.prompt) == bool(args.task):
        raise ValueError("give --prompt (once or several times) or --task, exactly one of them")
    if args.task is None and args.instruction is None:
        raise ValueError("--instruction is required with --prompt")
    layers = _layer_range(args.layers)  # checked before the model loads
    _check_out(args.out)
    model = _load(args)
    mask = _load_mask(args.mask, model)
    chat = _chat_choice(args.chat)
    if args.prompt and len(args.prompt) == 1:
        result = figure4_similarity(
            model, args.prompt[0], args.instruction, mask, position=args.position, chat=chat
        )
        written = result.save(output_dir(args.out), png=True)
        print(result.to_markdown())
        label = "all layers" if layers is None else f"layers {layers.start}-{layers.stop - 1}"
        print(f"\nmean cosine over {label}:\n" + result.summary(layers).to_markdown(floatfmt=".4f"))
        _print_written(written)
        return 0
    stats = figure4_stats(
        model,
        args.prompt or args.task,
        args.instruction,
        mask,
        n_prompts=args.n_prompts if args.task else None,
        later_layers=layers,
        position=args.position,
        chat=chat,
    )
    written = stats.save(output_dir(args.out), png=True)
    print(stats.to_markdown().split("\n\n| layer")[0])
    _print_written(written)
    return 0


def _add_attention(sub: Any) -> None:
    parser = sub.add_parser(
        "attention",
        help="attention from the last position to a target word, per head (Table 7)",
        description="Attention of the final position on the target word's tokens, per head, "
        "bare / instructed / masked, averaged over all heads, the heads in M and those in 1-M. "
        "Prompts come from an extractive task (--task, the answer is a word of the input) or "
        "from --prompt/--target. Writes table.csv (per head), table.md (Table 7), result.json, "
        "tensors.safetensors and figure.html to --out.",
    )
    _add_model_argument(parser)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--task", help="an extractive task, e.g. fruit_v_animal_3")
    source.add_argument("--prompt", action="append", help="a prompt (repeat with --target)")
    parser.add_argument("--target", action="append", help="its target word (one per --prompt)")
    parser.add_argument(
        "--n-eval", type=_positive, default=40, help="task examples to use (the last N)"
    )
    _deprecated(parser, "--n", "--n-eval", "n_eval", type=_positive)
    parser.add_argument("--mask", help=_MASK_HELP)
    parser.add_argument("--instruction", help="instruction (default: the task's own)")
    parser.add_argument("--no-instruction", action="store_true", help="skip the instructed run")
    _add_chat_argument(parser)
    parser.add_argument("--batch-size", type=_positive, default=16)
    parser.add_argument("--out", required=True, help="output directory")


def _cmd_attention(args: argparse.Namespace) -> int:
    from lens_heads.attention import attention_on_target, extractive_targets
    from lens_heads.tasks import get_task

    instruction = args.instruction
    if args.task:
        if args.target:
            raise ValueError("--target goes with --prompt; a task brings its own targets")
        task = get_task(args.task)
        prompts, targets = extractive_targets(task, n=args.n_eval)
        instruction = instruction or task.instruction
    else:
        prompts, targets = args.prompt, args.target or []
        if len(targets) != len(prompts):
            raise ValueError(
                f"{len(prompts)} --prompt but {len(targets)} --target; give one target each"
            )
    if args.no_instruction:
        instruction = None
    _check_out(args.out)
    model = _load(args)
    result = attention_on_target(
        model,
        prompts,
        targets,
        mask=_load_mask(args.mask, model),
        instruction=instruction,
        chat=_chat_choice(args.chat),
        batch_size=args.batch_size,
        progress=True,
    )
    written = result.save(output_dir(args.out), png=True)
    print(result.to_markdown())
    print("top heads (" + result.settings[0] + "):\n" + result.top_heads(k=5).to_markdown())
    _print_written(written)
    return 0


# -- demo (the README's first command) ---------------------------------------------------------
def _add_demo(sub: Any) -> None:
    parser = sub.add_parser(
        "demo",
        help="end to end on the offline default model: train a mask, evaluate, sweep, report",
        description="Trains a head mask on the instruction-free capitalize task (100 steps), "
        "evaluates it (Original / w/ instruction / w/ random M / w/ M), removes heads one by one, "
        "compares hidden states with the instructed run and runs the logit lens; writes each "
        "result folder and report.md + report.html (figures inline) to --out. A few minutes on "
        "2 CPU cores; re-running with the same settings reuses the finished stages.",
    )
    _add_model_argument(parser, default="smollm2-135m-instruct")
    parser.add_argument("--task", default="capitalize", help="built-in task or a data file")
    parser.add_argument("--steps", type=_positive, default=100, help="mask-training steps")
    parser.add_argument("--lr", type=_finite, default=0.2, help="peak learning rate")
    parser.add_argument("--n-eval", type=_positive, default=40, help="held-out examples")
    parser.add_argument("--sweep-every", type=_positive, default=2, help="evaluate every K heads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--fresh", action="store_true", help="recompute every stage (default: reuse finished ones)"
    )
    parser.add_argument("--out", default="demo-report", help="output directory")


def _cmd_demo(args: argparse.Namespace) -> int:
    from lens_heads.demo import run_demo

    _check_out(args.out)
    report = run_demo(
        args.out,
        model=args.model if args.dtype == "float32" else _load(args),  # an alias loads lazily
        task=args.task,
        steps=args.steps,
        lr=args.lr,
        n_eval=args.n_eval,
        sweep_every=args.sweep_every,
        seed=args.seed,
        fresh=args.fresh,
    )
    print(report.evaluation.to_markdown())
    print(f"switch step: {report.sweep.switch_step(3)} heads removed")
    print(f"report: {report.report} and {report.out / 'report.html'}")
    return 0


COMMANDS: list[tuple[str, Callable[[Any], None], Callable[[argparse.Namespace], int]]] = [
    ("models", _add_models, _cmd_models),
    ("generate", _add_generate, _cmd_generate),
    ("tasks", _add_tasks, _cmd_tasks),
    ("eval", _add_eval, _cmd_eval),
    ("train-mask", _add_train_mask, _cmd_train_mask),
    ("sweep", _add_sweep, _cmd_sweep),
    ("logit-lens", _add_logit_lens, _cmd_logit_lens),
    ("similarity", _add_similarity, _cmd_similarity),
    ("attention", _add_attention, _cmd_attention),
    ("demo", _add_demo, _cmd_demo),
    ("grid", add_grid, cmd_grid),
    *cli_lahis.COMMANDS,  # importance, language-heads, language-perplexity, transfer (issue 14)
]
COMMANDS += ALIGNMENT_COMMANDS  # translation-scores, ablate-heads, trater (issue 13)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lens-heads", description="Attention-head masks and analyses with TransformerLens."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    sub = parser.add_subparsers(dest="command", required=True)
    for _, add, _ in COMMANDS:
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    handlers = {name: command for name, _, command in COMMANDS}
    try:
        return handlers[args.command](args)
    except (ValueError, KeyError, OSError, RuntimeError) as error:  # one line, no traceback
        message = error.args[0] if isinstance(error, KeyError) and error.args else error
        print(f"lens-heads {args.command}: error: {message}", file=sys.stderr)
        return 2


def _print_written(paths: Sequence[Path]) -> None:
    print("wrote " + ", ".join(str(path) for path in paths))


def output_dir(path: str | Path) -> Path:
    """Create and return an output directory."""
    directory = Path(path)
    directory.mkdir(parents=True, exist_ok=True)
    return directory


if __name__ == "__main__":
    raise SystemExit(main())
