"""How well do gradient estimates replace an exact removal sweep? (issue 36). The sweep removes
the heads of the task's trained mask in ascending weight W (the Heads up! order) on each of the
task's last ``n_prompts`` held-out prompts; the first-order estimate (one backward at the full
model) and integrated gradients (one batched backward along the mask path) give each step's
change of the answer logit. The page reports each estimate's rank correlation with the exact
steps, its top-k agreement, its error per step and of the total, its cost, and the heads where it
fails, with the part of the error that explains it (:mod:`lens_heads.heads_up.estimate_errors`).

    python -m analyses.sweep_estimate_errors --task capitalize --mask runs/demo/training \\
        --out runs/sweep-estimates/smollm2-capitalize
    python -m analyses.sweep_estimate_errors --model gemma-3-270m --task en-fr \\
        --mask runs/table1/gemma-3-270m/training_en-fr --out runs/sweep-estimates/gemma-en-fr

Resumable (the mask's training and the errors are stages).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from analyses._common import (
    LazyModel,
    MaskedTaskConfig,
    command_line,
    help_of,
    markdown_table,
    mask_of,
    stages_of,
    write_outputs,
)
from lens_heads.core import InputError
from lens_heads.heads_up import (
    ESTIMATES,
    EstimateErrors,
    EstimateErrorsConfig,
    estimate_errors,
)


@dataclass
class Config(MaskedTaskConfig):
    n_prompts: int = field(default=10, metadata=help_of("held-out prompts swept"))
    ig_steps: int = field(default=32, metadata=help_of("midpoints of the integrated gradients"))
    k: int = field(default=10, metadata=help_of("top-k sets compared"))
    max_heads: int | None = field(default=None, metadata=help_of("first N heads of the order"))
    ablation: str = field(default="zero", metadata=help_of("what a removed head outputs"))
    outside_mask: bool = field(
        default=False, metadata=help_of("sweep only the heads the mask removes (sigmoid(W) < 0.5)")
    )
    out: str = field(default="runs/sweep-estimates", metadata=help_of("output folder"))

    @property
    def estimates(self) -> EstimateErrorsConfig:
        """The estimates' settings (validated when built)."""
        return EstimateErrorsConfig(
            n_eval=self.n_prompts,
            ig_steps=self.ig_steps,
            k=self.k,
            max_heads=self.max_heads,
            ablation=self.ablation,
            progress=self.progress,
        )


def numbers_of(errors: EstimateErrors) -> dict[str, Any]:
    """The stored numbers: the error table, the failures of each estimate, the costs."""
    return {
        "model": errors.model,
        "task": errors.task,
        "prompts": int(errors.exact.shape[0]),
        "heads in the order": len(errors.order),
        "settings": errors.settings,
        "table": errors.to_frame().to_dict(orient="records"),
        "failures": {name: errors.failures(name).to_dict(orient="records") for name in ESTIMATES},
        "failure kinds": {
            name: errors.failures(name, n=len(errors.order))["failure"].value_counts().to_dict()
            for name in ESTIMATES
        },
        "path": errors.path_roughness(),
        "cost": errors.cost,
        "seconds": errors.seconds,
    }


def run(config: Config) -> EstimateErrors:
    settings = config.estimates  # bad settings stop here, before any model loads
    if config.n_prompts > config.n_eval:
        raise InputError(
            f"--n-prompts {config.n_prompts} exceeds the {config.n_eval} examples held out of "
            "the mask's training (--n-eval)"
        )
    model = LazyModel(config.model)
    stages = stages_of(config, model)
    training = mask_of(config, stages, model)
    if config.outside_mask:  # ascending W: the heads the mask removes come first
        settings = replace(settings, max_heads=max(int((training.W < 0).sum()), 2))

    def compute(where: Path) -> EstimateErrors:
        errors = estimate_errors(model(), config.task_object(), training.W, settings)
        errors.save(where)
        return errors

    errors = stages("errors", compute, EstimateErrors.load)
    numbers = numbers_of(errors)
    failures = [
        f"**{name}**: the heads where it errs most\n\n"
        + markdown_table(errors.failures(name), floatfmt=".3g", index=False)
        for name in ESTIMATES
    ]
    rough = numbers["path"]
    text = "\n\n".join(
        [
            f"{numbers['prompts']} prompts, {numbers['heads in the order']} heads removed in "
            f"ascending trained weight, {config.ablation} ablation. Along the integrated "
            f"gradients' path the answer logit travels {rough['path travel']:.1f} on average "
            f"between ends {rough['path ends apart']:.1f} apart.",
            errors.to_markdown(),
            *failures,
        ]
    )
    write_outputs(
        config.out,
        title=f"Gradient estimates of a removal sweep: {errors.task} on {errors.model}",
        markdown=text,
        figures={"sweep_estimate_errors": errors.plot()},
        numbers=numbers,
    )
    return errors


main = command_line(Config, run, __doc__)

if __name__ == "__main__":
    raise SystemExit(main())


#: a run on a tiny model (the tests add ``--steps 3 --n-eval 4 --no-progress --out DIR``) and
#: the figure it must write (tests/unit/tools/test_analyses_modules.py runs each analysis's)
EXAMPLE = (["--n-prompts", "2", "--ig-steps", "4", "--k", "2"], "sweep_estimate_errors")
