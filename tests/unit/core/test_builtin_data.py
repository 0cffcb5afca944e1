"""The built-in data shipped in lens_heads/data: registry, word tasks and parallel corpus."""

from __future__ import annotations

import itertools
import json
from collections import Counter

import pytest

import lens_heads as lh
from lens_heads.core._tasks import LANGUAGE_NAMES, _data_path, _registry, parallel_corpus

WORD_TASKS = [
    "country-capital",
    "country-currency",
    "capitalize_first_letter",
    "lowercase_last_letter",
    "capitalize",
    "next_item",
    "prev_item",
    "present-past",
    "singular-plural",
    "antonym",
    "synonym",
    "english-french",
    "english-spanish",
    "english-german",
    "sentiment",
    "fruit_v_animal_3",
    "color_v_animal_3",
    "object_v_concept_3",
]
THREE_WORD_TASKS = ["fruit_v_animal_3", "color_v_animal_3", "object_v_concept_3"]


def test_registry_lists_every_task_and_language_pairs():
    names = lh.list_tasks()
    assert set(WORD_TASKS) <= set(names)
    assert set(lh.list_tasks("word")) == set(_registry())
    assert {"en-fr", "zh-de", "fr-en"} <= set(names)
    for name, info in _registry().items():
        assert set(info) == {"instruction", "match", "kind", "description"}, name
        assert info["match"] in ("startswith", "contains"), name
        assert info["kind"] == "word", name
        assert info["instruction"].endswith("."), name
        assert _data_path("tasks", f"{name}.json").is_file(), name


@pytest.mark.parametrize("name", WORD_TASKS)
def test_word_task_loads_and_is_clean(name):
    task = lh.get_task(name)
    assert task.instruction == _registry()[name]["instruction"]
    assert task.match == _registry()[name]["match"]
    assert len(task) >= 150
    for example in task:
        assert example.input.strip() == example.input != ""
        assert example.output.strip() == example.output != ""
    duplicates = [text for text, count in Counter(task.inputs).items() if count > 1]
    assert not duplicates
    train, evaluation = task.split()
    n_eval = 100 if len(task) >= 200 else len(task) // 2  # small tasks evaluate half
    assert len(evaluation) == n_eval and len(train) == len(task) - n_eval
    assert evaluation.inputs == task.inputs[-n_eval:]


@pytest.mark.parametrize("name", ["capitalize", "antonym", "sentiment", "next_item", "en-fr"])
def test_paper_split_has_100_eval_examples(name):
    train, evaluation = lh.get_task(name).split()
    assert len(evaluation) == 100 and len(train) >= 100


def test_files_are_plain_function_vector_lists():
    for name in WORD_TASKS:
        data = json.loads(_data_path("tasks", f"{name}.json").read_text(encoding="utf-8"))
        assert isinstance(data, list)
        assert all(set(item) == {"input", "output"} for item in data)


def test_letter_tasks_follow_their_rule():
    for example in lh.get_task("capitalize"):
        assert example.input.islower() and example.output == example.input.capitalize()
    for example in lh.get_task("capitalize_first_letter"):
        assert example.output == example.input[0].upper()
    for example in lh.get_task("lowercase_last_letter"):
        assert example.output == example.input[-1].lower()


def test_sequences_step_by_one():
    nxt = {e.input: e.output for e in lh.get_task("next_item")}
    prev = {e.input: e.output for e in lh.get_task("prev_item")}
    assert (nxt["7"], nxt["c"], nxt["Sunday"], nxt["December"], nxt["nine"]) == (
        "8",
        "d",
        "Monday",
        "January",
        "ten",
    )
    assert (prev["10"], prev["B"], prev["Monday"], prev["IV"], prev["third"]) == (
        "9",
        "A",
        "Sunday",
        "III",
        "second",
    )
    # next and prev are inverse wherever both are defined (I, V and X are letters as inputs)
    for source, target in nxt.items():
        if target in prev and target not in ("I", "V", "X"):
            assert prev[target] == source


