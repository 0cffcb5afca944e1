"""The hook_z mask mechanism on a tiny grouped-query model."""

from __future__ import annotations

import pytest
import torch

import lens_heads as lh
from lens_heads.core._masks import HeadMask, MaskShapeError

PROMPTS = ["hello world", "the cat sat", "x"]


def _tokens(model, text):
    return model.to_tokens(text)


def test_all_zero_mask_zeroes_every_attention_output(tiny):
    outputs = {}

    def record(value, hook):
        outputs[hook.name] = value.detach().clone()

    names = [f"blocks.{layer}.hook_attn_out" for layer in range(tiny.cfg.n_layers)]
    tiny.run_with_hooks(
        _tokens(tiny, "hello"),
        fwd_hooks=lh.mask_hooks(HeadMask.zeros(tiny)) + [(name, record) for name in names],
    )
    assert len(outputs) == tiny.cfg.n_layers
    for value in outputs.values():
        assert torch.count_nonzero(value) == 0


def test_all_ones_mask_is_bit_identical(tiny):
    tokens = _tokens(tiny, "hello world")
    with lh.apply_mask(tiny, HeadMask.ones(tiny)):
        masked = tiny(tokens)
    assert torch.equal(masked, tiny(tokens))


def test_one_head_mask_equals_hand_written_ablation(tiny):
    tokens = _tokens(tiny, "hello world")
    layer, head = 1, 2

    def ablate(z, hook):
        z = z.clone()
        z[:, :, head, :] = 0.0
        return z

    expected = tiny.run_with_hooks(tokens, fwd_hooks=[(f"blocks.{layer}.attn.hook_z", ablate)])
    mask = HeadMask.ones(tiny).values.clone()
    mask[layer, head] = 0.0
    with lh.apply_mask(tiny, HeadMask(mask)):
        masked = tiny(tokens)
    assert torch.allclose(masked, expected, atol=1e-6)
    assert not torch.allclose(masked, tiny(tokens), atol=1e-4)


def test_per_example_masks_equal_running_each_alone(tiny):
    tokens = torch.cat([_tokens(tiny, "abcdef")] * 3)
    masks = [
        HeadMask.ones(tiny),
        HeadMask.zeros(tiny),
        HeadMask.from_heads(["L0H1"], n_layers=2, n_heads=4),
    ]
    batched = tiny.run_with_hooks(
        tokens, fwd_hooks=lh.mask_hooks(torch.stack([m.values for m in masks]))
    )
    for row, mask in enumerate(masks):
        with lh.apply_mask(tiny, mask):
            alone = tiny(tokens[row : row + 1])
        assert torch.allclose(batched[row], alone[0], atol=1e-5)


def test_mask_gradient_matches_finite_differences(tiny):
    tokens = _tokens(tiny, "gradient check")
    generator = torch.Generator().manual_seed(0)
    base = torch.rand(2, 4, generator=generator, dtype=torch.float64)

    def loss_of(values: torch.Tensor) -> torch.Tensor:
        logits = tiny.run_with_hooks(tokens, fwd_hooks=lh.mask_hooks(values))
        return logits[0, -1].double().log_softmax(-1)[7]

    values = base.clone().float().requires_grad_(True)
    loss_of(values).backward()
    assert values.grad is not None and torch.count_nonzero(values.grad) > 0
    epsilon = 1e-2
    for layer, head in [(0, 0), (1, 3), (0, 2)]:
        up, down = base.clone().float(), base.clone().float()
        up[layer, head] += epsilon
        down[layer, head] -= epsilon
        estimate = (loss_of(up) - loss_of(down)).item() / (2 * epsilon)
        assert values.grad[layer, head].item() == pytest.approx(estimate, rel=0.05, abs=1e-3)


def test_masks_apply_inside_generate_and_run_with_cache(tiny):
    tokens = _tokens(tiny, "hello")
    with lh.apply_mask(tiny, HeadMask.zeros(tiny)):
        _, cache = tiny.run_with_cache(tokens)
        generated = tiny.generate(tokens, max_new_tokens=4, do_sample=False, verbose=False)
    assert torch.count_nonzero(cache["blocks.0.hook_attn_out"]) == 0
    zero_alone = lh.greedy_generate(
        tiny, [tokens[0].tolist()], max_new_tokens=4, mask=HeadMask.zeros(tiny), stop_tokens=[]
    )
    assert generated[0, tokens.shape[1] :].tolist() == zero_alone[0]


