"""Export head scores in the node-level submission format of MIB's circuit-localization track, so
that someone with its models and data can submit a ranking this toolkit computed.

MIB reads, per ``<task>_<model>`` folder, one ``importances.json`` with ``cfg``, ``nodes`` and
``edges``; a node is the embedding (``input``), an attention head (``a{layer}.h{head}``) or an MLP
(``m{layer}``), each with ``in_graph`` and an optional ``score``. Only heads are scored here: a
node without a score stays in every circuit MIB evaluates and is not counted in its sizes.

>>> import torch, tempfile, json
>>> path = write_mib_scores(torch.tensor([[0.5, -1.0]]), tempfile.mkdtemp(), "ioi", "gpt2",
...                         d_model=8)
>>> nodes = json.loads(path.read_text())["nodes"]
>>> nodes["a0.h1"], "score" in nodes["m0"]
({'in_graph': True, 'score': -1.0}, False)
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from jaxtyping import Float
from torch import Tensor

from lens_heads.core import InputError, write_atomic

__all__ = ["mib_folder_name", "write_mib_scores"]


def mib_folder_name(task: str, model: str) -> str:
    """``<task>_<model>``, each part in MIB's spelling (dashes inside a name, an underscore
    between the two).

    >>> mib_folder_name("country_capital", "SmolLM2-135M-Instruct")
    'country-capital_smollm2-135m-instruct'
    """

    def part(text: str) -> str:
        return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")

    return f"{part(task)}_{part(Path(model).name)}"


def write_mib_scores(
    scores: Float[Tensor, "n_layers n_heads"],
    out: str | os.PathLike[str],
    task: str,
    model: str,
    *,
    d_model: int,
) -> Path:
    """Write the head ``scores`` (higher: more important) as ``out/<task>_<model>/
    importances.json`` in MIB's node-level format; returns the file's path."""
    if scores.ndim != 2:
        raise InputError(f"scores must be [n_layers, n_heads], got shape {tuple(scores.shape)}")
    n_layers, n_heads = scores.shape
    nodes: dict[str, dict[str, object]] = {"input": {"in_graph": True}}
    for layer in range(n_layers):
        for head in range(n_heads):
            value = float(scores[layer, head])
            nodes[f"a{layer}.h{head}"] = {"in_graph": True, "score": value}
        nodes[f"m{layer}"] = {"in_graph": True}
    payload = {
        "cfg": {
            "n_layers": int(n_layers),
            "n_heads": int(n_heads),
            "parallel_attn_mlp": False,
            "d_model": int(d_model),
        },
        "nodes": nodes,
        "edges": {},
    }
    path = Path(out) / mib_folder_name(task, model) / "importances.json"
    return write_atomic(path, json.dumps(payload, indent=1))
