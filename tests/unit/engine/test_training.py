"""Unit tests of head-mask training (issue 4) on tiny random models."""

from __future__ import annotations

import dataclasses
import math
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
import torch

import lens_heads as lh
from lens_heads.cli import main
from lens_heads.core._logits import answer_logits
from lens_heads.core._prompts import collate, encode_example, encode_text
from lens_heads.core._tasks import Example, Task
from lens_heads.engine._training import (
    CheckpointError,
    MaskTrainer,
    MaskTrainingResult,
    TrainingConfig,
    _query_side_hooks,
    gumbel_noise,
    lr_at,
    native_bf16,
    straight_through_mask,
    tau_at,
    train_mask,
)
from lens_heads.engine._training_data import batch_indices

ROOT = Path(__file__).resolve().parents[3]


def _words(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(3, 7))) for _ in range(n)]


@pytest.fixture
def upper_task() -> Task:
    return Task("upper", tuple(Example(w, w.upper()) for w in _words(40)), instruction="Upper.")


@pytest.fixture
def model():
    """A fresh tiny model per test (training must leave it untouched, which some tests check)."""
    return lh.tiny_model(n_layers=2, n_heads=4, n_kv_heads=2, seed=0)


def _config(**overrides) -> TrainingConfig:
    values = dict(steps=8, batch_size=4, lr=0.1, n_eval=8, precision="float32", seed=3)
    return TrainingConfig(**{**values, **overrides})


# -- the estimator and the schedules ---------------------------------------------------------
def test_straight_through_forward_is_binary_and_gradient_is_the_sigmoids():
    W = torch.tensor([[2.0, -1.0, 0.3]], requires_grad=True)
    noise = torch.tensor([[0.1, -0.2, -0.5]])
    mask = straight_through_mask(W, noise, tau=0.7)
    assert mask.tolist() == [[1.0, 0.0, 0.0]]
    weights = torch.tensor([[1.0, 2.0, 3.0]])
    (mask * weights).sum().backward()
    soft = torch.sigmoid((W.detach() + noise) / 0.7)
    expected = weights * soft * (1 - soft) / 0.7
    torch.testing.assert_close(W.grad, expected)


def test_gradients_reach_every_head_through_the_model_and_not_the_weights(model, upper_task):
    trainer = MaskTrainer(model, upper_task, _config(tau_begin=4.0))
    before = trainer.W.detach().clone()
    trainer.step()
    assert trainer.W.grad is not None
    assert bool(trainer.W.grad.ne(0).all()), "every head's logit gets a gradient"
    assert not torch.equal(before, trainer.W.detach())
    assert all(p.grad is None for p in model.parameters()), "no gradients for model weights"


def test_gumbel_noise_is_the_left_tail_log_log_form():
    noise = gumbel_noise((200_000,), torch.Generator().manual_seed(0))
    # G = log(-log U): P(G <= g) = 1 - exp(-exp(g)); median = log(log 2)
    assert abs(float(noise.median()) - math.log(math.log(2))) < 0.02
    assert abs(float((noise <= 0).float().mean()) - (1 - math.exp(-1))) < 0.01


@pytest.mark.parametrize("steps", [10, 100, 6250])
def test_tau_schedule_matches_formula(steps):
    config = TrainingConfig(steps=steps)
    span = 0.4 * steps
    for step in range(steps):
        expected = 4.0 + (0.05 - 4.0) * min(1.0, step / span)
        assert tau_at(step, config) == pytest.approx(expected, abs=1e-12)
    assert tau_at(0, config) == 4.0
    assert tau_at(steps - 1, config) == 0.05


@pytest.mark.parametrize("steps", [10, 200, 6250])
def test_lr_schedule_matches_formula(steps):
    config = TrainingConfig(steps=steps, lr=1e-2, min_lr=1e-4)
    warmup = round(0.1 * steps)
    for step in range(steps):
        if step < warmup:
            expected = 1e-2 * (step + 1) / warmup
        else:
            progress = (step - warmup) / (steps - warmup)
            expected = 1e-4 + (1e-2 - 1e-4) * 0.5 * (1 + math.cos(math.pi * progress))
        assert lr_at(step, config) == pytest.approx(expected, rel=1e-12)
    assert lr_at(warmup - 1, config) == pytest.approx(1e-2)
    after = [lr_at(step, config) for step in range(warmup, steps)]
    assert after == sorted(after, reverse=True), "the cosine decays monotonically"
    assert lr_at(steps, config) == pytest.approx(1e-4), "it ends at min_lr"


