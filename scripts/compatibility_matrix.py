"""The compatibility matrix of ``docs/compatibility.md``: each model family of the papers, as a
tiny random checkpoint loaded with ``lh.load_model(folder)``, through six checks against plain
``transformers`` (never another path of lens_heads).

    python scripts/compatibility_matrix.py                 # every family; writes the result
    python scripts/compatibility_matrix.py --only gemma2   # one family; prints, writes nothing
    python scripts/library_envs.py matrix                  # at the lowest and newest transformers

Checks 1-4 are :mod:`lens_heads.core._compatibility`'s (what ``lens-heads doctor`` runs); 5 and 6
need the research lines and live here:

5. ``gradient``: the mask gradient of :func:`lens_heads.head_importance` equals central finite
   differences of each document's loss in ``transformers`` (float64, a pre-hook scaling the head's
   slice of ``o_proj``'s input by ``1 +- eps``, see :func:`finite_difference`), for two heads;
6. ``training``: :func:`lens_heads.train_mask` interrupted and resumed ends bit-identical to an
   uninterrupted run; its trained weights, as a removal order, give a :func:`removal_sweep`
   whose batched engine equals the naive loop, and whose logits and greedy continuation at
   each step equal ``transformers`` with those heads zeroed by pre-hooks.

The result goes to ``results/compatibility/transformers-<version>/numbers.json`` (with
``-torch-<version>`` where torch is not the release ``constraints.txt`` pins; one per
installed transformers release: ``scripts/library_envs.py matrix`` runs the lowest and the
newest of the tested range in fresh environments), from which ``scripts/update_docs.py`` writes
the table; ``tests/unit/core/test_compatibility.py`` runs every family and checks that its
verdicts are the ones stored for the installed release.
"""

from __future__ import annotations

import argparse
import copy
import importlib.metadata
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results" / "compatibility"


def result_path(transformers_version: str | None = None, device: str = "cpu") -> Path:
    """Where the matrix of a transformers release is stored (default: the installed one); a
    matrix with the bridge on another device (``cuda``) goes in a folder of that name."""
    version = transformers_version or importlib.metadata.version("transformers")
    folder = RESULTS if device == "cpu" else RESULTS / device
    torch_version = importlib.metadata.version("torch")
    other_torch = "" if torch_version == pinned_torch() else f"-torch-{torch_version}"
    return folder / f"transformers-{version}{other_torch}" / "numbers.json"


def pinned_torch() -> str:
    """The torch release ``constraints.txt`` pins (what CI installs); a matrix under another
    torch is stored beside it, its folder named after that torch too."""
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith("torch=="):
            return line.strip().split("==", 1)[1]
    return ""


COMMAND = "python scripts/compatibility_matrix.py"

#: the matrix's rows: (family key, what the checkpoint's config asks for as attention; None: the
#: family's default) -- Llama once more with flash_attention_2, which this CPU machine lacks
ROWS: tuple[tuple[str, str | None], ...] = (
    ("llama", None),
    ("llama", "flash_attention_2"),
    ("qwen2", None),
    ("qwen3", None),
    ("qwen3_moe", None),
    ("mistral", None),
    ("mixtral", None),
    ("phi3", None),
    ("phimoe", None),
    ("gemma2", None),
    ("gemma3", None),
    ("cohere", None),
)

EXTRA_CHECKS = {
    "gradient": "head_importance's mask gradient = finite differences in transformers (2 heads)",
    "training": "train_mask resumes bit-identically; removal_sweep batched = naive = transformers",
}
TEXTS = ("the cat sat on the mat", "Paris is the capital of France")
WORDS = ("apple", "house", "green", "river", "stone", "cloud", "table", "music", "paper", "light")


# -- 5. the mask gradient --------------------------------------------------------------------------
def _document_loss(
    hf_model: Any, ids: torch.Tensor, layer: int, factors: dict[int, float]
) -> float:
    """Mean next-token cross-entropy of one document with ``o_proj``'s input of ``layer``
    scaled per head by ``factors`` (plain transformers)."""
    from lens_heads.testing import output_projection, scale_heads_hook

    module = output_projection(hf_model, layer)
    d_head = module.in_features // int(hf_model.config.num_attention_heads)
    handle = module.register_forward_pre_hook(scale_heads_hook(factors, d_head))
    try:
        with torch.no_grad():
            logits = hf_model(ids).logits[0, :-1].double()
    finally:
        handle.remove()
    return float(torch.nn.functional.cross_entropy(logits, ids[0, 1:]))


