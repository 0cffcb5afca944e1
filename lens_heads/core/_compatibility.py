"""Does lens_heads work on this model? Checks against plain ``transformers``.

Each check compares what lens_heads computes on a loaded model with an independent computation
in plain ``transformers`` on the same checkpoint (never another path of lens_heads):

1. ``ones``: a mask of ones leaves the logits unchanged -- bit for bit against the unmasked
   bridge, and within :data:`TOLERANCE` of the ``transformers`` model's logits;
2. ``head``: zeroing query head ``h`` with a :class:`~lens_heads.HeadMask` equals zeroing that
   head's slice of the output projection's input with a ``transformers`` forward pre-hook, for
   a head that shares its key-value group with another (so a query head is never confused with
   its key-value group or a neighbour);
3. ``generate``: :func:`lens_heads.generate` on text equals ``transformers``' greedy
   ``generate`` on the checkpoint's own tokenization (``AutoTokenizer(text)`` and its chat
   template), for one prompt and a left-padded batch of different lengths, and stops where it
   stops;
4. ``pattern``: ``hook_pattern`` equals the eager attention weights ``transformers`` returns
   (``output_attentions=True``), in a full forward, a left-padded batch and the KV-cached path
   translation scores take.

:func:`run_checks` runs them on a model and its :class:`Reference`; :func:`doctor` loads both
from a spec (``lens-heads doctor MODEL``). A check never lets an error through as a number: it
passes, fails with the largest difference, or says what is not supported and why.

>>> import tempfile
>>> from lens_heads.core._families import tiny_checkpoint
>>> report = doctor(tiny_checkpoint("qwen2", tempfile.mkdtemp()))
>>> [(result.check, result.status) for result in report.results]
[('ones', 'pass'), ('head', 'pass'), ('generate', 'pass'), ('pattern', 'pass')]
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from lens_heads.core._decoding import cached_forward, repeat_cache
from lens_heads.core._generation import generate, stop_token_ids
from lens_heads.core._hooks import apply_mask
from lens_heads.core._libraries import library_versions
from lens_heads.core._masks import HeadMask
from lens_heads.core._models import (
    MODEL_ALIASES,
    UnsupportedModelError,
    _cached_model_dir,
    _file_sha256,
    head_shape,
    load_model,
    model_name,
)
from lens_heads.core._prompts import has_chat_template

__all__ = [
    "CHECKS",
    "FAIL",
    "NOT_SUPPORTED",
    "PASS",
    "TOLERANCE",
    "CheckResult",
    "DoctorReport",
    "Reference",
    "check_attention_patterns",
    "check_generation",
    "check_head_zeroing",
    "check_ones_mask",
    "doctor",
    "output_projection",
    "run_checks",
    "scale_heads_hook",
]

#: a check's status: lens_heads agrees with plain ``transformers``
PASS = "pass"
#: a check's status: they differ (the result gives the largest difference)
FAIL = "fail"
#: a check's status: the check cannot run on this model (the result says why)
NOT_SUPPORTED = "not supported"

#: what each check compares (the four ``lens-heads doctor`` runs)
CHECKS: dict[str, str] = {
    "ones": "a mask of ones leaves the logits unchanged",
    "head": "zeroing query head h = zeroing its slice of o_proj's input (transformers pre-hook)",
    "generate": "lh.generate on text = transformers' greedy generate on the checkpoint's tokens",
    "pattern": "hook_pattern = transformers' eager attention weights",
}

#: largest difference allowed between lens_heads and transformers, relative to the size of the
#: reference values (``max(1, max |reference|)``); float32 reimplementations differ by ~1e-6
TOLERANCE = 1e-5

PROMPTS = ("the cat sat on the mat", "hello", "Paris is the capital of")
NEW_TOKENS = 8


@dataclass(frozen=True)
class CheckResult:
    """One check's verdict: ``status`` is pass, fail or not supported; ``detail`` says what was
    compared (the numbers) or, when it did not pass, the error a user gets."""

    check: str
    status: str
    detail: str
    max_diff: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Reference:
    """The same checkpoint in plain ``transformers``: the model (the attention implementation the
    checkpoint asks for) and the checkpoint's own tokenizer."""

    model: Any
    tokenizer: Any
    source: str

    @classmethod
    def from_pretrained(cls, source: str | os.PathLike[str]) -> Reference:
        """Load it as a user would; when the attention implementation the checkpoint asks for is
        unavailable here (flash_attention_2 without flash-attn), with eager attention."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(source)
        try:
            model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32)
        except ImportError:
            model = AutoModelForCausalLM.from_pretrained(
                source, dtype=torch.float32, attn_implementation="eager"
            )
        return cls(model.eval(), tokenizer, os.fspath(source))

    def logits(self, tokens: Tensor, **kwargs: Any) -> Tensor:
        with torch.no_grad():
            return self.model(tokens, **kwargs).logits.float()

    def stops(self) -> list[int]:
        """The tokens ``transformers``' generate stops at (the generation config's EOS ids)."""
        eos = getattr(self.model.generation_config, "eos_token_id", None)
        if eos is None:
            eos = self.tokenizer.eos_token_id
        return sorted({int(t) for t in (eos if isinstance(eos, list) else [eos]) if t is not None})

    def encode(self, text: str, chat: bool) -> list[int]:
        """The checkpoint's own token ids of a prompt: ``tokenizer(text)``, or its chat template
        applied and tokenized as ``apply_chat_template`` does."""
        if not chat:
            return list(self.tokenizer(text).input_ids)
        messages = [{"role": "user", "content": text}]
        encoded = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_dict=True
        )
        return list(encoded["input_ids"])


@dataclass
class DoctorReport:
    """The checks' verdicts on one model."""

    model: str
    results: list[CheckResult] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=library_versions)

    @property
    def ok(self) -> bool:
        return all(result.status == PASS for result in self.results)

    def to_text(self) -> str:
        installed = ", ".join(f"{name} {version}" for name, version in self.versions.items())
        lines = [f"lens-heads doctor: {self.model}", f"  on {installed}"]
        for index, result in enumerate(self.results, start=1):
            lines.append(
                f"  {index}. {result.check:9s} {result.status.upper():13s} {result.detail}"
            )
            lines.append(f"     ({CHECKS.get(result.check, '')})")
        verdict = "every check passes" if self.ok else "NOT every check passes: see above"
        return "\n".join([*lines, f"verdict: {verdict}"])


