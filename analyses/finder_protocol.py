"""One model and task of the head-finder protocol (issue 70): every method of the protocol file on
the test part that no design choice has read, one benchmark per training seed, pooled into the
methods' CMD and CPR under both weightings with intervals over seeds and test pairs, and each
mask's comparison with the strongest like-for-like baseline under the protocol's rule.

    python -m analyses.finder_protocol --protocol protocols/head_finders-1.toml \\
        --model smollm2-135m-instruct --task ioi --out runs/protocol-1/smollm2-135m-instruct-ioi

Writes ``summary.md``, ``numbers.json`` (the protocol's version and hash, the pair counts, the
table, the comparisons and the per-size curves with their bands), the figure, every seed's
resumable benchmark (``<out>/seed-<s>``) and the pooled result (``<out>/protocol``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import lens_heads as lh
from analyses._common import DEFAULT_MODEL, command_line, help_of, write_outputs
from lens_heads.core import InputError
from lens_heads.finders import FinderProtocol, ProtocolResult, run_protocol


@dataclass
class Config:
    protocol: str = field(
        default="protocols/head_finders-1.toml", metadata=help_of("the protocol file")
    )
    model: str = field(default=DEFAULT_MODEL, metadata=help_of("model alias or path"))
    task: str = field(default="ioi", metadata=help_of("one task of the protocol"))
    progress: bool = field(default=True, metadata=help_of("progress bars"))
    out: str = field(default="runs/finder-protocol", metadata=help_of("output folder"))

    #: the test part's data, read whatever the settings (the task's own files are found by name)
    READS: ClassVar[tuple[str, ...]] = (
        "lens_heads/data/ioi.jsonl", "lens_heads/data/ioi_test.jsonl",
        "lens_heads/data/finder_development.json", "lens_heads/data/finder_test",
    )  # fmt: skip

    def implied_settings(self) -> dict[str, Any]:
        """The seeds the protocol file sets (its training seeds, the test pairs' seed and the
        random floors' seeds), recorded with the run's provenance."""
        protocol = FinderProtocol.load(self.protocol)
        return {
            "protocol_seeds": list(protocol.seeds),
            "test_seed": protocol.test_seed,
            "methods": list(protocol.methods),
        }


def numbers_of(result: ProtocolResult) -> dict[str, Any]:
    """What a stored protocol run keeps: enough to regenerate every table and figure."""
    return {
        "protocol": result.protocol,
        "model": result.model,
        "task": result.task,
        "counts": result.counts,
        "seeds": result.seeds,
        "roles": result.roles,
        "sizes": result.sizes,
        "table": result.table,
        "comparisons": result.comparisons,
        "f mean": [[round(v, 6) for v in row] for row in result.f_mean.tolist()],
        "f low": [[round(v, 6) for v in row] for row in result.f_low.tolist()],
        "f high": [[round(v, 6) for v in row] for row in result.f_high.tolist()],
    }


def run(config: Config) -> ProtocolResult:
    protocol = FinderProtocol.load(config.protocol)
    if protocol.tasks and config.task not in protocol.tasks:
        raise InputError(
            f"task {config.task!r} is not one of the protocol's: {', '.join(protocol.tasks)}"
        )
    model = lh.load_model(config.model)
    result = run_protocol(model, config.task, protocol, out=config.out, progress=config.progress)
    write_outputs(
        config.out,
        title=f"Head-finder protocol v{protocol.version}: {config.task} ({config.model})",
        markdown=result.to_markdown(),
        figures={"curves": result.plot()},
        numbers=numbers_of(result),
    )
    return result


#: a run on a tiny model and the figure it must write (the tests run it: test_analyses_modules)
EXAMPLE = (["--protocol", "protocols/example-tiny.toml", "--task", "capitalize"], "curves")

main = command_line(Config, run, __doc__)

if __name__ == "__main__":
    raise SystemExit(main())
