"""The Heads up! commands (``sweep``, ``logit-lens``, ``similarity``, ``attention``) and
``demo``, the end-to-end report."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from lens_heads.cli import _common as common
from lens_heads.cli._options import add_settings, settings_from
from lens_heads.core import InputError, markdown_table
from lens_heads.core.internal import ABLATIONS
from lens_heads.demo import DemoConfig
from lens_heads.heads_up import AttentionConfig, LensConfig, ReadoutConfig, SweepConfig
from lens_heads.heads_up.internal import ENGINES

__all__ = ["COMMANDS"]


# -- sweep (issue 5) -----------------------------------------------------------------------------
def _add_sweep(sub: Any) -> None:
    parser = sub.add_parser(
        "sweep",
        help="remove heads one by one; track token ranks, outputs, similarity (Figures 2, 5)",
        description="Writes sweep.csv, sweep.json + sweep.safetensors (SweepResult.load), "
        "outputs.md (Figure 2 right), similarity.csv, ranks.html and similarity.html (.png too "
        "when kaleido can export) to --out.",
    )
    common.add_model_argument(parser)
    order = parser.add_mutually_exclusive_group(required=True)
    common.add_inputs(
        order,
        mask={"help": "removal order: a train-mask output folder (or its training.safetensors: "
              "ascending trained weight W, the paper's order) or a head-mask file (ascending)"},
        heads={"help": "explicit removal order, e.g. L3H7,L0H1,L12H4 (or a file of labels)"},
    )  # fmt: skip
    order.add_argument(
        "--influential",
        action="store_true",
        help="Appendix C.3.1: heads ordered by the target-rank gain each causes alone",
    )
    common.add_inputs(parser, "target", prompt={"required": True})
    parser.add_argument(
        "--reference-prompt", type=common.text, help="full-model run to compare with (Figure 5)"
    )
    common.add_inputs(
        parser,
        instruction={
            "help": "instead of --reference-prompt: the full-model run of the prompt under this "
            "instruction, in the instruction template (Table 10)"
        },
    )
    common.deprecated(parser, "--reference-instruction", "--instruction", "instruction")
    add_settings(
        parser,
        SweepConfig,
        skip=("progress",),
        choices={"ablation": ABLATIONS, "engine": ENGINES},
    )
    # SweepConfig.track_top_k, spelt --top-k before 0.2.0 (--top-k is LensConfig.top_k elsewhere)
    common.deprecated(parser, "--top-k", "--track-top-k", "track_top_k", type=int)
    parser.add_argument(
        "--ablation-task",
        help="with --ablation mean or resample: the task (built-in name or file) whose first 64 "
        "training inputs give each head's mean output, or the donor (the first with as many "
        "tokens as --prompt)",
    )
    common.deprecated(
        parser, "--generate-tokens", "--max-new-tokens", "max_new_tokens", type=common.non_negative
    )
    parser.add_argument(
        "--stay", type=common.positive, default=3, help="steps the target must stay top-1"
    )
    common.deprecated(parser, "--no-chat", "--chat no", "chat", const="no")
    common.add_out_argument(parser)


def _sweep_order(args: argparse.Namespace, shape: Any) -> Any:
    """The ``order`` argument of removal_sweep from --mask / --heads / --influential, read and
    checked before the model loads (against its shape when known)."""
    from lens_heads.core.internal import MaskShapeError
    from lens_heads.engine import MaskTrainingResult

    if args.influential:
        return "influential"
    if args.heads is not None:
        return common.check_heads(args.heads, shape)
    path = Path(args.mask)
    if path.is_dir() or path.name == "training.safetensors":
        folder = path if path.is_dir() else path.parent
        if (folder / "training.safetensors").is_file():
            weights = MaskTrainingResult.load(folder).W
            if shape is not None and tuple(weights.shape) != (shape.n_layers, shape.n_heads):
                raise MaskShapeError(
                    f"--mask {folder}: trained weights of shape {tuple(weights.shape)} (layers, "
                    f"heads) but model {shape.name} has {shape.n_layers} layers x "
                    f"{shape.n_heads} heads"
                )
            return weights
    mask = common.mask_before_model(args.mask, shape)
    if mask.is_binary:  # the rule of lens_heads.removal_sweep, said before the model loads
        raise InputError(
            f"--mask {path} is a binary mask: it gives no removal order (its kept heads all "
            "tie); pass the train-mask output folder (ascending trained weight W) or --heads"
        )
    return mask


def _cmd_sweep(args: argparse.Namespace) -> int:
    from lens_heads.core.internal import check_top_k
    from lens_heads.heads_up import removal_sweep

    if args.reference_prompt and args.instruction:
        raise InputError("give --reference-prompt or --instruction, not both")
    shape = common.check_model(args)
    if shape is not None and args.track_top_k:
        check_top_k(shape, args.track_top_k, "--track-top-k")
    order = _sweep_order(args, shape)
    if args.target is None and args.track_top_k == 0:
        raise InputError("nothing to track: give --target or --track-top-k above 0")
    config = settings_from(args, SweepConfig)
    ablation_prompts = None
    if config.ablation != "zero" or args.ablation_task:
        if config.ablation == "zero" or not args.ablation_task:
            raise InputError(
                "mean and resample ablation take their reference prompts from a task: pass "
                "--ablation mean (or resample) with --ablation-task TASK"
            )
        from lens_heads.core import get_task
        from lens_heads.core.internal import REFERENCE_SIZE

        examples = get_task(args.ablation_task).examples[:REFERENCE_SIZE]
        ablation_prompts = [example.input for example in examples]
    with common.writing(args.out) as out:
        model = common.load_model(args)
        result = removal_sweep(
            model,
            args.prompt,
            order,  # a mask is checked against the model there
            target=args.target,
            reference_prompt=args.reference_prompt,
            instruction=args.instruction,  # the reference run, built as in Python
            ablation_prompts=ablation_prompts,
            config=config,
        )
        result.metadata["stay"] = args.stay
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
    common.print_written(written)
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
    common.add_model_argument(parser)
    common.add_inputs(
        parser, "mask", prompt={"required": True},
        instruction={"help": "add the instructed setting (Table 10 template)"},
        target={"action": "append", "help": "token whose probability to follow (repeatable)"},
    )  # fmt: skip
    add_settings(parser, LensConfig)  # --top-k --position --final-norm/--no-final-norm --chat
    common.add_out_argument(parser)


def _cmd_logit_lens(args: argparse.Namespace) -> int:
    from lens_heads.core.internal import check_top_k
    from lens_heads.heads_up import logit_lens, top_tokens

    config = settings_from(args, LensConfig)
    shape = common.check_model(args)
    if shape is not None:
        check_top_k(shape, config.top_k, "--top-k")
    mask = common.mask_before_model(args.mask, shape)
    with common.writing(args.out) as out:
        model = common.load_model(args)
        mask = common.load_mask(mask, model)
        lens = logit_lens(
            model, args.prompt, config, mask=mask, instruction=args.instruction,
            targets=args.target,
        )  # fmt: skip
        written = lens.save(out, png=True)
        k = min(10, int(model.cfg.d_vocab))
        table = top_tokens(
            model, args.prompt, position=config.position, top_k=k, mask=mask,
            instruction=args.instruction, chat=config.chat,
        )  # fmt: skip
        written += table.save(out / "top_tokens", png=True)
    print(lens.to_markdown())
    print("\n" + table.to_markdown())
    common.print_written(written)
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
    common.add_model_argument(parser)
    common.add_inputs(
        parser,
        prompt={"action": "append", "help": "an input text, e.g. apple (repeat for many)"},
        task={"help": "take the prompts from a built-in task or a .json/.jsonl task file"},
    )
    common.add_inputs(parser, "n_eval")
    common.deprecated(parser, "--n-prompts", "--n-eval", "n_eval", type=common.positive)
    common.add_inputs(parser, "instruction", mask={"required": True})
    parser.add_argument(
        "--layers",
        help="layers to average (printed summary; the paired test with many prompts), e.g. "
        "15-29 (default: all for one prompt, the later half for many)",
    )
    add_settings(parser, ReadoutConfig, only=("position", "chat"))
    common.add_out_argument(parser)


def _layer_range(text: str | None, shape: Any = None) -> range | None:
    """``--layers 15-29`` or ``7``: a closed range of layer indices, within the model when its
    shape is known."""
    if text is None:
        return None
    first, dash, last = text.partition("-")
    try:  # "1-" is no range: int("") fails
        layers = range(int(first), int(last if dash else first) + 1)
    except ValueError as error:
        raise InputError(
            f"--layers must look like 15-29 (first-last, both given) or 7, got {text!r}"
        ) from error
    if layers.start < 0 or not layers:
        raise InputError(f"--layers must be a non-empty range of layer indices, got {text!r}")
    if shape is not None and layers.stop > shape.n_layers:
        raise InputError(f"--layers {text}: model {shape.name} has layers 0-{shape.n_layers - 1}")
    return layers


def _cmd_similarity(args: argparse.Namespace) -> int:
    from lens_heads.core import get_task
    from lens_heads.heads_up import figure4_similarity, figure4_stats

    if bool(args.prompt) == bool(args.task):
        raise InputError("give --prompt (once or several times) or --task, exactly one of them")
    if args.task is None and args.instruction is None:
        raise InputError("--instruction is required with --prompt")
    shape = common.check_model(args)
    layers = _layer_range(args.layers, shape)
    prompts: Any = args.prompt
    if args.task:
        task = get_task(args.task)
        if args.n_eval > len(task):
            raise InputError(
                f"--n-eval {args.n_eval} but task {task.name!r} has {len(task)} examples; "
                f"ask for at most {len(task)}"
            )
        if args.n_eval < 2:
            raise InputError("--n-eval must be at least 2: the paired test needs 2 prompts")
        if (args.instruction or task.instruction) is None:
            raise InputError(f"task {task.name!r} has no instruction: give --instruction")
        prompts = task
    mask = common.mask_before_model(args.mask, shape)
    readout = settings_from(args, ReadoutConfig)  # where the states are read
    with common.writing(args.out) as out:
        model = common.load_model(args)
        mask = common.load_mask(mask, model)
        if args.prompt and len(args.prompt) == 1:
            result = figure4_similarity(model, args.prompt[0], args.instruction, mask, readout)
            written = result.save(out, png=True)
            print(result.to_markdown())
            label = "all layers" if layers is None else f"layers {layers.start}-{layers.stop - 1}"
            print(
                f"\nmean cosine over {label}:\n"
                + markdown_table(result.summary(layers), floatfmt=".4f")
            )
            common.print_written(written)
            return 0
        stats = figure4_stats(
            model,
            prompts,
            args.instruction,
            mask,
            n_prompts=args.n_eval if args.task else None,
            later_layers=layers,
            config=readout,
        )
        written = stats.save(out, png=True)
    print(stats.to_markdown().split("\n\n| layer")[0])
    common.print_written(written)
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
    common.add_model_argument(parser)
    source = parser.add_mutually_exclusive_group(required=True)
    common.add_inputs(
        source,
        task={"help": "an extractive task, e.g. fruit_v_animal_3"},
        prompt={"action": "append", "help": "a prompt (repeat with --target)"},
    )
    common.add_inputs(
        parser, target={"action": "append", "help": "its target word (one per --prompt)"}
    )
    common.add_inputs(parser, "n_eval")
    common.deprecated(parser, "--n", "--n-eval", "n_eval", type=common.positive)
    common.add_inputs(parser, "mask", "instruction")
    parser.add_argument("--no-instruction", action="store_true", help="skip the instructed run")
    add_settings(parser, AttentionConfig, skip=("progress",))  # --chat --batch-size
    common.add_out_argument(parser)


def _cmd_attention(args: argparse.Namespace) -> int:
    from lens_heads.core import get_task
    from lens_heads.heads_up import attention_on_target
    from lens_heads.heads_up.internal import extractive_targets

    instruction = args.instruction
    if args.task:
        if args.target:
            raise InputError("--target goes with --prompt; a task brings its own targets")
        task = get_task(args.task)
        prompts, targets = extractive_targets(task, n=args.n_eval)
        instruction = instruction or task.instruction
    else:
        prompts, targets = args.prompt, args.target or []
        if len(targets) != len(prompts):
            raise InputError(
                f"{len(prompts)} --prompt but {len(targets)} --target; give one target each"
            )
        missing = [t for p, t in zip(prompts, targets, strict=True) if t not in p]
        if missing:
            raise InputError(f"--target {missing[0]!r} is not in its --prompt; give a word of it")
    if args.no_instruction:
        instruction = None
    config = settings_from(args, AttentionConfig, progress=True)
    mask = common.mask_before_model(args.mask, common.check_model(args))
    with common.writing(args.out) as out:
        model = common.load_model(args)
        result = attention_on_target(
            model,
            prompts,
            targets,
            config,
            mask=common.load_mask(mask, model),
            instruction=instruction,
        )
        written = result.save(out, png=True)
    print(result.to_markdown())
    print(
        "top heads ("
        + result.settings[0]
        + "):\n"
        + markdown_table(result.top_heads(k=5), floatfmt=".4f")
    )
    common.print_written(written)
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
    common.add_model_argument(parser, default="smollm2-135m-instruct")
    add_settings(
        parser,
        DemoConfig,
        skip=("model", "progress"),
        choices={"precision": common.PRECISION_CHOICES},
    )
    parser.add_argument(
        "--fresh", action="store_true", help="recompute every stage (default: reuse finished ones)"
    )
    common.add_out_argument(parser, default="demo-report")


def _cmd_demo(args: argparse.Namespace) -> int:
    from lens_heads.core import get_task
    from lens_heads.demo import DemoConfig, run_demo
    from lens_heads.engine import check_training

    shape = common.check_model(args)
    config = settings_from(args, DemoConfig)
    check_training(get_task(config.task), config.training, model=shape)  # its held-out part
    with common.writing(args.out) as out:
        # the model loads lazily (when a stage computes) unless its weights need a cast
        model = args.model if args.dtype == "float32" else common.load_model(args)
        config = dataclasses.replace(config, model=model)
        report = run_demo(out, config, fresh=args.fresh)
    print(report.evaluation.to_markdown())
    print(f"switch step: {report.sweep.switch_step(3)} heads removed")
    print(f"report: {report.report} and {report.out / 'report.html'}")
    return 0


COMMANDS = [
    ("sweep", _add_sweep, _cmd_sweep),
    ("logit-lens", _add_logit_lens, _cmd_logit_lens),
    ("similarity", _add_similarity, _cmd_similarity),
    ("attention", _add_attention, _cmd_attention),
    ("demo", _add_demo, _cmd_demo),
]


#: each command's examples, run by the tests (common.Examples: the placeholders)
EXAMPLES = {
    "sweep": common.Examples(
        bad="--model {M} --prompt apple --heads l0h1 --out {out}",
        message="'l0h1' is not of the form 'L<layer>H<head>'",
        good="--model {M} --prompt apple --heads L0H1 --target A",
    ),
    "logit-lens": common.Examples(
        bad="--model {M} --prompt apple --top-k 1000 --out {out}",
        message="vocabulary of 261 tokens",
        good="--model {M} --prompt apple",
    ),
    "similarity": common.Examples(
        bad="--model {M} --prompt a --instruction b --mask {mask} --layers 1- --out {out}",
        message="--layers must look like 15-29 (first-last, both given)",
        good="--model {M} --prompt a --instruction b --mask {mask}",
    ),
    "attention": common.Examples(
        bad="--model {M} --task antonym --out {out}",
        message="'antonym' is not extractive (a choose-a-word task): the answer is a word of "
        "the input in 0 of its 281 examples",
        good="--model {M} --task fruit_v_animal_3 --n-eval 4",
    ),
    "demo": common.Examples(
        bad="--model {M} --task {one} --out {out}",
        message="has 1 examples",
        good="--model {M} --task capitalize --steps 2 --n-eval 4",
    ),
}
