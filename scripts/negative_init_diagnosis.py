"""Why a mask trained from the paper's negative init does not learn on a small model.

Heads up!'s negative init (W ~ N(-3, 0.02)) starts every head removed. Under the paper's noise
``G = log(-log U)`` a head at -3 is sampled *on* with probability exp(-e^3) = 2e-9, so every
training forward is the all-heads-off model and all learning comes from straight-through
gradients taken there. This script measures, without training:

1. the gradient at the all-off point: over ``--batches`` training batches at tau = 4, how many
   heads have a consistently negative gradient (that is, want to be switched on), and how often
   the per-batch sign agrees with the mean;
2. the loss landscape around it: the answer CE with ``k`` random heads switched on (no noise,
   ``--seeds`` seeds), and with the ``k`` heads the gradient ranks first -- if switching on a
   few heads *raises* the loss, the all-off point sits behind a barrier that a linearised step
   cannot cross.

    python scripts/negative_init_diagnosis.py --model smollm2-135m-instruct --task capitalize \\
        --out runs/negative-init-diagnosis

About a minute on a 2-core CPU. Writes ``landscape.csv``, ``summary.json`` and ``summary.md``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd
import torch

import lens_heads as lh
from lens_heads.core import markdown_table, write_atomic
from lens_heads.engine import MaskTrainer


def gradient_at_all_off(trainer: MaskTrainer, batches: int) -> torch.Tensor:
    """The straight-through gradient of the answer CE with respect to W, at W = init and
    tau = tau_begin (the first step's), for each of the first ``batches`` training batches;
    nothing is updated."""
    grads = []
    for index in range(batches):
        tokens, answer_mask = trainer.batch(index)
        weights = trainer.W.detach().clone().requires_grad_(True)
        mask = trainer._sample(weights, tokens.shape[0])  # per-example noise at step 0's tau
        (grad,) = torch.autograd.grad(trainer.loss(tokens, answer_mask, mask), weights)
        grads.append(grad)
    return torch.stack(grads)


def answer_ce(trainer: MaskTrainer, mask: torch.Tensor, batches: list) -> float:
    """Mean answer CE of ``batches`` under the fixed 0/1 ``mask`` (no noise, no gradient)."""
    with torch.no_grad():
        losses = [float(trainer.loss(tokens, answer, mask)) for tokens, answer in batches]
    return sum(losses) / len(losses)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--task", default="capitalize")
    parser.add_argument("--init-mean", type=float, default=-3.0)
    parser.add_argument("--batches", type=int, default=24)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", default="runs/negative-init-diagnosis")
    args = parser.parse_args(argv)

    model = lh.load_model(args.model)
    model.requires_grad_(False)
    config = lh.TrainingConfig.short(init_mean=args.init_mean, n_eval=100)
    trainer = MaskTrainer(model, lh.get_task(args.task), config)
    eval_batches = [trainer.batch(0), trainer.batch(1)]
    grads = gradient_at_all_off(trainer, args.batches)
    mean, std = grads.mean(0), grads.std(0)
    t = mean / (std / len(grads) ** 0.5 + 1e-12)
    agreement = float((torch.sign(grads) == torch.sign(mean)).float().mean())
    n_layers, n_heads = mean.shape
    total = n_layers * n_heads
    ranked = torch.argsort(mean.flatten())  # most negative gradient first: wants to be on

    rows = []
    for k in sorted({0, total // 9, total // 4, total // 3, total // 2, 2 * total // 3, total}):
        random_ce = []
        for seed in range(args.seeds):
            on = torch.zeros(total)
            on[torch.randperm(total, generator=torch.Generator().manual_seed(seed))[:k]] = 1
            random_ce.append(answer_ce(trainer, on.view(n_layers, n_heads), eval_batches))
        by_gradient = torch.zeros(total)
        by_gradient[ranked[:k]] = 1
        rows.append(
            {
                "heads on": k,
                "CE, random heads on (mean)": sum(random_ce) / len(random_ce),
                "CE, random (std)": float(torch.tensor(random_ce).std())
                if k not in (0, total)
                else 0.0,
                "CE, heads the gradient ranks first": answer_ce(
                    trainer, by_gradient.view(n_layers, n_heads), eval_batches
                ),
            }
        )
    landscape = pd.DataFrame(rows)
    all_off = float(landscape["CE, random heads on (mean)"].iloc[0])
    summary = {
        "model": args.model,
        "task": args.task,
        "init_mean": args.init_mean,
        "batches": args.batches,
        "answer_ce_all_off": all_off,
        "answer_ce_full_model": float(landscape["CE, random heads on (mean)"].iloc[-1]),
        "heads_that_want_on": int((mean < 0).sum()),
        "heads_consistently_want_on_t_below_-3": int((t < -3).sum()),
        "heads_consistently_want_off_t_above_3": int((t > 3).sum()),
        "per_batch_sign_agreement": agreement,
        "fewest_random_heads_on_below_all_off": next(
            (int(r["heads on"]) for r in rows[1:] if r["CE, random heads on (mean)"] < all_off),
            None,
        ),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    landscape.to_csv(out / "landscape.csv", index=False)
    write_atomic(out / "summary.json", json.dumps(summary, indent=1))
    text = (
        f"# Negative-init diagnosis: {args.task} on {args.model}, W = {args.init_mean:g}\n\n"
        f"`python scripts/negative_init_diagnosis.py --model {args.model} --task {args.task} "
        f"--init-mean {args.init_mean:g} --out {args.out}`\n\n"
        f"Gradient at the all-off point over {args.batches} batches: "
        f"{summary['heads_that_want_on']} of {total} heads want on on average, "
        f"{summary['heads_consistently_want_on_t_below_-3']} consistently (t < -3); "
        f"the per-batch sign agrees with the mean {agreement:.0%} of the"
        f" time.\n\nAnswer CE with k heads on (no noise, {args.seeds} seeds; all off "
        f"{all_off:.2f}, full model {summary['answer_ce_full_model']:.2f}):\n\n"
        f"{markdown_table(landscape, floatfmt='.2f', index=False)}\n"
    )
    write_atomic(out / "summary.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