def finite_difference(loss: Any) -> tuple[float | None, float]:
    """``(d loss / dm at m = 1, step)``: the four-point central difference (error ~step^4), its
    step shrunk from 1e-2 to 1e-4 until the loss is smooth around 1 -- mixture-of-experts
    routing switches experts at some multipliers, where the loss jumps (then the one-sided
    slopes disagree). None when it is nowhere smooth."""
    at_one = loss(1.0)
    for step in (1e-2, 1e-3, 1e-4):
        v = {k: loss(1.0 + k * step) for k in (-2, -1, 1, 2)}
        slopes = [v[-1] - v[-2], at_one - v[-1], v[1] - at_one, v[2] - v[1]]
        slopes = [slope / step for slope in slopes]
        if max(slopes) - min(slopes) <= 0.25 * max(map(abs, slopes)) + 1e-2:
            return (8 * (v[1] - v[-1]) - (v[2] - v[-2])) / (12 * step), step
    return None, step


def check_gradient(model: Any, reference: Any) -> Any:
    from lens_heads import head_importance
    from lens_heads.testing import FAIL, PASS, CheckResult

    n_layers, n_heads = int(model.cfg.n_layers), int(model.cfg.n_heads)
    heads = [(0, 1), (n_layers - 1, n_heads - 1)]
    result = head_importance(model, list(TEXTS), precision="float32", progress=False)
    hf64 = copy.deepcopy(reference.model).double()
    if getattr(hf64.config, "_experts_implementation", None) not in (None, "eager"):
        hf64.set_experts_implementation("eager")  # grouped matmuls take no float64
    worst, largest, smallest_step = 0.0, 0.0, 1.0
    labels = ", ".join(f"L{layer}H{head}" for layer, head in heads)
    for doc, text in enumerate(TEXTS):
        ids = torch.tensor([reference.encode(text, False)])
        for layer, head in heads:

            def loss(factor: float, ids: Any = ids, layer: int = layer, head: int = head) -> float:
                return _document_loss(hf64, ids, layer, {head: factor})

            difference, step = finite_difference(loss)
            if difference is None:
                detail = f"inconclusive: the loss jumps around m = 1 at L{layer}H{head}"
                return CheckResult("gradient", FAIL, detail)
            got = float(result.gradients[doc, layer, head])
            # transformers' float32 norms leave ~1e-7 of noise in the float64 loss
            allowed = 1e-7 / step + 1e-3 * abs(difference)
            worst = max(worst, abs(got - difference) / allowed)
            largest, smallest_step = max(largest, abs(difference)), min(smallest_step, step)
    if worst > 1:
        detail = (
            f"gradients differ from finite differences by {worst:.1f}x the tolerance at {labels}"
        )
        return CheckResult("gradient", FAIL, detail, worst)
    detail = (
        f"{labels}, {len(TEXTS)} documents: largest error {worst:.2f}x the tolerance (|g| up to "
        f"{largest:.2f}; step {smallest_step:g}"
        + (", shrunk where MoE routing switches)" if smallest_step < 1e-2 else ")")
    )
    return CheckResult("gradient", PASS, detail, worst)


# -- 6. training and the removal sweep -------------------------------------------------------------
class _Interrupt(Exception):
    pass


def _interrupt(step: int, loss: float) -> None:
    if step == 3:
        raise _Interrupt


def _zeroed_logits(reference: Any, ids: list[int], heads: Sequence[tuple[int, int]]) -> Any:
    """Logits at the last position (and the greedy continuation) in transformers with
    ``heads`` zeroed by pre-hooks on the output projections."""
    from lens_heads.testing import output_projection, scale_heads_hook

    hf = reference.model
    handles = []
    for layer in sorted({layer for layer, _ in heads}):
        module = output_projection(hf, layer)
        d_head = module.in_features // int(hf.config.num_attention_heads)
        factors = {head: 0.0 for at, head in heads if at == layer}
        handles.append(module.register_forward_pre_hook(scale_heads_hook(factors, d_head)))
    try:
        tokens = torch.tensor([ids])
        with torch.no_grad():
            logits = hf(tokens).logits[0, -1].float()
            output = hf.generate(
                tokens, do_sample=False, max_new_tokens=3, eos_token_id=reference.stops(),
                pad_token_id=reference.stops()[0],
            )  # fmt: skip
    finally:
        for handle in handles:
            handle.remove()
    new = output[0, len(ids) :].tolist()
    return logits, new[: next((i for i, t in enumerate(new) if t in reference.stops()), len(new))]


