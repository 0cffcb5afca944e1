"""The public boundary (issue 34): ``lh.__all__`` and each subpackage's ``__all__`` are pinned
(a change to the API is a change to this file, on purpose), every public function takes at most
ten parameters (settings travel as objects), and ``lh.LensHeadsError`` catches every error the
library raises on purpose, through each public entry point."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest
import torch

import lens_heads as lh

ROOT = Path(__file__).resolve().parents[3]
MAX_PARAMETERS = 10

API = {
    "lens_heads": [
        "MODEL_ALIASES", "AblationResult", "AlphaCurve", "AtlasConfig", "DemoConfig", "DemoReport",
        "EvaluationConfig", "EvaluationResult", "Generation", "GridConfig", "GridResult",
        "HeadAtlas", "HeadImportance", "HeadMask", "HeadRoles", "HeadScale", "LanguageHeads",
        "LensConfig", "LensHeadsError", "MaskStatistics", "MaskTrainingResult", "PathwaysResult",
        "Plan", "PlanConfig", "PromptFormat", "RolesConfig", "ScoreConfig", "SimilarityStats",
        "SweepConfig", "SweepResult", "TRaterResult", "Task", "TasksPerHead", "TrainingConfig",
        "TranslationScores", "ablate_heads", "ablated", "alpha_curve", "apply_mask",
        "attention_on_target", "evaluate", "expected_random_jaccard", "figure4_similarity",
        "functional_pathways", "generate", "get_task", "greedy_generate", "head_atlas",
        "head_importance", "head_roles", "head_shape", "jaccard", "language_heads",
        "layer_similarity", "list_tasks", "load_masks", "load_model", "logit_lens", "mask_hooks",
        "mask_statistics", "plan", "plot_sweeps", "random_model", "removal_sweep", "run_demo",
        "run_grid", "tasks_per_head", "tiny_model", "top_tokens", "train_family_masks",
        "train_mask", "translation_scores", "trater_scores", "verify_model",
        "AttentionConfig", "DecodingConfig", "GenerationConfig", "HiddenStatesConfig",
        "ImportanceConfig", "LanguageHeadsConfig", "ReadoutConfig", "TopTokensConfig",
        "TRaterConfig",
    ],
    "lens_heads.core": [
        "CORPUS_LANGUAGES", "INSTRUCTION_TEMPLATE", "MODEL_ALIASES", "DecodingConfig",
        "EncodedExample", "Example", "Fingerprint", "Generation", "GenerationConfig", "HeadMask",
        "HeadScale", "InputError", "LensHeadsError", "LibraryMismatchError", "MaskLike",
        "ModelLike", "ParallelCorpus", "PromptFormat", "PromptLike", "Stages", "Task",
        "UnsupportedModelError", "ablated", "answer_logits", "apply_mask", "claim_folder",
        "code_version", "collate", "configure", "content_hash", "data_hashes", "encode_example",
        "expected_random_jaccard",
        "field_docs", "format_head", "generate", "get_task", "greedy_generate", "has_chat_template",
        "hash_sources", "head_shape", "hybrid_few_shot", "identify_language", "jaccard",
        "library_versions",
        "list_tasks", "load_model", "machine", "markdown_table", "mask_hooks", "pad_token_id",
        "parallel_corpus", "random_model", "resolve_mask", "run_record", "save_figures",
        "tiny_model", "verify_model", "write_atomic", "write_plotly_js",
        "Contents", "MatchRule", "PlotlyJs", "TaskKind", "MaskSource", "TrainedMask",
        "ResultRepr",
    ],
    "lens_heads.engine": [
        "METRICS", "SETTINGS", "TRANSLATION_METRICS", "WORD_METRICS", "CheckpointError",
        "EvaluationConfig", "EvaluationResult", "EvaluationRun", "MaskTrainer",
        "MaskTrainingResult", "TrainingConfig", "check_training", "evaluate", "evaluation_figure",
        "mask_info", "native_bf16", "run_plan", "train_mask", "train_or_resume", "with_overrides",
    ],
    "lens_heads.heads_up": [
        "DEFAULT_ALPHAS", "ESTIMATES", "AlphaCurve", "AttentionConfig", "AttentionResult",
        "DependentChanges",
        "EstimateErrors", "EstimateErrorsConfig", "HeadRoles", "HiddenStatesConfig",
        "KVGroupsRemoved", "LensConfig",
        "LogitLensResult", "MaskStatistics", "PathwaysResult", "ReadoutConfig", "RolesConfig",
        "SimilarityResult", "SimilarityStats", "SweepConfig", "SweepEstimates", "SweepResult",
        "TasksPerHead", "TopTokensConfig", "agreement_table", "agreement_within", "alpha_curve",
        "attention_on_target", "candidate_words",
        "check_alphas", "cohen_kappa", "dependent_changes", "estimate_errors",
        "figure4_similarity", "figure4_stats", "functional_pathways", "head_roles",
        "kv_groups_removed", "layer_similarity", "load_masks", "logit_lens", "mask_statistics",
        "pathway_heads", "plot_sweeps", "removal_sweep", "sweep_estimates", "sweep_example",
        "table8", "tasks_per_head", "top_tokens", "train_family_masks",
        "MaskSet", "OrderLike", "TargetSpec", "TopTokensResult",
    ],
    "lens_heads.alignment": [
        "CATEGORIES", "AblationResult", "AcrossModels", "AlignmentError", "Consistency",
        "EflomalAligner", "ScoreConfig", "SimAligner", "TRaterConfig", "TRaterResult",
        "TranslationScores",
        "ablate_heads", "alignment_consistency", "alignment_heads_across_models",
        "translation_scores", "trater_scores",
        "PairsLike",
    ],
    "lens_heads.lahis": [
        "HeadImportance", "ImportanceConfig", "LanguageHeads", "LanguageHeadsConfig",
        "PerplexityConfig", "PerplexityExperiment", "SoftMaskConfig", "SoftMaskExperiment",
        "TransferConfig", "TransferResult", "attention_transfer", "head_importance",
        "language_heads", "load_texts_by_language", "perplexity_experiment", "ranking_documents",
        "soft_mask_config", "soft_mask_experiment",
    ],
    "lens_heads.scale": [
        "GridConfig", "GridConfigError", "GridEvaluationConfig", "GridResult", "GridSweepConfig",
        "Plan", "PlanConfig", "PlanDoesNotFitError", "plan", "run_grid",
        "Cell",
    ],
    "lens_heads.finders": [
        "DEFAULT_METHODS", "METHODS", "SIZES", "BenchmarkConfig", "CounterfactualPair",
        "CounterfactualSet", "FaithfulnessConfig", "FaithfulnessCurve", "FinderBenchmark",
        "FinderProtocol", "MethodConfig", "ProtocolResult", "counterfactual_pairs",
        "faithfulness", "head_finder_benchmark", "pair_key", "protocol_split", "run_protocol",
        "write_mib_circuits", "write_mib_curve", "write_mib_scores",
        "PairScorer",
    ],
    "lens_heads.atlas": [
        "ABLATIONS", "DETECTORS", "AgreementConfig", "AtlasConfig", "DetectorConfig",
        "EffectsConfig", "HeadAtlas", "MeanOutputsConfig", "agreement", "builtin_relations",
        "chance_scores",
        "detect_patterns", "head_atlas", "mean_head_outputs", "ov_readout",
        "plain_single_head_effects", "relation_scores", "repeated_half_loss",
        "single_head_effects", "top_k_overlap",
    ],
    "lens_heads.demo": ["DemoConfig", "DemoReport", "run_demo"],
    "lens_heads.testing": [
        "CHECKS", "FAIL", "FAMILIES", "NOT_SUPPORTED", "PASS", "TOLERANCE", "CheckResult",
        "DoctorReport", "Family", "Reference", "doctor", "family", "output_projection",
        "run_checks", "scale_heads_hook", "tiny_checkpoint", "tiny_tokenizer",
    ],
    "lens_heads.cli": [
        "COMMANDS", "EXAMPLES", "add_settings", "build_parser", "main", "settings_from",
    ],
}  # fmt: skip


@pytest.mark.parametrize("package", sorted(API))
def test_each_api_is_pinned_and_resolves(package):
    module = importlib.import_module(package)
    assert sorted(module.__all__) == sorted(API[package]), (
        f"{package}.__all__ changed: update API here if the change is meant"
    )
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert not missing


def _public_functions(root: Path, base: Path = ROOT):
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(
                node, ast.FunctionDef | ast.AsyncFunctionDef
            ) and not node.name.startswith("_"):
                arguments = node.args
                names = [
                    a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs
                ]
                count = len(names) - (names[:1] in (["self"], ["cls"]))
                count += (arguments.vararg is not None) + (arguments.kwarg is not None)
                yield path.relative_to(base), node.name, count


def test_no_public_function_takes_more_than_ten_parameters():
    long = [
        f"{path}:{name} ({count})"
        for root in ("lens_heads", "analyses")
        for path, name, count in _public_functions(ROOT / root)
        if count > MAX_PARAMETERS
    ]
    assert not long, f"more than {MAX_PARAMETERS} parameters (use a settings object): {long}"


def test_the_count_sees_a_long_signature(tmp_path):
    (tmp_path / "m.py").write_text("def f(self, a, b, c, d, e, f, g, h, i, j, *k, l=1): pass\n")
    [(_, name, count)] = _public_functions(tmp_path, base=tmp_path)
    assert (name, count) == ("f", 12)


# -- one error to catch ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def model():
    return lh.tiny_model(n_layers=2, n_heads=4, n_kv_heads=2, seed=0)


def _bad_calls(model):
    mask = lh.HeadMask.from_heads(["L0H1"], n_layers=2, n_heads=4)
    weights = torch.zeros(2, 4)
    return {
        "load_model": lambda: lh.load_model("no-such-model"),
        "tiny_model": lambda: lh.tiny_model(n_layers=0),
        "get_task": lambda: lh.get_task("no-such-task"),
        "HeadMask.from_heads": lambda: lh.HeadMask.from_heads(["L9H0"], n_layers=2, n_heads=4),
        "HeadScale": lambda: lh.HeadScale(torch.full((2, 4), -1.0)),
        "apply_mask": lambda: lh.apply_mask(model, lh.HeadMask.ones(3, 4)).__enter__(),
        "jaccard": lambda: lh.jaccard(mask, lh.HeadMask.ones(3, 4)),
        "generate": lambda: lh.generate(model, []),
        "greedy_generate": lambda: lh.greedy_generate(model, [[1, 2]], max_new_tokens=0),
        "TrainingConfig": lambda: lh.TrainingConfig(steps=0),
        "train_mask": lambda: lh.train_mask(model, "capitalize", lh.TrainingConfig(n_eval=10**6)),
        "evaluate": lambda: lh.evaluate(model, "capitalize", n_eval=0),
        "evaluate (option)": lambda: lh.evaluate(model, "capitalize", n_evl=4),
        "removal_sweep": lambda: lh.removal_sweep(model, "apple", weights, every=0),
        "alpha_curve": lambda: lh.alpha_curve(model, "capitalize", mask, alphas=[2.0]),
        "figure4_similarity": lambda: lh.figure4_similarity(model, "apple", None, mask),
        "logit_lens": lambda: lh.logit_lens(model, "apple", top_k=10**6),
        "attention_on_target": lambda: lh.attention_on_target(model, ["a b"], ["a", "b"]),
        "translation_scores": lambda: lh.translation_scores(model, "en-fr", query="middle"),
        "ablate_heads": lambda: lh.ablate_heads(model, "en-fr", []),
        "trater_scores": lambda: lh.trater_scores(model, [], ["L0H1"]),
        "head_importance": lambda: lh.head_importance(model, []),
        "language_heads": lambda: lh.language_heads(model, quantile=2.0),
        "functional_pathways": lambda: lh.functional_pathways(model, ["capitalize"], {}),
        "mask_statistics": lambda: lh.mask_statistics({}),
        "run_grid": lambda: lh.run_grid("no-such-grid.toml", "unused"),
        "verify_model on a broken model": None,  # tests/unit/core/test_guards.py
    }


def test_lens_heads_error_catches_every_deliberate_error(model):
    escaped = {}
    for name, call in _bad_calls(model).items():
        if call is None:
            continue
        try:
            call()
        except lh.LensHeadsError:
            continue
        except Exception as error:  # a deliberate error that is not a LensHeadsError
            escaped[name] = f"{type(error).__name__}: {error}"
        else:
            escaped[name] = "no error at all"
    assert not escaped, escaped


def test_the_entry_points_take_their_settings_as_keyword_overrides(model, tmp_path):
    """Issue 45: ``train_mask``, ``head_roles`` and ``head_atlas`` take their settings' fields as
    keywords; a misspelt one is a LensHeadsError naming the closest field, before any work."""
    trained = lh.train_mask(model, "capitalize", steps=3, progress=False)
    assert trained.config.steps == 3
    roles = lh.head_roles(
        model, "capitalize", n_masks=2, steps=2, out=tmp_path / "r", progress=False
    )
    assert roles.n_masks == 2 and roles.settings["steps"] == 2
    atlas = lh.head_atlas(
        model, task="capitalize", k=4, n_eval=2, n_sequences=4, permutations=50, bootstrap=20,
        out=tmp_path / "a", progress=False,
    )  # fmt: skip
    assert atlas.settings["permutations"] == 50
    calls = {
        "stepz": lambda **kw: lh.train_mask(model, "capitalize", **kw),
        "n_mask": lambda **kw: lh.head_roles(model, "capitalize", out=tmp_path / "x", **kw),
        "permutation": lambda **kw: lh.head_atlas(model, out=tmp_path / "y", **kw),
    }
    for typo, field in [("stepz", "steps"), ("n_mask", "n_masks"), ("permutation", "permutations")]:
        call = calls[typo]
        with pytest.raises(lh.LensHeadsError, match=f"'{typo}' \\(did you mean '{field}'\\?\\)"):
            call(**{typo: 3})


def test_the_last_odd_entry_points_take_config_by_position_and_overrides(model):
    """Issue 45: the entry points whose config was keyword-only take it after their positional
    inputs, and those that refused overrides (the single-head effects, the detectors, the
    estimate errors) take its fields as keywords (a misspelt one names the closest field,
    before any forward pass)."""
    import pandas as pd

    from lens_heads.atlas import (
        AgreementConfig,
        EffectsConfig,
        agreement,
        plain_single_head_effects,
        single_head_effects,
    )

    frame = pd.DataFrame({"a": [0.1, 0.5, 0.3, 0.9], "b": [0.2, 0.4, 0.1, 0.8]})
    by_position = agreement(frame, None, AgreementConfig(permutations=50, bootstrap=20))
    by_keyword = agreement(frame, permutations=50, bootstrap=20)
    pd.testing.assert_frame_equal(by_position, by_keyword)
    prompts, answers = ["the cat sat", "a dog ran"], ["x", "y"]
    for effects in (single_head_effects, plain_single_head_effects):
        zero = effects(model, prompts, answers, EffectsConfig(ablations=("zero",)))
        assert set(zero) == {"zero"}
        assert set(effects(model, prompts, answers, ablations=("zero",))) == {"zero"}
        with pytest.raises(lh.LensHeadsError, match="'ablation' \\(did you mean 'ablations'"):
            effects(model, prompts, answers, ablation=("zero",))
    from lens_heads.atlas import DetectorConfig, chance_scores, detect_patterns
    from lens_heads.heads_up import estimate_errors

    small = DetectorConfig(n_sequences=3, length=5)
    assert chance_scores(model, n_sequences=3, length=5) == chance_scores(model, small)
    with pytest.raises(lh.LensHeadsError, match="'n_sequence' \\(did you mean 'n_sequences'"):
        detect_patterns(model, n_sequence=3)
    with pytest.raises(lh.LensHeadsError, match="'max_head' \\(did you mean 'max_heads'"):
        estimate_errors(model, "capitalize", ["L0H1"], max_head=1)


def _dataclasses_named(suffix: str) -> list[type]:
    """Every dataclass of the package whose name ends with ``suffix``, where it is defined."""
    import dataclasses
    import pkgutil

    found = []
    for info in pkgutil.walk_packages(lh.__path__, "lens_heads."):
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if (
                isinstance(obj, type)
                and dataclasses.is_dataclass(obj)
                and obj.__module__ == module.__name__
                and name.endswith(suffix)
            ):
                found.append(obj)
    return found


def _settings_classes() -> list[type]:
    return _dataclasses_named("Config")


def test_every_settings_field_is_documented_and_every_settings_class_frozen():
    """Issue 45: each field of each ``*Config`` class has its own docstring (the generated flags'
    help and the API pages read it) and no settings object changes after its checks ran."""
    import dataclasses

    from lens_heads.core._settings import field_docs

    classes = _settings_classes()
    assert len(classes) >= 20, [c.__name__ for c in classes]
    undocumented = {}
    for c in classes:
        docs = field_docs(c)
        missing = [f.name for f in dataclasses.fields(c) if not docs.get(f.name)]
        if missing:
            undocumented[f"{c.__module__}.{c.__name__}"] = missing
    assert not undocumented
    assert [c.__name__ for c in classes if not c.__dataclass_params__.frozen] == []


def _shows_its_fields(kind: type) -> str | None:
    """What is wrong with the signature of the settings class ``kind``, or None: it must list
    every field of the dataclass with its default, each keyword-only."""
    import dataclasses
    import inspect

    parameters = inspect.signature(kind).parameters
    fields = [f.name for f in dataclasses.fields(kind) if f.init]
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters.values()):
        return f"hides its fields: {inspect.signature(kind)}"
    if sorted(parameters) != sorted(fields):
        return f"lists {sorted(parameters)}, its fields are {sorted(fields)}"
    positional = [n for n, p in parameters.items() if p.kind != p.KEYWORD_ONLY]
    return f"{positional} may be given by position" if positional else None


def test_every_settings_class_shows_its_fields_keyword_only():
    """Issue 71: ``inspect.signature`` (``help()``, Shift-Tab in Jupyter, an IDE) of every
    settings class lists each of its fields with its default, all keyword-only: no
    ``(*args, **values)``, and ``EvaluationConfig(40)`` is refused instead of read as the first
    field of a part."""
    wrong = {c.__name__: why for c in _settings_classes() if (why := _shows_its_fields(c))}
    assert not wrong


def test_the_signature_check_sees_a_hidden_or_positional_field():
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Positional:
        steps: int = 1

    class Hidden(Positional):
        def __init__(self, *args, **values):
            super().__init__(*args, **values)

    assert "by position" in _shows_its_fields(Positional)
    assert "hides its fields" in _shows_its_fields(Hidden)


def test_the_cli_module_table_lists_each_modules_commands_in_order():
    """``lens_heads.cli.MODULES`` lets a command import its own module only; it must name the
    commands each module defines, in the order ``--help`` lists them."""
    import importlib

    import lens_heads.cli as cli

    for module, names in cli.MODULES.items():
        defined = [
            name for name, _, _ in importlib.import_module(f"lens_heads.cli._{module}").COMMANDS
        ]
        assert tuple(defined) == names, module
    assert [name for name, _, _ in cli.COMMANDS] == [n for ns in cli.MODULES.values() for n in ns]


INTERNAL = [
    f"lens_heads.{sub}.internal"
    for sub in ("core", "engine", "heads_up", "alignment", "lahis", "scale")
]


#: every package of lens_heads with public names: one ``__init__`` style, lazy (issue 71)
PACKAGES = [
    "lens_heads",
    *(f"lens_heads.{sub}" for sub in ("core", "engine", "heads_up", "alignment", "lahis")),
    *(f"lens_heads.{sub}" for sub in ("atlas", "finders", "scale", "demo")),
]


def test_every_package_init_is_written_one_way():
    """Issue 71: each package's ``__init__`` lists its names under ``if TYPE_CHECKING:`` and
    imports them on first use (``lazy_exports``); none imports its modules eagerly."""
    import ast
    import importlib

    eager = []
    for package in PACKAGES:
        path = importlib.import_module(package).__file__
        tree = ast.parse(Path(path).read_text())
        if "lazy_exports" not in Path(path).read_text() or any(
            isinstance(node, ast.ImportFrom)
            and node.module.startswith(f"{package}.")
            and {alias.name for alias in node.names} != {"lazy_exports"}  # the mechanism itself
            for node in tree.body
        ):
            eager.append(package)
    assert eager == []


@pytest.mark.parametrize("package", [*PACKAGES, *INTERNAL])
def test_lazy_packages_export_what_they_list(package):
    """The lazy packages (``lens_heads.core._lazy``) resolve every name of their ``__all__`` from
    the imports under ``if TYPE_CHECKING:``, each the object of its module."""
    import importlib

    module = importlib.import_module(package)
    for name in module.__all__:
        value = getattr(module, name)
        source = importlib.import_module(module._EXPORTS[name])
        assert value is getattr(source, name), name
    assert set(module.__all__) <= set(dir(module))
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        getattr(module, "no_such_name")  # noqa: B009


def _declared_twice(classes) -> dict[str, list[str]]:
    """Each field name declared by more than one class, with them: a class declares the fields
    written in its own body, not those of a shared part it takes as a base (``ChatSetting``).
    A field that holds a settings group (``RolesConfig.training``, a ``TrainingConfig``) is
    composition, not a copy: the group's fields are declared once, in the group's class."""
    import dataclasses
    import types
    import typing
    from collections import defaultdict

    groups = set(_settings_classes())

    def holds_group(hint: object) -> bool:  # a settings class, or one or None
        inner = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        return any(t in groups for t in inner)

    where: dict[str, list[str]] = defaultdict(list)
    for kind in [*classes, *_shared_parts()]:
        own = vars(kind).get("__annotations__", {})
        hints = typing.get_type_hints(kind)
        for field in dataclasses.fields(kind):
            if field.name in own and not holds_group(hints[field.name]):
                where[field.name].append(kind.__name__)
    return {name: sorted(owners) for name, owners in where.items() if len(owners) > 1}


def _shared_parts() -> list[type]:
    """The shared parts of settings classes: each ``*Setting`` dataclass built on
    ``SharedPart`` (most live in ``lens_heads.core._setting_parts``, a research line's own in its
    subpackage)."""
    from lens_heads.core._settings import SharedPart

    return [kind for kind in _dataclasses_named("Setting") if issubclass(kind, SharedPart)]


def test_no_settings_field_is_copied_into_a_new_class():
    """Issue 45: each field name is declared by one settings class or shared part (a class that
    needs a field another declares takes the part as a base, or holds the settings group, as
    ``RolesConfig`` holds a ``TrainingConfig`` and the grid an ``EvaluationConfig``);
    ``RolesConfig`` copies none of the trainer's fields (they are keywords routed into it)."""
    import dataclasses

    from lens_heads.demo import DemoConfig
    from lens_heads.engine import TrainingConfig
    from lens_heads.heads_up import RolesConfig

    found = _declared_twice(_settings_classes())
    assert not found, f"settings fields declared in two classes (compose them instead): {found}"
    trainer = {f.name for f in dataclasses.fields(TrainingConfig)}
    for holder in (RolesConfig, DemoConfig):
        assert not {f.name for f in dataclasses.fields(holder)} & trainer, holder.__name__
    assert RolesConfig(n_masks=2, lr=0.5).training.n_masks == 2
    assert DemoConfig(steps=3, lr=0.5).training.lr == 0.5


