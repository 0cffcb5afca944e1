"""Tasks: splits, loaders (function-vector JSON, JSONL, TSV, FLORES, Pharaoh) and bad files."""

from __future__ import annotations

import json

import pytest

import lens_heads.core._tasks as tasks_module
from lens_heads.core._checks import InputWarning
from lens_heads.core._tasks import (
    Example,
    ParallelCorpus,
    Task,
    TaskDataError,
    get_task,
    load_alignments,
    load_examples,
    load_flores_dir,
    load_parallel_tsv,
)


def make_task(n: int, **kwargs) -> Task:
    return Task("t", tuple(Example(f"in{i}", f"out{i}") for i in range(n)), **kwargs)


@pytest.fixture
def fake_registry(monkeypatch):
    """A registry that does not depend on the built-in data files."""
    registry = {
        "country-capital": {"instruction": "Name the capital.", "match": "contains"},
        "capitalize": {"instruction": "Capitalize the word.", "match": "startswith"},
        "antonym": {"instruction": "Give the antonym.", "match": "contains"},
    }
    monkeypatch.setattr(tasks_module, "_registry", lambda: registry)
    return registry


# -- Task and splits ------------------------------------------------------------------------------
def test_split_takes_the_last_n_eval_examples():
    train, evaluation = make_task(10).split(n_eval=3)
    assert evaluation.inputs == ["in7", "in8", "in9"]
    assert train.inputs == [f"in{i}" for i in range(7)]
    assert (train.name, evaluation.name) == ("t:train", "t:eval")


def test_seeded_split_is_reproducible_and_a_partition():
    task = make_task(50)
    first = task.split(n_eval=10, seed=3)
    again = task.split(n_eval=10, seed=3)
    other = task.split(n_eval=10, seed=4)
    assert first == again
    assert first[1].inputs != other[1].inputs
    assert first[1].inputs != task.split(n_eval=10)[1].inputs  # shuffled, not the tail
    assert sorted(first[0].inputs + first[1].inputs) == sorted(task.inputs)
    assert not set(first[0].inputs) & set(first[1].inputs)


def test_small_task_evaluates_half_and_bad_split_sizes():
    with pytest.warns(InputWarning, match=r"its last 3 \(half the task\) are held out, not 5"):
        train, evaluation = make_task(6).split(n_eval=5)
    assert (len(train), len(evaluation)) == (3, 3)
    with pytest.raises(ValueError, match="n_eval must be positive"):
        make_task(6).split(n_eval=0)
    with pytest.raises(ValueError, match="n_eval=100 asks for at least every example"):
        make_task(6).split(n_eval=100)  # issue 27: was 3 held out, without a word
    with pytest.raises(TaskDataError, match="has 1 example; at least 2"):
        make_task(1).split(n_eval=5)


def test_task_validation_and_kind():
    with pytest.raises(TaskDataError, match="has no examples"):
        Task("empty", ())
    # the user's error, not the runtime type checker's TypeError (which pytest turns on)
    with pytest.raises(TaskDataError, match=r"match must be 'startswith' or 'contains', got 'eq"):
        make_task(3, match="equals")
    with pytest.raises(TaskDataError, match=r"example 'a': match must be .* got 'equals'"):
        Example("a", "b", match="equals")
    with pytest.raises(TaskDataError, match=r"kind must be 'word' or 'translation', got 'sent"):
        make_task(3, kind="sentence")
    with pytest.raises(TaskDataError, match="example 1 has an empty input or output"):
        Task("t", (Example("a", "b"), Example("c", "  ")))
    assert make_task(3).max_new_tokens == 10
    assert make_task(3, kind="translation").max_new_tokens == 50
    assert make_task(5).head(2).inputs == ["in0", "in1"]


