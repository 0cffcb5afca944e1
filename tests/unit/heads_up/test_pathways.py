"""Functional pathways (Table 6) on a tiny model with hand-made masks."""

from __future__ import annotations

import importlib
import json
import math
from types import SimpleNamespace

import pandas as pd
import pytest

import lens_heads as lh
from analyses import table6_pathways
from lens_heads.core._masks import HeadMask, MaskShapeError
from lens_heads.core._tasks import Example, Task
from lens_heads.engine import MaskTrainingResult
from lens_heads.heads_up._pathways import CONDITIONS, PathwaysResult, pathway_heads

WORDS = "cat dog owl bee ant cow pig elk yak emu".split()


def family(n: int = 2) -> list[Task]:
    rules = [("upper", str.upper), ("title", str.title), ("reverse", lambda w: w[::-1])]
    return [
        Task(name, tuple(Example(w, rule(w)) for w in WORDS), instruction=f"Make it {name}.")
        for name, rule in rules[:n]
    ]


def heads(*labels: str) -> HeadMask:
    return HeadMask.from_heads(labels, n_layers=2, n_heads=4)


#: Three masks over 2 x 4 heads: all keep L0H0 and L1H2; none keeps L0H3, L1H0, L1H1.
MASKS = {
    "upper": heads("L0H0", "L0H1", "L1H2"),
    "title": heads("L0H0", "L1H2", "L1H3"),
    "reverse": heads("L0H0", "L0H2", "L1H2"),
}


@pytest.fixture(scope="module")
def result(tiny) -> PathwaysResult:
    masks = {name: MASKS[name] for name in ("upper", "title")}
    # seeds 1..3: independent draws, so on 8 heads two of the 28 pairs can coincide (seeds 0 and
    # 2 draw the same pair here); these three draw distinct sets of both sizes
    return lh.functional_pathways(
        tiny, family(2), masks, random_seeds=(1, 2, 3), n_eval=2, progress=False
    )