def test_the_copy_check_sees_a_copied_field():
    """Plant a settings class that copies ``TrainingConfig.noise``: the check must see it."""
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class CopyConfig:
        noise: str = "example"
        """Copied."""

    found = _declared_twice([*_settings_classes(), CopyConfig])
    assert found == {"noise": ["CopyConfig", "TrainingConfig"]}


#: for each shared part: a field, a value its checks refuse, and the error's message
BAD_VALUES = {
    "AblationSetting": ("ablation", "median", r".* takes ablation .*, got 'median'"),
    "AblationsSetting": ("ablations", ("noise",), r"ablations must be some of .*"),
    "BatchSetting": ("batch_size", -1, "batch_size must be at least [01], got -1"),
    "BootstrapSetting": ("bootstrap", 5, "bootstrap must be at least 10, got 5"),
    "ChatSetting": ("chat", "no", r"chat must be True, False or None \(auto\), got 'no'"),
    "CheckpointSetting": ("checkpoint_activations", "no", "checkpoint_activations must be .*"),
    "DocumentsSetting": ("n_docs", 0, "n_docs must be at least 1, got 0"),
    "CircuitSetting": ("sizes", (0.5, 0.1), "sizes must be at least two increasing .*"),
    "HeldOutSetting": ("n_eval", -1, "n_eval must be at least [012], got -1"),
    "InstructedSetting": ("instructed", "no", "instructed must be True or False, got 'no'"),
    "IntegratedGradientsSetting": ("ig_steps", 0, "ig_steps must be at least 1, got 0"),
    "TaskSetting": ("task", 3, "task must be a task name or file.*, got int"),
    "LoadingSetting": ("device", "gpu", r"device must be cpu, .*, got 'gpu'"),
    "LevelSetting": ("level", 1.5, r"level must lie in \(0, 1\), got 1.5"),
    "MasksSetting": ("n_masks", 0, "n_masks must be at least 1, got 0"),
    "NewTokensSetting": ("max_new_tokens", -1, "max_new_tokens must be at least [01], got -1"),
    "PermutationsSetting": ("permutations", 5, "permutations must be at least 10, got 5"),
    "PositionSetting": ("position", 1.5, "position must be an integer, got 1.5"),
    "PrecisionSetting": ("precision", "float16", "precision must be 'auto', 'bfloat16' .*"),
    "ProgressSetting": ("progress", "no", "progress must be True or False, got 'no'"),
    "RandomBlockSetting": ("length", 1, "length must be at least 2, got 1"),
    "RandomControlsSetting": ("random_seeds", "01", "random_seeds must be a list of .*"),
    "SeedSetting": ("seed", 1.5, "seed must be an integer, got 1.5"),
    "SeparatorSetting": ("separator", 2, "separator must be a string, got 2"),
    "ShotSeedSetting": ("shot_seed", 1.5, "shot_seed must be an integer, got 1.5"),
    "ShotsSetting": ("shots", -1, "shots must be at least 0, got -1"),
    "SplitSetting": ("split_seed", 1.5, "split_seed must be an integer, got 1.5"),
    "TopKSetting": ("k", 0, "k must be at least 1, got 0"),
    "TopTokensSetting": ("top_k", 0, "top_k must be at least 1, got 0"),
}