# -- example files --------------------------------------------------------------------------------
def test_function_vector_json(tmp_path):
    path = tmp_path / "data.json"
    items = [{"input": "cat", "output": "Cat"}, {"input": "dog", "output": ["Dog", "DOG"]}]
    path.write_text(json.dumps(items))
    assert load_examples(path) == [Example("cat", "Cat"), Example("dog", "Dog")]
    wrapped = tmp_path / "wrapped.json"
    wrapped.write_text(json.dumps({"examples": items}))
    assert load_examples(wrapped)[0] == Example("cat", "Cat")


def test_jsonl_skips_blank_lines(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text('{"input": "a", "output": "A"}\n\n{"input": "b", "output": "B"}\n')
    assert load_examples(path) == [Example("a", "A"), Example("b", "B")]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"input": "a", "output": "A"}\n{"input": "b", "output": "B"}\n{"input": "c"', r":3: not"),
        ('{"input": "a", "output": "A"}\n{"input": "b"}\n', r":2: missing field\(s\) output"),
        ('{"output": "A"}\n', r":1: missing field\(s\) input"),
        ('{"input": "a", "output": " "}\n', r":1: empty output \(answer\)"),
        ('{"input": "a", "output": []}\n', r":1: empty output \(answer\)"),
        ('{"input": "", "output": "A"}\n', r":1: empty input"),
        ('{"input": "a", "output": 3}\n', r":1: 'input' and 'output' must be strings"),
        ('["a", "A"]\n', r":1: expected an object"),
        ("\n\n", r"the file is empty"),
    ],
)
def test_bad_jsonl_names_file_and_line(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(TaskDataError, match=message) as info:
        load_examples(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[]", "holds no examples"),
        ('{"input": "a"}', "no 'examples' list"),
        ('[{"input": "a", "output": "A"}, {"input": "b"}]', r"item 1: missing field\(s\) output"),
        ('[\n{"input": "a", "output": "A"},\n{"input": "b" "output": "B"}\n]', r":3: not valid"),
        ("", "the file is empty"),
    ],
)
def test_bad_json_files(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(TaskDataError, match=message):
        load_examples(path)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_examples(tmp_path / "nope.json")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        get_task(tmp_path / "nope.jsonl")


# -- get_task -------------------------------------------------------------------------------------
def _object_file(path, **fields):
    examples = [{"input": "sell", "output": "buy"}, {"input": "hot", "output": "cold"}]
    path.write_text(json.dumps({**fields, "examples": examples}))
    return path


def test_a_task_file_named_like_a_builtin_keeps_its_own_instruction_and_rule(
    tmp_path, fake_registry
):
    """The issue's case: ``antonym.json`` saying its own instruction loaded the built-in's."""
    path = _object_file(tmp_path / "antonym.json", instruction="Reverse the word.")
    task = get_task(path)
    assert (task.name, task.instruction, task.match, task.kind) == (
        "antonym",
        "Reverse the word.",
        "contains",
        "word",
    )
    ruled = _object_file(tmp_path / "capitalize.json", instruction="Do it.", match="contains")
    assert (get_task(ruled).instruction, get_task(ruled).match) == ("Do it.", "contains")
    # the same file under another name reads the same
    other = _object_file(tmp_path / "reverse_guess.json", instruction="Reverse the word.")
    assert get_task(other).instruction == "Reverse the word."
    # an argument overrides the file
    assert get_task(str(path), instruction="Other.").instruction == "Other."
    assert get_task(path, match="startswith").match == "startswith"


def test_a_file_without_an_instruction_takes_no_builtin_one_and_says_so(tmp_path, fake_registry):
    path = tmp_path / "capitalize.jsonl"
    path.write_text('{"input": "cat", "output": "Cat"}\n{"input": "dog", "output": "Dog"}\n')
    with pytest.warns(InputWarning, match="named like the built-in task 'capitalize'"):
        task = get_task(path)
    assert (task.name, task.instruction, task.match, len(task)) == (
        "capitalize",
        None,
        "contains",
        2,
    )
    assert "instruction  none  [default]" in task.describe()
    # a name the paper's notebook would give "startswith" does not change the rule either
    paper_like = tmp_path / "next_city.json"
    paper_like.write_text('[{"input": "Paris", "output": "Lyon"}]')
    assert get_task(paper_like).match == "contains"
    # a Path is always a file, never a built-in name
    with pytest.raises(FileNotFoundError, match="does not exist"):
        get_task(tmp_path.parent / "capitalize")


def test_a_task_file_states_its_fields_and_describe_says_where_each_came_from(tmp_path):
    path = _object_file(
        tmp_path / "mine.json", name="opposites", match="startswith", description="Mine."
    )
    task = get_task(path)
    assert (task.name, task.instruction, task.match, task.description) == (
        "opposites", None, "startswith", "Mine."
    )  # fmt: skip
    described = task.describe()
    assert "match        'startswith'  [file]" in described
    assert "kind         'word'  [default]" in described
    assert str(path) in described and "'sell' -> 'buy'" in described
    assert len(repr(task)) < 200 and "2 examples" in repr(task)
    assert "instruction  'Capitalize the first letter" in get_task("capitalize").describe()


def test_a_translation_task_file_names_its_languages(tmp_path):
    path = tmp_path / "pairs.json"
    examples = [{"input": "Good morning.", "output": "Guten Morgen."}]
    path.write_text(json.dumps({"source_lang": "en", "target_lang": "de", "examples": examples}))
    task = get_task(path)
    assert (task.kind, task.source_lang, task.target_lang) == ("translation", "en", "de")
    assert task.instruction == "Translate the following English text into German."
    # a JSONL file named like a language pair is a word task with no instruction, and says so
    named = tmp_path / "en-de.jsonl"
    named.write_text(json.dumps(examples[0]) + "\n")
    with pytest.warns(InputWarning, match="named like the built-in task 'en-de'"):
        assert get_task(named).kind == "word"
    lonely = tmp_path / "half.json"
    lonely.write_text(json.dumps({"source_lang": "en", "examples": examples}))
    with pytest.raises(TaskDataError, match="both 'source_lang' and 'target_lang'"):
        get_task(lonely)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"instructions": "x", "examples": [{"input": "a", "output": "b"}]}, "unknown field"),
        ({"instruction": "x"}, "no 'examples' list"),
        ({"match": "exact", "examples": [{"input": "a", "output": "b"}]}, "match must be"),
        ({"instruction": 3, "examples": [{"input": "a", "output": "b"}]}, "must be a string"),
        ({"examples": [{"input": "a", "output": "b", "match": "exact"}]}, "match must be"),
    ],
)
def test_bad_task_file_fields_name_the_problem(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(content))
    with pytest.raises(TaskDataError, match=message):
        get_task(path)


