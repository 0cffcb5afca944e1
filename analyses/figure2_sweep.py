"""Heads up! Figure 2: remove a trained mask's heads one by one, in ascending mask weight, and
follow the rank of the answer token and the generated text; the step where the answer becomes
the top-1 prediction and stays there (the *switch*) is marked.

    python -m analyses.figure2_sweep --task capitalize --out runs/figure2
    python -m analyses.figure2_sweep --mask demo-report/training --out runs/figure2   # reuse a mask

The prompt is ``--word`` or the first held-out input whose answer is one token; the sweep also
records the per-layer similarity to the instructed prompt (Figure 5 reads it). Resumable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from analyses._common import (
    LazyModel,
    MaskedTaskConfig,
    Stages,
    command_line,
    help_of,
    mask_of,
    stages_of,
    write_outputs,
)
from lens_heads.core import has_chat_template
from lens_heads.heads_up import SweepResult, removal_sweep, sweep_example


@dataclass
class Config(MaskedTaskConfig):
    word: str | None = field(default=None, metadata=help_of("held-out input to sweep"))
    every: int = field(default=2, metadata=help_of("evaluate every k-th removal step"))
    max_new_tokens: int = field(default=10, metadata=help_of("greedy tokens per step"))
    out: str = field(default="runs/figure2", metadata=help_of("output folder"))


def sweep_of(
    config: Config,
    stages: Stages,
    model: LazyModel,
    order: Any,
    *,
    name: str = "sweep",
    influential_k: int | None = None,
) -> SweepResult:
    """The removal sweep of ``order`` (trained weights, a head list or ``"influential"``) on
    the config's prompt, as the stage ``name``; ``influential_k`` re-orders the first k heads of
    the weight order by single-head influence (Figure 8)."""

    def compute(where: Any) -> SweepResult:
        task = config.task_object()
        chat = has_chat_template(model().tokenizer)
        held_out = config.held_out()
        if config.word is None:
            example = sweep_example(model(), held_out, chat)
        else:
            matches = [e for e in task.examples if e.input == config.word]
            if not matches:
                raise ValueError(f"{config.word!r} is not an input of task {task.name!r}")
            example = matches[0]
        result = removal_sweep(
            model(),
            example.input,
            order,
            target=example.output,
            instruction=task.instruction or None,  # the reference run: the instructed prompt
            max_new_tokens=config.max_new_tokens,
            every=config.every,
            chat=chat,
            progress=config.progress,
            influential_k=influential_k,
        )
        result.save(where)
        result.save_figures(where)
        return result

    return stages(name, compute, SweepResult.load)


def sweep_markdown(sweep: SweepResult) -> str:
    info = sweep.summary()
    lines = [f"- {key}: {value}" for key, value in info.items()]
    return "\n".join(lines) + "\n\n" + sweep.outputs_markdown()


def run(config: Config) -> SweepResult:
    model = LazyModel(config.model)
    stages = stages_of(config, model)
    training = mask_of(config, stages, model)
    sweep = sweep_of(config, stages, model, training.W)
    write_outputs(
        config.out,
        title=f"Figure 2: removal sweep of the {config.task} mask on {sweep.model}",
        markdown=sweep_markdown(sweep),
        figures={"figure2_ranks": sweep.plot_ranks()},
        numbers=sweep.summary(),
    )
    return sweep


main = command_line(Config, run, __doc__)

if __name__ == "__main__":
    raise SystemExit(main())


#: a run on a tiny model (the tests add ``--steps 3 --n-eval 4 --no-progress --out DIR``) and
#: the figure it must write (tests/unit/tools/test_analyses_modules.py runs each analysis's)
EXAMPLE = (["--task", "capitalize", "--every", "8", "--max-new-tokens", "2"], "figure2_ranks")
