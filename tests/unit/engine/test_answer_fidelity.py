"""Answer fidelity (issue 12): end-of-turn in training targets, exact match and echo rate, the
paper's match rules by task name, and Figure 4 over many prompts -- on tiny models."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

import lens_heads as lh
import lens_heads.core
from lens_heads.cli import main
from lens_heads.core._metrics import echo_rate, exact_match, first_segment, is_echo, is_exact_match
from lens_heads.core._prompts import answer_end_tokens, encode_example
from lens_heads.core._tasks import Example, Task, get_task, match_rule_for
from lens_heads.engine import MaskTrainer, TrainingConfig
from lens_heads.heads_up._similarity import SimilarityStats, figure4_similarity, figure4_stats

WORDS = ["apple", "pear", "plum", "fig", "kiwi", "lime", "date", "grape", "melon", "peach"]


@pytest.fixture
def upper() -> Task:
    return Task("upper", tuple(Example(w, w.upper()) for w in WORDS * 2), instruction="Upper.")


def _config(**overrides) -> TrainingConfig:
    values = dict(steps=2, batch_size=2, lr=0.1, n_eval=4, precision="float32", seed=0)
    return TrainingConfig(**{**values, **overrides})


# -- 1. the training target ends the turn ---------------------------------------------------------
def test_chat_training_target_ends_with_the_templates_end_of_turn(tiny, upper):
    trainer = MaskTrainer(tiny, upper, _config())
    end = tiny.tokenizer.convert_tokens_to_ids("<|im_end|>")
    for encoded, example in zip(trainer.encoded, trainer.train_set.examples, strict=True):
        assert encoded.answer_tokens[-1] == end
        assert tiny.tokenizer.decode(encoded.answer_tokens[:-1]) == example.output
    # the end-of-turn token is scored: it lies inside the answer mask of a batch
    tokens, answer_mask = trainer.batch(0)
    assert bool((tokens[answer_mask] == end).any())


def test_answer_end_none_trains_on_the_answer_alone(tiny, upper):
    trainer = MaskTrainer(tiny, upper, _config(answer_end="none"))
    first = trainer.encoded[0]
    assert tiny.tokenizer.decode(first.answer_tokens) == trainer.train_set.outputs[0]


def test_base_model_prompts_end_with_eos_or_the_separator(tiny, upper):
    eos = tiny.tokenizer.eos_token_id
    trainer = MaskTrainer(tiny, upper, _config(chat=False))
    assert trainer.encoded[0].answer_tokens[-1] == eos
    separator = tiny.tokenizer("\n\n", add_special_tokens=False).input_ids
    trainer = MaskTrainer(tiny, upper, _config(chat=False, answer_end="separator"))
    assert trainer.encoded[0].answer_tokens[-len(separator) :] == separator


def test_answer_end_tokens_rules(tiny):
    tokenizer = tiny.tokenizer
    turn = answer_end_tokens(tokenizer, chat=True)
    assert tokenizer.convert_ids_to_tokens(turn) == ["<|im_end|>"]
    assert answer_end_tokens(tokenizer, chat=True, answer_end="eos") == [tokenizer.eos_token_id]
    assert answer_end_tokens(tokenizer, chat=False, answer_end="none") == []
    with pytest.raises(ValueError, match="answer_end must be one of"):
        answer_end_tokens(tokenizer, chat=True, answer_end="stop")
    with pytest.raises(ValueError, match="answer_end must be one of"):
        TrainingConfig(answer_end="end")
    # encode_example keeps the end tokens inside the answer span
    encoded = encode_example(tokenizer, "x ", "Apple", chat=False, end_tokens=turn)
    assert encoded.answer_tokens[-1] == turn[0]


# -- 2. metrics that tell answering from copying --------------------------------------------------
@pytest.mark.parametrize(
    ("prediction", "answer", "expected"),
    [
        ("Apple", "Apple", True),
        (" Apple.", "Apple", True),  # surrounding punctuation and whitespace
        ("Apple<|im_end|>", "Apple", True),  # a trailing end-of-turn
        ("«Apple»\nBanana", "Apple", True),  # the first line only
        ("Apple. Apple. Apple.", "Apple", False),  # runs on
        ("apple", "Apple", False),  # case-sensitive
        ("Apple pie", "Apple", False),
        ("\n\nApple", "Apple", True),  # leading blank lines are skipped
        ("?", "?", True),  # an answer made of punctuation
    ],
)
def test_exact_match_cases(prediction, answer, expected):
    assert is_exact_match(prediction, answer) is expected


@pytest.mark.parametrize(
    ("prediction", "source", "answer", "expected"),
    [
        ("apple", "apple", "Apple", True),
        ("apple.", "apple", "Apple", True),
        ("apple apple apple", "apple", "Apple", True),
        ("Apple", "apple", "Apple", False),
        ("cat, dog, bird", "cat, dog, bird", "cat", True),  # the list echoed: 'startswith' says ok
        ("cat", "cat, dog, bird", "cat", False),
        ("cats", "cat", "cats", False),  # the answer starts with the input: never an echo
        ("carrot", "carrot", "carrot", False),  # input == answer
        ("apples", "apple", "Apple", False),  # not the whole word
    ],
)
def test_echo_cases(prediction, source, answer, expected):
    assert is_echo(prediction, source, answer) is expected


def test_corpus_level_rates_and_errors():
    assert exact_match(["Apple<|im_end|>", "Apple. Apple."], ["Apple", "Apple"]) == 0.5
    assert echo_rate(["kiwi", "Kiwi"], ["kiwi", "kiwi"], ["Kiwi", "Kiwi"]) == 0.5
    assert first_segment("  a\nb") == "a"
    with pytest.raises(ValueError, match="answer is empty"):
        is_exact_match("x", "  ")
    with pytest.raises(ValueError, match="2 predictions but 1 answers"):
        exact_match(["a", "b"], ["a"])


def test_paper_rule_counts_an_echo_as_correct_and_exact_match_does_not():
    """The motivating case: on a 'first word of the list' task the echoed list 'starts with' the
    answer, and 'contains' accepts a one-letter answer anywhere."""
    from lens_heads.core._metrics import is_correct

    assert is_correct("cat, dog, bird", "cat", "startswith")
    assert not is_exact_match("cat, dog, bird", "cat")
    assert is_correct("The letter is e", "e", "contains")
    assert not is_exact_match("The letter is e", "e")


def test_evaluation_reports_exact_match_and_echo_rate(tiny, upper):
    result = lh.evaluate(tiny, upper, ["original"], n_eval=6, progress=False)
    runs = result.runs.iloc[0]
    records = result.records
    assert runs["exact_match"] == pytest.approx(records["exact"].mean())
    assert runs["echo_rate"] == pytest.approx(records["echo"].mean())
    expected = [
        is_echo(g, i, a)
        for g, i, a in zip(records["generated"], records["input"], records["answer"], strict=True)
    ]
    assert records["echo"].tolist() == expected
    assert "exact match" in result.to_frame().columns and "echo rate" in result.to_frame().columns


def test_old_results_without_the_new_columns_still_load():
    old = lh.EvaluationResult.example()
    assert "exact_match" not in old.metrics
    assert "accuracy" in old.to_frame().columns


# -- the paper's rules by name, --match and --instruction ----------------------------------------
@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("capitalize_second_letter", "startswith"),
        ("lowercase_first_letter", "startswith"),
        ("next_capital_letter", "startswith"),
        ("prev_item", "startswith"),
        ("animal_v_object_5", "startswith"),
        ("choose_first_of_list", "startswith"),
        ("conll2003_person", "startswith"),
        ("first_word_of_list", "contains"),
        ("animal_v_object", "contains"),  # no _N suffix
        ("my_capitalize", "contains"),
    ],
)
def test_match_rule_by_name_pattern(name, rule):
    assert match_rule_for(name) == rule


def test_task_files_take_the_rule_they_state_and_match_overrides(tmp_path):
    """A file's rule is its own (or ``contains``), never its name's; ``match_rule_for`` gives
    the paper's rule by name for whoever asks."""
    path = tmp_path / "capitalize_last_letter.json"
    path.write_text(json.dumps([{"input": w, "output": w[:-1] + w[-1].upper()} for w in WORDS]))
    assert get_task(path).match == "contains"
    assert get_task(path, match=match_rule_for(path.stem)).match == "startswith"
    stated = tmp_path / "stated.json"
    examples = [{"input": w, "output": w.upper()} for w in WORDS]
    stated.write_text(json.dumps({"match": "startswith", "examples": examples}))
    assert get_task(stated).match == "startswith"
    assert get_task(stated, match="contains").match == "contains"
    assert get_task("capitalize", match="contains").match == "contains"
    with pytest.raises(ValueError, match="match must be"):
        get_task(stated, match="exact")