class FakeEvaluator:
    """Stands in for lh.evaluate: answer CE = 1 + heads removed, and counts the calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str], int]] = []

    def __call__(self, model, task, settings, *, mask=None, progress=True, **options):
        removed = 0 if mask is None else mask.complement().n_selected
        self.calls.append((task.name, list(settings), removed))
        run = {"setting": settings[0], "seed": -1, "heads": 8 - removed}
        run |= {"answer_ce": 1.0 + removed, "accuracy": 1.0 / (1 + removed)}
        return SimpleNamespace(runs=pd.DataFrame([run]), records=pd.DataFrame([{"index": 0}]))


@pytest.fixture()
def fake(monkeypatch) -> FakeEvaluator:
    evaluator = FakeEvaluator()
    # the module, not the function lh.evaluate that shadows it as an attribute of lens_heads
    monkeypatch.setattr(importlib.import_module("lens_heads.engine"), "evaluate", evaluator)
    return evaluator


# -- the head sets ---------------------------------------------------------------------------------
def test_shared_and_unused_sets_are_the_intersection_and_the_complement_of_the_union():
    shared, unused = pathway_heads(MASKS)
    assert shared.labels == ["L0H0", "L1H2"]
    assert unused.labels == ["L0H3", "L1H0", "L1H1"]
    with pytest.raises(MaskShapeError):
        pathway_heads([MASKS["upper"], HeadMask.ones(3, 4)])


def test_result_sets_and_random_controls(result):
    assert result.shared == ["L0H0", "L1H2"]  # upper & title
    assert result.unused == ["L0H2", "L0H3", "L1H0", "L1H1"]  # in neither
    assert result.seeds == [1, 2, 3] and result.mask_sizes == {"upper": 3, "title": 3}
    for key, size in (("random_shared", 2), ("random_unused", 4)):
        sets = result.random_sets[key]
        assert [len(s) for s in sets] == [size] * 3
        assert len({tuple(s) for s in sets}) == 3, f"{key}: the seeds draw different sets"
        size_of = heads(*(result.shared if key == "random_shared" else result.unused))
        assert sets == [HeadMask.random_like(size_of, seed=s).labels for s in (1, 2, 3)]
    runs = result.runs
    random_rows = runs[runs["condition"] == "random_shared"]
    assert random_rows["seed"].tolist() == [1, 2, 3, 1, 2, 3]
    assert random_rows["heads removed"].tolist() == [2] * 6


def test_rows_present_for_every_task_and_condition(result):
    table = result.to_frame()
    labels = list(CONDITIONS.values())
    assert list(table.index) == [(t, c) for t in ("upper", "title") for c in labels]
    assert table["heads removed"].tolist() == [0, 2, 2, 4, 4] * 2
    assert table["seeds"].tolist() == [1, 1, 3, 1, 3] * 2
    assert {"accuracy", "answer CE (paper: PPL)", "exact match"} <= set(table.columns)
    std = table["answer CE (paper: PPL)" + " std"]
    assert std.isna().tolist() == [True, True, False, True, False] * 2
    markdown = result.to_markdown()
    assert "| upper | remove random, size of (a) | 2 |" in markdown and " ± " in markdown
    assert result.verdict() in markdown
    figure = result.plot()
    assert len(figure.data) == len(CONDITIONS) * 2  # panels: answer CE, accuracy
    assert list(figure.data[0].x) == ["upper", "title"]


def test_runs_are_the_evaluators_instructed_runs(result, tiny):
    """The full row is lh.evaluate's "instruction" setting; a removal row is its
    "mask+instruction" setting with the removed heads switched off."""
    upper = family(2)[0]
    full = lh.evaluate(tiny, upper, ["instruction"], n_eval=2, progress=False).runs.iloc[0]
    keep = ~heads(*result.shared)
    shared = lh.evaluate(
        tiny, upper, ["mask+instruction"], mask=keep, n_eval=2, progress=False
    ).runs.iloc[0]
    runs = result.runs.set_index(["task", "condition", "seed"])
    assert runs.loc[("upper", "full", -1), "answer_ce"] == pytest.approx(full["answer_ce"])
    assert runs.loc[("upper", "shared", -1), "answer_ce"] == pytest.approx(shared["answer_ce"])
    assert runs.loc[("upper", "shared", -1), "accuracy"] == shared["accuracy"]
    assert shared["answer_ce"] != pytest.approx(full["answer_ce"]), "removing heads matters"
    assert (result.runs["seconds"] > 0).all()


def test_save_load_round_trip(result, tmp_path):
    names = {path.name for path in result.save(tmp_path)}
    assert {"table.csv", "table.md", "runs.csv", "summary.csv", "figure.html"} <= names
    loaded = PathwaysResult.load(tmp_path)
    pd.testing.assert_frame_equal(loaded.to_frame(), result.to_frame())
    pd.testing.assert_frame_equal(loaded.runs, result.runs)
    assert loaded.random_sets == result.random_sets and loaded.verdict() == result.verdict()


# -- bad input -----------------------------------------------------------------------------------
def test_a_family_of_one_task_is_rejected(tiny, fake):
    with pytest.raises(ValueError, match=r"at least two related tasks, got 1 \(\['upper'\]\)"):
        lh.functional_pathways(tiny, family(1), {"upper": MASKS["upper"]}, progress=False)
    with pytest.raises(ValueError, match="at least two"):
        lh.functional_pathways(tiny, "capitalize", {"capitalize": MASKS["upper"]})
    assert fake.calls == []


def test_masks_and_tasks_that_do_not_fit(tiny, fake):
    tasks = family(2)
    with pytest.raises(ValueError, match=r"no mask for \['title'\].*train_family_masks"):
        lh.functional_pathways(tiny, tasks, {"upper": MASKS["upper"]}, progress=False)
    wrong = {"upper": MASKS["upper"], "title": HeadMask.ones(3, 4)}
    with pytest.raises(MaskShapeError, match="the mask of 'title'"):
        lh.functional_pathways(tiny, tasks, wrong, progress=False)
    bare = [tasks[0], Task("plain", tasks[1].examples)]
    with pytest.raises(ValueError, match=r"with its instruction, but \['plain'\] have none"):
        lh.functional_pathways(tiny, bare, [MASKS["upper"], MASKS["title"]], progress=False)
    with pytest.raises(ValueError, match="tasks repeat"):
        lh.functional_pathways(tiny, [tasks[0], tasks[0]], MASKS, progress=False)
    with pytest.raises(ValueError, match="random_seeds is empty"):
        lh.functional_pathways(tiny, tasks, MASKS, random_seeds=(), progress=False)
    assert fake.calls == []


# -- logic, with a stand-in evaluator -------------------------------------------------------------
def test_an_empty_shared_set_repeats_the_full_run(tiny, fake):
    disjoint = {"upper": heads("L0H0"), "title": heads("L0H1")}
    result = lh.functional_pathways(
        tiny, family(2), disjoint, random_seeds=(0, 1), n_eval=2, progress=False
    )
    assert result.shared == [] and len(result.unused) == 6
    # per task: full, unused, 2 random unused; removing nothing is not evaluated again
    assert [removed for _, _, removed in fake.calls] == [0, 6, 6, 6] * 2
    table = result.to_frame()
    rows = table.xs("upper")
    assert rows["heads removed"].tolist() == [0, 0, 0, 6, 6]
    assert rows["answer CE (paper: PPL)"].tolist() == [1.0, 1.0, 1.0, 7.0, 7.0]
    assert result.verdict().startswith("No head is kept by every mask")
    copied = result.runs[result.runs["condition"].isin(["shared", "random_shared"])]
    assert copied["seconds"].eq(0).all() and copied["heads removed"].eq(0).all()
    assert "for 8 evaluations" in result.to_markdown()


def test_the_cache_resumes_and_recomputes_only_changed_runs(tiny, fake, tmp_path):
    masks = {name: MASKS[name] for name in ("upper", "title")}
    first = lh.functional_pathways(
        tiny, family(2), masks, random_seeds=(0, 1), cache_dir=tmp_path, progress=False
    )
    assert len(fake.calls) == 2 * 7  # per task: full, (a), 2 random, (b), 2 random
    stored = json.loads((tmp_path / "upper" / "random_shared-seed1.json").read_text())
    assert stored["key"]["removed"] == first.random_sets["random_shared"][1]
    assert (tmp_path / "upper" / "full.csv").is_file()
    again = lh.functional_pathways(
        tiny, family(2), masks, random_seeds=(0, 1), cache_dir=tmp_path, progress=False
    )
    assert len(fake.calls) == 14, "a second call reuses every run"
    pd.testing.assert_frame_equal(again.runs, first.runs)
    changed = {"upper": masks["upper"], "title": heads("L0H0", "L0H2", "L1H2", "L1H3")}
    lh.functional_pathways(
        tiny, family(2), changed, random_seeds=(0, 1), cache_dir=tmp_path, progress=False
    )
    # the shared set is unchanged; the unused set lost L0H2: only its 3 runs per task are new
    assert len(fake.calls) == 14 + 2 * 3
    lh.functional_pathways(
        tiny, family(2), masks, random_seeds=(0, 1), n_eval=3, cache_dir=tmp_path, progress=False
    )
    assert len(fake.calls) == 20 + 14, "other settings are not reused"


def test_summary_and_verdict_read_the_direction():
    result = PathwaysResult.example()
    summary = result.summary().loc["upper"]
    assert (summary["CE full"], summary["CE shared"], summary["CE random shared"]) == (1, 3, 2)
    assert summary["shared hurts more"] and summary["unused does not hurt"]
    verdict = result.verdict()
    assert "hurts more than its random control on 1/1 tasks (the paper's direction)" in verdict
    assert "does not raise the CE on 1/1 tasks" in verdict
    flipped = PathwaysResult.example()
    flipped.runs.loc[flipped.runs["condition"] == "unused", "answer_ce"] = 5.0
    assert not flipped.summary().loc["upper", "unused does not hurt"]
    assert "does not raise the CE on 0/1 tasks." in flipped.verdict()
    assert math.isnan(result.to_frame().loc[("upper", "full model"), "accuracy std"])


# -- training the family ---------------------------------------------------------------------------
def test_train_family_masks_trains_once_with_negative_init(tiny, tmp_path):
    config = lh.TrainingConfig(steps=2, batch_size=4, n_eval=4, init_mean=-3.0, precision="float32")
    with pytest.warns(UserWarning, match=r"did not learn .* heads kept\): from init_mean=-3"):
        masks = lh.train_family_masks(tiny, family(2), config, out=tmp_path, progress=False)
    assert list(masks) == ["upper", "title"]
    info = json.loads((tmp_path / "upper" / "training.json").read_text())
    assert info["config"]["init_mean"] == -3.0
    assert masks["upper"].n_selected < 8, "negative init starts with heads removed"
    stamp = (tmp_path / "upper" / "training.json").stat().st_mtime_ns
    again = lh.train_family_masks(tiny, family(2), config, out=tmp_path, progress=False)
    assert (tmp_path / "upper" / "training.json").stat().st_mtime_ns == stamp
    assert again["title"] == masks["title"]
    assert lh.load_masks(tmp_path).keys() == masks.keys()
    other = lh.TrainingConfig(steps=2, batch_size=4, n_eval=4, init_mean=4.0, precision="float32")
    with pytest.raises(ValueError, match=r"other settings \(init_mean: saved -3.0, this run 4.0\)"):
        lh.train_family_masks(tiny, family(2), other, out=tmp_path, progress=False)


def test_default_training_config_is_the_short_negative_init_schedule(tiny, tmp_path, monkeypatch):
    seen = []

    def train(model, task, config, **options):
        seen.append((config, options["resume"]))
        return MaskTrainingResult.example()

    monkeypatch.setattr("lens_heads.engine._training_folder.train_mask", train)
    masks = lh.train_family_masks(tiny, family(1), out=tmp_path, progress=False)
    assert seen == [(lh.TrainingConfig.short(init_mean=-3.0), True)]
    assert (tmp_path / "upper" / "mask.safetensors").is_file() and list(masks) == ["upper"]


# -- the analysis ----------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:the .* mask did not learn")  # two steps
def test_table6_analysis_trains_evaluates_and_resumes(tiny, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(lh, "load_model", lambda spec, **kw: tiny)
    words = [f"w{chr(97 + i)}{chr(97 + j)}" for i in range(4) for j in range(4)]
    files = []
    for name, rule in (("capitalize", str.capitalize), ("lowercase_last_letter", lambda w: w[-1])):
        path = tmp_path / f"{name}.json"  # each file states its instruction (its name lends none)
        examples = [{"input": w, "output": rule(w)} for w in words]
        instruction = lh.get_task(name).instruction
        path.write_text(json.dumps({"instruction": instruction, "examples": examples}))
        files.append(str(path))
    out = tmp_path / "out"
    argv = ["--tasks", ",".join(files), "--steps", "2", "--batch-size", "4", "--holdout", "4"]
    argv += ["--n-eval", "2", "--seeds", "1", "--out", str(out)]
    assert table6_pathways.main(argv) == 0
    printed = capsys.readouterr().out
    assert "# Functional pathways (Heads up! Table 6)" in printed
    assert "| capitalize | full model |" in printed
    for name in ["table.csv", "runs.csv", "figure.html", "masks/capitalize/mask.safetensors"]:
        assert (out / name).is_file(), name
    assert (out / "tasks-per-head" / "figure.html").is_file()
    loaded = PathwaysResult.load(out)
    assert loaded.tasks == ["capitalize", "lowercase_last_letter"]
    assert loaded.config["training"]["init_mean"] == 0.0, "the init that trains on SmolLM2"
    stored = json.loads((out / "numbers.json").read_text())["family"]
    table = loaded.summary()
    assert stored["tasks"] == 2 and stored["shared heads"] == len(loaded.shared)
    assert stored["unused: tasks improved"] == int((table["CE unused"] < table["CE full"]).sum())
    assert stored["shared: CE rise"] == pytest.approx(
        float((table["CE shared"] - table["CE full"]).mean()), abs=0.006
    )
    stamps = {p: p.stat().st_mtime_ns for p in (out / "runs").rglob("*.json")}
    assert table6_pathways.main(argv) == 0
    assert {p: p.stat().st_mtime_ns for p in (out / "runs").rglob("*.json")} == stamps


def test_table6_analysis_rejects_bad_configs_before_loading_a_model(monkeypatch):
    monkeypatch.setattr(lh, "load_model", lambda spec, **kw: pytest.fail("loaded a model"))
    with pytest.raises(ValueError, match="at least two related tasks"):
        table6_pathways.run(table6_pathways.Config(tasks=("capitalize",)))
    with pytest.raises(ValueError, match="exceeds holdout"):
        table6_pathways.run(table6_pathways.Config(n_eval=50, holdout=10))
    assert table6_pathways.Config("gemma-3-270m").family == ("en-fr", "en-de", "en-es")
    assert table6_pathways.Config().family[0] == "capitalize"
