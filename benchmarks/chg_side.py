"""The Causal Head Gating side of ``benchmarks/bench_roles.py``: run in the separate environment
that has ``nam-causal-head-gating`` 0.1.0 (it imports neither lens_heads nor anything of this
project). ``python benchmarks/chg_side.py IN.pt OUT.pt``.

IN holds the training prompts as lens_heads encodes them (``input_ids`` right-padded with an id
that occurs in no prompt, so CHG's collate, which cuts every batch at the first column that is
padding in all rows, cuts only padding), ``loss_masks`` (the answer tokens), the model folder and
the settings (and ``precision``: ``float32`` runs CHG with its autocast switched off through
torch's ``enabled=False``, the library unmodified). OUT gets the gates of the three fits in
lens_heads' order (free; pulled down: CHG's "negative" stage, whose loss adds the mean clamped
gate logit; pulled up: its "positive" stage, which subtracts it), the seconds per update of
each fit, the peak RSS, and what CHG says when asked to gate the other models named in IN.
"""

from __future__ import annotations

import platform
import resource
import sys
import time
from pathlib import Path
from typing import Any

import torch


def _peak_rss_mib() -> float:
    """This process's own peak (``VmHWM``), as ``benchmarks.harness.peak_rss_mb`` reads it (this
    side imports nothing of the project): ``ru_maxrss`` would include the parent's resident set
    at the start, which Linux keeps across fork and exec."""
    status = Path("/proc/self/status")
    if status.is_file():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024 / (1024 if platform.system() == "Darwin" else 1)


def _attempt(folder: str) -> str:
    """What CHG 0.1.0 does with the model in ``folder``: ``"runs"`` or its error."""
    from causal_head_gating import CHG
    from transformers import AutoModelForCausalLM

    try:
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
        gated = CHG(model)
        ids = torch.tensor([[1, 2, 3, 4]])
        gated(ids, torch.ones(gated.num_layers, gated.num_heads))
    except Exception as error:  # the point is to report it
        return f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
    return "runs"


def autocast_off(autocast: Any) -> Any:
    """``autocast`` with ``enabled=False``: CHG autocasts every loss on the CPU (bfloat16), and
    torch's own switch turns that off, CHG unmodified."""
    import functools

    return functools.partial(autocast, enabled=False)


def main(source: str, target: str) -> None:
    import causal_head_gating
    from causal_head_gating.core.trainer import CHGTrainer
    from causal_head_gating.data.datasets import MaskedSequenceDataset
    from transformers import AutoModelForCausalLM

    given = torch.load(source)
    settings = given["settings"]
    if given.get("precision", "bfloat16") == "float32":
        torch.amp.autocast = autocast_off(torch.amp.autocast)
    torch.manual_seed(settings["seed"])
    model = AutoModelForCausalLM.from_pretrained(given["model"], dtype=torch.float32).eval()
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    dataset = MaskedSequenceDataset(
        given["pad"], input_ids=given["input_ids"], loss_masks=given["loss_masks"]
    )
    trainer = CHGTrainer(
        model,
        dataset,
        num_masks=settings["n_masks"],
        batch_size=settings["batch_size"],
        l1_weight=settings["pull"],
        lr=settings["lr"],
        lr_reg=settings["lr"],
    )
    seconds: dict[str, float] = {}
    for stage, updates in (("none", settings["steps"]), ("negative", settings["pulled_steps"]),
                           ("positive", settings["pulled_steps"])):  # fmt: skip
        start = time.perf_counter()
        for _ in trainer.fit_stage(stage, updates, show_progress=False):
            pass
        seconds[stage] = (time.perf_counter() - start) / updates
        if stage == "none":  # as CHGTrainer.fit: both pulled fits start from the free gates
            with torch.no_grad():
                trainer.mask_logits_pos.copy_(trainer.mask_logits)
                trainer.mask_logits_neg.copy_(trainer.mask_logits)
    gates = torch.stack(
        [
            trainer.mask_logits.sigmoid().detach(),
            trainer.mask_logits_neg.sigmoid().detach(),
            trainer.mask_logits_pos.sigmoid().detach(),
        ]
    )
    if gates.ndim == 3:  # one mask: [fit, layer, head]
        gates = gates[:, None]
    torch.save(
        {
            "gates": gates.float(),
            "seconds per update": {
                "free": seconds["none"],
                "down": seconds["negative"],
                "up": seconds["positive"],
            },
            "peak RSS (MiB)": _peak_rss_mib(),
            "version": getattr(causal_head_gating, "__version__", "?"),
            "other models": {name: _attempt(folder) for name, folder in given["others"].items()},
        },
        target,
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
