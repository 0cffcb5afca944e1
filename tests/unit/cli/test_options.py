"""The flags generated from settings classes (``lens_heads.cli._options``): a nested settings
class is a section of its own, with the library's defaults, its flags' prefix and its base."""

from __future__ import annotations

import argparse

import pytest

from lens_heads.cli._options import add_settings, settings_from
from lens_heads.core._errors import InputError
from lens_heads.lahis._importance import ImportanceConfig
from lens_heads.lahis._languages import LanguageHeadsConfig
from lens_heads.lahis._soft_mask_experiment import SoftMaskConfig, soft_mask_config


def _parser(kind: type, **options) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add_settings(parser, kind, **options)
    return parser


def test_a_nested_settings_class_is_a_section_with_the_librarys_defaults():
    parser = _parser(LanguageHeadsConfig, skip=("importance.progress",))
    assert settings_from(parser.parse_args([]), LanguageHeadsConfig) == LanguageHeadsConfig()
    config = settings_from(
        parser.parse_args(["--quantile", "0.9", "--method", "taylor", "--max-tokens", "64"]),
        LanguageHeadsConfig,
    )
    assert config.quantile == 0.9
    assert config.importance == ImportanceConfig(method="taylor", max_tokens=64)
    flags = [a.option_strings[0] for a in parser._actions if a.option_strings]
    assert flags.count("--batch-size") == 1 and "--progress" not in flags
    with pytest.raises(InputError, match="--batch-size: must be at least 1, got 0"):
        settings_from(parser.parse_args(["--batch-size", "0"]), LanguageHeadsConfig)


def test_a_section_takes_its_prefix_and_its_base():
    """The soft-mask experiment's training schedule: ``--training-*`` flags over
    ``soft_mask_config()``, whose fields the command line does not set keep its values."""
    base = soft_mask_config()
    options = {"sections": {"training": "training"}, "bases": {"training": base}}
    parser = _parser(
        SoftMaskConfig,
        only=("n_train", "training.lr", "training.batch_size"),
        sections=options["sections"],
        defaults={"training": base},
    )
    flags = {a.option_strings[0]: a.default for a in parser._actions if a.option_strings}
    assert flags["--training-lr"] == base.lr and flags["--training-batch-size"] == base.batch_size
    config = settings_from(parser.parse_args(["--training-lr", "0.05"]), SoftMaskConfig, **options)
    assert config.training.lr == 0.05 and config.training.soft and config.training.n_eval == 0
    with pytest.raises(InputError, match="--training-batch-size"):
        settings_from(parser.parse_args(["--training-batch-size", "0"]), SoftMaskConfig, **options)


def test_the_soft_mask_command_keeps_its_rate_constant():
    from lens_heads.cli import build_parser
    from lens_heads.cli._lahis import _soft_mask_settings

    args = build_parser("soft-mask-experiment").parse_args(
        ["soft-mask-experiment", "--model", "m", "--training-lr", "0.05", "--batch-size", "4",
         "--out", "o"]
    )  # fmt: skip
    config = _soft_mask_settings(args)
    assert config.training.lr == config.training.min_lr == 0.05
    assert config.batch_size == 4 and config.training.batch_size == soft_mask_config().batch_size