#: the fields a settings class has no default for, to build it in the test below
REQUIRED = {
    "GridConfig": {"models": ["tiny-2x4"], "tasks": ["antonym"], "seeds": [0], "schedules": {}}
}


def test_every_class_holding_a_shared_part_runs_its_checks():
    """A settings class that takes a shared part as a base (``ChatSetting``, ``SeedSetting``,
    ...) checks the part's fields with the part's one error: its ``__post_init__`` hands on to
    the part's (a class that forgot ``super().__post_init__()`` would accept ``chat="no"``).
    A part taken with other defaults (``BootstrapSetting.with_defaults(bootstrap=2000)``) keeps
    the part's type and help: only the default differs."""
    import dataclasses

    from lens_heads.core._errors import InputError, InputTypeError
    from lens_heads.core._settings import field_docs

    parts = {part.__name__: part for part in _shared_parts()}
    assert set(parts) == set(BAD_VALUES), "give each shared part a refused value in BAD_VALUES"
    held = 0
    for part_name, part in parts.items():
        name, value, message = BAD_VALUES[part_name]
        holders = [c for c in _settings_classes() if issubclass(c, part)]
        assert holders, f"{part_name} is held by no settings class"
        for kind in holders:
            held += 1
            with pytest.raises((InputError, InputTypeError), match=f"^{message}$"):
                kind(**REQUIRED.get(kind.__name__, {}), **{name: value})
            assert name not in vars(kind).get("__annotations__", {}), kind.__name__
            types = {f.name: f.type for f in dataclasses.fields(kind)}
            for field in dataclasses.fields(part):
                assert types[field.name] == field.type, (kind.__name__, field.name)
                assert field_docs(kind)[field.name] == field_docs(part)[field.name]
    assert held >= 50, held