def test_an_example_may_carry_its_own_match_rule(tmp_path):
    path = tmp_path / "mixed.jsonl"
    rows = [{"input": "a", "output": "A", "match": "startswith"}, {"input": "b", "output": "B"}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert [e.match for e in get_task(path).examples] == ["startswith", None]


def test_cli_tasks_show_prints_what_a_file_gives(tmp_path, capsys):
    from lens_heads.cli import main

    path = _object_file(tmp_path / "antonym.json", instruction="Reverse the word.")
    assert main(["tasks", "--show", str(path)]) == 0
    printed = capsys.readouterr().out
    assert "instruction  'Reverse the word.'  [file]" in printed
    assert "match        'contains'  [default]" in printed


def test_unknown_task_lists_close_matches(fake_registry):
    with pytest.raises(KeyError, match="did you mean country-capital"):
        get_task("country_capitals")
    with pytest.raises(KeyError, match=r"did you mean.*en-fr"):
        get_task("en-fx")
    with pytest.raises(KeyError, match="see lens-heads tasks"):
        get_task("qqqqqqqqqqqqqq")


# -- parallel corpora -----------------------------------------------------------------------------
def test_parallel_tsv_with_header(tmp_path):
    path = tmp_path / "xnli.tsv"
    path.write_text("en\tfr\tde\nHello.\tBonjour.\tHallo.\nThank you.\tMerci.\tDanke.\n")
    corpus = load_parallel_tsv(path)
    assert corpus.languages == ["en", "fr", "de"]
    assert len(corpus) == 2
    task = corpus.translation_task("en", "fr")
    assert task.examples[1] == Example("Thank you.", "Merci.")
    assert (task.kind, task.name) == ("translation", "en-fr")
    headerless = tmp_path / "plain.tsv"
    headerless.write_text("Hello.\tBonjour.\n")
    assert load_parallel_tsv(headerless, languages=["en", "fr"]).sentences["fr"] == ["Bonjour."]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("en\tfr\nHello.\tBonjour.\nThanks.\n", r":3: 1 columns, expected 2 \(en, fr\)"),
        ("en\tfr\nHello.\t \n", r":2: empty 'fr' column"),
        ("en\ten\nHello.\tHi.\n", r":1: the header must name each language once"),
        ("\n", "empty file"),
    ],
)
def test_bad_parallel_tsv(tmp_path, content, message):
    path = tmp_path / "bad.tsv"
    path.write_text(content)
    with pytest.raises(TaskDataError, match=message):
        load_parallel_tsv(path)


