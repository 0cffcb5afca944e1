"""Head ablation (Figure 8) and TRater (eq. 4) on a tiny random model."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

import lens_heads as lh
from lens_heads.alignment import TRaterConfig
from lens_heads.alignment._ablation import AblationResult, failure_category, resolve_heads
from lens_heads.alignment._trater import TextFileError, TRaterResult, load_texts
from lens_heads.core._language_id import identify_language


def test_ablation_runs_the_three_settings(tiny, tmp_path):
    result = lh.ablate_heads(
        tiny,
        "en-fr",
        ["L0H1", "L1H2"],
        random_seeds=(0, 1, 2),
        exclude=["L0H0"],
        n_eval=3,
        max_new_tokens=4,
        progress=False,
    )
    frame = result.to_frame()
    assert list(frame.index) == ["unmasked", "ablated", "random"]
    assert frame.loc["random", "runs"] == 3 and frame.loc["ablated", "runs"] == 1
    assert len(result.controls) == 3 and len({tuple(c) for c in result.controls}) > 1
    for control in result.controls:
        assert len(control) == 2 and not {"L0H1", "L1H2", "L0H0"} & set(control)
    ablated = result.records[result.records["setting"] == "ablated"]["prediction"].tolist()
    unmasked = result.records[result.records["setting"] == "unmasked"]["prediction"].tolist()
    assert ablated != unmasked  # removing heads changes the tiny model's outputs
    result.save(tmp_path / "a")
    loaded = AblationResult.load(tmp_path / "a")
    pd.testing.assert_frame_equal(loaded.to_frame(), frame)
    assert loaded.heads == ["L0H1", "L1H2"] and "Failure categories" in loaded.to_markdown()


def test_ablation_matches_evaluate_with_the_complement_mask(tiny):
    result = lh.ablate_heads(
        tiny, "en-fr", ["L1H0"], random_seeds=(), n_eval=2, max_new_tokens=4, progress=False
    )
    mask = lh.HeadMask.from_heads(["L1H0"], n_layers=2, n_heads=4).complement()
    direct = lh.evaluate(
        tiny, "en-fr", ["mask"], mask=mask, n_eval=2, shots=2, max_new_tokens=4, progress=False
    )
    ablated = result.records[result.records["setting"] == "ablated"]
    assert ablated["prediction"].tolist() == direct.predictions("mask")["prediction"].tolist()


def test_language_identification_and_failure_categories():
    assert identify_language("Der Hund ist in der Küche.") == "de"
    assert identify_language("The dog is in the kitchen.") == "en"
    languages = ["en", "fr", "de"]
    assert failure_category("The dog is here.", "Le chien est ici.", "fr", languages) == (
        "no translation"
    )
    # the paper's appendix A.4: saying less of the source, or saying something else
    assert failure_category("Le chien.", "Le chien est dans la cuisine.", "fr", languages) == (
        "missing details"
    )
    reference = "Le chien est dans la cuisine."
    hallucinated = "Les filles courent vite au marché."
    assert failure_category(hallucinated, "Le chien.", "fr", languages, "", reference) == (
        "hallucination"
    )
    # 3 of 5 words in the reference: missing details; 2 of 5: hallucination
    partly = "Le chien mange une pomme."
    assert failure_category(partly, "", "fr", languages, "", "Le chien est là.") == "hallucination"
    assert failure_category(partly, "", "fr", languages, "", "Le chien mange là.") == (
        "missing details"
    )


@pytest.mark.parametrize(
    ("heads", "message"),
    [(["L9H0"], "out of range"), (["head3"], "not of the form"), (["L0H1", "L0H1"], "repeat")],
)
def test_bad_heads(tiny, heads, message):
    with pytest.raises(ValueError, match=message):
        resolve_heads(heads, tiny)
    with pytest.raises(ValueError, match=message):
        lh.trater_scores(tiny, ["the cat"], heads)


def test_heads_from_a_file_and_a_mask(tiny, tmp_path):
    (tmp_path / "heads.txt").write_text("L0H1, L1H3\n")
    assert resolve_heads(tmp_path / "heads.txt", tiny) == ["L0H1", "L1H3"]
    mask = lh.HeadMask.from_heads(["L1H3", "L0H1"], n_layers=2, n_heads=4)
    assert resolve_heads(mask, tiny) == ["L0H1", "L1H3"]
    with pytest.raises(ValueError, match="no heads to ablate"):
        lh.ablate_heads(tiny, "en-fr", [], n_eval=2)


# -- TRater --------------------------------------------------------------------------------------
TEXTS = [
    "The dog is in the kitchen.",
    "The dog is in the kitchen. Le chien est dans la cuisine.",
    "Der Hund.",
    "A very long sentence about the weather, which is grey and cold today in the north.",
]


def test_trater_is_exactly_zero_for_no_heads(tiny):
    result = lh.trater_scores(tiny, TEXTS, [])
    assert torch.equal(result.scores, torch.zeros(len(TEXTS)))


def test_trater_batched_equals_one_at_a_time(tiny):
    batched = lh.trater_scores(tiny, TEXTS, ["L0H1", "L1H2"], batch_size=16)
    single = lh.trater_scores(tiny, TEXTS, ["L0H1", "L1H2"], TRaterConfig(batch_size=1))
    with pytest.raises(lh.LensHeadsError, match="'batch' \\(did you mean 'batch_size'"):
        lh.trater_scores(tiny, TEXTS, ["L0H1"], batch=2)
    assert torch.allclose(batched.scores, single.scores, atol=1e-5)
    assert (batched.scores != 0).all()


def test_trater_equals_the_definition(tiny):
    text = TEXTS[1]
    tokens = torch.tensor([tiny.tokenizer(text).input_ids])

    def token_ce(logits):
        return torch.nn.functional.cross_entropy(logits[0, :-1], tokens[0, 1:], reduction="none")

    with torch.inference_mode():
        clean = token_ce(tiny(tokens))
        mask = lh.HeadMask.from_heads(["L1H1"], n_layers=2, n_heads=4).complement()
        with lh.apply_mask(tiny, mask):
            masked = token_ce(tiny(tokens))
    expected = float((masked - clean).mean())
    assert float(lh.trater_scores(tiny, [text], ["L1H1"]).scores[0]) == pytest.approx(
        expected, abs=1e-6
    )


def test_trater_io_and_selection(tiny, tmp_path):
    rows = [
        {"text": t, "lang": lang} for t, lang in zip(TEXTS, ["en", "en", "de", "en"], strict=True)
    ]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    pd.DataFrame(rows).to_csv(tmp_path / "t.csv", index=False)
    from_jsonl = lh.trater_scores(tiny, tmp_path / "t.jsonl", ["L0H1"])
    from_csv = lh.trater_scores(tiny, tmp_path / "t.csv", ["L0H1"])
    assert torch.equal(from_jsonl.scores, from_csv.scores)
    assert from_csv.languages == ["en", "en", "de", "en"]
    frame = from_csv.to_frame()
    assert frame["score"].is_monotonic_decreasing
    selected = from_csv.select(0.34)
    assert sorted(selected["lang"]) == ["de", "en"]
    assert len(from_csv.select(0.5, per_language=False)) == 2
    from_csv.save(tmp_path / "r")
    loaded = TRaterResult.load(tmp_path / "r")
    assert torch.equal(loaded.scores, from_csv.scores) and loaded.texts == TEXTS
    assert len((tmp_path / "r" / "scores.jsonl").read_text().splitlines()) == len(TEXTS)


@pytest.mark.parametrize(
    ("content", "suffix", "message"),
    [("not json\n", ".jsonl", "not valid JSON"), ("a,b\n1,2\n", ".csv", "no 'text' column")],
)
def test_bad_text_files(tmp_path, content, suffix, message):
    path = tmp_path / f"texts{suffix}"
    path.write_text(content)
    with pytest.raises(TextFileError, match=message):
        load_texts(path)


def test_trater_bad_input(tiny):
    with pytest.raises(ValueError, match="text 1 is empty"):
        lh.trater_scores(tiny, ["the cat", "  "], [])
    with pytest.raises(ValueError, match="more than the model's context"):
        lh.trater_scores(tiny, ["cat " * 200], [])
    with pytest.raises(ValueError, match="2 languages for 1 texts"):
        lh.trater_scores(tiny, ["the cat"], [], languages=["en", "fr"])
