"""Causal head roles (issue 36): the three gate fits find the roles planted in a tiny model, the
seeds trained together are independent fits, and the result saves, reloads and resumes."""

from __future__ import annotations

import pytest
import torch

import lens_heads as lh
from lens_heads.core._errors import InputError
from lens_heads.core._tasks import Example, Task
from lens_heads.engine._training import MaskTrainer
from lens_heads.heads_up import HeadRoles, RolesConfig, head_roles

D_HEAD = 8
WORDS = "ab cd ef gh ij kl mn op qr st uv wx ya bc de fg".split()
TASK = Task("say-z", tuple(Example(word, "z") for word in WORDS))
FAST = RolesConfig(
    steps=30, pulled_steps=30, n_masks=3, batch_size=4, n_eval=4, evaluate=False,
    precision="float32",
)  # fmt: skip


def planted_model(identical_tokens: bool = False) -> object:
    """One layer, three heads whose roles are known by construction: L0H0 writes the answer
    token's unembedding direction (the task needs it), L0H1 writes the opposite direction (it
    hurts the task), L0H2 writes nothing. Every token carries one constant embedding direction
    and each head's value reads only it, so each head outputs the same vector whatever it
    attends to; the MLP is switched off. ``identical_tokens``: every token embeds the same
    vector, so that the normalised input, and each head's output, is exactly the same at every
    position."""
    model = lh.tiny_model(n_layers=1, n_heads=3, d_head=D_HEAD)
    hf = model.original_model
    answer = model.tokenizer.encode("z", add_special_tokens=False)[0]
    with torch.no_grad():
        if identical_tokens:
            hf.model.embed_tokens.weight.zero_()
        hf.model.embed_tokens.weight[:, 0] = 3.0
        layer = hf.model.layers[0]
        layer.mlp.down_proj.weight.zero_()
        value = layer.self_attn.v_proj.weight
        value.zero_()
        for head in range(3):
            value[head * D_HEAD, 0] = 1.0
        out = layer.self_attn.o_proj.weight
        out.zero_()
        direction = hf.lm_head.weight[answer] / hf.lm_head.weight[answer].norm()
        out[:, 0] = 4.0 * direction  # L0H0 carries the answer
        out[:, D_HEAD] = -2.0 * direction  # L0H1 works against it
    return model


def test_the_three_fits_find_the_planted_roles() -> None:
    roles = head_roles(planted_model(), TASK, FAST)
    frame = roles.to_frame().set_index("label")
    assert list(frame["class"]) == ["facilitating", "interfering", "irrelevant"]
    assert list(frame["agreement"]) == [1.0, 1.0, 1.0]
    # what makes L0H2 irrelevant: the pull decides its gate in both directions
    assert frame.loc["L0H2", "gate down"] < 0.5 < frame.loc["L0H2", "gate up"]
    assert roles.heads("facilitating") == ["L0H0"] and roles.heads("interfering") == ["L0H1"]


def test_seeds_trained_together_are_the_fits_each_seed_would_make_alone() -> None:
    from dataclasses import replace

    model = lh.tiny_model(n_layers=2, n_heads=4)  # random: every example has its own loss
    task = Task("upper", tuple(Example(w, w.upper()) for w in "abcdefghijklmnop"))
    config = replace(FAST.training_of("down"), n_masks=2)  # 2 seeds, batch 4: rows must not mix
    together = MaskTrainer(model, task, config)
    start = together.W.detach().clone()
    assert start.shape == (2, 2, 4) and not torch.equal(start[0], start[1])
    for _ in range(5):
        together.step()
    alone = MaskTrainer(model, task, replace(config, n_masks=1), initial=start[1])
    for _ in range(5):
        alone.step()
    torch.testing.assert_close(together.W.detach()[1], alone.W.detach(), atol=1e-5, rtol=1e-4)


def test_the_pull_moves_gates_that_the_task_ignores() -> None:
    model = planted_model()
    down, up = (
        MaskTrainer(model, TASK, FAST.training_of(fit), initial=torch.zeros(3, 1, 3))
        for fit in ("down", "up")
    )
    for _ in range(10):
        down.step()
        up.step()
    assert float(torch.sigmoid(down.W.detach()[:, 0, 2]).max()) < 0.5  # L0H2: pulled down
    assert float(torch.sigmoid(up.W.detach()[:, 0, 2]).min()) > 0.5  # and up


