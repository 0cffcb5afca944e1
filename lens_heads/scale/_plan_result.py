"""The result of a plan (:class:`Plan`): predicted memory per device by component, the memory
available there, the time per step or head, and the fix when the run does not fit
(:meth:`Plan.check` raises :class:`PlanDoesNotFitError` with the numbers).

>>> import lens_heads as lh
>>> plan = lh.plan("qwen2.5-14b-instruct", "train-mask", device="cuda", gpu="l4", dtype="bfloat16")
>>> plan.fits
False
>>> plan.check()  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
lens_heads.scale._plan_result.PlanDoesNotFitError: train-mask on qwen2.5-14b-instruct needs ...
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from lens_heads.core import LensHeadsError
from lens_heads.core.internal import FolderResult

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["OUTSIDE_TENSORS", "Plan", "PlanDoesNotFitError", "gib"]

#: the component a GPU plan lists outside the allocator's tensors (the CUDA context)
OUTSIDE_TENSORS = "runtime (outside the tensors)"


class PlanDoesNotFitError(LensHeadsError, MemoryError):
    """A job's predicted peak memory exceeds what its device offers; the message names both
    and the fix."""


def gib(value: int | float) -> str:
    """Bytes as GiB, as the plans print them.

    >>> gib(16 * 2**30)
    '16.00 GiB'
    """
    return f"{value / 2**30:.2f} GiB"


@dataclass(repr=False)
class Plan(FolderResult):
    """A job's predicted memory and time (:func:`lens_heads.plan`). ``components``: device ->
    component -> bytes; ``available``: device -> bytes it offers (None: unknown); ``time``: FLOP,
    seconds and layer calls of ``units`` units (steps, heads, batches) of the kind ``per``."""

    model: str
    job: str
    config: dict[str, Any]
    shape: dict[str, Any]
    components: dict[str, dict[str, int]]
    available: dict[str, int | None]
    time: dict[str, Any]
    weights_dtype: str
    autocast: bool
    random_weights: bool
    fixes: dict[str, list[str]] = field(default_factory=dict)
    """Per device that is short of memory: what would make the run fit there."""

    _format: ClassVar[str] = "lens_heads.plan/1"

    @property
    def devices(self) -> list[str]:
        return list(self.components)

    def peak(self, device: str | None = None) -> int:
        """Predicted peak bytes on ``device`` (default: where the model computes)."""
        return sum(self.components[device or self.devices[0]].values())

    def tensors(self, device: str | None = None) -> int:
        """The peak without what lies outside the allocator (a GPU's CUDA context): what
        ``torch.cuda.max_memory_allocated`` measures."""
        found = self.components[device or self.devices[0]]
        return sum(value for name, value in found.items() if name != OUTSIDE_TENSORS)

    @property
    def weights_gib(self) -> float:
        return sum(
            value for part in self.components.values() for name, value in part.items()
            if "weights" in name and "copies" not in name
        ) / 2**30  # fmt: skip

    @property
    def fits(self) -> bool:
        """Whether every device offers its predicted peak (an unknown device counts as fitting)."""
        return all(
            self.available.get(device) is None or self.peak(device) <= self.available[device]
            for device in self.devices
        )

    @property
    def seconds_per_unit(self) -> float:
        return float(self.time["seconds"]) / max(1, int(self.time["units"]))

    @property
    def samples_per_second(self) -> float | None:
        """Training: rows per second of training steps."""
        if self.job not in ("train-mask", "roles"):
            return None
        return int(self.time["rows"]) / float(self.time["seconds"])

    def to_frame(self) -> pd.DataFrame:
        rows = [
            {"device": device, "component": name, "bytes": value, "GiB": value / 2**30}
            for device, part in self.components.items()
            for name, value in part.items()
        ]
        import pandas as pd  # a plan prints without pandas

        return pd.DataFrame(rows, columns=["device", "component", "bytes", "GiB"])

    def to_markdown(self) -> str:
        return "\n".join(self.lines())

    def lines(self) -> list[str]:
        """What ``lens-heads plan`` prints."""
        config = self.config
        what = f"{self.job} on {self.model}"
        if self.random_weights:
            what += " (random weights: time and memory only)"
        precision = f"weights {self.weights_dtype}" + (", bf16 autocast" if self.autocast else "")
        lines = [f"{what}: {precision}, {self.time['rows']} rows of {self._tokens()} tokens"]
        if config.get("checkpoint_activations"):
            lines[0] += ", activation checkpointing"
        for device in self.devices:
            available = self.available.get(device)
            offer = "unknown" if available is None else gib(available)
            verdict = "" if available is None else (" fits" if self.peak(device) <= available else
                                                    " DOES NOT FIT")  # fmt: skip
            lines.append(f"  {device}: predicted peak {gib(self.peak(device))} of {offer}{verdict}")
            lines += [
                f"    {name}: {gib(value)}"
                for name, value in self.components[device].items()
                if value
            ]
        lines.append(f"  time: {self._time_line()}")
        return lines

    def _tokens(self) -> int:
        from lens_heads.scale._plan_config import PlanConfig

        return PlanConfig(**{**self.config, "ablations": tuple(self.config["ablations"])}).value(
            "seq_len"
        )

    def _time_line(self) -> str:
        time, unit = self.time, self.time["per"]
        line = f"{self.seconds_per_unit:.3g} s per {unit}"
        if self.samples_per_second is not None:
            line += f" ({self.samples_per_second:.3g} samples/s)"
        if int(time["units"]) > 1:
            line += f", {float(time['seconds']):.3g} s for all {time['units']} {unit}s"
        return f"{line} on {time['device']} ({float(time['flops']):.3g} FLOP)"

    def plot(self) -> Any:
        """Predicted memory per device, stacked by component, beside what the device offers."""
        import plotly.graph_objects as go

        figure = go.Figure()
        names = dict.fromkeys(name for part in self.components.values() for name in part)
        for name in names:
            values = [self.components[d].get(name, 0) / 2**30 for d in self.devices]
            figure.add_bar(x=self.devices, y=values, name=name)
        offered = [self.available.get(d) for d in self.devices]
        if any(value is not None for value in offered):
            figure.add_scatter(
                x=self.devices,
                y=[None if v is None else v / 2**30 for v in offered],
                mode="markers",
                marker={"symbol": "line-ew-open", "size": 40},
                name="available",
            )
        figure.update_layout(
            barmode="stack",
            title=f"Plan: {self.job} on {self.model}",
            yaxis_title="GiB",
            template="plotly_white",
        )
        return figure

    def check(self) -> Plan:
        """This plan when it fits; a :class:`PlanDoesNotFitError` naming the predicted and the
        available memory and the fix otherwise."""
        for device in self.devices:
            available = self.available.get(device)
            if available is None or self.peak(device) <= available:
                continue
            fixes = self.fixes.get(device) or ["a machine with more memory"]
            raise PlanDoesNotFitError(
                f"{self.job} on {self.model} needs {gib(self.peak(device))} on {device} (predicted "
                f"peak; weights {gib(self.components[device].get('weights', 0))}) but "
                f"{gib(available)} is available there. Fix: {'; or '.join(fixes)}"
            )
        return self
