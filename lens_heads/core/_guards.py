"""The guards that make silent garbage from a library change impossible: on each model's first
use, the KV-cached decoding and the attention patterns lens_heads computes are held against an
independent computation, and a disagreement stops everything with one clear
:class:`~lens_heads.core.LibraryMismatchError` (installed versions, the measured
difference, the fix) before any result is computed or written.

* :func:`check_cached_decoding`: a short cached continuation -- a prefix run once, two
  left-padded suffixes after it, two one-token steps -- against full forwards;
* :func:`check_pattern_capture`: ``hook_pattern`` of every layer against the weights the
  checkpoint's own ``transformers`` attention module returns under eager attention, in a full
  forward and on the KV-cached path (its rows must equal the full forward's);
* :func:`verify_model`: both, what every command runs right after loading its model.

Each runs a few forwards of :data:`GUARD_TEXT` (well under a second on the offline models) and
is remembered per model.

>>> import lens_heads as lh
>>> model = lh.tiny_model()
>>> checked = verify_model(model)
>>> sorted(checked), all(value < 1e-4 for value in checked.values())
(['cache', 'pattern'], True)
"""

from __future__ import annotations

import copy
import functools
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor

from lens_heads.core._errors import InputError, InputTypeError
from lens_heads.core._kv_cache import cached_step, is_bridge, sliding_window
from lens_heads.core._libraries import LibraryMismatchError, mismatch_message

__all__ = [
    "GUARD_TEXT",
    "check_cached_decoding",
    "check_pattern_capture",
    "forget_checks",
    "reads_patterns",
    "verify_model",
]

#: the text whose tokens the guards run (any text works; this one has a clear continuation)
GUARD_TEXT = "The capital of France is Paris, and the capital of Germany is Berlin."

_CHECKED: weakref.WeakKeyDictionary[Any, dict[str, float]] = weakref.WeakKeyDictionary()


@contextmanager
def _hooks_suspended(model: Any) -> Iterator[None]:
    """Run without the hooks a caller has put on the model's hook points (masks, patched
    patterns): the guards check the libraries, not the caller's edits. Restored afterwards with
    the same handles."""
    saved = []
    for module in model.modules():
        hooks = getattr(module, "_forward_hooks", None)
        if hooks and hasattr(module, "add_hook"):  # a TransformerLens hook point
            saved.append((module, dict(hooks)))
            hooks.clear()
    try:
        yield
    finally:
        for module, hooks in saved:
            module._forward_hooks.update(hooks)


# -- the KV cache ----------------------------------------------------------------------------------
def _tolerance(model: Any) -> float:
    """The largest relative difference the guards accept: float32 arithmetic in another order
    differs by ~1e-6; bfloat16 and float16 by ~1e-2."""
    dtype = getattr(model.cfg, "dtype", torch.float32)
    return 1e-3 if dtype in (torch.float32, torch.float64) else 6e-2


def _tokens(model: Any) -> list[int]:
    """The first 12 token ids of :data:`GUARD_TEXT` (at least 10), by the model's tokenizer."""
    ids = list(model.tokenizer(GUARD_TEXT).input_ids)
    while len(ids) < 10:
        ids = ids + ids
    return ids[:12]


def _full_logits(model: Any, rows: list[list[int]]) -> list[Tensor]:
    """Logits of each row in one full forward, no cache: the rows right padded into one batch
    (causal attention: a row's positions never see the padding after them, so position i's
    logits are those of the forward of its first i + 1 tokens)."""
    width = max(len(row) for row in rows)
    batch = [row + [row[-1]] * (width - len(row)) for row in rows]
    logits = model(torch.tensor(batch, device=model.cfg.device), return_type="logits").float()
    return [logits[index, : len(row)] for index, row in enumerate(rows)]


def _plain(run: Callable[[], Any], what: str) -> Any:
    return run()