def test_roles_save_reload_and_resume(tmp_path) -> None:
    model = planted_model()
    first = head_roles(model, TASK, FAST, out=tmp_path / "run")
    again = HeadRoles.load(tmp_path / "run" / "roles")
    torch.testing.assert_close(again.gates, first.gates)
    assert again.to_frame().equals(first.to_frame())
    (tmp_path / "run" / "up" / ".complete").unlink()  # as if killed during the last fit
    resumed = head_roles(model, TASK, FAST, out=tmp_path / "run")
    torch.testing.assert_close(resumed.gates, first.gates)
    with pytest.raises(InputError, match=r"differ|another"):
        other = RolesConfig(**{**FAST.__dict__, "n_masks": 2})
        head_roles(model, TASK, other, out=tmp_path / "run")
    # a folder from before the ablation setting (no "ablation" in its config) ran zero ablation
    import json

    path = tmp_path / "run" / "config.json"
    recorded = json.loads(path.read_text())
    del recorded["ablation"]
    path.write_text(json.dumps(recorded))
    torch.testing.assert_close(
        head_roles(model, TASK, FAST, out=tmp_path / "run").gates, first.gates
    )
    with pytest.raises(InputError, match=r"ablation: saved 'zero', this run 'mean'"):
        head_roles(
            model, TASK, RolesConfig(**{**FAST.__dict__, "ablation": "mean"}), out=path.parent
        )


def test_the_sets_found_are_evaluated() -> None:
    config = RolesConfig(**{**FAST.__dict__, "evaluate": True})
    roles = head_roles(planted_model(), TASK, config)
    frame = roles.evaluation.set_index("heads")
    expected = {"all heads", "heads the down fit keeps", "without interfering heads"}
    assert set(frame.index) == expected
    assert int(frame.loc["heads the down fit keeps", "n heads"]) == 1
    assert frame.loc["without interfering heads", "answer_ce"] < frame.loc["all heads", "answer_ce"]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"n_masks": 0}, "n_masks must be at least 1, got 0"),
        ({"pull": 0.0}, "pull must be positive"),
        ({"threshold": 1.0}, "threshold must lie in"),
    ],
)
def test_bad_settings_are_refused(fields, message) -> None:
    with pytest.raises(InputError, match=message):
        RolesConfig(**fields)


def test_seeds_and_pull_belong_to_sigmoid_gates() -> None:
    with pytest.raises(InputError, match="pass gates='sigmoid'"):
        lh.TrainingConfig(n_masks=2)
    with pytest.raises(InputError, match="gates must be one of"):
        lh.TrainingConfig(gates="gumbel")
    with pytest.raises(InputError, match="initial mask logits have shape"):
        MaskTrainer(planted_model(), TASK, FAST.training_of("free"), initial=torch.zeros(2, 2))


def test_a_result_of_several_seeds_has_one_mask_per_seed() -> None:
    result = lh.train_mask(planted_model(), TASK, FAST.training_of("free"), progress=False)
    assert result.n_masks == 3
    with pytest.raises(InputError, match=r"take one with result\.single"):
        _ = result.mask
    assert result.single(2).mask.shape == (1, 3)
    torch.testing.assert_close(result.single(2).W, result.W[2])


def test_with_mean_ablation_heads_whose_output_never_varies_are_irrelevant() -> None:
    """When every head writes the same vector at every position, replacing a head by its mean
    output changes nothing: under mean ablation the roles that zero ablation finds vanish, and
    the pulls alone decide every gate."""
    from dataclasses import replace

    model = planted_model(identical_tokens=True)
    zero = head_roles(model, TASK, FAST)
    assert list(zero.to_frame()["class"]) == ["facilitating", "interfering", "irrelevant"]
    roles = head_roles(model, TASK, replace(FAST, ablation="mean"))
    assert roles.settings["ablation"] == "mean"
    assert list(roles.to_frame()["class"]) == ["irrelevant"] * 3