def _scale(reference: Tensor) -> float:
    return max(1.0, float(reference.abs().max()))


def _diff(a: Tensor, b: Tensor) -> float:
    return float((a.float() - b.float()).abs().max())


def _bridge_logits(model: Any, tokens: Tensor, **kwargs: Any) -> Tensor:
    with torch.no_grad():
        return model(tokens.to(model.cfg.device), **kwargs).float().cpu()


def _prompts(reference: Reference) -> list[list[int]]:
    chat = [reference.encode(PROMPTS[0], True)] if has_chat_template(reference.tokenizer) else []
    return [reference.encode(text, False) for text in PROMPTS] + chat


# -- 1. a mask of ones -----------------------------------------------------------------------------
def check_ones_mask(model: Any, reference: Reference) -> CheckResult:
    """A mask of ones changes no logit of the bridge, and the bridge's logits are those of
    ``transformers`` (each prompt alone, tokenized by the checkpoint's tokenizer)."""
    worst, exact = 0.0, True
    for ids in _prompts(reference):
        tokens = torch.tensor([ids])
        expected = reference.logits(tokens)
        plain = _bridge_logits(model, tokens)
        with apply_mask(model, HeadMask.ones(model)):
            masked = _bridge_logits(model, tokens)
        exact &= torch.equal(masked, plain)
        worst = max(worst, _diff(masked, expected) / _scale(expected))
    if not exact:
        return CheckResult("ones", FAIL, "a mask of ones changed the bridge's logits", worst)
    if worst > TOLERANCE:
        detail = f"logits differ from transformers by {worst:.2e} (relative) > {TOLERANCE:g}"
        return CheckResult("ones", FAIL, detail, worst)
    detail = f"ones = unmasked bit for bit; vs transformers {worst:.1e} (relative)"
    return CheckResult("ones", PASS, detail, worst)


