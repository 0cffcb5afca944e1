"""The settings table (Tables 1, 2 and 6) on a tiny random model."""

from __future__ import annotations

import json
import math

import pandas as pd
import plotly.graph_objects as go
import pytest
import sacrebleu
import torch

import lens_heads as lh
from lens_heads.cli import main
from lens_heads.core._generation import greedy_generate
from lens_heads.core._masks import HeadMask, MaskFileError, MaskShapeError
from lens_heads.core._metrics import answer_ce
from lens_heads.core._prompts import PromptFormat, collate, encode_example
from lens_heads.core._tasks import Example, Task
from lens_heads.engine import METRICS, EvaluationResult, evaluate
from lens_heads.engine._scoring import first_line_of

WORDS = [f"{w}" for w in "cat dog owl bee ant cow pig elk yak emu fox hen ram".split()]


def word_task(**kwargs) -> Task:
    examples = tuple(Example(w, w.upper()) for w in WORDS)
    return Task("upper", examples, instruction="Write the word in capitals.", **kwargs)


@pytest.fixture(scope="module")
def mask(tiny) -> HeadMask:
    return HeadMask.from_heads(["L0H1", "L1H0", "L1H3"], n_layers=2, n_heads=4)


@pytest.fixture(scope="module")
def result(tiny, mask) -> EvaluationResult:
    other = HeadMask.from_heads(["L0H0", "L0H2"], n_layers=2, n_heads=4)
    return evaluate(
        tiny, word_task(), mask=mask, other_mask=other, n_eval=5, batch_size=3, progress=False
    )


def test_table_rows_heads_and_columns(result, tiny):
    table = result.to_frame()
    assert list(table.index) == [
        "Original",
        "w/ instruction",
        "w/ random M",
        "w/ M",
        "w/ M + instruction",
        "w/ M of another model",
    ]
    assert table["heads"].tolist() == [8, 8, 3, 3, 3, 2]
    assert table["seeds"].tolist() == [1, 1, 3, 1, 1, 1]
    assert "answer CE (paper: PPL)" in table.columns and "perplexity" in table.columns
    assert "BLEU" not in table.columns  # word task
    assert len(result.records) == 8 * 5  # 8 runs (random: 3 seeds) x 5 examples


def test_random_setting_is_mean_and_std_over_seeds(result):
    seeds = result.per_seed_frame()
    random_runs = seeds[seeds["setting"] == "random"]
    assert random_runs["seed"].tolist() == [0, 1, 2]
    assert (random_runs["heads"] == 3).all()
    column = METRICS["answer_ce"]
    row = result.to_frame().loc["w/ random M"]
    assert row[column] == pytest.approx(random_runs[column].mean())
    assert row[f"{column} std"] == pytest.approx(random_runs[column].std())
    assert math.isnan(result.to_frame().loc["w/ M", f"{column} std"])
    # different seeds draw different masks (on 2x4 heads two of three may coincide)
    assert random_runs[column].nunique() >= 2


def test_records_match_direct_generation_and_teacher_forcing(result, tiny, mask):
    """Each run equals generating and scoring the prompts directly under its mask."""
    _, evaluation = word_task().split(n_eval=5)
    tokenizer = tiny.tokenizer
    for setting, run_mask, instruction in [
        ("original", None, None),
        ("mask+instruction", mask, word_task().instruction),
    ]:
        fmt = PromptFormat(chat=True, instruction=instruction)
        encoded = [
            encode_example(tokenizer, fmt.render(e.input, tokenizer), e.output, chat=True)
            for e in evaluation
        ]
        new = greedy_generate(
            tiny, [e.prompt_tokens for e in encoded], max_new_tokens=10, mask=run_mask
        )
        tokens, answer_mask, _ = collate(encoded, pad_id=tokenizer.pad_token_id)
        with lh.hooks.maybe_mask(tiny, run_mask):
            expected_ce = answer_ce(tiny(tokens), tokens, answer_mask)
        records = result.predictions(setting)
        texts = [tokenizer.decode(t, skip_special_tokens=True) for t in new]
        # generation stops at a line break (only the first line is scored): same first line
        assert records["prediction"].tolist() == [first_line_of(text) for text in texts]
        assert all(t.startswith(g) for t, g in zip(texts, records["generated"], strict=True))
        assert records["answer_ce"].tolist() == pytest.approx(expected_ce.tolist(), abs=1e-4)
        assert records["prompt"][0] == tokenizer.decode(encoded[0].prompt_tokens)
    runs = result.runs.set_index("setting")
    records = result.predictions("original")
    total = (records["answer_ce"] * records["n_answer_tokens"]).sum()
    assert runs.loc["original", "perplexity"] == pytest.approx(
        math.exp(total / records["n_answer_tokens"].sum()), rel=1e-5
    )
    assert runs.loc["original", "accuracy"] == records["correct"].mean()


