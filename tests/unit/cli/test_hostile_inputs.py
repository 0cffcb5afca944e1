"""Issue 43, one test per input that was silent, wrong or refused only after the work: each is
now refused with one clear line before any model loads (``no_load``) or any stage computes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

import lens_heads as lh
import lens_heads.cli._common as common
from lens_heads.cli import main


@pytest.fixture()
def no_load(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a model loaded before the arguments were checked")

    monkeypatch.setattr(common, "load_model", refuse)
    monkeypatch.setattr("lens_heads.core.load_model", refuse)


def _error(capsys, argv: list[str]) -> str:
    """The one error line of ``lens-heads ARGV`` (a usage error or a refused run: exit 2)."""
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's usage errors
        code = exit_.code
    assert code == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(lines) == 1, lines
    return lines[0]


def _masks(folder: Path, n_layers: int, n_heads: int) -> str:
    folder.mkdir()
    lh.HeadMask.from_heads(["L0H0"], n_layers=n_layers, n_heads=n_heads).save(
        folder / "a.safetensors"
    )
    return str(folder)


ATLAS = ["--task", "none", "--n-sequences", "2", "--length", "4", "--permutations", "10"]


@pytest.mark.parametrize("k", [None, "100", "5"])
def test_atlas_top_sets_of_more_than_half_the_heads_are_refused(
    k, tiny_dir, tmp_path, capsys, no_load
):
    """``--k 100`` (and the default 10) on a model of 8 heads once reported every pair sharing
    all its heads "against 8.0 at random"."""
    argv = ["atlas", str(tiny_dir), *ATLAS, "--out", str(tmp_path / "out")]
    line = _error(capsys, argv + ([] if k is None else ["--k", k]))
    assert f"k={k or 10} top heads of 8" in line and "--k 4" in line


def test_the_library_refuses_them_too_and_an_overlap_past_half_is_no_number(tiny):
    from lens_heads.atlas import top_k_overlap

    with pytest.raises(lh.LensHeadsError, match="k=5 top heads of 8"):
        lh.head_atlas(tiny, task=None, k=5)
    overlap, expected = top_k_overlap(torch.arange(8.0).numpy(), torch.arange(8.0).numpy(), 5)
    assert overlap != overlap and expected != expected  # NaN: no statistic to report


def test_old_and_new_spelling_of_one_flag_together_are_refused(tiny_dir, tmp_path, capsys, no_load):
    """``--random-seeds 0 --seeds 1`` once evaluated with seeds [1] after a deprecation line."""
    argv = ["train-mask", "--model", str(tiny_dir), "--task", "capitalize"]
    argv += ["--random-seeds", "0", "--seeds", "1", "--out", str(tmp_path / "out")]
    line = _error(capsys, argv)
    assert "--seeds and --random-seeds set one option" in line
    from lens_heads.core._settings import configure, seeds_from_count
    from lens_heads.demo import DemoConfig

    both = {"generate_tokens": 2, "max_new_tokens": 3}
    with pytest.raises(lh.LensHeadsError, match="set one"):
        configure(DemoConfig, None, both, "run_demo")
    both = {"random_controls": 2, "random_seeds": (5,)}
    with pytest.warns(DeprecationWarning), pytest.raises(lh.LensHeadsError, match="set one"):
        seeds_from_count(both, "ablate_heads", "random_controls", 3)


def test_masks_of_another_model_are_refused_before_the_model_loads(
    tiny_dir, tmp_path, capsys, no_load
):
    """Such masks once failed after every stage with 'Length of values (6) does not match'."""
    masks = _masks(tmp_path / "masks", 3, 2)
    argv = [
        "atlas",
        str(tiny_dir),
        *ATLAS,
        "--k",
        "4",
        "--masks",
        masks,
        "--out",
        str(tmp_path / "o"),
    ]
    line = _error(capsys, argv)
    assert "masks=" in line and "3x2 model" in line and "not of this 2x4 model" in line


def test_an_unreadable_mask_file_is_named_unreadable_never_skipped(
    tiny_dir, tmp_path, capsys, no_load
):
    masks = tmp_path / "masks"
    masks.mkdir()
    (masks / "broken.safetensors").write_bytes(b"\x00\x01 not a safetensors file")
    argv = [
        "atlas",
        str(tiny_dir),
        *ATLAS,
        "--k",
        "4",
        "--masks",
        str(masks),
        "--out",
        str(tmp_path / "o"),
    ]
    line = _error(capsys, argv)
    assert (
        "broken.safetensors is not a readable safetensors file" in line and "no masks" not in line
    )
    if os.geteuid() != 0:  # root reads every file: permissions cannot be planted there
        good = masks / "good.safetensors"
        lh.HeadMask.from_heads(["L0H0"], n_layers=2, n_heads=4).save(good)
        (masks / "broken.safetensors").unlink()
        good.chmod(0)
        assert "cannot be read" in _error(capsys, argv)


def test_an_empty_mask_folder_is_refused_before_the_model_loads(
    tiny_dir, tmp_path, capsys, no_load
):
    (tmp_path / "masks").mkdir()
    argv = ["atlas", str(tiny_dir), *ATLAS, "--k", "4", "--masks", str(tmp_path / "masks")]
    line = _error(capsys, [*argv, "--out", str(tmp_path / "o")])
    assert "no masks in" in line


@pytest.mark.parametrize(
    ("command", "flag"),
    [("atlas", "--bootstrap"), ("atlas", "--permutations"), ("atlas", "--n-sequences"),
     ("sweep-estimates", "--path-points"), ("sweep-estimates", "--ig-steps")],
)  # fmt: skip
def test_counts_that_allocate_have_a_bound_named_in_the_message(
    command, flag, tiny_dir, tmp_path, capsys, no_load
):
    """``--bootstrap 1e12`` once died with a numpy allocation traceback after the whole atlas."""
    if command == "atlas":
        argv = ["atlas", str(tiny_dir), "--task", "none", "--k", "4"]
    else:
        argv = ["sweep-estimates", "--model", str(tiny_dir), "--task", "capitalize"]
        argv += ["--heads", "L0H1,L1H2"]
    line = _error(capsys, [*argv, flag, str(10**12), "--out", str(tmp_path / "out")])
    assert f"{flag}: must be at most" in line


def test_an_unknown_atlas_task_is_refused_before_the_model_loads(
    tiny_dir, tmp_path, capsys, no_load
):
    """``atlas --task capitalise`` was once refused only after the model loaded and ran."""
    line = _error(capsys, ["atlas", str(tiny_dir), "--task", "capitalise", "--k", "4",
                           "--out", str(tmp_path / "out")])  # fmt: skip
    assert "capitalise" in line and "capitalize" in line


def test_head_atlas_with_a_mapping_for_config_is_a_clear_error(tiny):
    """``lh.head_atlas(model, {"task": None})`` once raised AttributeError."""
    from lens_heads.atlas import AtlasConfig
    from lens_heads.core._settings import configure

    with pytest.raises(TypeError):  # under pytest, the runtime type checker says it first
        lh.head_atlas(tiny, {"task": None})
    with pytest.raises(lh.LensHeadsError, match="config must be a AtlasConfig, got dict"):
        configure(AtlasConfig, {"task": None}, {}, "head_atlas")  # what a user sees
    atlas = lh.head_atlas(tiny, task=None, k=4, n_sequences=2, length=4, permutations=10,
                          bootstrap=10)  # fmt: skip
    assert len(atlas.frame) == 8


def test_a_resample_prompt_without_a_donor_is_found_before_any_stage(tiny, tmp_path):
    """... once found only after the detector and readout stages computed."""
    task = lh.Task("lengths", tuple(lh.core.Example("a" * (i + 1), "b") for i in range(12)))
    path = tmp_path / "lengths.json"
    path.write_text(
        "[" + ",".join(f'{{"input": "{e.input}", "output": "b"}}' for e in task.examples) + "]"
    )
    with pytest.raises(lh.LensHeadsError, match="no reference prompt has as many"):
        lh.head_atlas(tiny, task=str(path), ablations=("resample",), n_eval=4, n_reference=2,
                      k=4, out=tmp_path / "out")  # fmt: skip
    assert not any((tmp_path / "out").glob("*/.complete")), "no stage computed"


def test_the_command_finds_it_with_the_tokenizer_alone(tiny_dir, tmp_path, capsys, no_load):
    path = tmp_path / "lengths.json"
    path.write_text(
        "[" + ",".join(f'{{"input": "{"a" * (i + 1)}", "output": "b"}}' for i in range(12)) + "]"
    )
    line = _error(capsys, ["atlas", str(tiny_dir), "--task", str(path), "--ablations", "resample",
                           "--n-eval", "4", "--n-reference", "2", "--k", "4",
                           "--out", str(tmp_path / "out")])  # fmt: skip
    assert "no reference prompt has as many" in line


def test_another_head_count_in_an_atlas_folder_names_the_model(tmp_path):
    """The same reuse with another head count once ended in 'cannot convert float NaN'."""
    options = dict(task=None, k=4, n_sequences=2, length=4, permutations=10, bootstrap=10)
    lh.head_atlas(lh.tiny_model(2, 4), out=tmp_path, **options)
    with pytest.raises(lh.LensHeadsError, match=r"another model .*another configuration"):
        lh.head_atlas(lh.tiny_model(3, 4), out=tmp_path, **options)
