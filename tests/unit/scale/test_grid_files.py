"""Every grid config shipped in docs/grids/ validates (the same check `lens-heads grid CONFIG
--check` runs), so a documented command never fails on its own config."""

from __future__ import annotations

from pathlib import Path

import pytest

from lens_heads.cli import main

GRIDS = sorted((Path(__file__).resolve().parents[3] / "docs" / "grids").glob("*.toml"))


@pytest.mark.parametrize("config", GRIDS, ids=lambda p: p.stem)
def test_shipped_grid_config_validates(config, tmp_path, capsys):
    assert main(["grid", str(config), "--out", str(tmp_path / "out"), "--check"]) == 0
    assert "cell" in capsys.readouterr().out.lower()


def test_there_are_grid_configs():
    assert {p.stem for p in GRIDS} >= {"laptop", "table1_translation"}