def test_schedules_are_the_ones_used_in_training(model, upper_task):
    config = _config(steps=6)
    result = train_mask(model, upper_task, config, progress=False)
    assert result.history["tau"].tolist() == pytest.approx([tau_at(s, config) for s in range(6)])
    assert result.history["lr"].tolist() == pytest.approx([lr_at(s, config) for s in range(6)])
    assert result.history["step"].tolist() == list(range(1, 7))


def test_batches_are_epochs_of_seeded_permutations():
    first_epoch = [i for step in range(5) for i in batch_indices(step, 10, 2, seed=1)]
    assert sorted(first_epoch) == list(range(10))
    assert batch_indices(7, 10, 2, seed=1) == batch_indices(7, 10, 2, seed=1)
    assert batch_indices(0, 10, 2, seed=1) != batch_indices(0, 10, 2, seed=2)


# -- the forward pass ------------------------------------------------------------------------
def test_partial_unembedding_equals_the_full_logits(model):
    tokenizer = model.tokenizer
    fmt = lh.PromptFormat(chat=True)
    encoded = [
        encode_example(tokenizer, fmt.render(w, tokenizer), w.upper(), chat=True)
        for w in ["apple", "kiwi", "banana"]
    ]
    tokens, answer_mask, _ = collate(encoded, tokenizer.pad_token_id)
    hooks = lh.mask_hooks(lh.HeadMask.from_heads(["L0H1", "L1H2"], n_layers=2, n_heads=4))
    full = answer_logits(model, tokens, answer_mask, hooks, partial=False)
    part = answer_logits(model, tokens, answer_mask, hooks, partial=True)
    assert part.shape == (int(answer_mask.sum()), model.cfg.d_vocab)
    torch.testing.assert_close(part, full, atol=1e-5, rtol=1e-5)
    assert sum(len(point._forward_hooks) for point in model.hook_dict.values()) == 0


def test_training_leaves_the_model_frozen_and_unchanged(upper_task):
    model = lh.tiny_model(n_layers=2, n_heads=4, seed=0)
    model.original_model.lm_head.weight.requires_grad_(True)  # a partly unfrozen model
    weights = {name: p.detach().clone() for name, p in model.named_parameters()}
    train_mask(model, upper_task, _config(steps=3), progress=False)
    assert model.original_model.lm_head.weight.requires_grad, "requires_grad is restored"
    assert model.original_model.lm_head.weight.grad is None
    for name, parameter in model.named_parameters():
        assert torch.equal(parameter, weights[name]), name


# -- a planted task --------------------------------------------------------------------------
def _planted(seed: int) -> tuple[object, Task, lh.HeadMask]:
    """A tiny model whose only attention output comes from two layer-1 heads, both scaled up:
    L1H0 is needed for the answer, L1H2 writes a strong distractor. Answers are the model's
    own predictions with L1H2 removed, kept only where that mask beats every other on/off
    combination of the two heads by at least 2 nats; so "remove L1H2" is the solution."""
    model = lh.tiny_model(n_layers=2, n_heads=4, seed=seed)
    hf = model.original_model
    d_head = model.cfg.d_head
    good, bad = (1, 0), (1, 2)
    with torch.no_grad():
        for layer, block in enumerate(hf.model.layers):
            weight = block.self_attn.o_proj.weight
            for head in range(4):
                factor = 30.0 if (layer, head) in (good, bad) else 0.0
                weight[:, head * d_head : (head + 1) * d_head] *= factor
        hf.lm_head.weight *= 30.0

    def without(*heads: tuple[int, int]) -> torch.Tensor:
        values = torch.ones(2, 4)
        for layer, head in heads:
            values[layer, head] = 0.0
        return values

    tokenizer = model.tokenizer
    words = _words(300, seed)
    prompts = [encode_text(tokenizer, w, chat=True) for w in words]
    tokens = torch.zeros(len(prompts), max(map(len, prompts)), dtype=torch.long)
    for row, ids in enumerate(prompts):
        tokens[row, : len(ids)] = torch.tensor(ids)
    rows, last = torch.arange(len(prompts)), torch.tensor([len(p) - 1 for p in prompts])
    logprobs = {}
    with torch.no_grad():
        for key, heads in {
            "target": [bad],
            "full": [],
            "neither": [good, bad],
            "x": [good],
        }.items():
            with lh.apply_mask(model, without(*heads)):
                logprobs[key] = model(tokens)[rows, last].log_softmax(-1)
    examples = []
    for i, word in enumerate(words):
        answer = int(logprobs["target"][i].argmax())
        text = tokenizer.decode([answer])
        best = float(logprobs["target"][i, answer])
        if any(float(logprobs[k][i, answer]) > best - 2 for k in ("full", "neither", "x")):
            continue
        if not text.strip() or tokenizer(text, add_special_tokens=False).input_ids != [answer]:
            continue
        examples.append(Example(word, text))
    assert len(examples) >= 48, "the planted construction yields enough examples"
    return model, Task("planted", tuple(examples[:48])), lh.HeadMask(without(bad))