def test_cli_train_mask_keeps_the_instruction_row_and_takes_match(
    tmp_path, tiny_dir, capsys, monkeypatch
):
    monkeypatch.setattr(
        lens_heads.core,
        "load_model",
        lambda spec, **kw: lh.tiny_model(n_layers=2, n_heads=4, n_kv_heads=2, seed=0),
    )
    data = tmp_path / "shout_words.json"  # no built-in task of that name: no instruction
    words = WORDS + [w + "s" for w in WORDS]  # twenty different examples
    data.write_text(json.dumps([{"input": w, "output": w.upper()} for w in words]))
    out = tmp_path / "out"
    argv = ["train-mask", "--model", str(tiny_dir), "--task", str(data), "--steps", "2"]
    argv += ["--out", str(out)]
    argv += ["--batch-size", "2", "--holdout", "4", "--n-eval", "4", "--precision", "fp32"]
    argv += ["--instruction", "Write the word in capitals.", "--match", "startswith"]
    assert main(argv) == 0
    table = pd.read_csv(out / "eval" / "table.csv", index_col=0)
    assert "w/ instruction" in table.index
    assert {"exact match", "echo rate"} <= set(table.columns)
    evaluation = lh.EvaluationResult.load(out / "eval")
    assert evaluation.config["match"] == "startswith"
    assert evaluation.config["instruction"] == "Write the word in capitals."
    training = json.loads((out / "training.json").read_text())
    assert training["config"]["answer_end"] == "auto"


