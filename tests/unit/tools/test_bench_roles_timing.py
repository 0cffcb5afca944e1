"""The CHG timing benchmark's rules (issue 47): which tool is faster is read from the ranges of
the repeats, and CHG's float32 run really computes in float32."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from benchmarks.bench_roles import faster

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("totals", "expected"),
    [
        ({"lens_heads": [1.0, 1.1, 1.2], "CHG": [2.0, 2.1, 1.9]}, "lens_heads"),
        ({"lens_heads": [3.0, 3.1, 3.2], "CHG": [2.0, 2.1, 1.9]}, "CHG"),
        ({"lens_heads": [1.0, 2.5, 1.2], "CHG": [2.0, 2.1, 1.9]}, "neither"),  # ranges overlap
        ({"lens_heads": [2.0], "CHG": [2.0]}, "neither"),
    ],
)
def test_the_faster_tool_is_read_from_the_ranges(totals, expected):
    assert faster(totals) == expected


def test_chg_in_float32_runs_without_autocast():
    spec = importlib.util.spec_from_file_location("chg_side", ROOT / "benchmarks" / "chg_side.py")
    side = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(side)
    a = torch.randn(4, 4)
    with torch.amp.autocast("cpu"):  # CHG's own call: bfloat16 on the CPU
        assert (a @ a).dtype == torch.bfloat16
    with side.autocast_off(torch.amp.autocast)("cpu"):  # what --precision float32 gives CHG
        assert (a @ a).dtype == torch.float32
