"""Unit tests of the removal sweep (lens_heads.heads_up._sweep) on tiny models: the batched engine
equals the naive loop, step 0 is the full model, similarity to itself is 1, orders, bad input,
io and the CLI."""

from __future__ import annotations

import pytest
import torch

import lens_heads as lh
from lens_heads.cli import main
from lens_heads.core._masks import MaskShapeError
from lens_heads.core._metrics import token_ranks
from lens_heads.core._prompts import encode_text
from lens_heads.core._tasks import Example, Task
from lens_heads.engine import TrainingConfig
from lens_heads.heads_up._sweep import SweepResult
from lens_heads.heads_up._sweep_inputs import removal_order, resolve_target

WEIGHTS = torch.tensor([[0.3, -1.0, 2.0, 0.1], [1.5, -0.2, 0.7, -3.0]])  # every head distinct
SWEEP = dict(target="a", max_new_tokens=4, reference_prompt="please repeat: apple", progress=False)


@pytest.fixture(scope="module")
def naive(tiny):
    return lh.removal_sweep(tiny, "apple", WEIGHTS, engine="naive", **SWEEP)


def assert_same_sweep(batched: SweepResult, naive: SweepResult) -> None:
    assert batched.order == naive.order
    assert batched.n_removed == naive.n_removed
    assert batched.token_ids == naive.token_ids
    assert torch.equal(batched.ranks, naive.ranks)
    torch.testing.assert_close(batched.logits, naive.logits, atol=1e-5, rtol=1e-5)
    assert batched.top1_ids == naive.top1_ids
    assert batched.output_ids == naive.output_ids
    assert batched.outputs == naive.outputs
    for name in ("resid_similarity", "attn_similarity"):
        torch.testing.assert_close(getattr(batched, name), getattr(naive, name), atol=1e-5, rtol=0)


@pytest.mark.parametrize("batch_size", [1, 2, 4, 9, None])
def test_batched_sweep_equals_the_naive_loop(tiny, naive, batch_size):
    batched = lh.removal_sweep(tiny, "apple", WEIGHTS, batch_size=batch_size, **SWEEP)
    assert batched.metadata["engine"] == "batched" and naive.metadata["engine"] == "naive"
    assert_same_sweep(batched, naive)


def test_outputs_change_along_the_sweep(naive):
    # the comparison above means something only if masking changes what the model does
    assert len(set(naive.top1_ids)) > 1 or len(set(map(tuple, naive.output_ids))) > 1
    assert naive.ranks.unique().numel() > 1


def test_step_zero_is_the_full_model(tiny, naive):
    tokens = torch.tensor([encode_text(tiny.tokenizer, "apple", chat=True)])
    with torch.no_grad():
        logits = tiny(tokens)[0, -1].float()
    ids = torch.tensor(naive.token_ids)
    assert naive.n_removed[0] == 0
    assert naive.ranks[0].tolist() == token_ranks(logits, ids).tolist()
    torch.testing.assert_close(naive.logits[0], logits[ids], atol=1e-5, rtol=1e-5)
    assert naive.top1_ids[0] == int(logits.argmax())
    # the tracked originals are the full model's top tokens, best first
    originals = [
        i for i, role in zip(naive.token_ids, naive.roles, strict=True) if role != "target"
    ]
    expected = [
        i for i in logits.argsort(descending=True, stable=True).tolist() if i != naive.target_id
    ]
    assert originals == expected[: len(originals)]
    # and its continuation is plain greedy generation from the full model
    assert naive.outputs[0] == lh.generate(tiny, "apple", chat=True, max_new_tokens=4)[0].text


def test_removing_every_head_matches_an_all_zero_mask(tiny, naive):
    tokens = torch.tensor([encode_text(tiny.tokenizer, "apple", chat=True)])
    with torch.no_grad(), lh.apply_mask(tiny, lh.HeadMask.zeros(tiny)):
        logits = tiny(tokens)[0, -1].float()
    assert naive.n_removed[-1] == 8
    torch.testing.assert_close(naive.logits[-1], logits[torch.tensor(naive.token_ids)])


