"""The atlas page in a real headless Chromium (issue 35): it loads offline, a click on a head of
the heat map opens that head's card, and the card shows the head's stored numbers.

The browser is the session's ``browser`` fixture (``tests/conftest.py``): CI installs Debian's
``chromium`` and ``chromium-driver`` (``.ci/run``); on a machine without them the test is
skipped, except under CI (``CI=true``), where a missing browser fails."""

from __future__ import annotations

import pytest

import lens_heads as lh
from lens_heads.atlas import AtlasConfig, head_atlas


def test_clicking_a_head_opens_its_card(browser, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    model = lh.tiny_model(n_layers=3, n_heads=4, n_kv_heads=2, seed=0)
    config = AtlasConfig(task=None, n_sequences=3, length=5, k=6, permutations=10, bootstrap=10)
    atlas = head_atlas(model, config, out=tmp_path)
    browser.get((tmp_path / "atlas" / "atlas.html").as_uri())
    WebDriverWait(browser, 20).until(
        lambda d: d.execute_script(
            "const g = document.getElementById('atlas-map'); return !!(g && g._fullLayout);"
        )
    )
    assert "No head selected" in browser.find_element(By.ID, "atlas-card").text
    # the page position of cell (layer 2, head 3) from plotly's own axes, then a real click there
    x, y = browser.execute_script(
        """const g = document.getElementById('atlas-map'); const l = g._fullLayout;
        const box = g.getBoundingClientRect();
        return [box.left + l.xaxis._offset + l.xaxis.l2p(3),
                box.top + l.yaxis._offset + l.yaxis.l2p(2)];"""
    )
    body = browser.find_element(By.TAG_NAME, "body")
    origin = body.rect
    ActionChains(browser).move_to_element_with_offset(
        body,
        int(x - origin["x"] - origin["width"] / 2),
        int(y - origin["y"] - origin["height"] / 2),
    ).click().perform()
    WebDriverWait(browser, 10).until(lambda d: d.find_elements(By.ID, "atlas-card-title"))
    card = browser.find_element(By.ID, "atlas-card")
    assert browser.find_element(By.ID, "atlas-card-title").text == "L2H3"
    assert "key-value group 1" in card.text
    expected = atlas.frame.set_index("label").loc["L2H3", "previous token"]
    row = next(r for r in card.find_elements(By.TAG_NAME, "tr") if "previous token" in r.text)
    assert float(row.find_element(By.CLASS_NAME, "value").text) == pytest.approx(expected, rel=1e-2)
    assert browser.execute_script(
        "return document.getElementById('atlas-pattern').data[0].z.length"
    ) == len(atlas.example_tokens)
