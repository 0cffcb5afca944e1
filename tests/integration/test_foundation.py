"""Foundation on the two real offline models: loading, masks, batched generation, CLI."""

from __future__ import annotations

import pytest
import torch

import lens_heads as lh
from lens_heads.cli import main
from lens_heads.core._generation import greedy_generate
from lens_heads.core._masks import HeadMask
from lens_heads.core._prompts import encode_text

pytestmark = pytest.mark.integration


def test_shapes(smollm2, gemma):
    assert lh.head_shape(smollm2) == (30, 9)
    assert lh.head_shape(gemma) == (18, 4)


def test_smollm2_chat_prompt_generates_sensible_text(smollm2):
    [output] = lh.generate(smollm2, "What is the capital of France?", chat=True, max_new_tokens=12)
    assert "Paris" in output.text


@pytest.mark.parametrize("fixture", ["smollm2", "gemma"])
def test_masking_a_whole_layer_changes_logits(request, fixture):
    model = request.getfixturevalue(fixture)
    tokens = torch.tensor([encode_text(model.tokenizer, "The capital of France is")])
    values = torch.ones(lh.head_shape(model))
    values[2] = 0.0
    with lh.apply_mask(model, HeadMask(values)):
        masked = model(tokens)
    with lh.apply_mask(model, HeadMask.ones(model)):
        ones = model(tokens)
    original = model(tokens)
    assert torch.equal(ones, original)
    # the all-ones mask reproduces the logits bit for bit, so any difference is the mask's;
    # 0.1 nats is 10^5 times the float32 rounding of these logits
    assert (masked[0, -1] - original[0, -1]).abs().max() > 0.1


@pytest.mark.parametrize(
    ("fixture", "chat", "prompts"),
    [
        (
            "smollm2",
            True,
            ["Name a fruit.", "What is 2+2?", "Say hi", "Write the word apple in capitals."],
        ),
        (
            "gemma",
            False,
            ["The capital of France is", "1, 2, 3,", "English: dog\nFrench:", "Hello"],
        ),
    ],
)
def test_batched_generation_equals_one_by_one(request, fixture, chat, prompts):
    model = request.getfixturevalue(fixture)
    encoded = [encode_text(model.tokenizer, p, chat=chat) for p in prompts]
    batched = greedy_generate(model, encoded, max_new_tokens=8, batch_size=4)
    alone = [greedy_generate(model, [e], max_new_tokens=8, batch_size=1)[0] for e in encoded]
    assert batched == alone
    assert all(len(tokens) > 0 for tokens in batched)


def test_cli_models_and_generate(capsys, tmp_path, smollm2):
    assert main(["models"]) == 0
    listing = capsys.readouterr().out
    assert "smollm2-135m-instruct" in listing and "gemma-3-270m" in listing and "cached" in listing
    mask_path = HeadMask.ones(smollm2).save(tmp_path / "ones.safetensors")
    code = main(
        [
            "generate",
            "--model",
            "smollm2-135m-instruct",
            "--chat",
            "--max-new-tokens",
            "8",
            "--prompt",
            "What is the capital of France?",
            "--mask",
            str(mask_path),
        ]
    )
    assert code == 0
    assert "Paris" in capsys.readouterr().out


def test_cli_rejects_mask_of_another_model(capsys, tmp_path):
    mask_path = HeadMask.ones(18, 4).save(tmp_path / "gemma.safetensors")
    code = main(
        ["generate", "--model", "smollm2-135m-instruct", "--prompt", "hi", "--mask", str(mask_path)]
    )
    assert code == 2
    assert "has 30 layers x 9 heads" in capsys.readouterr().err


# -- issue 26: lens-heads doctor and the BOS convention on the offline models -------------------
@pytest.mark.parametrize(
    ("fixture", "alias"), [("smollm2", "smollm2-135m-instruct"), ("gemma", "gemma-3-270m")]
)
def test_doctor_checks_pass_on_the_offline_models(request, fixture, alias):
    """Checks 1-4 of docs/compatibility.md against plain transformers on the cached checkpoint."""
    from lens_heads.core._compatibility import PASS, Reference, reference_source, run_checks

    model = request.getfixturevalue(fixture)
    results = run_checks(model, Reference.from_pretrained(reference_source(alias)))
    assert [r.status for r in results] == [PASS] * 4, [r.detail for r in results]


@pytest.mark.parametrize("fixture", ["smollm2", "gemma"])
def test_the_checkpoints_tokenizer_changes_only_smollm2_plain_text(request, fixture):
    """TransformerLens's copy of the tokenizer (add_bos_token=True) and the checkpoint's own
    give the same chat ids (the templates start with the BOS) and the same Gemma ids (its
    tokenizer adds <bos>); only SmolLM2's plain text loses TransformerLens's <|im_start|>."""
    import copy

    from transformer_lens.utilities.tokenize_utils import get_tokenizer_with_bos

    model = request.getfixturevalue(fixture)
    ours = model.tokenizer
    theirs = get_tokenizer_with_bos(copy.deepcopy(ours))
    for text in ["apple", "The capital of France is"]:
        if fixture == "smollm2":
            assert encode_text(ours, text, chat=True) == encode_text(theirs, text, chat=True)
            plain = encode_text(ours, text)
            # the checkpoint's tokenizer adds no BOS to plain text; TransformerLens's copy adds
            # at most that one token (whether it does depends on the tokenizer's version)
            assert plain[0] != ours.bos_token_id
            assert encode_text(theirs, text) in (plain, [ours.bos_token_id, *plain])
        else:
            assert encode_text(ours, text) == encode_text(theirs, text)
            assert encode_text(ours, text)[0] == ours.bos_token_id