def test_batched_equals_one_at_a_time(tiny, mask):
    kwargs = dict(settings=["original", "mask"], mask=mask, n_eval=5, progress=False)
    batched = evaluate(tiny, word_task(), batch_size=5, **kwargs)
    alone = evaluate(tiny, word_task(), batch_size=1, **kwargs)
    columns = ["setting", "generated", "prediction", "correct"]
    pd.testing.assert_frame_equal(batched.records[columns], alone.records[columns])
    assert batched.records["answer_ce"].tolist() == pytest.approx(
        alone.records["answer_ce"].tolist(), abs=1e-4
    )


@pytest.mark.parametrize("stack_masks", [False, True])
def test_batched_equals_one_at_a_time_on_prompts_of_different_lengths(tiny, mask, stack_masks):
    """Left-padded batches of prompts 1 to 9 letters long, every setting (the random masks
    stacked as per-example masks in one batch, or run one seed at a time), against batch 1."""
    words = ["a", "hat", "seven", "elephant", "bo", "crocodile", "mice", "zebra", "owl"] * 2
    task = Task("upper", tuple(Example(w, w.upper()) for w in words), instruction="Capitals.")
    kwargs = dict(mask=mask, n_eval=9, random_seeds=(0, 1), max_new_tokens=5, progress=False)
    batched = evaluate(tiny, task, batch_size=4, stack_masks=stack_masks, **kwargs)
    alone = evaluate(tiny, task, batch_size=1, **kwargs)
    assert set(batched.records["setting"]) == {
        "original", "instruction", "random", "mask", "mask+instruction"
    }  # fmt: skip
    prompts = batched.records["prompt"].drop_duplicates()
    assert len({len(tiny.tokenizer(p, add_special_tokens=False).input_ids) for p in prompts}) > 5
    columns = ["setting", "input", "prompt", "generated", "prediction", "correct"]
    pd.testing.assert_frame_equal(batched.records[columns], alone.records[columns])
    assert batched.records["answer_ce"].tolist() == pytest.approx(
        alone.records["answer_ce"].tolist(), abs=1e-4
    )
    assert batched.records["generated"].nunique() > 3  # the outputs differ from row to row


def test_newline_stops_give_the_samefirst_line_of():
    """Stopping at line breaks (first_line=True) scores what the full generation's first
    non-empty line would be, including rows whose output starts with a line break."""
    model = lh.tiny_model(n_layers=2, n_heads=4, seed=1)
    newline = model.tokenizer.convert_tokens_to_ids("Ċ")
    with torch.no_grad():  # make "\n" likely enough to appear in some outputs
        dict(model.named_parameters())["lm_head._original_component.weight"][newline] *= 4.0
    words = [chr(c) * 2 for c in range(ord("a"), ord("z"))]
    task = Task("many", tuple(Example(w, w) for w in words * 2))
    kwargs = dict(n_eval=len(words), chat=False, max_new_tokens=8, progress=False)
    stopped = evaluate(model, task, ["original"], **kwargs).records
    full = evaluate(model, task, ["original"], first_line=False, **kwargs).records
    assert stopped["prediction"].tolist() == [first_line_of(t) for t in full["generated"]]
    assert full["generated"].str.contains("\n").sum() >= 5  # the stops were exercised
    assert full["generated"].str.lstrip(" ").str.startswith("\n").sum() >= 1  # and the retry
    assert (stopped["generated"].str.len() < full["generated"].str.len()).sum() >= 5
    assert stopped["answer_ce"].tolist() == full["answer_ce"].tolist()