@pytest.mark.parametrize("seed", [0, 1])
def test_training_finds_the_planted_head(seed):
    model, task, solution = _planted(seed)
    # the planted solution is about the answer token; the end-of-turn token is not planted
    config = TrainingConfig(
        steps=60, batch_size=8, lr=0.5, n_eval=8, precision="float32", seed=seed, answer_end="none"
    )
    result = train_mask(model, task, config, progress=False)
    assert result.mask == solution, f"found {result.mask.labels}, planted {solution.labels}"
    assert result.to_frame().iloc[0]["label"] == "L1H2", "the planted head has the lowest p"
    first, last = result.history["loss"].iloc[:5].mean(), result.history["loss"].iloc[-5:].mean()
    assert last < 0.25 * first


def test_bf16_autocast_finds_the_planted_head_too():
    model, task, solution = _planted(0)
    config = TrainingConfig(
        steps=60, batch_size=8, lr=0.5, n_eval=8, precision="bf16", seed=0, answer_end="none"
    )
    result = train_mask(model, task, config, progress=False)
    assert result.config.precision == "bfloat16"
    assert result.mask == solution


# -- checkpoints and resume -------------------------------------------------------------------
class _Interrupt(Exception):
    pass


def _interrupt_at(step_to_stop: int):
    def callback(step: int, loss: float) -> None:
        if step == step_to_stop:
            raise _Interrupt

    return callback


def test_resume_equals_an_uninterrupted_run(model, upper_task, tmp_path):
    config = _config(steps=12, trajectory_every=2)
    full = train_mask(model, upper_task, config, checkpoint_dir=tmp_path / "a", progress=False)
    with pytest.raises(_Interrupt):
        train_mask(
            model,
            upper_task,
            config,
            checkpoint_dir=tmp_path / "b",
            checkpoint_every=4,
            progress=False,
            callback=_interrupt_at(6),
        )
    resumed = train_mask(
        model, upper_task, config, checkpoint_dir=tmp_path / "b", resume=True, progress=False
    )
    assert resumed.timing["steps_this_session"] == 8, "lost steps 5-6, resumed from step 4"
    assert torch.equal(resumed.W, full.W)
    assert torch.equal(resumed.trajectory, full.trajectory)
    assert resumed.trajectory_steps == full.trajectory_steps == [0, 2, 4, 6, 8, 10, 12]
    pd.testing.assert_frame_equal(resumed.history, full.history)


def test_resume_after_the_process_is_killed(model, upper_task, tmp_path):
    """A real SIGKILL in a subprocess after step 7 (checkpoints every 3 steps)."""
    data = tmp_path / "upper.json"
    data.write_text(
        pd.DataFrame({"input": upper_task.inputs, "output": upper_task.outputs}).to_json(
            orient="records"
        )
    )
    script = textwrap.dedent(
        f"""
        import os, signal
        import lens_heads as lh
        from lens_heads.engine import TrainingConfig
        model = lh.tiny_model(n_layers=2, n_heads=4, n_kv_heads=2, seed=0)
        def kill(step, loss):
            if step == 7:
                os.kill(os.getpid(), signal.SIGKILL)
        config = TrainingConfig(
            steps=10, batch_size=4, lr=0.1, n_eval=8, precision="float32", seed=3
        )
        task = lh.get_task({str(data)!r})
        lh.train_mask(model, task, config, checkpoint_dir={str(tmp_path / "run")!r},
                      checkpoint_every=3, progress=False, callback=kill)
        """
    )
    process = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert process.returncode == -9, process.stderr[-2000:]
    task = lh.get_task(data)
    config = _config(steps=10)
    resumed = train_mask(
        model, task, config, checkpoint_dir=tmp_path / "run", resume=True, progress=False
    )
    assert resumed.timing["steps_this_session"] == 4, "resumed from the checkpoint of step 6"
    uninterrupted = train_mask(model, task, config, progress=False)
    torch.testing.assert_close(resumed.W, uninterrupted.W, atol=1e-6, rtol=0)
    assert resumed.mask == uninterrupted.mask


def test_a_finished_checkpoint_resumes_without_steps(model, upper_task, tmp_path):
    config = _config(steps=4)
    first = train_mask(model, upper_task, config, checkpoint_dir=tmp_path, progress=False)
    again = train_mask(
        model, upper_task, config, checkpoint_dir=tmp_path, resume=True, progress=False
    )
    assert again.timing["steps_this_session"] == 0
    assert torch.equal(first.W, again.W)