def test_similarity_with_itself_is_one(tiny):
    result = lh.removal_sweep(
        tiny, "apple", WEIGHTS, target="a", reference_prompt="apple", max_new_tokens=0,
        progress=False,
    )  # fmt: skip
    torch.testing.assert_close(result.resid_similarity[0], torch.ones(2))
    torch.testing.assert_close(result.attn_similarity[0], torch.ones(2))
    # once heads are removed the attention output moves away from the reference
    assert bool((result.attn_similarity[1:] < 0.9999).any())
    frame = result.similarity_frame()
    assert set(frame["kind"]) == {"decoder output", "attention output"}
    assert len(frame) == 2 * 2 * result.n_steps


def test_every_k_evaluates_a_subset_of_the_same_steps(tiny, naive):
    sparse = lh.removal_sweep(tiny, "apple", WEIGHTS, every=3, **SWEEP)
    assert sparse.n_removed == [0, 3, 6, 8]
    rows = [naive.n_removed.index(n) for n in sparse.n_removed]
    assert torch.equal(sparse.ranks, naive.ranks[rows])
    assert sparse.outputs == [naive.outputs[i] for i in rows]


def test_orders_from_masks_weights_and_labels(tiny):
    assert removal_order(tiny, WEIGHTS)[:3] == [(1, 3), (0, 1), (1, 1)]  # ascending weight
    mask = lh.HeadMask.from_heads(["L0H0", "L1H1"], n_layers=2, n_heads=4)
    # a binary mask gives no order (its heads tie): refused, naming the trained weights (issue 72)
    with pytest.raises(lh.LensHeadsError, match="binary mask gives no removal order"):
        removal_order(tiny, mask)
    soft = lh.HeadMask(WEIGHTS.sigmoid())  # a soft mask orders as its weights do
    assert removal_order(tiny, soft) == removal_order(tiny, WEIGHTS)
    assert removal_order(tiny, ["L1H2", (0, 3)]) == [(1, 2), (0, 3)]
    result = lh.removal_sweep(tiny, "apple", ["L1H2", "L0H3"], target="a", max_new_tokens=0,
                              progress=False)  # fmt: skip
    assert result.removed_heads == ["", "L1H2", "L0H3"]


def test_influential_order_ranks_heads_by_their_single_removal_gain(tiny):
    result = lh.removal_sweep(
        tiny, "apple", "influential", target="a", max_new_tokens=0, progress=False
    )
    gains = result.metadata["influence_gain"]
    prompt = torch.tensor([encode_text(tiny.tokenizer, "apple", chat=True)])
    target = torch.tensor([result.target_id])
    with torch.no_grad():
        full = int(token_ranks(tiny(prompt)[0, -1], target)[0])
        for label, gain in gains.items():
            single = ~lh.HeadMask.from_heads([label], n_layers=2, n_heads=4)
            with lh.apply_mask(tiny, single):
                assert gain == full - int(token_ranks(tiny(prompt)[0, -1], target)[0])
    ordered = [gains[label] for label in result.order]
    assert ordered == sorted(ordered, reverse=True)
    assert sorted(result.order) == sorted(gains)
    # influential_k re-orders only the first k heads of another order
    partial = lh.removal_sweep(tiny, "apple", WEIGHTS, target="a", max_new_tokens=0,
                               influential_k=3, progress=False)  # fmt: skip
    base = [f"L{layer}H{head}" for layer, head in removal_order(tiny, WEIGHTS)]
    assert sorted(partial.order[:3]) == sorted(base[:3]) and partial.order[3:] == base[3:]


def test_switch_step_and_collapsed_outputs():
    result = SweepResult.example()
    assert result.target_ranks == [12, 3, 1, 1, 1, 90]
    assert result.switch_step(stay=3) == 2
    assert result.switch_step(stay=1) == 2
    assert result.switch_step(stay=4) is None
    table = result.outputs_table()
    assert table["n_removed"].tolist() == ["0", "1", "2", "3–4", "5"]
    assert table["output"].tolist() == ["banana", "…", "Apple", "…", "zzz"]
    assert "switch step: 2" in result.outputs_markdown()
    summary = result.summary()
    assert summary["target_rank_best"] == 1 and summary["best_at_n_removed"] == 2
    with pytest.raises(ValueError, match="stay"):
        result.switch_step(stay=0)


