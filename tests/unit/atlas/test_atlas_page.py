"""The atlas page in a real headless Chromium (issues 35 and 47): it loads offline from its folder
(plotly.js beside it), a click on a head of the heat map opens that head's card with its exact
single-head effects, the table sorts and filters, the measure menu retitles the map (plotly.js 3
ignores a title given as a bare string: the rendered title is read from the page) and a cell of
the agreement matrix opens the pair's scatter with its Spearman and interval.

The browser is the session's ``browser`` fixture (``tests/conftest.py``): CI installs Debian's
``chromium`` and ``chromium-driver`` (``.ci/run``); on a machine without them the test is
skipped, except under CI (``CI=true``), where a missing browser fails."""

from __future__ import annotations

import re

import pytest

import lens_heads as lh
from lens_heads.atlas import AtlasConfig, head_atlas


@pytest.fixture(scope="module")
def page(browser, tmp_path_factory):
    out = tmp_path_factory.mktemp("atlas-page")
    model = lh.tiny_model(n_layers=3, n_heads=4, n_kv_heads=2, seed=0)
    config = AtlasConfig(
        task="capitalize", n_eval=4, n_reference=4, n_sequences=3, length=5, k=3,
        permutations=10, bootstrap=10, batch_size=4,
    )  # fmt: skip
    atlas = head_atlas(model, config, out=out)
    browser.get((out / "atlas" / "atlas.html").as_uri())
    _wait(browser, "const g = document.getElementById('atlas-map'); return !!(g && g._fullLayout);")
    return atlas


def _wait(browser, script: str, timeout: float = 20):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, timeout).until(lambda d: d.execute_script(script))


def _click_point(browser, div: str, x: float, y: float) -> None:
    """A real mouse click on data point (x, y) of the plot in ``div``, placed by plotly's own
    axes (offsets from the plot's centre, as the browser sees it once scrolled into view)."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    element = browser.find_element(By.ID, div)
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", element)
    dx, dy = browser.execute_script(
        f"""const g = document.getElementById('{div}'); const l = g._fullLayout;
        const box = g.getBoundingClientRect();
        return [l.xaxis._offset + l.xaxis.l2p({x}) - box.width / 2,
                l.yaxis._offset + l.yaxis.l2p({y}) - box.height / 2];"""
    )
    ActionChains(browser).move_to_element_with_offset(element, int(dx), int(dy)).click().perform()


def _rendered_title(browser, div: str) -> str:
    return browser.execute_script(
        f"const t = document.querySelector('#{div} .gtitle'); return t ? t.textContent : '';"
    )


def test_clicking_a_head_opens_its_card_with_its_effects(browser, page):
    from selenium.webdriver.common.by import By

    atlas = page
    assert "No head selected" in browser.find_element(By.ID, "atlas-card").text
    _click_point(browser, "atlas-map", 3, 2)  # head 3 of layer 2
    _wait(browser, "return document.getElementById('atlas-card-title') !== null;")
    card = browser.find_element(By.ID, "atlas-card")
    assert browser.find_element(By.ID, "atlas-card-title").text == "L2H3"
    assert "key-value group 1" in card.text
    row = atlas.frame.set_index("label").loc["L2H3"]
    effects = browser.find_element(By.ID, "atlas-card-effects")
    line = next(r for r in effects.find_elements(By.TAG_NAME, "tr") if "zero" in r.text)
    assert float(line.find_element(By.CLASS_NAME, "value").text) == pytest.approx(
        row["zero-ablation effect"], rel=1e-2, abs=1e-3
    )
    assert browser.execute_script(
        "return document.getElementById('atlas-pattern').data[0].z.length"
    ) == len(atlas.example_tokens)


def test_the_table_sorts_filters_and_opens_a_card(browser, page):
    from selenium.webdriver.common.by import By

    atlas = page
    measure = "induction"
    header = next(
        th
        for th in browser.find_elements(By.CSS_SELECTOR, "#atlas-table thead th")
        if th.get_attribute("data-column") == measure
    )
    header.click()  # highest first
    first = browser.find_element(By.CSS_SELECTOR, "#atlas-table tbody tr.head td").text
    assert first == atlas.frame.loc[atlas.frame[measure].idxmax(), "label"]
    header = browser.find_element(By.CSS_SELECTOR, f'#atlas-table th[data-column="{measure}"]')
    header.click()  # again: lowest first
    first = browser.find_element(By.CSS_SELECTOR, "#atlas-table tbody tr.head td").text
    assert first == atlas.frame.loc[atlas.frame[measure].idxmin(), "label"]
    # sorting by a measure also colours the map by it
    assert _rendered_title(browser, "atlas-map").startswith(measure)
    box = browser.find_element(By.ID, "atlas-filter")
    box.clear()
    box.send_keys("L1")
    rows = browser.find_elements(By.CSS_SELECTOR, "#atlas-table tbody tr.head")
    assert len(rows) == 4 and all(r.text.startswith("L1H") for r in rows)
    rows[0].click()
    assert browser.find_element(By.ID, "atlas-card-title").text == rows[0].text.split()[0]
    box.clear()
    box.send_keys(" ")  # an empty filter shows every head again
    assert len(browser.find_elements(By.CSS_SELECTOR, "#atlas-table tbody tr.head")) == 12


def test_the_menu_retitles_the_map(browser, page):
    from selenium.webdriver.support.ui import Select

    atlas = page
    menu = Select(browser.find_element("id", "atlas-measure"))
    for measure in (atlas.measures[1], atlas.measures[-1]):
        menu.select_by_value(measure)
        _wait(browser, f"return document.querySelector('#atlas-map .gtitle')"
                       f"?.textContent.startsWith({measure!r});")  # fmt: skip
        assert _rendered_title(browser, "atlas-map") == f"{measure} ({atlas.model})"
        z = browser.execute_script("return document.getElementById('atlas-map').data[0].z")
        assert z[2][3] == pytest.approx(float(atlas.matrix(measure)[2, 3]), rel=1e-3, abs=1e-6)


def test_a_cell_of_the_agreement_matrix_opens_the_pair(browser, page):
    from selenium.webdriver.common.by import By

    atlas = page
    table = atlas.agreement()
    row = table.dropna(subset=["spearman"]).iloc[0]
    axis = browser.execute_script("return document.getElementById('atlas-agreement').data[0].x")
    i, j = axis.index(row["second"]), axis.index(row["first"])
    _click_point(browser, "atlas-agreement", i, j)
    _wait(browser, "return !!document.getElementById('atlas-pair').dataset.pair;")
    pair = browser.find_element(By.ID, "atlas-pair").get_attribute("data-pair")
    assert set(pair.split("|")) == {row["first"], row["second"]}
    stats = browser.find_element(By.ID, "atlas-pair-stats").text
    shown = re.search(r"Spearman (\S+), 95% interval \[(\S+), (\S+)\]", stats)
    assert shown, stats
    for text, value in zip(shown.groups(), ("spearman", "ci low", "ci high"), strict=True):
        assert float(text) == pytest.approx(row[value], abs=2e-3)  # three significant digits
    title = _rendered_title(browser, "atlas-pair")
    assert "Spearman" in title
    both = atlas.frame[[row["first"], row["second"]]].dropna()
    points = browser.execute_script("return document.getElementById('atlas-pair').data[0].x")
    assert len(points) == len(both)