def test_checkpoint_of_another_model_task_or_config_is_refused(model, upper_task, tmp_path):
    config = _config(steps=4)
    train_mask(model, upper_task, config, checkpoint_dir=tmp_path, progress=False)
    other_model = lh.tiny_model(n_layers=2, n_heads=4, n_kv_heads=2, seed=1)
    with pytest.raises(CheckpointError, match=r"another run with other settings.*model"):
        train_mask(other_model, upper_task, config, checkpoint_dir=tmp_path, resume=True)
    lower = Task("lower", tuple(Example(w.upper(), w) for w in _words(40)))
    with pytest.raises(CheckpointError, match=r"another run with other settings.*task"):
        train_mask(model, lower, config, checkpoint_dir=tmp_path, resume=True)
    with pytest.raises(CheckpointError, match=r"other settings.*lr: saved 0.1, this run 0.2"):
        train_mask(
            model, upper_task, _config(steps=4, lr=0.2), checkpoint_dir=tmp_path, resume=True
        )
    with pytest.raises(CheckpointError, match="resume=True"):
        train_mask(model, upper_task, config, checkpoint_dir=tmp_path, resume=False)


def test_a_corrupt_checkpoint_is_a_clear_error(model, upper_task, tmp_path):
    (tmp_path / "checkpoint.safetensors").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="not a readable mask-training checkpoint"):
        train_mask(model, upper_task, _config(), checkpoint_dir=tmp_path, resume=True)


def test_checkpoints_are_written_atomically_every_n_steps(model, upper_task, tmp_path):
    seen = []

    def callback(step: int, loss: float) -> None:
        path = tmp_path / "checkpoint.safetensors"
        seen.append(path.stat().st_mtime_ns if path.exists() else None)

    train_mask(
        model,
        upper_task,
        _config(steps=5),
        checkpoint_dir=tmp_path,
        checkpoint_every=2,
        progress=False,
        callback=callback,
    )
    assert seen[0] is None and seen[1] is not None
    assert seen[1] == seen[2] and seen[3] != seen[2] and seen[4] != seen[3]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.safetensors"]


# -- bad input --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"tau_begin": 0.5, "tau_end": 1.0}, "tau_end .* must not exceed tau_begin"),
        ({"steps": 0}, "steps must be a positive integer"),
        ({"steps": -5}, "steps must be a positive integer"),
        ({"batch_size": 0}, "batch_size must be at least 1, got 0"),
        ({"lr": 0.0}, "lr must be positive"),
        ({"min_lr": 1.0}, "min_lr must lie in"),
        ({"warmup_fraction": 1.0}, "warmup_fraction"),
        ({"tau_fraction": 0.0}, "tau_fraction"),
        ({"tau_end": 0.0}, "temperatures must be positive"),
        ({"noise": "token"}, "noise must be 'example'"),
        ({"precision": "float16"}, "precision must be 'auto', 'bfloat16'"),
        ({"sparsity": -1.0}, "sparsity must be >= 0"),
        ({"shots": -1}, "shots must be at least 0"),
        ({"trajectory_every": 0}, "trajectory_every must be positive"),
    ],
)
def test_bad_configs_are_clear_errors(overrides, message):
    with pytest.raises(ValueError, match=message):
        TrainingConfig(**overrides)


def test_a_batch_larger_than_the_training_split_is_a_clear_error(model):
    task = Task("small", tuple(Example(w, w.upper()) for w in _words(12)))
    with pytest.raises(ValueError, match="batch_size 8 is larger than the 6 training examples"):
        train_mask(model, task, _config(batch_size=8, n_eval=6), progress=False)
    with pytest.raises(ValueError, match="checkpoint_every must be positive"):
        train_mask(model, task, _config(batch_size=2), checkpoint_every=0, progress=False)


def test_the_training_precision_keeps_its_old_name_with_a_warning():
    """Issue 45: the training precision is ``precision`` as everywhere else; ``dtype=`` (its
    name before 0.2.0), the ``dtype`` attribute and ``resolve_dtype`` still work with a
    DeprecationWarning, and a run stored under the old key loads as it was."""
    from lens_heads.core._settings import configure

    with pytest.warns(DeprecationWarning, match="dtype= is now precision="):
        old = TrainingConfig(steps=3, dtype="bf16")
    assert old == TrainingConfig(steps=3, precision="bfloat16")
    with pytest.warns(DeprecationWarning, match="TrainingConfig.dtype is now"):
        assert old.dtype == "bfloat16"
    with pytest.warns(DeprecationWarning, match="resolve_precision"):
        assert old.resolve_dtype() == old
    with pytest.warns(DeprecationWarning):  # as an override of an entry point
        assert configure(TrainingConfig, None, {"dtype": "fp32"}, "x").precision == "float32"
    stored = {**old.to_dict(), "dtype": "float32"}
    del stored["precision"]
    assert TrainingConfig.from_dict(stored).precision == "float32"
    with pytest.raises(ValueError, match="give only precision="):
        TrainingConfig(dtype="fp32", precision="fp32")