def test_bad_input_gives_clear_errors(tiny):
    run = dict(target="a", max_new_tokens=0, progress=False)
    with pytest.raises(ValueError, match="twice"):
        lh.removal_sweep(tiny, "apple", ["L0H1", "L1H0", "L0H1"], **run)
    with pytest.raises(ValueError, match="out of range"):
        lh.removal_sweep(tiny, "apple", ["L9H0"], **run)
    with pytest.raises(ValueError, match="out of range"):
        lh.removal_sweep(tiny, "apple", [(0, 4)], **run)
    with pytest.raises(ValueError, match="prompt is empty"):
        lh.removal_sweep(tiny, "  ", WEIGHTS, **run)
    for every in (0, -2):
        with pytest.raises(ValueError, match="every"):
            lh.removal_sweep(tiny, "apple", WEIGHTS, every=every, **run)
    with pytest.raises(ValueError, match="empty"):
        lh.removal_sweep(tiny, "apple", WEIGHTS, target=" ", max_new_tokens=0, progress=False)
    with pytest.raises(ValueError, match="out of range"):
        lh.removal_sweep(tiny, "apple", WEIGHTS, target=10**6, max_new_tokens=0, progress=False)
    with pytest.raises(MaskShapeError, match="layers"):
        lh.removal_sweep(tiny, "apple", torch.zeros(3, 4), **run)
    with pytest.raises(MaskShapeError):
        lh.removal_sweep(tiny, "apple", lh.HeadMask.ones(2, 5), **run)
    with pytest.raises(ValueError, match="influential"):
        lh.removal_sweep(tiny, "apple", "influential", max_new_tokens=0, progress=False)
    with pytest.raises(ValueError, match="unknown order"):
        lh.removal_sweep(tiny, "apple", "ascending", **run)
    with pytest.raises(ValueError, match="order is empty"):
        lh.removal_sweep(tiny, "apple", [], **run)
    with pytest.raises(ValueError, match="engine must be"):
        lh.removal_sweep(tiny, "apple", WEIGHTS, engine="fast", **run)


def test_a_multi_token_target_warns_and_tracks_its_first_token(tiny):
    prompt = "<|im_start|>user\napple<|im_end|>\n<|im_start|>assistant\n"
    with pytest.warns(UserWarning, match="tracking its first token"):
        first = resolve_target(tiny.tokenizer, prompt, "Apple", chat=True)
    assert tiny.tokenizer.decode([first]) == "A"
    assert resolve_target(tiny.tokenizer, prompt, 42, chat=True) == 42


def test_save_load_round_trip_and_figures(tiny, tmp_path, naive):
    written = naive.save(tmp_path) + naive.save_figures(tmp_path)
    names = {path.name for path in written}
    assert {"sweep.json", "sweep.safetensors", "sweep.csv", "outputs.md"} <= names
    assert {"similarity.csv", "ranks.html", "similarity.html"} <= names
    loaded = SweepResult.load(tmp_path)
    assert_same_sweep(loaded, naive)
    assert loaded.to_frame().equals(naive.to_frame())
    assert loaded.switch == naive.switch
    ranks = naive.plot_ranks()
    assert ranks.layout.yaxis.type == "log"
    assert ranks.data[0].name.endswith("(target)")
    assert len(naive.plot_similarity().data) == 2 * 2  # two layers, two hidden states
    (tmp_path / "sweep.json").write_text("{")
    with pytest.raises(ValueError, match="not a readable sweep"):
        SweepResult.load(tmp_path)