# -- 3. Figure 4 over many prompts -----------------------------------------------------------------
MASK = lh.HeadMask.from_heads(["L0H1", "L1H2"], n_layers=2, n_heads=4)


def test_many_prompt_similarity_is_the_mean_of_single_prompt_calls(tiny):
    prompts = ["apple", "a ripe pear", "plum"]
    stats = figure4_similarity(tiny, prompts, "Repeat the word.", MASK, progress=False)
    assert isinstance(stats, SimilarityStats)
    singles = torch.stack(
        [figure4_similarity(tiny, p, "Repeat the word.", MASK).cosine for p in prompts]
    )
    assert stats.cosine.shape == singles.shape == (3, 3, 2, 2)
    torch.testing.assert_close(stats.cosine, singles, atol=1e-5, rtol=0)
    torch.testing.assert_close(stats.mean(), singles.mean(dim=0), atol=1e-5, rtol=0)


def test_interval_and_paired_test_against_scipy(tiny):
    from scipy import stats as scipy_stats

    result = figure4_stats(tiny, WORDS[:6], "Repeat the word.", MASK, progress=False)
    values = result.cosine[:, 0, 0, 1].double().numpy()
    low, high = scipy_stats.t.interval(
        0.95, len(values) - 1, loc=values.mean(), scale=scipy_stats.sem(values)
    )
    ci_low, ci_high = result.ci95()
    assert float(ci_low[0, 0, 1]) == pytest.approx(low, abs=1e-5)
    assert float(ci_high[0, 0, 1]) == pytest.approx(high, abs=1e-5)
    later = result.cosine[:, :, 0, result.later_layers].double().mean(dim=-1)
    differences = (later[:, 1] - later[:, 0]).numpy()
    summary = result.difference()
    expected = scipy_stats.ttest_rel(later[:, 1].numpy(), later[:, 0].numpy())
    assert summary["mean"] == pytest.approx(differences.mean(), abs=1e-6)
    assert summary["p_value"] == pytest.approx(expected.pvalue, rel=1e-4)
    assert summary["n_positive"] + summary["n_negative"] <= 6
    assert summary["masked vs instructed"] == pytest.approx(later[:, 1].mean().item(), abs=1e-6)
    assert summary["original vs instructed"] == pytest.approx(later[:, 0].mean().item(), abs=1e-6)
    assert summary["masked vs instructed"] - summary["original vs instructed"] == pytest.approx(
        summary["mean"], abs=1e-6
    )
    assert result.later_layers == [1]
    assert "paired t-test" in result.verdict()


