"""Causal head roles of a task (issue 36): the three gate fits of :func:`lens_heads.head_roles`,
the classes they give each head, and the sets evaluated: does a model without its interfering
heads do the task better? (Heads up!, footnote 2 to Table 6, measured for one task at a time.)

    python -m analyses.head_roles --task capitalize --out runs/roles/smollm2-capitalize
    python -m analyses.head_roles --model gemma-3-270m --task en-fr --out runs/roles/gemma-en-fr

Resumable (each fit and the evaluation is a stage); writes ``roles/`` (``lh.HeadRoles.load``),
``numbers.json``, ``summary.md`` and the class map.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import pandas as pd

import lens_heads as lh
from analyses._common import DEFAULT_MODEL, command_line, help_of, markdown_table, write_outputs
from lens_heads.heads_up import HeadRoles, RolesConfig, head_roles


@dataclass(frozen=True)
class Config(RolesConfig):
    model: str = field(default=DEFAULT_MODEL, metadata=help_of("model alias or path"))
    task: str = field(default="capitalize", metadata=help_of("task name or file"))
    progress: bool = field(default=True, metadata=help_of("progress bars"))
    out: str = field(default="runs/roles", metadata=help_of("output folder"))

    @property
    def precision(self) -> str:
        """The training precision, under the name the stored provenance reads."""
        return self.training.precision


def removing_interference(roles: HeadRoles) -> dict[str, Any]:
    """What removing the interfering heads does to the instructed and the bare model: the
    accuracy and the answer CE with all heads and without them (rows of the evaluation)."""
    if roles.evaluation is None or not len(roles.evaluation):
        return {}
    frame = roles.evaluation
    found: dict[str, Any] = {}
    for instructed in (True, False):
        rows = frame[frame["instructed"] == instructed].set_index("heads")
        if {"all heads", "without interfering heads"} <= set(rows.index):
            before, after = rows.loc["all heads"], rows.loc["without interfering heads"]
            found["instructed" if instructed else "bare input"] = {
                "accuracy": [float(before["accuracy"]), float(after["accuracy"])],
                "answer CE": [float(before["answer_ce"]), float(after["answer_ce"])],
                "heads removed": int(before["n heads"]) - int(after["n heads"]),
                "better": bool(
                    after["accuracy"] >= before["accuracy"]
                    and after["answer_ce"] < before["answer_ce"]
                ),
            }
    return found


def run(config: Config) -> HeadRoles:
    model = lh.load_model(config.model)
    settings = {f.name: getattr(config, f.name) for f in fields(RolesConfig)}
    roles = head_roles(
        model, config.task, RolesConfig(**settings), out=config.out, progress=config.progress
    )
    counts = roles.counts()
    effect = removing_interference(roles)
    agreement = roles.mask_agreement()
    lines = [
        f"{sum(counts.values())} heads: "
        + ", ".join(f"{n} {name}" for name, n in counts.items())
        + f" ({config.training.n_masks} masks per fit).",
        "",
        "How far the masks agree on a head's class, beside the agreement the class shares "
        "alone give:",
        "",
        markdown_table(pd.DataFrame(agreement), floatfmt=".3f", index=False),
        "",
    ]
    if roles.evaluation is not None:
        lines += [markdown_table(roles.evaluation, floatfmt=".3g", index=False), ""]
    lines.append(roles.to_markdown())
    write_outputs(
        config.out,
        title=f"Head roles: {roles.task} on {roles.model}",
        markdown="\n".join(lines),
        figures={"roles": roles.plot()},
        numbers={
            "model": roles.model,
            "task": roles.task,
            "settings": {
                **config.flat(),
                "model": config.model,
                "task": config.task,
                "out": None,
                "progress": None,
            },
            "counts": counts,
            "heads": {name: roles.heads(name) for name in ("facilitating", "interfering")},
            "mean agreement": float(roles.agreement.mean()),
            "agreement between masks (kappa)": agreement,
            "gates": roles.gates.float().round(decimals=4).tolist(),  # [fit, mask, layer, head]
            "final loss": roles.settings.get("final loss"),
            "fit seconds": roles.seconds,
            "evaluation": []
            if roles.evaluation is None
            else roles.evaluation.to_dict(orient="records"),
            "removing interfering heads": effect,
        },
    )
    return roles


main = command_line(Config, run, __doc__)

if __name__ == "__main__":
    raise SystemExit(main())


#: a run on a tiny model (the tests add ``--n-eval 4 --no-progress --out DIR``) and its figure
EXAMPLE = (
    ["--pulled-steps", "3", "--n-masks", "2", "--batch-size", "2", "--no-evaluate"],
    "roles",
)