@pytest.mark.parametrize("name", THREE_WORD_TASKS)
def test_three_word_tasks_pick_one_of_the_three(name):
    task = lh.get_task(name)
    positions = Counter()
    for example in task:
        parts = example.input.split(", ")
        assert len(parts) == 3 and len(set(parts)) == 3
        assert parts.count(example.output) == 1
        positions[parts.index(example.output)] += 1
    assert min(positions.values()) >= len(task) // 5  # the position varies
    others = {w for e in task for w in e.input.split(", ") if w != e.output}
    assert not others & set(task.outputs)  # distractors are never targets


def test_sentiment_is_balanced_short_sentences():
    task = lh.get_task("sentiment")
    counts = Counter(task.outputs)
    assert set(counts) == {"positive", "negative"}
    assert 0.4 <= counts["positive"] / len(task) <= 0.6
    for example in task:
        assert 5 <= len(example.input.split()) <= 12, example.input


def test_facts_spot_checks():
    capital = {e.input: e.output for e in lh.get_task("country-capital")}
    assert (capital["France"], capital["Japan"], capital["Australia"]) == (
        "Paris",
        "Tokyo",
        "Canberra",
    )
    french = {e.input: e.output for e in lh.get_task("english-french")}
    assert (french["dog"], french["sister"]) == ("chien", "sœur")
    german = {e.input: e.output for e in lh.get_task("english-german")}
    assert german["house"] == "Haus"
    past = {e.input: e.output for e in lh.get_task("present-past")}
    assert (past["go"], past["stop"]) == ("went", "stopped")


# -- parallel corpus ------------------------------------------------------------------------------
def records():
    text = _data_path("parallel.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_corpus_size_and_languages():
    corpus = parallel_corpus()
    assert len(corpus) >= 150
    assert set(corpus.languages) == set(LANGUAGE_NAMES)
    assert set(corpus.alignments) == {"fr", "es", "de", "zh"}
    english = corpus.sentences["en"]
    assert len(set(english)) == len(english)
    task = lh.get_task("zh-de")
    assert (task.kind, len(task)) == ("translation", len(corpus))


def test_tokens_appear_in_order_in_each_sentence():
    for record in records():
        for lang in LANGUAGE_NAMES:
            sentence, tokens = record[lang], record["tokens"][lang]
            assert tokens and all(tokens)
            position = 0
            for token in tokens:
                found = sentence.find(token, position)
                assert found >= 0, (lang, sentence, token)
                position = found + len(token)
            if lang == "zh":
                assert "".join(tokens) == sentence
            else:
                assert sentence.replace(" ", "") == "".join(tokens)


def test_alignments_are_in_range_and_cover_content_and_punctuation():
    for record in records():
        english = record["tokens"]["en"]
        for lang, pairs in record["align"].items():
            target = record["tokens"][lang]
            assert pairs == sorted(pairs) and len({tuple(p) for p in pairs}) == len(pairs)
            for source, index in pairs:
                assert 0 <= source < len(english) and 0 <= index < len(target)
            aligned_en = {s for s, _ in pairs}
            aligned_target = {t for _, t in pairs}
            # every target token is aligned; English articles may be dropped (Chinese)
            assert aligned_target == set(range(len(target))), (lang, record["en"])
            # Chinese drops the copula before a negated adjective (书不贵)
            skip = {"The", "the", "a", "an"}
            if lang == "zh" and "not" in english:
                skip.add("is")
            content = {i for i, w in enumerate(english) if w not in skip}
            assert content <= aligned_en, (lang, record["en"])
            # the final punctuation marks align to each other
            assert [len(english) - 1, len(target) - 1] in pairs


def test_english_indefinite_article_agrees():
    for record in records():
        english = record["tokens"]["en"]
        for word, following in itertools.pairwise(english):
            if word in ("a", "an"):
                assert (word == "an") == (following[0] in "aeiou"), record["en"]


def test_alignment_composition_between_non_pivot_languages():
    corpus = parallel_corpus()
    for index in range(len(corpus)):
        pairs = corpus.alignment("fr", "de", index)
        assert pairs, corpus.sentences["en"][index]
        fr, de = corpus.tokens["fr"][index], corpus.tokens["de"][index]
        assert all(0 <= a < len(fr) and 0 <= b < len(de) for a, b in pairs)
