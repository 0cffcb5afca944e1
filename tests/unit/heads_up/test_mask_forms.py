"""Issue 72: one mask-like input everywhere. Every public function that takes a mask takes it
in each of four forms -- a ``HeadMask``, a mask file, a ``train-mask`` output folder and a
``MaskTrainingResult`` -- through one resolver (``lens_heads.core.resolve_mask``); a removal
order takes the trained weights in each form that holds them and refuses a binary mask with
the fix. The walk below lists every public function with a mask parameter, so a new one
without a call here fails."""

from __future__ import annotations

import importlib
import inspect

import pytest

import lens_heads as lh

PUBLIC = ("lens_heads", "lens_heads.core", "lens_heads.engine", "lens_heads.heads_up")
TOKENS = [[1, 2, 3]]


def _figure4_stats(model, mask):
    import lens_heads.heads_up as hu

    return hu.figure4_stats(model, ["cat", "dog"], "Capitalize the word.", mask, n_prompts=2)


def _table8(model, mask):
    import lens_heads.heads_up as hu

    return hu.table8(
        model, "capitalize", mask, alphas=(0.0, 1.0), n_eval=2, max_new_tokens=1, progress=False
    )


def _apply_mask(model, mask):
    with lh.apply_mask(model, mask):
        model("cat")


#: every public function with a ``mask`` (or ``other_mask``) parameter: a call with the mask
CALLS = {
    "alpha_curve": lambda m, mask: lh.alpha_curve(
        m, "capitalize", mask, alphas=(0.0, 1.0), n_eval=2, max_new_tokens=1, progress=False
    ),
    "apply_mask": _apply_mask,
    "attention_on_target": lambda m, mask: lh.attention_on_target(
        m, ["the cat"], ["cat"], mask=mask
    ),
    "evaluate": lambda m, mask: lh.evaluate(
        m, "capitalize", ["mask"], mask=mask, n_eval=2, max_new_tokens=1, progress=False
    ),
    "evaluate other_mask": lambda m, mask: lh.evaluate(
        m,
        "capitalize",
        ["other_mask"],
        other_mask=mask,
        n_eval=2,
        max_new_tokens=1,
        progress=False,
    ),
    "figure4_similarity": lambda m, mask: lh.figure4_similarity(m, "cat", "Capitalize.", mask),
    "figure4_stats": _figure4_stats,
    "generate": lambda m, mask: lh.generate(m, "cat", mask=mask, max_new_tokens=1),
    "greedy_generate": lambda m, mask: lh.greedy_generate(m, TOKENS, mask=mask, max_new_tokens=1),
    "kv_groups_removed": lambda m, mask: lh.heads_up.kv_groups_removed(mask, 2, permutations=10),
    "logit_lens": lambda m, mask: lh.logit_lens(m, "cat", mask=mask),
    "mask_hooks": lambda m, mask: lh.mask_hooks(mask, m),
    "mask_info": lambda m, mask: lh.engine.mask_info(mask, mask),
    "table8": _table8,
    "top_tokens": lambda m, mask: lh.top_tokens(m, "cat", mask=mask),
}


def _mask_taking() -> set[str]:
    found = set()
    for name in PUBLIC:
        package = importlib.import_module(name)
        for export in package.__all__:
            function = getattr(package, export)
            if not callable(function) or inspect.isclass(function):
                continue
            try:
                parameters = inspect.signature(function).parameters
            except (TypeError, ValueError):
                continue
            found |= {
                export if parameter == "mask" else f"{export} {parameter}"
                for parameter in ("mask", "other_mask")
                if parameter in parameters
            }
    return found


@pytest.fixture(scope="module")
def trained(tiny, tmp_path_factory):
    """A mask trained for two steps on the tiny model, saved; each form of it by name."""
    result = lh.train_mask(tiny, "capitalize", steps=2, batch_size=2, n_eval=2, progress=False)
    folder = tmp_path_factory.mktemp("trained")
    result.save(folder)
    return {
        "HeadMask": result.mask,
        "file": str(folder / "mask.safetensors"),
        "folder": folder,
        "result": result,
    }


def test_every_mask_taking_function_is_called_here():
    assert _mask_taking() == set(CALLS)


@pytest.mark.parametrize("form", ["HeadMask", "file", "folder", "result"])
@pytest.mark.parametrize("name", sorted(CALLS))
def test_every_mask_taking_function_takes_every_form(name, form, tiny, trained):
    CALLS[name](tiny, trained[form])


@pytest.mark.parametrize("form", ["file", "folder", "result"])
def test_a_removal_order_takes_the_trained_weights_in_each_form(form, tiny, trained):
    expected = lh.removal_sweep(tiny, "cat", trained["result"].W, max_new_tokens=0).order
    order = trained["folder"] if form == "file" else trained[form]  # the folder's training file
    order = order / "training.safetensors" if form == "file" else order
    assert lh.removal_sweep(tiny, "cat", order, max_new_tokens=0).order == expected


@pytest.mark.parametrize("form", ["HeadMask", "file"])
def test_a_binary_mask_as_an_order_is_refused_with_the_fix(form, tiny, trained):
    with pytest.raises(lh.LensHeadsError, match=r"binary mask gives no removal order.*\.W"):
        lh.removal_sweep(tiny, "cat", trained[form])


def test_a_wrong_type_names_what_it_got_and_what_to_pass():
    with pytest.raises(lh.LensHeadsError, match=r"a mask must be a HeadMask, a mask file.*got int"):
        lh.core.resolve_mask(3)