def test_match_rules_score_thefirst_line_of(tiny):
    """Answers built from the model's own predictions: prefix vs infix under each rule."""
    probe = evaluate(tiny, word_task(), ["original"], n_eval=6, progress=False)
    predictions = probe.records["prediction"].tolist()
    usable = [i for i, p in enumerate(predictions) if len(p) >= 3 and p[1:3].strip() == p[1:3]]
    assert len(usable) >= 2, predictions
    train = [Example(w, w.upper()) for w in WORDS[: len(WORDS) - 6]]
    queries = word_task().split(n_eval=6)[1].examples
    evaluation = []
    for i, query in enumerate(queries):
        p = predictions[i]
        if i == usable[0]:
            evaluation.append(Example(query.input, p[:2], match="startswith", source="a"))
        elif i == usable[1]:
            evaluation.append(Example(query.input, p[1:3], match="startswith", source="b"))
        elif i in usable:
            evaluation.append(Example(query.input, p[1:3], source="c"))  # task rule: contains
        else:
            evaluation.append(Example(query.input, "\u2603never", source="d"))
    task = Task("probe", tuple(train + evaluation), match="contains")
    scored = evaluate(tiny, task, ["original"], n_eval=6, progress=False).records
    assert scored["prediction"].tolist() == predictions
    expected = [i == usable[0] or (i in usable[2:]) for i in range(6)]
    assert scored["correct"].tolist() == expected
    assert scored["source"].tolist() == [e.source for e in evaluation]


def test_plain_format_and_shots_from_the_training_split(tiny):
    task = word_task()
    train, evaluation = task.split(n_eval=4)
    result = evaluate(tiny, task, ["original"], n_eval=4, chat=False, progress=False)
    assert result.records["prompt"].tolist() == [f"{e.input}\n\n" for e in evaluation]
    few = evaluate(tiny, task, ["original", "instruction"], n_eval=4, chat=False, shots=2)
    prompts = few.predictions("original")["prompt"].tolist()
    for prompt, query in zip(prompts, evaluation, strict=True):
        parts = prompt.split("\n\n")
        assert len(parts) == 6 and parts[4] == query.input and parts[5] == ""
        assert {parts[0], parts[2]} <= set(train.inputs)
        assert parts[1] == parts[0].upper() and parts[3] == parts[2].upper()
    again = evaluate(tiny, task, ["original"], n_eval=4, chat=False, shots=2, progress=False)
    assert again.records["prompt"].tolist() == prompts
    instructed = few.predictions("instruction")["prompt"][0]
    assert instructed.startswith(task.instruction + "\n\nInput:\n\n")
    assert instructed.endswith(f"Input:\n\n{evaluation.examples[0].input}\n\nOutput:\n\n")


def test_translation_metrics(tiny):
    pairs = [
        ("the cat", "le chat"),
        ("the dog", "le chien"),
        ("a house", "une maison"),
        ("the sun", "le soleil"),
        ("a tree", "un arbre"),
        ("the sea", "la mer"),
    ]
    task = Task(
        "en-fr",
        tuple(Example(a, b) for a, b in pairs),
        instruction="Translate into French.",
        kind="translation",
        source_lang="en",
        target_lang="fr",
    )
    result = evaluate(tiny, task, ["original"], n_eval=3, max_new_tokens=6, progress=False)
    assert result.config["max_new_tokens"] == 6
    table = result.to_frame()
    for column in ("ROUGE-L", "BLEU", "chrF++", "accuracy", "answer CE (paper: PPL)"):
        assert column in table.columns
    records = result.records
    hypotheses, references = records["prediction"].tolist(), records["answer"].tolist()
    assert table.loc["Original", "BLEU"] == pytest.approx(
        sacrebleu.corpus_bleu(hypotheses, [references]).score
    )
    assert table.loc["Original", "ROUGE-L"] == pytest.approx(records["rouge_l"].mean())
    assert evaluate(tiny, task, ["original"], n_eval=3, progress=False).config[
        "max_new_tokens"
    ] == (50)