# -- 2. zeroing a query head -----------------------------------------------------------------------
def output_projection(hf_model: Any, layer: int) -> Any:
    """The ``transformers`` module that maps the concatenated heads of ``layer`` to the residual
    stream (``o_proj``, ``out_proj`` or ``dense`` of the layer's attention)."""
    decoder = hf_model.get_decoder() if hasattr(hf_model, "get_decoder") else hf_model.model
    block = decoder.layers[layer]
    attention = getattr(block, "self_attn", None) or getattr(block, "attn", None)
    for name in ("o_proj", "out_proj", "dense"):
        module = getattr(attention, name, None)
        if isinstance(module, torch.nn.Linear):
            return module
    raise UnsupportedModelError(
        f"{type(hf_model).__name__}: found no linear output projection (o_proj, out_proj, dense) "
        f"in layer {layer}'s attention, so a head's slice of its input cannot be zeroed in "
        "plain transformers to check head masks"
    )


def scale_heads_hook(factors: dict[int, float], d_head: int) -> Callable[..., Any]:
    """A ``transformers`` forward pre-hook that multiplies query head ``h``'s slice of the input
    of an output projection (the heads' outputs, concatenated in head order) by ``factors[h]``.

    >>> hook = scale_heads_hook({1: 0.0}, d_head=2)
    >>> hook(None, (torch.ones(1, 6),))[0].tolist()
    [[1.0, 1.0, 0.0, 0.0, 1.0, 1.0]]
    """

    def hook(module: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
        x = args[0].clone()
        for head, factor in factors.items():
            x[..., head * d_head : (head + 1) * d_head] *= factor
        return (x, *args[1:])

    return hook


def _zeroed_reference(reference: Reference, tokens: Tensor, layer: int, head: int) -> Tensor:
    module = output_projection(reference.model, layer)
    n_heads = int(reference.model.config.num_attention_heads)
    d_head = module.in_features // n_heads
    handle = module.register_forward_pre_hook(scale_heads_hook({head: 0.0}, d_head))
    try:
        return reference.logits(tokens)
    finally:
        handle.remove()


def check_head_zeroing(
    model: Any, reference: Reference, layer: int | None = None, head: int | None = None
) -> CheckResult:
    """Zeroing query head ``head`` of ``layer`` (default: the last head of the last layer, the
    second of its key-value group) with a mask equals zeroing it in ``transformers``, and
    differs from zeroing its neighbour in the same group."""
    n_layers, n_heads = head_shape(model)
    layer = n_layers - 1 if layer is None else layer
    head = n_heads - 1 if head is None else head
    tokens = torch.tensor([reference.encode(PROMPTS[0], False)])
    expected = _zeroed_reference(reference, tokens, layer, head)
    neighbour = _zeroed_reference(reference, tokens, layer, head - 1 if head else head + 1)
    zeroed = ~HeadMask.from_heads([(layer, head)], n_layers=n_layers, n_heads=n_heads)
    with apply_mask(model, zeroed):
        masked = _bridge_logits(model, tokens)
    scale = _scale(expected)
    worst = _diff(masked, expected) / scale
    effect = _diff(expected, reference.logits(tokens)) / scale
    apart = _diff(expected, neighbour) / scale
    label = f"L{layer}H{head}"
    if worst > TOLERANCE:
        detail = f"masking {label} differs from zeroing it in transformers by {worst:.2e}"
        if _diff(masked, neighbour) / scale <= TOLERANCE:
            detail += " but equals zeroing its neighbour: the mask hits the wrong head"
        return CheckResult("head", FAIL, detail, worst)
    if min(effect, apart) <= 100 * TOLERANCE:
        detail = f"inconclusive: zeroing {label} changes the logits by only {effect:.1e}"
        return CheckResult("head", FAIL, detail, worst)
    kv = getattr(model.cfg, "n_key_value_heads", None) or n_heads
    detail = (
        f"{label} (query head of KV group {head // (n_heads // kv)} of {kv}): {worst:.1e} "
        f"(relative; effect of the head {effect:.1e}, of its neighbour {apart:.1e} apart)"
    )
    return CheckResult("head", PASS, detail, worst)


# -- 3. generation ---------------------------------------------------------------------------------
def _reference_generate(reference: Reference, prompts: Sequence[Sequence[int]]) -> list[list[int]]:
    """``transformers``' greedy ``generate`` on a left-padded batch, cut at its stop tokens."""
    from transformers import GenerationConfig

    stops = reference.stops()
    pad = reference.tokenizer.pad_token_id
    pad = stops[0] if pad is None else int(pad)
    width = max(len(p) for p in prompts)
    tokens = torch.full((len(prompts), width), pad, dtype=torch.long)
    attention = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        tokens[row, width - len(prompt) :] = torch.tensor(list(prompt))
        attention[row, width - len(prompt) :] = 1
    config = GenerationConfig(
        do_sample=False, max_new_tokens=NEW_TOKENS, eos_token_id=stops, pad_token_id=pad
    )
    with torch.no_grad():
        output = reference.model.generate(
            input_ids=tokens, attention_mask=attention, generation_config=config
        )
    rows = []
    for row in output[:, width:].tolist():
        rows.append(row[: next((i for i, t in enumerate(row) if t in stops), len(row))])
    return rows


def check_generation(model: Any, reference: Reference) -> CheckResult:
    """``lh.generate`` on text gives the checkpoint's own prompt tokens and ``transformers``'
    greedy tokens, for one prompt and a left-padded batch of different lengths (with and
    without the chat template), and stops at every token ``transformers`` stops at."""
    missing = sorted(set(reference.stops()) - set(stop_token_ids(model.tokenizer, model)))
    if missing:
        names = reference.tokenizer.convert_ids_to_tokens(missing)
        detail = f"lh.generate does not stop at {names}, which transformers' generate stops at"
        return CheckResult("generate", FAIL, detail)
    modes = [False, True] if has_chat_template(reference.tokenizer) else [False]
    compared = 0
    for chat in modes:
        for texts in ([PROMPTS[0]], list(PROMPTS)):
            expected_prompts = [reference.encode(text, chat) for text in texts]
            outputs = generate(model, texts, chat=chat, max_new_tokens=NEW_TOKENS)
            ours = [output.prompt_tokens for output in outputs]
            if ours != expected_prompts:
                detail = (
                    f"prompt tokens differ from the checkpoint's tokenizer (chat={chat}): "
                    f"{ours[0][:6]}... vs {expected_prompts[0][:6]}..."
                )
                return CheckResult("generate", FAIL, detail)
            expected = _reference_generate(reference, expected_prompts)
            got = [output.new_tokens for output in outputs]
            if got != expected:
                detail = (
                    f"greedy tokens differ (chat={chat}, {len(texts)} prompts): {got} vs {expected}"
                )
                return CheckResult("generate", FAIL, detail)
            compared += len(texts)
    modes_text = (
        "plain text and chat template" if len(modes) == 2 else "plain text (no chat template)"
    )
    detail = f"{compared} prompts ({modes_text}; 1 alone, {len(PROMPTS)} left-padded): same tokens"
    return CheckResult("generate", PASS, detail)


# -- 4. attention patterns -------------------------------------------------------------------------
def _bridge_patterns(model: Any, run: Callable[[], Any]) -> dict[int, Tensor]:
    n_layers = head_shape(model)[0]
    found: dict[int, Tensor] = {}

    def keep(layer: int) -> Callable[..., None]:
        def hook(pattern: Tensor, hook: Any) -> None:
            found[layer] = pattern.detach().float().cpu()

        return hook

    hooks = [(f"blocks.{layer}.attn.hook_pattern", keep(layer)) for layer in range(n_layers)]
    with torch.no_grad(), model.hooks(fwd_hooks=hooks):
        run()
    missing = [layer for layer in range(n_layers) if layer not in found]
    if missing:
        raise UnsupportedModelError(
            f"hook_pattern did not fire in layers {missing}: this model's attention does not "
            "expose its pattern to TransformerLens hooks"
        )
    return found


def _eager_attentions(reference: Reference, tokens: Tensor, **kwargs: Any) -> list[Tensor]:
    model = reference.model
    before = model.config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            output = model(tokens, output_attentions=True, **kwargs)
    finally:
        model.set_attn_implementation(before)
    return [attention.float() for attention in output.attentions]


def check_attention_patterns(model: Any, reference: Reference) -> CheckResult:
    """``hook_pattern`` of every layer equals ``transformers``' eager attention weights: one
    prompt (longer than any sliding window), a left-padded batch (real query rows) and the
    KV-cached path (a prefix run once, the rest on its cache)."""
    ids = reference.encode(" ".join(PROMPTS), False)
    tokens = torch.tensor([ids])
    device = model.cfg.device
    worst = 0.0
    expected = _eager_attentions(reference, tokens)
    full = _bridge_patterns(model, lambda: model(tokens.to(device)))
    for layer, weights in enumerate(expected):
        worst = max(worst, _diff(full[layer], weights))
    # left-padded batch: the short prompt's real rows and columns
    short = reference.encode(PROMPTS[1], False)
    batch = torch.full((2, len(ids)), ids[0], dtype=torch.long)
    batch[0] = tokens[0]
    batch[1, len(ids) - len(short) :] = torch.tensor(short)
    attention = torch.ones_like(batch)
    attention[1, : len(ids) - len(short)] = 0
    expected = _eager_attentions(reference, batch, attention_mask=attention)
    padded = _bridge_patterns(
        model, lambda: model(batch.to(device), attention_mask=attention.to(device))
    )
    real = attention.bool()
    for layer, weights in enumerate(expected):
        rows = padded[layer].permute(0, 2, 1, 3)[real]  # [real queries, heads, keys]
        worst = max(worst, _diff(rows, weights.permute(0, 2, 1, 3)[real]))
    # the KV-cached path of translation scores: prefix once, the rest on a copy of its cache
    split = len(ids) // 2
    head, rest = tokens[:, :split].to(device), tokens[:, split:].to(device)
    with torch.no_grad():
        _, cache = cached_forward(model, head, torch.ones_like(head), None, 1)
    cached = _bridge_patterns(
        model,
        lambda: cached_forward(model, rest, torch.ones_like(tokens), repeat_cache(cache, 1), 1),
    )
    for layer, weights in enumerate(_eager_attentions(reference, tokens)):
        worst = max(worst, _diff(cached[layer], weights[:, :, split:, :]))
    status = PASS if worst <= TOLERANCE else FAIL
    detail = (
        f"{len(expected)} layers, {len(ids)} tokens (full, left-padded, KV-cached): max "
        f"difference {worst:.1e}" + ("" if status == PASS else f" > {TOLERANCE:g}")
    )
    return CheckResult("pattern", status, detail, worst)


# -- running them ----------------------------------------------------------------------------------
CHECK_FUNCTIONS: dict[str, Callable[[Any, Reference], CheckResult]] = {
    "ones": check_ones_mask,
    "head": check_head_zeroing,
    "generate": check_generation,
    "pattern": check_attention_patterns,
}


def run_checks(
    model: Any, reference: Reference, checks: Sequence[str] = tuple(CHECK_FUNCTIONS)
) -> list[CheckResult]:
    """Run ``checks`` on ``model`` against ``reference``; an error in a check is its verdict
    (not supported when lens_heads, TransformerLens or transformers cannot do it, else fail)."""
    results = []
    for name in checks:
        try:
            results.append(CHECK_FUNCTIONS[name](model, reference))
        except (UnsupportedModelError, NotImplementedError) as error:
            results.append(CheckResult(name, NOT_SUPPORTED, f"{type(error).__name__}: {error}"))
        except Exception as error:  # a crash is a failed check, with the error a user gets
            results.append(CheckResult(name, FAIL, f"{type(error).__name__}: {error}"))
    return results


def reference_source(spec: str | os.PathLike[str]) -> str:
    """Where plain ``transformers`` loads the checkpoint that ``load_model(spec)`` loads: the
    folder itself, the cached dequantized checkpoint of an alias or GGUF file, or the hub id."""
    text = os.fspath(spec)
    path = Path(text).expanduser()
    if text in MODEL_ALIASES:
        return os.fspath(_cached_model_dir(MODEL_ALIASES[text].sha256()))
    if path.suffix == ".gguf":
        return os.fspath(_cached_model_dir(_file_sha256(path)))
    return os.fspath(path) if path.is_dir() else text


def doctor(
    spec: str | os.PathLike[str],
    *,
    checks: Sequence[str] = tuple(CHECK_FUNCTIONS),
    **load_kwargs: Any,
) -> DoctorReport:
    """Load ``spec`` with :func:`lens_heads.load_model` (``load_kwargs`` passed on) and the same
    checkpoint in plain ``transformers``, and run the checks (float32 on the CPU by default).

    A model lens_heads cannot load gives a report with every check not supported and the
    loader's error."""
    try:
        model = load_model(spec, verify=False, **load_kwargs)
    except UnsupportedModelError as error:
        reason = f"{type(error).__name__}: {error}"
        return DoctorReport(
            os.fspath(spec), [CheckResult(c, NOT_SUPPORTED, reason) for c in checks]
        )
    reference = Reference.from_pretrained(reference_source(spec))
    return DoctorReport(model_name(model), run_checks(model, reference, checks))