def test_alpha_scales_unselected_heads(tiny):
    tokens = _tokens(tiny, "scale")
    mask = HeadMask.from_heads(["L0H0"], n_layers=2, n_heads=4).with_alpha(0.5)
    expected = torch.full((2, 4), 0.5)
    expected[0, 0] = 1.0
    with lh.apply_mask(tiny, mask):
        scaled = tiny(tokens)
    assert torch.allclose(scaled, tiny.run_with_hooks(tokens, fwd_hooks=lh.mask_hooks(expected)))


def test_wrong_mask_shape_is_a_clear_error(tiny):
    with pytest.raises(MaskShapeError, match=r"shape \(3, 4\).* has 2 layers x 4 heads"):
        with lh.apply_mask(tiny, HeadMask.ones(3, 4)):
            pass
    with pytest.raises(MaskShapeError, match="per-example mask has batch 2"):
        tiny.run_with_hooks(_tokens(tiny, "a"), fwd_hooks=lh.mask_hooks(torch.ones(2, 2, 4)))


def test_gqa_mask_acts_on_query_heads():
    """6 query heads share 2 KV heads (3 per KV head): zeroing query head h with a lens_heads
    mask zeroes exactly that head's ``hook_z`` slice; its layer's other heads -- the two that
    share its KV head included -- and the layers before it are unchanged."""
    model = lh.tiny_model(n_layers=2, n_heads=6, n_kv_heads=2, seed=3)
    tokens = _tokens(model, "grouped query")
    names = [f"blocks.{layer}.attn.hook_z" for layer in range(2)]

    def z_under(mask: HeadMask | None) -> dict[str, torch.Tensor]:
        seen = {}

        def recorder(name: str):
            def record(z, hook):
                seen[name] = z.detach().clone()

            return record

        hooks = [] if mask is None else lh.mask_hooks(mask, model)
        model.run_with_hooks(tokens, fwd_hooks=hooks + [(name, recorder(name)) for name in names])
        return seen

    plain = z_under(None)
    assert plain[names[0]].shape[2] == 6  # query heads, not the two KV heads
    assert model.cfg.n_key_value_heads == 2
    for layer in range(2):
        for head in range(6):
            masked = z_under(~HeadMask.from_heads([(layer, head)], n_layers=2, n_heads=6))
            z, reference = masked[names[layer]], plain[names[layer]]
            assert torch.count_nonzero(z[:, :, head]) == 0
            assert bool(reference[:, :, head].abs().sum() > 0), "the head had output to remove"
            others = [h for h in range(6) if h != head]
            assert torch.equal(z[:, :, others], reference[:, :, others]), (layer, head)
            if layer == 1:
                assert torch.equal(masked[names[0]], plain[names[0]])
            else:  # layer 1 reads the changed residual stream
                assert not torch.allclose(masked[names[1]], plain[names[1]])


def test_a_baseline_replaces_what_the_mask_removes_by_hand():
    """Mean ablation: the removed head's z becomes the baseline vector at every position; a
    factor of 0.25 keeps a quarter of z and three quarters of the baseline; others untouched."""
    model = lh.tiny_model(n_layers=2, n_heads=4, n_kv_heads=2, seed=0)
    tokens = model.to_tokens("a small test")
    name = "blocks.1.attn.hook_z"
    seen = {}

    def record(z, hook):
        seen["z"] = z.detach().clone()

    model.run_with_hooks(tokens, fwd_hooks=[(name, record)])
    plain = seen["z"]
    baseline = torch.randn(2, 4, plain.shape[-1])
    factor = torch.ones(2, 4)
    factor[1, 2] = 0.25
    hooks = lh.mask_hooks(factor, model, baseline=baseline)
    model.run_with_hooks(tokens, fwd_hooks=[*hooks, (name, record)])
    expected = plain.clone()
    expected[:, :, 2] = 0.25 * plain[:, :, 2] + 0.75 * baseline[1, 2]
    torch.testing.assert_close(seen["z"], expected)
    with pytest.raises(MaskShapeError, match="one vector per head"):
        lh.mask_hooks(factor, model, baseline=torch.zeros(2, 3, plain.shape[-1]))
    # resample ablation: a baseline per example and position (another prompt's z)
    per_position = torch.randn(*plain.shape[:2], 2, 4, plain.shape[-1])
    hooks = lh.mask_hooks(factor, model, baseline=per_position)
    model.run_with_hooks(tokens, fwd_hooks=[*hooks, (name, record)])
    expected = plain.clone()
    expected[:, :, 2] = 0.25 * plain[:, :, 2] + 0.75 * per_position[:, :, 1, 2]
    torch.testing.assert_close(seen["z"], expected)
    with pytest.raises(MaskShapeError, match=r"\(batch, positions\)"):
        model.run_with_hooks(
            model.to_tokens("a much longer test here"),
            fwd_hooks=lh.mask_hooks(factor, model, baseline=per_position),
        )
