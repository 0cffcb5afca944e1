"""The end-to-end demo behind ``lens-heads demo`` (layer 4): train a head mask for a task, evaluate
it, sweep head removal, compare hidden states, look through the logit lens and write a report.

* _run -- :class:`DemoConfig` and :func:`run_demo` (the steps, each one library call)
* _report -- :class:`DemoReport` and the report's markdown and HTML pages
"""

from typing import TYPE_CHECKING

from lens_heads.core.internal import lazy_exports

if TYPE_CHECKING:  # imported on first use (lens_heads.core._lazy): no torch before it is needed
    from lens_heads.demo._report import DemoReport
    from lens_heads.demo._run import DemoConfig, run_demo

_EXPORTS, __getattr__, __dir__ = lazy_exports(__name__, __file__)

__all__ = ["DemoConfig", "DemoReport", "run_demo"]