def implementation_imports(sources: dict[str, str]) -> list[str]:
    """``file: module.name`` for each ``from lens_heads... import name`` of ``sources`` (file ->
    code) that does not come from a public namespace exporting ``name``."""
    import ast

    public = {namespace: set(names) for namespace, names in API.items()}
    found = []
    for where, source in sources.items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lens_heads"):
                found += [
                    f"{where}: {node.module}.{alias.name}"
                    for alias in node.names
                    if alias.name not in public.get(node.module or "", ())
                ]
    return found


def _user_sources() -> dict[str, str]:
    """The code of analyses/, scripts/ and the notebooks' code cells (magics left out)."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    sources = {
        str(path.relative_to(root)): path.read_text(encoding="utf-8")
        for folder in ("analyses", "scripts")
        for path in sorted((root / folder).rglob("*.py"))
    }
    for path in sorted((root / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        lines = [
            line
            for cell in cells
            if cell["cell_type"] == "code"
            for line in "".join(cell["source"]).splitlines()
            if not line.startswith(("%", "!"))
        ]
        sources[str(path.relative_to(root))] = "\n".join(lines)
    return sources


def test_analyses_scripts_and_notebooks_import_only_public_names():
    """analyses/, scripts/ and the notebooks use the toolkit as a user would: each name comes
    from a public namespace (``API``) that exports it, never from the module that defines it."""
    found = implementation_imports(_user_sources())
    assert not found, f"implementation names imported (use the public namespaces): {found}"
    planted = (
        "from lens_heads.heads_up._sweep import removal_sweep\nfrom lens_heads import evaluate"
    )
    assert implementation_imports({"x.py": planted}) == [
        "x.py: lens_heads.heads_up._sweep.removal_sweep"
    ]