def _measure_cache(
    model: Any, watch: Callable[[Callable[[], Any], str], Any] = _plain
) -> tuple[float, str]:
    """Largest relative difference between cached and full-forward logits, and a description:
    a shared prefix run once, two left-padded suffixes after it (an interior gap), then two
    one-token steps -- the shape of the cached decoding lens_heads does. Where a sliding window
    is shorter than the text, decoding shares no prefix (the gap would move tokens out of the
    window) and neither does the guard: the rows are left padded from their start."""
    device = model.cfg.device
    ids = _tokens(model)
    window = sliding_window(model)
    n = len(ids)
    prefix = 4 if window is None or window > n else 0
    rows = [ids, ids[:4] + ids[6:]]  # the same first 4 tokens, lengths n and n - 2
    suffixes = [row[prefix:-2] for row in rows]
    width = max(len(s) for s in suffixes)
    tokens = torch.full((2, width), int(ids[0]), dtype=torch.long)
    attention = torch.zeros((2, prefix + width), dtype=torch.long)
    attention[:, :prefix] = 1
    for row, suffix in enumerate(suffixes):
        tokens[row, width - len(suffix) :] = torch.tensor(suffix)
        attention[row, prefix + width - len(suffix) :] = 1
    cache = None
    if prefix:
        head = torch.tensor([ids[:prefix]], device=device)
        _, cache = cached_step(model, head, torch.ones_like(head), None, 1)
        cache.batch_repeat_interleave(2)
    attention = attention.to(device)
    logits, cache = cached_step(model, tokens.to(device), attention, cache, 1)
    full = _full_logits(model, rows)
    worst, scale = 0.0, 1.0
    for step in range(3):
        for row, sequence in enumerate(rows):
            expected = full[row][len(sequence) - 3 + step]
            scale = max(scale, float(expected.abs().max()))
            worst = max(worst, float((logits[row, -1].float() - expected).abs().max()))
        if step == 2:
            break
        following = torch.tensor([[row[len(row) - 2 + step]] for row in rows], device=device)
        attention = torch.cat([attention, attention.new_ones((2, 1))], dim=1)
        run = watch if step == 1 else _plain
        step_once = functools.partial(cached_step, model, following, attention, cache, 1)
        logits, cache = run(step_once, "KV-cached")
    shared = (
        f"prefix of {prefix} cached, 2 left-padded suffixes" if prefix else "2 left-padded rows"
    )
    return worst / scale, f"{n} tokens: {shared}, 2 single-token steps"


_FAILURES = (RuntimeError, ValueError, IndexError, TypeError)


def _cache_failed(model: Any, error: Exception) -> LibraryMismatchError:
    return LibraryMismatchError(
        mismatch_message(
            "KV-cached decoding fails",
            _name(model),
            f"a short cached continuation raised {type(error).__name__}: {error}",
        )
    )


def _judge_cache(model: Any, difference: float, what: str) -> float:
    tolerance = _tolerance(model)
    if not difference <= tolerance:  # NaN fails too
        raise LibraryMismatchError(
            mismatch_message(
                "KV-cached decoding disagrees with a full forward",
                _name(model),
                f"largest logit difference {difference:.3g} (relative; allowed {tolerance:g}) "
                f"over {what}",
            )
        )
    return difference


def check_cached_decoding(model: Any) -> float:
    """The first time ``model`` decodes with a cache: its cached logits against full forwards
    (a few short forwards, remembered per model). Returns the largest relative difference;
    raises :class:`LibraryMismatchError` when it exceeds the guard's tolerance. A model that
    decodes without a Hugging Face cache (a legacy ``HookedTransformer``) gives 0.0."""
    checked = _remembered(model)
    if "cache" in checked:
        return checked["cache"]
    if not is_bridge(model):
        checked["cache"] = 0.0
        return 0.0
    with torch.inference_mode(), _hooks_suspended(model):
        try:
            difference, what = _measure_cache(model)
        except _FAILURES as error:
            raise _cache_failed(model, error) from error
    checked["cache"] = _judge_cache(model, difference, what)
    return difference


def forget_checks(model: Any) -> None:
    """Forget that ``model`` passed the guards (they run again on its next use)."""
    _CHECKED.pop(model, None)


def _remembered(model: Any) -> dict[str, float]:
    """The guards' results remembered for ``model`` (check name -> largest difference)."""
    return _CHECKED.setdefault(model, {})