def test_flores_folder(tmp_path):
    (tmp_path / "eng_Latn.devtest").write_text("Hello.\nThank you.\n")
    (tmp_path / "fra_Latn.devtest").write_text("Bonjour.\nMerci.\n")
    corpus = load_flores_dir(tmp_path)
    assert corpus.languages == ["eng_Latn", "fra_Latn"]
    assert corpus.translation_task("fra_Latn", "eng_Latn").examples[0] == Example(
        "Bonjour.", "Hello."
    )


def test_bad_flores_folders(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_flores_dir(tmp_path / "missing")
    with pytest.raises(TaskDataError, match="no language files"):
        load_flores_dir(tmp_path)
    (tmp_path / "eng_Latn.devtest").write_text("Hello.\nThank you.\n")
    (tmp_path / "fra_Latn.devtest").write_text("Bonjour.\n")
    with pytest.raises(TaskDataError, match="different sentence counts"):
        load_flores_dir(tmp_path)
    (tmp_path / "fra_Latn.devtest").write_text("Bonjour.\n\nMerci.\n")
    with pytest.raises(TaskDataError, match=r"fra_Latn.devtest:2: empty line"):
        load_flores_dir(tmp_path)
    corpus = load_flores_dir(tmp_path, pattern="eng*")
    with pytest.raises(KeyError, match="no language 'fra_Latn'"):
        corpus.translation_task("eng_Latn", "fra_Latn")


def test_pharaoh_alignments(tmp_path):
    path = tmp_path / "align.txt"
    path.write_text("0-0 1-2 2-1\n\n3-3\n")
    assert load_alignments(path) == [[(0, 0), (1, 2), (2, 1)], [], [(3, 3)]]
    path.write_text("0-0 1-2\n0-0 1:1\n")
    with pytest.raises(TaskDataError, match=r"align.txt:2: '1:1' is not an alignment pair"):
        load_alignments(path)


def test_alignment_composes_through_the_pivot():
    corpus = ParallelCorpus(
        sentences={"en": ["a b"], "fr": ["x y"], "de": ["p q"]},
        tokens={"en": [["a", "b"]], "fr": [["x", "y"]], "de": [["p", "q"]]},
        alignments={"fr": [[(0, 1), (1, 0)]], "de": [[(0, 0), (1, 1)]]},
    )
    assert corpus.alignment("en", "fr", 0) == [(0, 1), (1, 0)]
    assert corpus.alignment("fr", "en", 0) == [(0, 1), (1, 0)]
    assert corpus.alignment("fr", "de", 0) == [(0, 1), (1, 0)]
    with pytest.raises(TaskDataError, match="different sentence counts"):
        ParallelCorpus(sentences={"en": ["a"], "fr": []})