def check_training(model: Any, reference: Any, workdir: Path) -> Any:
    from lens_heads import removal_sweep, train_mask
    from lens_heads.core import Example, Task, format_head, has_chat_template
    from lens_heads.engine import TrainingConfig
    from lens_heads.testing import FAIL, PASS, TOLERANCE, CheckResult

    task = Task("upper", tuple(Example(word, word.upper()) for word in WORDS))
    config = TrainingConfig(
        steps=4, batch_size=4, lr=0.5, n_eval=2, precision="float32", seed=3, trajectory_every=1
    )
    full = train_mask(model, task, config, checkpoint_dir=workdir / "full", progress=False)
    try:
        train_mask(
            model, task, config, checkpoint_dir=workdir / "cut", checkpoint_every=2,
            progress=False, callback=_interrupt,
        )  # fmt: skip
    except _Interrupt:
        pass
    resumed = train_mask(model, task, config, checkpoint_dir=workdir / "cut", resume=True,
                         progress=False)  # fmt: skip
    same = (
        torch.equal(resumed.W, full.W)
        and torch.equal(resumed.trajectory, full.trajectory)
        and resumed.history.equals(full.history)
    )
    if not same:
        return CheckResult("training", FAIL, "the resumed training differs from the uninterrupted")
    flat = full.W.flatten().argsort()[:3].tolist()  # the 3 heads of lowest trained weight
    n_heads = int(model.cfg.n_heads)
    order = [(index // n_heads, index % n_heads) for index in flat]
    chat = has_chat_template(reference.tokenizer)
    run = dict(track_top_k=3, max_new_tokens=3, chat=chat, progress=False)
    labels = [format_head(*head) for head in order]
    naive = removal_sweep(model, "apple", labels, engine="naive", **run)
    batched = removal_sweep(model, "apple", labels, engine="batched", **run)
    fields = ("order", "n_removed", "token_ids", "top1_ids", "output_ids")
    if any(getattr(naive, f) != getattr(batched, f) for f in fields) or not torch.equal(
        naive.ranks, batched.ranks
    ):
        return CheckResult("training", FAIL, "removal_sweep: the batched engine differs from naive")
    ids = reference.encode("apple", chat)
    worst = 0.0
    for step, removed in enumerate(naive.n_removed):
        logits, continuation = _zeroed_logits(reference, ids, order[:removed])
        expected = logits[naive.token_ids]
        scale = max(1.0, float(logits.abs().max()))
        for sweep in (naive, batched):
            worst = max(worst, float((sweep.logits[step].cpu() - expected).abs().max()) / scale)
        if continuation != naive.output_ids[step]:
            detail = f"sweep step {step}: greedy {naive.output_ids[step]} vs {continuation}"
            return CheckResult("training", FAIL, detail)
    if worst > TOLERANCE:
        detail = f"sweep logits differ from transformers by {worst:.1e} (relative)"
        return CheckResult("training", FAIL, detail, worst)
    detail = (
        f"4 steps, resumed from step 2: W, trajectory, history identical; sweep of "
        f"{', '.join(labels)}: batched = naive, vs transformers {worst:.1e} (relative)"
    )
    return CheckResult("training", PASS, detail, worst)


# -- a row -----------------------------------------------------------------------------------------
def row_name(key: str, attention: str | None) -> str:
    from lens_heads.testing import family

    name = family(key).name
    return name if attention is None else f"{name} (config asks for {attention})"


def run_row(key: str, attention: str | None, workdir: Path, device: str = "cpu") -> dict[str, Any]:
    """Every check on one family's tiny checkpoint, as ``{"results": {check: result}}``, with
    the bridge in float32 on ``device`` and plain ``transformers`` on the CPU."""
    import transformers

    from lens_heads.core import UnsupportedModelError, load_model
    from lens_heads.testing import (
        NOT_SUPPORTED,
        CheckResult,
        Reference,
        family,
        run_checks,
        tiny_checkpoint,
    )

    spec = family(key)
    started = time.perf_counter()
    names = [*("ones", "head", "generate", "pattern"), *EXTRA_CHECKS]
    results: list[Any]
    if getattr(transformers, spec.config_class, None) is None:
        reason = f"transformers {transformers.__version__} has no {spec.config_class}"
        results = [CheckResult(name, NOT_SUPPORTED, reason) for name in names]
    else:
        folder = tiny_checkpoint(key, workdir / "checkpoint", attn_implementation=attention)
        try:
            model = load_model(folder, verify=False, device=device, dtype="float32")
        except UnsupportedModelError as error:
            reason = f"{type(error).__name__}: {error}"
            results = [CheckResult(name, NOT_SUPPORTED, reason) for name in names]
        else:
            reference = Reference.from_pretrained(folder)
            results = run_checks(model, reference)
            results.append(_guard("gradient", lambda: check_gradient(model, reference)))
            results.append(
                _guard("training", lambda: check_training(model, reference, workdir / "runs"))
            )
    return {
        "key": key,
        "attention": attention,
        "name": row_name(key, attention),
        "papers": spec.papers,
        "peculiarity": spec.peculiarity,
        "architecture": spec.model_class,
        "results": {result.check: result.to_dict() for result in results},
        "seconds": round(time.perf_counter() - started, 2),
    }


def _guard(name: str, check: Any) -> Any:
    from lens_heads.testing import FAIL, CheckResult

    try:
        return check()
    except Exception as error:  # a crash is a failed check, with the error a user gets
        return CheckResult(name, FAIL, f"{type(error).__name__}: {error}")


def unsupported_example(workdir: Path) -> dict[str, str]:
    """What a user gets for an architecture TransformerLens has no adapter for (Helium)."""
    import transformers

    from lens_heads.core import UnsupportedModelError, load_model
    from lens_heads.testing import family, tiny_tokenizer

    tokenizer = tiny_tokenizer(family("llama"))
    config = transformers.HeliumConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8,
    )  # fmt: skip
    config.architectures = ["HeliumForCausalLM"]
    folder = workdir / "helium"
    transformers.HeliumForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    try:
        load_model(folder)
    except UnsupportedModelError as error:
        message = str(error).replace(str(folder), "FOLDER")
        return {"architecture": "HeliumForCausalLM", "error": message}
    raise AssertionError("HeliumForCausalLM loaded; choose another unsupported architecture")


def versions() -> dict[str, str]:
    names = ("transformers", "transformer-lens", "torch", "tokenizers", "lens_heads")
    return {name: importlib.metadata.version(name) for name in names}


def run_matrix(
    rows: Sequence[tuple[str, str | None]] = ROWS, device: str = "cpu"
) -> dict[str, Any]:
    from lens_heads.core import code_version, machine, run_record
    from lens_heads.testing import CHECKS

    transformers_logging()
    workdir = Path(tempfile.mkdtemp(prefix="lens-heads-compat-"))
    try:
        matrix = [
            run_row(key, attention, workdir / f"{i}", device)
            for i, (key, attention) in enumerate(rows)
        ]
        example = unsupported_example(workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return {
        "format": "lens_heads.compatibility/1",
        "command": COMMAND if device == "cpu" else f"{COMMAND} --device {device}",
        "device": device,
        "code": code_version(),
        "machine": machine(),
        "versions": versions(),
        "checks": {**CHECKS, **EXTRA_CHECKS},
        "rows": matrix,
        "unsupported_example": example,
        **run_record(),  # no seed setting; tiny random checkpoints and words of this file: no data
    }


def transformers_logging() -> None:
    import transformers

    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", help="run only this family (repeatable)")
    parser.add_argument("--no-store", action="store_true", help="print the matrix, store nothing")
    parser.add_argument(
        "--device",
        default="cpu",
        choices=("cpu", "cuda"),
        help="where the bridge runs (float32); plain transformers stays on the CPU",
    )
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA GPU here; run it on a GPU machine")
    torch.set_num_threads(1)
    rows = [row for row in ROWS if not args.only or row[0] in args.only]
    numbers = run_matrix(rows, args.device)
    failed = 0
    for row in numbers["rows"]:
        print(f"{row['name']} ({row['seconds']} s)")
        for result in row["results"].values():
            print(f"  {result['check']:9s} {result['status']:13s} {result['detail']}")
            failed += result["status"] == "fail"
    if not args.only and not args.no_store:
        result = result_path(device=args.device)
        result.parent.mkdir(parents=True, exist_ok=True)
        result.write_text(json.dumps(numbers, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {result.relative_to(ROOT)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
