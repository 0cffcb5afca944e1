"""Shared fixtures: each real model is loaded once per test session."""

from __future__ import annotations

import pytest

import lens_heads as lh


@pytest.fixture(scope="session")
def smollm2():
    """SmolLM2-135M-Instruct (30 layers x 9 query heads), loaded once."""
    return lh.load_model("smollm2-135m-instruct")


@pytest.fixture(scope="session")
def gemma():
    """Gemma 3 270M base (18 layers x 4 query heads), loaded once."""
    return lh.load_model("gemma-3-270m")


@pytest.fixture(scope="session")
def tiny():
    """A 2-layer, 4-head random Llama-style model with grouped-query attention."""
    return lh.tiny_model(n_layers=2, n_heads=4, n_kv_heads=2, seed=0)
