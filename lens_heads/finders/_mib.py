"""Export head scores in the node-level submission format of MIB's circuit-localization track, so
that someone with its models and data can submit a ranking this toolkit computed.

MIB reads, per ``<task>_<model>`` folder, one ``importances.json`` with ``cfg``, ``nodes`` and
``edges``; a node is the embedding (``input``), an attention head (``a{layer}.h{head}``) or an MLP
(``m{layer}``), each with ``in_graph`` and an optional ``score``. Only heads are scored here: a
node without a score stays in every circuit MIB evaluates and is not counted in its sizes.

MIB also takes, instead of the scores, one 0/1 circuit per size in the same folder, each a file
of the same format without scores (its evaluation reads up to 9 such files, every size short of
the whole model, and adds the whole model itself): :func:`write_mib_circuits` writes them as
``circuit_<size>.json`` (``in_graph`` false for the heads left out; the embedding and the MLPs
stay in). :func:`write_mib_curve` exports a measured curve: the scores where MIB's top heads of
them are the circuits the curve measured (a ranking), else the curve's own circuits per size (a
method that builds each size's circuit, which no one ranking need give).

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
from collections.abc import Sequence
from pathlib import Path

import torch
from jaxtyping import Float
from torch import Tensor

from lens_heads.core import InputError, write_atomic
from lens_heads.finders._faithfulness import FaithfulnessCurve, top_heads

__all__ = ["mib_folder_name", "write_mib_circuits", "write_mib_curve", "write_mib_scores"]


def mib_folder_name(task: str, model: str) -> str:
    """``<task>_<model>``, each part in MIB's spelling (dashes inside a name, an underscore
    between the two).

    >>> mib_folder_name("country_capital", "SmolLM2-135M-Instruct")
    'country-capital_smollm2-135m-instruct'
    """

    def part(text: str) -> str:
        return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")

    return f"{part(task)}_{part(Path(model).name)}"


def _graph(heads: Tensor, d_model: int, *, scored: bool) -> str:
    """MIB's node-level JSON of ``heads`` ``[n_layers, n_heads]``: their scores, or (not
    ``scored``) their 0/1 membership."""
    n_layers, n_heads = heads.shape
    nodes: dict[str, dict[str, object]] = {"input": {"in_graph": True}}
    for layer in range(n_layers):
        for head in range(n_heads):
            value = float(heads[layer, head])
            node = {"in_graph": True, "score": value} if scored else {"in_graph": value > 0}
            nodes[f"a{layer}.h{head}"] = node
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
    return json.dumps(payload, indent=1)


def write_mib_scores(
    scores: Float[Tensor, "n_layers n_heads"],
    out: str | os.PathLike[str],
    task: str,
    model: str,
    *,
    d_model: int,
) -> Path:
    """Write the head ``scores`` (higher: more important) as ``out/<task>_<model>/
    importances.json`` in MIB's node-level format (removing per-size circuits an earlier export
    left there: MIB reads one or the other); returns the file's path."""
    if scores.ndim != 2:
        raise InputError(f"scores must be [n_layers, n_heads], got shape {tuple(scores.shape)}")
    folder = Path(out) / mib_folder_name(task, model)
    for stale in folder.glob("circuit_*.json"):
        stale.unlink()
    return write_atomic(folder / "importances.json", _graph(scores, d_model, scored=True))


def write_mib_circuits(
    circuits: Float[Tensor, "n_sizes n_layers n_heads"],
    sizes: Sequence[float],
    out: str | os.PathLike[str],
    task: str,
    model: str,
    *,
    d_model: int,
) -> list[Path]:
    """Write one 0/1 circuit per size as ``out/<task>_<model>/circuit_<size>.json`` (the size
    as a share of the heads, ``circuit_0.01.json``), every size but the whole model (size 1,
    which MIB adds itself), removing an ``importances.json`` an earlier export left there;
    returns the files' paths.

    >>> import torch, tempfile, json
    >>> circuits = torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]], [[1.0, 1.0]]])
    >>> paths = write_mib_circuits(circuits, (0.25, 0.5, 1.0), tempfile.mkdtemp(), "ioi", "gpt2",
    ...                            d_model=8)
    >>> [p.name for p in paths], json.loads(paths[0].read_text())["nodes"]["a0.h1"]
    (['circuit_0.25.json', 'circuit_0.5.json'], {'in_graph': False})
    """
    if circuits.ndim != 3 or len(circuits) != len(sizes):
        raise InputError(
            f"circuits must be [n_sizes={len(sizes)}, n_layers, n_heads], got shape "
            f"{tuple(circuits.shape)}"
        )
    folder = Path(out) / mib_folder_name(task, model)
    (folder / "importances.json").unlink(missing_ok=True)
    return [
        write_atomic(folder / f"circuit_{size:g}.json", _graph(circuit, d_model, scored=False))
        for size, circuit in zip(sizes, circuits, strict=True)
        if size < 1
    ]


def write_mib_curve(
    curve: FaithfulnessCurve, out: str | os.PathLike[str], model: str, *, d_model: int
) -> list[Path]:
    """Export what ``curve`` measured for MIB: its scores (:func:`write_mib_scores`) where each
    size's circuits are the top heads of them, by signed and by absolute score (or the curve
    stores no circuits: one saved before they were), else its circuits per size
    (:func:`write_mib_circuits`); returns the files' paths."""
    ranked = curve.circuits is None or all(
        torch.equal(top_heads(scores, k), circuit)
        for scores, circuits in ((curve.scores, curve.circuits),
                                 (curve.scores.abs(), curve.circuits_absolute))
        for k, circuit in zip(curve.counts, circuits, strict=True)
    )  # fmt: skip
    if ranked:
        return [write_mib_scores(curve.scores, out, curve.task, model, d_model=d_model)]
    return write_mib_circuits(curve.circuits, curve.sizes, out, curve.task, model, d_model=d_model)