def _name(model: Any) -> str:
    return str(getattr(model, "lens_heads_name", None) or getattr(model.cfg, "model_name", "model"))


# -- attention patterns ---------------------------------------------------------------------------
_CACHE_NAMES = ("cache", "past_key_values")


def reads_patterns(hook_names: Iterable[str]) -> bool:
    """Whether any of ``hook_names`` is an attention pattern (``blocks.{l}.attn.hook_pattern``).

    >>> reads_patterns(["blocks.0.attn.hook_z"]), reads_patterns(["blocks.3.attn.hook_pattern"])
    (False, True)
    """
    return any(name.endswith("attn.hook_pattern") for name in hook_names)


def _reference_hook(found: dict[int, Tensor], layer: int) -> Callable[..., None]:
    """A forward pre-hook on an attention bridge that runs the checkpoint's own attention module
    on the same inputs (eager attention, a copy of the cache) and keeps its weights."""

    def hook(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        inputs = dict(kwargs)
        for name in _CACHE_NAMES:
            if inputs.get(name) is not None:
                inputs[name] = copy.deepcopy(inputs[name])
        output = module.original_component(*args, **inputs)
        weights = output[1] if isinstance(output, tuple) and len(output) > 1 else None
        if weights is None:
            raise InputError(
                "the checkpoint's attention module returned no attention weights under eager "
                "attention, so hook_pattern cannot be checked against them"
            )
        found[layer] = weights.detach().float()

    return hook


def _patterns(
    model: Any, run: Callable[[], Any]
) -> tuple[dict[int, Tensor], dict[int, Tensor], Any]:
    """(hook_pattern per layer, the reference weights per layer, what ``run`` returned) of one
    forward."""
    n_layers = int(model.cfg.n_layers)
    bridge: dict[int, Tensor] = {}
    reference: dict[int, Tensor] = {}

    def keep(layer: int) -> Callable[..., None]:
        def hook(pattern: Tensor, hook: Any) -> None:
            bridge[layer] = pattern.detach().float()

        return hook

    handles = [
        model.blocks[layer].attn.register_forward_pre_hook(
            _reference_hook(reference, layer), with_kwargs=True
        )
        for layer in range(n_layers)
    ]
    hooks = [(f"blocks.{layer}.attn.hook_pattern", keep(layer)) for layer in range(n_layers)]
    try:
        with model.hooks(fwd_hooks=hooks):
            output = run()
    finally:
        for handle in handles:
            handle.remove()
    return bridge, reference, output


def _compare(bridge: dict[int, Tensor], reference: dict[int, Tensor], what: str) -> float:
    worst = 0.0
    for layer, expected in reference.items():
        got = bridge.get(layer)
        if got is None:
            raise InputError(f"hook_pattern did not fire in layer {layer} ({what})")
        if got.shape != expected.shape:
            raise InputError(
                f"layer {layer} ({what}): hook_pattern has shape {tuple(got.shape)}, the "
                f"checkpoint's eager attention weights {tuple(expected.shape)}"
            )
        worst = max(worst, float((got - expected.to(got.device)).abs().max()))
    return worst


def _measure_patterns(model: Any) -> float:
    """Largest difference of ``hook_pattern`` from the reference weights of a full forward: in
    that forward, and in the cached path (a prefix once, the rest on its cache), whose rows must
    equal the full forward's last rows whatever the cache does."""
    device = model.cfg.device
    ids = _tokens(model)
    tokens = torch.tensor([ids], device=device)
    split = len(ids) // 2
    patterns, reference, _ = _patterns(model, lambda: model(tokens, return_type="logits"))
    full = _compare(patterns, reference, "full forward")
    head = tokens[:, :split]
    _, cache = cached_step(model, head, torch.ones_like(head), None, 1)
    rest = tokens[:, split:]
    attention = torch.ones_like(tokens)
    patterns, _, _ = _patterns(model, lambda: cached_step(model, rest, attention, cache, 1))
    last_rows = {layer: weights[:, :, split:, :] for layer, weights in reference.items()}
    return max(full, _compare(patterns, last_rows, "KV-cached"))


_PATTERN_HEADLINE = "hook_pattern disagrees with the checkpoint's eager attention weights"


def _captures_patterns(model: Any) -> bool:
    hook_dict = getattr(model, "hook_dict", {}) or {}
    return is_bridge(model) and "blocks.0.attn.hook_pattern" in hook_dict


@contextmanager
def _eager(model: Any) -> Iterator[None]:
    """The checkpoint's attention modules under eager attention (which returns its weights)."""
    hf_model = model.original_model
    before = getattr(hf_model.config, "_attn_implementation", "eager")
    if before != "eager":
        hf_model.set_attn_implementation("eager")
    try:
        yield
    finally:
        if before != "eager":
            hf_model.set_attn_implementation(before)


def _judge_patterns(model: Any, difference: float, what: str) -> float:
    tolerance = _tolerance(model)
    if not difference <= tolerance:
        raise LibraryMismatchError(
            mismatch_message(
                _PATTERN_HEADLINE,
                _name(model),
                f"largest difference {difference:.3g} (allowed {tolerance:g}) over {what}",
            )
        )
    return difference


def check_pattern_capture(model: Any) -> float:
    """The first time ``model``'s attention patterns are read: ``hook_pattern`` of every layer
    against the checkpoint's own eager attention weights, in a full forward and on a KV cache
    (remembered per model). Returns the largest difference; raises
    :class:`LibraryMismatchError` when it exceeds the guard's tolerance or the shapes differ.
    A model without a Hugging Face checkpoint inside (a legacy ``HookedTransformer``) or
    without ``hook_pattern`` gives 0.0."""
    checked = _remembered(model)
    if "pattern" in checked:
        return checked["pattern"]
    if not _captures_patterns(model):
        checked["pattern"] = 0.0
        return 0.0
    try:
        with _eager(model), torch.inference_mode(), _hooks_suspended(model):
            difference = _measure_patterns(model)
    except _FAILURES as error:
        raise LibraryMismatchError(
            mismatch_message(_PATTERN_HEADLINE, _name(model), f"{type(error).__name__}: {error}")
        ) from error
    what = f"{len(_tokens(model))} tokens, full forward and KV-cached"
    checked["pattern"] = _judge_patterns(model, difference, what)
    return difference


def verify_model(model: Any) -> dict[str, float]:
    """Run both guards on ``model`` (each once per model) and return their largest differences:
    ``{"cache": ..., "pattern": ...}``. Raises :class:`LibraryMismatchError` on disagreement.
    On a model neither guard has seen, both share one short cached continuation, whose last
    single-token step (each row's query against every cached key, padding masked) is held
    against the eager weights: five forwards in all, not eight. :func:`check_pattern_capture`
    alone also checks a multi-token full forward.

    >>> verify_model("smollm2-135m-instruct")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lens_heads.core._errors.InputTypeError: verify_model checks a loaded model ...
    """
    if not isinstance(model, torch.nn.Module) or not hasattr(model, "cfg"):
        raise InputTypeError(
            f"verify_model checks a loaded model (a TransformerBridge or a HookedTransformer), "
            f"got {type(model).__name__}; load one with lh.load_model(spec), which verifies it"
        )
    checked = _remembered(model)
    if checked or not _captures_patterns(model):
        return {"cache": check_cached_decoding(model), "pattern": check_pattern_capture(model)}
    worst, problems = 0.0, []

    def watch(run: Callable[[], Any], what: str) -> Any:
        nonlocal worst
        patterns, reference, output = _patterns(model, run)
        try:
            worst = max(worst, _compare(patterns, reference, what))
        except InputError as error:  # judged after the cache: its error names the cause
            problems.append(str(error))
        return output

    try:
        with _eager(model), torch.inference_mode(), _hooks_suspended(model):
            difference, what = _measure_cache(model, watch)
    except _FAILURES as error:
        raise _cache_failed(model, error) from error
    _judge_cache(model, difference, what)
    if problems:
        raise LibraryMismatchError(mismatch_message(_PATTERN_HEADLINE, _name(model), problems[0]))
    _judge_patterns(model, worst, f"{what} (the last cached step)")
    checked.update(cache=difference, pattern=worst)
    return {"cache": difference, "pattern": worst}