def test_default_batch_size_bounds_the_logits_memory(tiny, monkeypatch):
    from lens_heads.heads_up._sweep_inputs import default_batch_size

    assert default_batch_size(tiny, 40) == 64  # small: the cap
    n_tokens = 100_000  # long: as many steps as keep one chunk's logits under 256 MiB
    size = default_batch_size(tiny, n_tokens)
    d_vocab = tiny.cfg.d_vocab
    assert 1 <= size < 64
    assert size * n_tokens * d_vocab * 4 <= 1 << 28 < (size + 1) * n_tokens * d_vocab * 4
    # a vocabulary of 32,000: floor(2**28 bytes / (4 bytes x 32,000 x n_tokens)), 1 to 64
    monkeypatch.setattr(tiny.cfg, "d_vocab", 32_000)
    vocab = tiny
    assert default_batch_size(vocab, 10) == 64  # 1.28 MB per step: 209 fit, the cap is 64
    assert default_batch_size(vocab, 100) == 20  # 12.8 MB per step: 268.4 / 12.8 = 20.97
    assert default_batch_size(vocab, 1_000) == 2  # 128 MB per step
    assert default_batch_size(vocab, 2_000) == 1  # 256 MB per step
    assert default_batch_size(vocab, 10_000) == 1  # 1.28 GB: over budget alone, still one


@pytest.fixture()
def tiny_cli(monkeypatch, tiny):
    import lens_heads.core

    monkeypatch.setattr(lens_heads.core, "load_model", lambda spec, **kw: tiny)
    return tiny


def test_cli_sweep_with_a_training_folder_a_mask_file_and_labels(
    tiny_cli, tiny_dir, tmp_path, capsys
):
    upper = Task("upper", tuple(Example(w, w.upper()) for w in "abcdefghijklmnop"))
    config = TrainingConfig(steps=2, batch_size=4, n_eval=4, precision="float32", lr=0.5)
    training = lh.train_mask(tiny_cli, upper, config, progress=False)
    training.save(tmp_path / "run")
    base = ["sweep", "--model", str(tiny_dir), "--prompt", "apple", "--target", "a"]
    base += ["--max-new-tokens", "3"]
    out = tmp_path / "from-folder"
    argv = [*base, "--mask", str(tmp_path / "run"), "--out", str(out)]
    argv += ["--instruction", "Repeat the word."]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "switch step" in printed and "| heads removed |" in printed
    result = SweepResult.load(out)
    expected = [f"L{layer}H{head}" for layer, head in removal_order(tiny_cli, training.W)]
    assert result.order == expected
    assert result.reference_prompt == "Repeat the word.\n\nInput:\n\napple\n\nOutput:\n\n"
    for name in ["sweep.csv", "outputs.md", "ranks.html", "similarity.html"]:
        assert (out / name).is_file(), name
    # a binary mask file gives no order: refused in one line, naming the fix (issue 72)
    out = tmp_path / "from-mask"
    argv = [*base, "--mask", str(tmp_path / "run" / "mask.safetensors"), "--out", str(out)]
    assert main(argv) == 2
    refused = [line for line in capsys.readouterr().err.splitlines() if "binary mask" in line]
    assert len(refused) == 1 and "pass the train-mask output folder" in refused[0]
    out = tmp_path / "labels"
    assert main([*base, "--heads", "L1H0,L0H2", "--every", "2", "--out", str(out)]) == 0
    assert SweepResult.load(out).n_removed == [0, 2]
    assert main([*base, "--heads", "L1H0,L1H0", "--out", str(out)]) == 2
    assert "twice" in capsys.readouterr().err
    argv = [*base, "--heads", "L0H0", "--reference-prompt", "x", "--instruction", "y"]
    assert main([*argv, "--out", str(out)]) == 2


def test_the_instruction_builds_the_reference_run_as_on_the_command_line(tiny):
    """Issue 72: ``instruction=`` is the one shape of an instruction, in removal_sweep too."""
    built = lh.removal_sweep(tiny, "apple", ["L1H2"], target="a", max_new_tokens=0,
                             instruction="Repeat the word.", progress=False)  # fmt: skip
    assert built.reference_prompt == "Repeat the word.\n\nInput:\n\napple\n\nOutput:\n\n"
    with pytest.raises(lh.LensHeadsError, match="not both"):
        lh.removal_sweep(tiny, "apple", ["L1H2"], reference_prompt="x", instruction="y")