def test_config_presets_and_round_trip():
    short = TrainingConfig.short()
    assert (short.steps, short.batch_size, short.lr, short.precision) == (200, 8, 0.1, "auto")
    assert TrainingConfig() == short  # the defaults are the short schedule, as on the CLI
    paper = TrainingConfig.paper()
    assert (paper.steps, paper.batch_size, paper.lr, paper.min_lr) == (6250, 16, 1e-2, 1e-4)
    assert (paper.tau_begin, paper.tau_end, paper.tau_fraction) == (4.0, 0.05, 0.4)
    assert (paper.init_mean, paper.init_std, paper.noise) == (4.0, 0.02, "example")
    assert TrainingConfig(precision="fp32").precision == "float32"
    assert TrainingConfig(precision="bf16").resolve_precision().precision == "bfloat16"
    expected = "bfloat16" if native_bf16("cpu") else "float32"
    assert short.resolve_precision("cpu").precision == expected
    assert TrainingConfig.from_dict(short.to_dict()) == short
    with pytest.raises(ValueError, match="unknown TrainingConfig field"):
        TrainingConfig.from_dict({"stepz": 3})


# -- the result ---------------------------------------------------------------------------------
def test_result_views_save_and_load(model, upper_task, tmp_path):
    result = train_mask(model, upper_task, _config(steps=6, trajectory_every=2), progress=False)
    assert result.trajectory.shape == (4, 2, 4)
    torch.testing.assert_close(result.trajectory[-1], torch.sigmoid(result.W))
    frame = result.to_frame()
    assert len(frame) == 8 and frame["p"].is_monotonic_increasing
    assert set(frame.columns) >= {"layer", "head", "label", "W", "p", "kept", "crossings"}
    assert result.mask.n_selected == int(frame["kept"].sum())
    assert result.mask.metadata["task"] == "upper"
    assert result.timing["seconds"] > 0
    written = result.save(tmp_path) + result.save_figures(tmp_path)
    assert {p.name for p in written} >= {"mask.safetensors", "training.json", "heatmap.html"}
    loaded = MaskTrainingResult.load(tmp_path)
    assert torch.equal(loaded.W, result.W) and torch.equal(loaded.trajectory, result.trajectory)
    assert loaded.config == result.config and loaded.trajectory_steps == result.trajectory_steps
    pd.testing.assert_frame_equal(loaded.history, result.history, check_dtype=False)
    assert lh.HeadMask.load(tmp_path / "mask.safetensors", model=model) == result.mask
    assert not list(tmp_path.glob("*.tmp"))
    with pytest.raises(FileNotFoundError, match="no saved training result"):
        MaskTrainingResult.load(tmp_path / "nothing")


def test_trajectory_figure_colours_and_highlights():
    result = MaskTrainingResult.example()
    figure = result.plot_trajectories()
    names = [trace.name for trace in figure.data]
    assert names == ["kept (2)", "removed (1)", "L0H1 (3 crossings)"]
    colours = {trace.name: trace.line.color for trace in figure.data}
    assert colours["kept (2)"] != colours["removed (1)"]
    assert colours["L0H1 (3 crossings)"] == colours["removed (1)"]
    assert figure.data[2].line.width > figure.data[0].line.width
    heatmap = result.plot_heatmap()
    torch.testing.assert_close(
        torch.tensor(heatmap.data[0].z, dtype=torch.float32), result.probabilities
    )
    assert len(result.plot_loss().data) == 3


# -- experimental variants ------------------------------------------------------------------------
def _answer_ce(model, tokens, answer_mask, hooks) -> torch.Tensor:
    """The answer-token CE of a full forward with ``hooks`` (written out, not the trainer's)."""
    logits = model.run_with_hooks(tokens, fwd_hooks=hooks)
    rows, cols = answer_mask.nonzero(as_tuple=True)
    return torch.nn.functional.cross_entropy(logits[rows, cols - 1].float(), tokens[rows, cols])


