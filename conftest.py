"""Root pytest configuration, seen by the tests and by the doctests in ``lens_heads/``.

Unit tests and doctests run tiny random models: their matrices are so small that torch's
intra-op threads cost more than they save (a tiny forward pass: ~4 ms on one thread, ~0.3 s on
two busy ones). Integration tests (marked ``integration``) keep every thread for the real models.
"""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread_for_tiny_models(request: pytest.FixtureRequest):
    if request.node.get_closest_marker("integration") is not None:
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