def test_task_prompts_save_and_load(tiny, tmp_path, upper):
    result = figure4_stats(tiny, upper, None, MASK, n_prompts=4, progress=False)
    assert result.prompts == upper.inputs[-4:] and result.instruction == "Upper."
    written = result.save(tmp_path / "fig4")
    assert {p.name for p in written} >= {"per_prompt.csv", "table.csv", "figure.html"}
    loaded = SimilarityStats.load(tmp_path / "fig4")
    torch.testing.assert_close(loaded.cosine, result.cosine)
    assert loaded.difference() == result.difference()
    per_prompt = pd.read_csv(tmp_path / "fig4" / "per_prompt.csv")
    assert len(per_prompt) == 4 and "difference" in per_prompt.columns
    figure = result.plot()
    assert sum(trace.fill == "toself" for trace in figure.data) == 6  # one band per line


def test_many_prompt_bad_input(tiny):
    with pytest.raises(ValueError, match="no prompts"):
        figure4_stats(tiny, [], "Repeat.", MASK)
    with pytest.raises(ValueError, match=r"prompt is empty or blank \(item 1\)"):
        figure4_stats(tiny, ["a", ""], "Repeat.", MASK)
    with pytest.raises(ValueError, match="later_layers"):
        figure4_stats(tiny, ["a", "b"], "Repeat.", MASK, later_layers=[5])
    with pytest.raises(ValueError, match="give an instruction"):
        figure4_stats(tiny, ["a", "b"], None, MASK)
    with pytest.raises(TypeError, match="many prompts"):
        figure4_similarity(tiny, "apple", "Repeat.", MASK, n_prompts=3)


def test_one_prompt_is_refused_for_the_paired_test(tiny):
    # issue 27: one prompt in a list gave a NaN interval and p-value without a word
    with pytest.raises(ValueError, match="needs at least 2"):
        figure4_stats(tiny, ["apple"], "Repeat.", MASK, progress=False)
    with pytest.raises(ValueError, match="pass one prompt as a string"):
        figure4_similarity(tiny, ["apple"], "Repeat.", MASK)


def test_records_say_how_each_output_ended(tiny, upper):
    from lens_heads.core._decoding import decode_greedy
    from lens_heads.core._generation import stop_token_ids
    from lens_heads.core._prompts import encode_text

    result = lh.evaluate(tiny, upper, ["original"], n_eval=6, progress=False, first_line=False)
    ended = result.records["ended_by"].tolist()
    prompts = [encode_text(tiny.tokenizer, w, chat=True) for w in upper.inputs[-6:]]
    decoded = decode_greedy(
        tiny, prompts, max_new_tokens=10, stops=stop_token_ids(tiny.tokenizer), answers=None
    )
    assert decoded.stopped_by is not None
    for label, tokens, stop in zip(ended, decoded.new_tokens, decoded.stopped_by, strict=True):
        if stop is None:
            assert label == "length" and len(tokens) == 10
        else:
            assert label == tiny.tokenizer.decode([stop]) and len(tokens) < 10


def test_decoder_reports_the_stop_token(tiny):
    from lens_heads.core._decoding import decode_greedy

    prompts = [[5, 6, 7], [8, 9]]
    free = decode_greedy(tiny, prompts, max_new_tokens=4, stops=[], answers=None)
    assert free.stopped_by == [None, None]
    third = free.new_tokens[0][2]  # stop row 0 at its third token
    stopped = decode_greedy(tiny, prompts, max_new_tokens=4, stops=[third], answers=None)
    assert stopped.stopped_by is not None
    assert stopped.stopped_by[0] == third and stopped.new_tokens[0] == free.new_tokens[0][:2]