def _first_step_by_hand(trainer: MaskTrainer, hooks_of) -> tuple[torch.Tensor, ...]:
    """The gradients of W (and ffn_W) at the trainer's first step, by the chain rule through
    hand-written hooks: replay the noise, take the gradient of the answer CE with respect to the
    0/1 masks themselves (``hooks_of(heads, ffn)`` applies them), and multiply by the
    straight-through factor ``s (1 - s) / tau`` of each sample, ``s = sigmoid((W + G) / tau)``."""
    replay = torch.Generator()
    replay.set_state(trainer.generator.get_state())
    tau = tau_at(0, trainer.config)
    tokens, answer_mask = trainer.batch(0)
    batch = tokens.shape[0]
    weights = [trainer.W.detach()] + ([] if trainer.ffn_W is None else [trainer.ffn_W.detach()])
    soft = [torch.sigmoid((w + gumbel_noise((batch, *w.shape), replay)) / tau) for w in weights]
    hard = [(s > 0.5).float().requires_grad_(True) for s in soft]
    loss = _answer_ce(trainer.model, tokens, answer_mask, hooks_of(*hard))
    grads = torch.autograd.grad(loss, hard)
    chained = [(g * s * (1 - s) / tau).sum(0) for g, s in zip(grads, soft, strict=True)]
    return (*chained, *hard)


def _z_and_mlp_hooks(heads: torch.Tensor, ffn: torch.Tensor | None = None) -> list:
    """Per-example multipliers on ``hook_z`` (``heads[b, l, h]``) and ``hook_mlp_out``
    (``ffn[b, l]``), written out."""

    def z_hook(layer):
        return lambda z, hook: z * heads[:, layer, None, :, None]

    def mlp_hook(layer):
        return lambda out, hook: out * ffn[:, layer, None, None]

    n_layers = heads.shape[1]
    hooks = [(f"blocks.{layer}.attn.hook_z", z_hook(layer)) for layer in range(n_layers)]
    if ffn is not None:
        hooks += [(f"blocks.{layer}.hook_mlp_out", mlp_hook(layer)) for layer in range(n_layers)]
    return hooks


def test_ffn_masks_train_jointly(model, upper_task):
    result = train_mask(model, upper_task, _config(steps=4, ffn_masks=True), progress=False)
    assert result.ffn_W is not None and result.ffn_W.shape == (2,)
    assert not torch.allclose(result.ffn_W, torch.full((2,), 4.0), atol=0.05), "ffn_W moved"
    names = [name for name, _ in result.hooks()]
    assert "blocks.1.hook_mlp_out" in names and "blocks.0.attn.hook_z" in names
    # one loss, both masks: the first step's gradients of W and ffn_W are those of the answer
    # CE under the sampled head mask and MLP mask together (W = 0: the samples mix 0 and 1)
    trainer = MaskTrainer(model, upper_task, _config(ffn_masks=True, init_mean=0.0))
    head_grad, ffn_grad, heads, ffn = _first_step_by_hand(trainer, _z_and_mlp_hooks)
    assert 0 < float(heads.mean()) < 1 and 0 < float(ffn.mean()) < 1
    trainer.step()
    torch.testing.assert_close(trainer.W.grad, head_grad, rtol=1e-4, atol=1e-7)
    torch.testing.assert_close(trainer.ffn_W.grad, ffn_grad, rtol=1e-4, atol=1e-7)
    # the result applies its trained MLP mask: sigmoid(ffn_W) < 0.5 removes layer 0's MLP output
    trained = dataclasses.replace(result, ffn_W=torch.tensor([-5.0, 5.0]))
    tokens = model.to_tokens("joint masks")
    kept = trained.mask.values[None].float()
    expected = model.run_with_hooks(
        tokens, fwd_hooks=_z_and_mlp_hooks(kept, torch.tensor([[0.0, 1.0]]))
    )
    torch.testing.assert_close(model.run_with_hooks(tokens, fwd_hooks=trained.hooks()), expected)
    assert not torch.allclose(expected, model.run_with_hooks(tokens, fwd_hooks=result.hooks()))


def test_query_side_masking_makes_a_head_attend_uniformly(model):
    tokens = model.to_tokens("hello there")
    values = torch.ones(2, 4)
    values[0, 1] = 0.0
    seen = {}

    def grab(pattern, hook):
        seen["pattern"] = pattern.detach().clone()

    hooks = [*_query_side_hooks(values), ("blocks.0.attn.hook_pattern", grab)]
    model.run_with_hooks(tokens, fwd_hooks=hooks)
    pattern = seen["pattern"][0]
    n = pattern.shape[-1]
    uniform = torch.tril(torch.ones(n, n)) / torch.arange(1, n + 1)[:, None]
    torch.testing.assert_close(pattern[1], uniform)
    assert not torch.allclose(pattern[0], uniform)
    plain = model(tokens)
    assert not torch.allclose(
        model.run_with_hooks(tokens, fwd_hooks=_query_side_hooks(values)), plain
    )


