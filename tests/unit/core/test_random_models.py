"""The papers' models without their weights (issue 44): shipped configurations, their shapes before
anything loads, random-weight models on the meta device and on the CPU with the right head counts,
the mark every result of such a model carries, and what refuses them."""

from __future__ import annotations

import pytest
import torch

import lens_heads as lh
from lens_heads.core._model_configs import CONFIG_ALIASES, hf_config, model_config
from lens_heads.core._model_shape import model_shape
from lens_heads.core._models import ModelNotAvailableError, model_name
from lens_heads.core._random_models import RANDOM_WEIGHTS, RandomWeightsError, is_random

#: the papers' models of the issue, with their (layers, query heads, KV heads)
PAPERS = {
    "llama-3.1-8b-instruct": (32, 32, 8),
    "llama-3.1-70b-instruct": (80, 64, 8),
    "qwen2.5-0.5b-instruct": (24, 14, 2),
    "qwen2.5-1.5b-instruct": (28, 12, 2),
    "qwen2.5-7b-instruct": (28, 28, 4),
    "qwen2.5-14b-instruct": (48, 40, 8),
    "phi-3.5-mini-instruct": (32, 32, 32),
    "mistral-7b-instruct-v0.3": (32, 32, 8),
    "gemma-2-9b": (42, 16, 8),
}


def test_every_model_of_the_issue_ships_a_configuration_with_its_source():
    assert set(PAPERS) <= set(CONFIG_ALIASES)
    for alias in CONFIG_ALIASES:
        record = model_config(alias)
        assert record["alias"] == alias and record["hf_id"] and len(record["source"]) > 40
        assert record["config"]["architectures"] and record["config"]["model_type"]


@pytest.mark.parametrize("alias", sorted(CONFIG_ALIASES))
def test_the_shape_counts_the_parameters_transformers_builds(alias):
    """The plan's arithmetic (ModelShape.n_params) against the model transformers makes from the
    configuration on the meta device (no memory)."""
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        built = AutoModelForCausalLM.from_config(hf_config(alias))
    shape = model_shape(alias)
    assert shape.n_params == sum(p.numel() for p in built.parameters())
    assert shape.complete


def test_known_sizes():
    assert round(model_shape("llama-3.1-8b-instruct").n_params / 1e9, 2) == 8.03
    assert round(model_shape("qwen2.5-0.5b-instruct").n_params / 1e6) == 494


@pytest.mark.parametrize("alias", sorted(set(PAPERS) - {"phi-3.5-mini-instruct"}))
def test_random_weight_shapes_build_on_the_meta_device_with_the_right_heads(alias):
    model = lh.random_model(alias, device="meta", dtype="bfloat16")
    layers, heads, kv = PAPERS[alias]
    assert lh.head_shape(model) == (layers, heads)
    assert model.cfg.n_key_value_heads == kv
    assert next(model.parameters()).is_meta and next(model.parameters()).dtype == torch.bfloat16
    assert is_random(model) and model_name(model) == f"{alias} [{RANDOM_WEIGHTS}]"


def test_phi3_on_the_meta_device_is_refused_with_the_way_out():
    with pytest.raises(lh.LensHeadsError, match=r"fused QKV.*use its shape"):
        lh.random_model("phi-3.5-mini-instruct", device="meta")


def _small(alias: str, **changes):
    """The configuration of ``alias`` with its heads kept and everything else made small."""
    values = model_config(alias)["config"]
    heads = values["num_attention_heads"]
    values.update(
        num_hidden_layers=2, hidden_size=8 * heads, intermediate_size=32, vocab_size=320,
        head_dim=8, max_position_embeddings=256,
    )  # fmt: skip
    values.pop("rope_scaling", None)
    values.update(changes)
    return values


@pytest.mark.parametrize("alias", ["qwen2.5-7b-instruct", "gemma-2-9b", "phi-3.5-mini-instruct"])
def test_random_weight_models_build_on_the_cpu_with_the_right_heads(alias):
    model = lh.random_model(_small(alias), device="cpu", dtype="float32", seed=3)
    _, heads, kv = PAPERS[alias]
    assert lh.head_shape(model) == (2, heads)
    assert (model.cfg.n_key_value_heads or heads) == kv  # None: no grouping (Phi-3)
    logits = model(torch.tensor([[1, 5, 9, 12]]))
    assert logits.shape == (1, 4, 320) and bool(torch.isfinite(logits).all())
    again = lh.random_model(_small(alias), device="cpu", dtype="float32", seed=3)
    assert torch.equal(again(torch.tensor([[1, 5, 9, 12]])), logits), "seeded"
    assert is_random(model) and RANDOM_WEIGHTS in model_name(model)


def test_load_model_refuses_a_configuration_without_weights_and_names_random_model():
    with pytest.raises(ModelNotAvailableError, match=r"lh\.random_model\('llama-3.1-8b-instruct'"):
        lh.load_model("llama-3.1-8b-instruct")


def test_what_reports_accuracy_refuses_random_weights(tmp_path):
    model = lh.random_model(_small("qwen2.5-0.5b-instruct"), verify=False)
    with pytest.raises(RandomWeightsError, match="random weights: time and memory only"):
        lh.evaluate(model, "capitalize", ["original"], n_eval=2)
    from lens_heads.demo import DemoConfig, run_demo

    with pytest.raises(RandomWeightsError, match="the demo reports accuracy"):
        run_demo(tmp_path / "demo", DemoConfig(model=model, steps=1))


def test_a_training_result_says_its_weights_are_random():
    model = lh.random_model(_small("qwen2.5-0.5b-instruct"), verify=False)
    result = lh.train_mask(model, "capitalize", lh.TrainingConfig(steps=1, batch_size=2, n_eval=0))
    assert RANDOM_WEIGHTS in result.model


def test_a_device_map_builds_each_part_where_it_says():
    values = _small("qwen2.5-0.5b-instruct")
    layout = {name: "cpu" for name in ("model.embed_tokens", "model.norm", "model.rotary_emb")}
    layout |= {"model.layers.0": "cpu", "model.layers.1": "cpu", "lm_head": "cpu"}
    model = lh.random_model(values, device_map=layout, verify=True)
    assert bool(torch.isfinite(model(torch.tensor([[1, 2, 3]]))).all())
    with pytest.raises(lh.LensHeadsError, match=r"places no device for model\.layers\.1"):
        lh.random_model(
            values, device_map={k: v for k, v in layout.items() if k != "model.layers.1"}
        )
