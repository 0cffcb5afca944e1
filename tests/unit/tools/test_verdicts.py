"""The verdicts of ``docs/reproduction.md`` are functions of their numbers (issue 33): each is fed
data for each outcome of the page's rule, so a function that answers one word whatever the data
fails here. The multiplicity rule (Holm within the tests behind one verdict) is checked against
an independent computation."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))

from reproduction import LEVEL, holm
from reproduction.heads_up_results import TABLE3, table3_verdict, table7_verdict


def test_holm_matches_the_step_down_rule_written_out():
    rng = np.random.default_rng(0)
    for _ in range(50):
        p = rng.uniform(0, 0.05, size=int(rng.integers(1, 12)))
        adjusted = holm({str(i): value for i, value in enumerate(p)})
        order = np.argsort(p)
        m = len(p)
        # rejection by the step-down rule: reject the i-th smallest while p_(i) <= LEVEL/(m-i)
        rejected, stop = set(), False
        for rank, index in enumerate(order):
            if not stop and p[index] < LEVEL / (m - rank):
                rejected.add(str(index))
            else:
                stop = True
        assert {name for name, value in adjusted.items() if value < LEVEL} == rejected
        assert all(adjusted[str(i)] >= p[i] for i in range(m))


def _table3(p_helps: float, p_instruction_above: float, p_own_above: float, tasks: int = 5):
    claims = {
        f"task{i}": {
            "hybrid M above the original: p": p_helps,
            "instruction above hybrid M: p": p_instruction_above,
            "instruction above own M: p": 1.0,
            "own M above the instruction: p": p_own_above,
        }
        for i in range(tasks)
    }
    return lambda path: {"claims": claims} if path == TABLE3 else pytest.fail(path)


@pytest.mark.parametrize(
    ("p_helps", "p_instruction_above", "word"),
    [(1e-6, 1.0, "reproduced"), (1e-6, 1e-6, "partly"), (0.5, 1.0, "not reproduced")],
)
def test_table3_verdict_follows_its_numbers(p_helps, p_instruction_above, word):
    assert table3_verdict(_table3(p_helps, p_instruction_above, 1.0)).startswith(word + ":")


def test_table3_counts_significance_after_holm_and_states_the_raw_count():
    # 0.002 passes alone at 0.01 but not among 20 tests (20 x 0.002 = 0.04)
    text = table3_verdict(_table3(1e-6, 1.0, 0.002))
    assert "above the instruction on 0 (5 before the correction" in text
    assert "Holm over the 20" in text
    text = table3_verdict(_table3(1e-6, 1.0, 1e-5))
    assert "above the instruction on 5 (5 before the correction" in text


def _table7(raise_p: float, m_more_p: float, outside_p: float, m_in: float, m_out: float):
    """Three tasks with the same tests; ``m_in``/``m_out``: the mean attention of the heads in
    M and in 1-M (instructed and under M alike)."""
    rows = {
        "w/ instruction, heads in M": m_in,
        "w/ instruction, heads in 1-M": m_out,
        "w/ M, heads in M": m_in,
        "w/ M, heads in 1-M": m_out,
    }
    claims = {
        "(1) instruction raises attention: p": raise_p,
        "(2) instructed, M attends more than 1-M: p": m_more_p,
        "(3) under M, 1-M attends more than M: p": outside_p,
    }
    numbers = {f"task{i}": {"rows": rows, "claims": claims} for i in range(3)}
    numbers["model"] = "not a task"
    return lambda path: numbers


@pytest.mark.parametrize(
    ("tests", "means", "start"),
    [
        ((1e-6, 0.9, 1e-6), (0.30, 0.35), "reproduced (readings (1), (2), (3) hold"),
        ((1e-6, 0.9, 0.9), (0.35, 0.30), "partly (reading (1) holds"),
        ((0.5, 1e-6, 0.9), (0.35, 0.30), "not reproduced (no reading holds"),
        ((0.5, 0.9, 0.9), (0.30, 0.35), "partly (reading (2) holds"),
    ],
)
def test_table7_verdict_follows_its_numbers(tests, means, start):
    assert table7_verdict(_table7(*tests, *means)).startswith(start)


def test_table7_does_not_read_a_failed_test_as_support():
    """Instructed, M attending more in direction (no significant test either way) does not
    support 'M attends no more than 1-M'."""
    text = table7_verdict(_table7(0.5, 0.5, 0.9, 0.35, 0.30))
    assert text.startswith("not reproduced") and "less in direction on 0" in text