def _uniform_pattern_hooks(heads: torch.Tensor, ffn: None = None) -> list:
    """Query-side masking written out: head ``h`` of example ``b`` attends ``heads[b, l, h] *
    pattern + (1 - heads[b, l, h]) * uniform`` over the positions up to its own."""

    def make(layer):
        def hook(pattern, hook):
            n = pattern.shape[-1]
            uniform = torch.tril(torch.ones(n, n)) / torch.arange(1, n + 1)[:, None]
            m = heads[:, layer, :, None, None]
            return m * pattern + (1 - m) * uniform

        return hook

    return [(f"blocks.{layer}.attn.hook_pattern", make(layer)) for layer in range(heads.shape[1])]


def test_query_side_training_runs_and_reports_its_hooks(model, upper_task):
    result = train_mask(model, upper_task, _config(steps=4, query_side=True), progress=False)
    assert all(name.endswith("hook_pattern") for name, _ in result.hooks())
    assert not torch.allclose(result.W, torch.full((2, 4), 4.0), atol=0.05)
    # training masks inside the softmax: the first step's gradient is that of the answer CE
    # with the sampled heads attending uniformly (not with their hook_z output removed)
    trainer = MaskTrainer(model, upper_task, _config(query_side=True, init_mean=0.0))
    by_hand, heads = _first_step_by_hand(trainer, _uniform_pattern_hooks)
    on_z, _ = _first_step_by_hand(trainer, _z_and_mlp_hooks)
    assert 0 < float(heads.mean()) < 1
    trainer.step()
    torch.testing.assert_close(trainer.W.grad, by_hand, rtol=1e-4, atol=1e-7)
    assert not torch.allclose(trainer.W.grad, on_z, rtol=1e-2, atol=1e-5)
    # its reported hooks apply the trained mask the same way: removed heads attend uniformly
    W = torch.full((2, 4), 3.0)
    W[0, 1] = W[1, 2] = -3.0
    trained = dataclasses.replace(result, W=W)
    assert trained.mask.labels == ["L0H0", "L0H2", "L0H3", "L1H0", "L1H1", "L1H3"]
    tokens = model.to_tokens("query side")
    expected = model.run_with_hooks(
        tokens, fwd_hooks=_uniform_pattern_hooks(trained.mask.values[None])
    )
    torch.testing.assert_close(model.run_with_hooks(tokens, fwd_hooks=trained.hooks()), expected)
    assert not torch.allclose(expected, model(tokens))