def test_bad_settings_and_masks(tiny, mask, tmp_path):
    task = word_task()
    with pytest.raises(ValueError, match=r"setting 'mask' needs the trained mask M"):
        evaluate(tiny, task, ["original", "mask"], progress=False)
    with pytest.raises(ValueError, match=r"setting 'random' needs the trained mask M"):
        evaluate(tiny, task, "original,random", progress=False)
    with pytest.raises(ValueError, match=r"'other_mask' needs a mask trained on another model"):
        evaluate(tiny, task, ["other_mask"], mask=mask, progress=False)
    with pytest.raises(ValueError, match=r"unknown setting 'masked'; choose from original"):
        evaluate(tiny, task, ["masked"], progress=False)
    with pytest.raises(ValueError, match="settings repeat"):
        evaluate(tiny, task, ["original", "original"], progress=False)
    with pytest.raises(ValueError, match="at least one seed"):
        evaluate(tiny, task, ["random"], mask=mask, random_seeds=(), progress=False)
    bare = Task("bare", task.examples)
    with pytest.raises(ValueError, match=r"needs an instruction but task 'bare' has none"):
        evaluate(tiny, bare, ["instruction"], progress=False)
    wrong = HeadMask.ones(3, 4)
    with pytest.raises(MaskShapeError, match="use a mask made for this model"):
        evaluate(tiny, task, ["other_mask"], other_mask=wrong, progress=False)
    with pytest.raises(ValueError, match="only 3"):
        evaluate(tiny, task.head(6), ["original"], n_eval=3, shots=4, progress=False)
    with pytest.raises(MaskFileError, match="does not exist"):
        evaluate(tiny, task, ["mask"], mask=tmp_path / "missing.safetensors", progress=False)


def test_defaults_masks_from_files_and_instruction_override(tiny, mask, tmp_path):
    path = mask.save(tmp_path / "other.safetensors", model="another-model", task="upper")
    bare = Task("bare", word_task().examples)
    result = evaluate(tiny, bare, other_mask=path, n_eval=3, progress=False)
    assert result.settings == ["original", "other_mask"]
    assert result.config["other_mask"] == {
        "heads": 3,
        "alpha": 0.0,
        "file": str(path),
        "model": "another-model",
        "task": "upper",
    }
    instructed = evaluate(tiny, bare, n_eval=3, instruction="Shout it.", progress=False)
    assert instructed.settings == ["original", "instruction"]
    assert instructed.predictions("instruction")["prompt"][0].count("Shout it.") == 1
    with pytest.raises(KeyError, match="was not evaluated"):
        instructed.predictions("mask")


def test_markdown_plot_and_save_load(result, tmp_path):
    markdown = result.to_markdown()
    header = (
        "| setting | heads | accuracy | exact match | echo rate | answer CE (paper: PPL) "
        "| perplexity |"
    )
    assert header in markdown
    random_line = next(line for line in markdown.splitlines() if "w/ random M" in line)
    assert random_line.count("±") == 5
    assert "w/ M of another model | 2 |" in markdown
    figure = result.plot()
    assert isinstance(figure, go.Figure)
    assert len(figure.data) == 6 * 5  # one bar per setting in each metric panel
    assert [a.text for a in figure.layout.annotations] == [
        "accuracy",
        "exact match",
        "echo rate",
        "answer CE (paper: PPL)",
        "perplexity",
    ]
    assert sum(bar.error_y.array is not None for bar in figure.data) == 5  # random M only
    written = result.save(tmp_path / "out")
    names = sorted(path.name for path in written)
    assert names == [
        "figure.html",
        "per_seed.csv",
        "records.csv",
        "result.json",
        "table.csv",
        "table.md",
    ]
    assert not list((tmp_path / "out").glob("*.tmp"))
    loaded = EvaluationResult.load(tmp_path / "out")
    pd.testing.assert_frame_equal(loaded.to_frame(), result.to_frame())
    assert loaded.records["prediction"].tolist() == result.records["prediction"].tolist()
    assert loaded.to_markdown() == markdown
    table = pd.read_csv(tmp_path / "out" / "table.csv", index_col=0)
    assert table.loc["w/ M", "heads"] == 3
    (tmp_path / "out" / "result.json").write_text(json.dumps({"format": "something else"}))
    with pytest.raises(ValueError, match="not a readable evaluation result"):
        EvaluationResult.load(tmp_path / "out")
    with pytest.raises(FileNotFoundError, match="an evaluation folder"):
        EvaluationResult.load(tmp_path / "nowhere")