def _masks_seen(trainer: MaskTrainer, steps: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Run ``steps`` updates; for each, the head mask the loss saw (as ``[batch, layers,
    heads]``) and the mask expected from a replay of the trainer's noise generator: ``1[W + G
    > 0]`` (the forward value of the straight-through sample) with one draw ``G`` of shape
    ``[layers, heads]`` per step for ``noise="batch"``, ``[batch, layers, heads]`` per example."""
    replay = torch.Generator()
    replay.set_state(trainer.generator.get_state())
    loss, seen = trainer.loss, []

    def recording_loss(tokens, answer_mask, mask, ffn=None, baseline=None, contrasts=None):
        seen.append(mask.detach().expand(tokens.shape[0], *trainer.shape).clone())
        return loss(tokens, answer_mask, mask, ffn, baseline, contrasts)

    trainer.loss = recording_loss
    pairs = []
    for _ in range(steps):
        W = trainer.W.detach().clone()
        batch = trainer.config.batch_size
        shape = trainer.shape if trainer.config.noise == "batch" else (batch, *trainer.shape)
        expected = (W + gumbel_noise(shape, replay) > 0).float().expand(batch, *trainer.shape)
        trainer.step()
        pairs.append((seen[-1], expected))
    return pairs


def test_per_batch_noise_and_negative_init(model, upper_task):
    config = _config(steps=3, noise="batch", init_mean=-3.0)
    result = train_mask(model, upper_task, config, progress=False)
    assert result.trajectory[0].max() < 0.1, "init N(-3, 0.02) starts with every head off"
    # batch noise: one draw per step, shared by every example of the batch (W = 0, so the
    # mask is the sign of the noise: about half the heads on, a new pattern each step)
    trainer = MaskTrainer(model, upper_task, _config(noise="batch", init_mean=0.0, init_std=0.0))
    pairs = _masks_seen(trainer, 3)
    for seen, expected in pairs:
        assert torch.equal(seen, expected)
        assert bool((seen == seen[0]).all()), "every example sees the same mask"
    assert len({tuple(seen[0].flatten().tolist()) for seen, _ in pairs}) > 1


def test_per_example_noise_draws_a_mask_per_example(model, upper_task):
    trainer = MaskTrainer(model, upper_task, _config(noise="example", init_mean=0.0, init_std=0.0))
    for seen, expected in _masks_seen(trainer, 2):
        assert torch.equal(seen, expected)
        assert not bool((seen == seen[0]).all()), "the examples of a batch see different masks"


def test_few_shot_training_data(model, upper_task):
    trainer = MaskTrainer(model, upper_task, _config(shots=2))
    prompt = model.tokenizer.decode(trainer.encoded[0].prompt_tokens)
    assert prompt.count("<|im_start|>user") == 3, "two demonstrations as earlier chat turns"
    answer = trainer.train_set.outputs[0]
    assert model.tokenizer.decode(trainer.encoded[0].answer_tokens) == answer + "<|im_end|>"


def test_base_model_format_without_a_chat_template(model, upper_task):
    trainer = MaskTrainer(model, upper_task, _config(chat=False))
    first = trainer.train_set.examples[0]
    prompt = model.tokenizer.decode(trainer.encoded[0].prompt_tokens, skip_special_tokens=True)
    assert prompt == f"{first.input}\n\n"


# -- the command ----------------------------------------------------------------------------------
def test_cli_train_mask_smoke(tmp_path, tiny_dir, monkeypatch, upper_task, capsys):
    import lens_heads.core

    def load(spec, **kw):  # named after its spec, as load_model names what it loads
        model = lh.tiny_model(n_layers=2, n_heads=4, n_kv_heads=2, seed=0)
        model.lens_heads_name = str(spec)
        return model

    monkeypatch.setattr(lens_heads.core, "load_model", load)
    data = tmp_path / "upper.json"
    data.write_text(
        pd.DataFrame({"input": upper_task.inputs, "output": upper_task.outputs}).to_json(
            orient="records"
        )
    )
    out = tmp_path / "out"
    argv = ["train-mask", "--model", str(tiny_dir), "--task", str(data), "--steps", "6"]
    argv += ["--out", str(out)]
    argv += ["--batch-size", "4", "--holdout", "8", "--n-eval", "4", "--precision", "fp32"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "w/ random M" in printed and "w/ M" in printed and "kept" in printed
    for name in ["mask.safetensors", "training.json", "history.csv", "trajectories.html"]:
        assert (out / name).is_file(), name
    assert (out / "eval" / "table.md").is_file()
    assert (out / "checkpoints" / "checkpoint.safetensors").is_file()
    result = MaskTrainingResult.load(out)
    assert result.config.steps == 6 and result.config.precision == "float32"
    assert main(argv) == 2, "a second run without --resume refuses to overwrite"
    assert "resume" in capsys.readouterr().err
    assert main([*argv, "--resume"]) == 0
    assert main([*argv[:-2], "--n-eval", "20"]) == 2
    assert "exceeds the 8 examples held out" in capsys.readouterr().err


def test_a_checkpoint_from_before_later_config_fields_still_resumes(model, upper_task, tmp_path):
    """Fields added later with their old behaviour as default (soft, trainable) are filled in;
    answer_end is not: an older checkpoint trained answer-only targets."""
    import json

    from safetensors import safe_open
    from safetensors.torch import save_file

    config = _config(steps=4)
    first = train_mask(model, upper_task, _config(steps=2), checkpoint_dir=tmp_path, progress=False)
    path = tmp_path / "checkpoint.safetensors"

    def rewrite(drop: tuple[str, ...]) -> None:
        with safe_open(str(path), framework="pt") as file:
            header = dict(file.metadata())
            tensors = {key: file.get_tensor(key) for key in file.keys()}
        state = json.loads(header["state"])
        for key in drop:
            state["config"].pop(key, None)
        state["config"]["steps"] = 4
        header["state"] = json.dumps(state)
        save_file(tensors, str(path), metadata=header)

    rewrite(("soft", "trainable"))
    resumed = train_mask(model, upper_task, config, checkpoint_dir=tmp_path, resume=True)
    assert resumed.timing["steps_this_session"] == 2 and first.W.shape == resumed.W.shape
    rewrite(("answer_end",))
    with pytest.raises(CheckpointError, match="answer_end: saved None"):
        train_mask(model, upper_task, config, checkpoint_dir=tmp_path, resume=True)