def test_cli_eval_and_tasks(tiny, tiny_dir, mask, tmp_path, monkeypatch, capsys):
    import lens_heads.cli._common as cli
    import lens_heads.core as tasks_module  # the command takes its tasks from there at each call

    monkeypatch.setattr(cli, "load_model", lambda args: tiny)
    data = tmp_path / "upper.jsonl"
    data.write_text("".join(json.dumps({"input": w, "output": w.upper()}) + "\n" for w in WORDS))
    mask_file = mask.save(tmp_path / "m.safetensors")
    out = tmp_path / "eval"
    code = main(
        [
            "eval",
            "--model",
            str(tiny_dir),
            "--task",
            str(data),
            "--instruction",
            "Capitals.",
            "--mask",
            str(mask_file),
            "--settings",
            "original,instruction,random,mask",
            "--seeds",
            "3,4",
            "--n-eval",
            "4",
            "--out",
            str(out),
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0
    assert "| w/ random M | 3 |" in printed
    assert (out / "table.csv").is_file() and (out / "figure.html").is_file()
    loaded = EvaluationResult.load(out)
    assert loaded.config["random_seeds"] == [3, 4] and loaded.config["instruction"] == "Capitals."
    assert main(["eval", "--model", str(tiny_dir), "--task", str(data), "--settings", "mask",
                 "--out", str(out)]) == 2  # fmt: skip
    assert "needs the trained mask M" in capsys.readouterr().err
    assert (
        main(["eval", "--model", str(tiny_dir), "--task", str(data), "--seeds", "a", "--out", "x"])
        == 2
    )
    assert "--seeds must be comma-separated integers" in capsys.readouterr().err

    upper = Task("upper", tuple(Example(w, w.upper()) for w in WORDS), match="startswith")
    monkeypatch.setattr(tasks_module, "list_tasks", lambda kind=None: ["upper"])
    monkeypatch.setattr(tasks_module, "get_task", lambda name: upper)
    assert main(["tasks"]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert listing[0].split()[:4] == ["task", "examples", "kind", "match"]
    assert listing[1].split() == ["upper", str(len(WORDS)), "word", "startswith"]


def test_save_png_failure_is_logged_not_raised(result, tmp_path, monkeypatch, caplog):
    def broken(figure, **kwargs):
        raise RuntimeError("Kaleido requires Google Chrome to be installed.")

    monkeypatch.setattr("lens_heads.core._storage.figure_png", broken)
    monkeypatch.setattr("lens_heads.core._storage._png_failure", None)
    with caplog.at_level("WARNING", logger="lens_heads.core._storage"):
        written = result.save(tmp_path / "png", png=True)
    assert "figure.png" not in [p.name for p in written]
    assert "PNG export skipped (RuntimeError: Kaleido requires Google Chrome" in caplog.text


def test_per_example_answer_ce_is_finite(result):
    assert torch.isfinite(torch.tensor(result.records["answer_ce"].tolist())).all()


def test_answer_ce_window_without_logits_to_keep(tiny, mask):
    """Models whose forward refuses ``logits_to_keep`` (legacy HookedTransformer) get the
    window sliced from the full logits: the same CE."""
    from lens_heads.engine._scoring import _logits_window

    class Legacy:
        def __init__(self, model):
            self.model = model

        def __call__(self, tokens):
            return self.model(tokens)

    tokens = torch.tensor([tiny.tokenizer("hello there").input_ids])
    full = tiny(tokens)
    assert torch.allclose(_logits_window(tiny, tokens, 3), full[:, -3:], atol=1e-5)
    assert torch.equal(_logits_window(Legacy(tiny), tokens, 3), full[:, -3:])
