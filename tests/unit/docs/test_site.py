"""The documentation site (issue 45): ``mkdocs build --strict`` passes (a link to a missing page
or anchor, a page left out of the navigation, a docstring mkdocstrings cannot render, a link out
of ``docs/`` to no file: each is a warning, and a warning fails the build), every public name of
``lh.__all__`` and of each subpackage's ``__all__`` has its heading on the API pages, and the
site's search finds a name, in a real headless Chromium over a local HTTP server.

The site is built once per session into a temporary folder, so ``python -m pytest`` checks it
and CI needs no other command."""

from __future__ import annotations

import csv
import functools
import http.server
import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from tests.unit.architecture.test_api import API

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def hooks():
    spec = importlib.util.spec_from_file_location("docs_site", ROOT / "scripts" / "docs_site.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(config: Path, site: Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of ``config`` into ``site``, run in ``cwd``."""
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=600,
    )


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    """The site as ``mkdocs build --strict`` builds it from this checkout."""
    out = tmp_path_factory.mktemp("docs-site")
    done = build(ROOT / "mkdocs.yml", out)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-6000:]}"
    return out


@pytest.fixture(scope="module")
def served(site):
    """The built site over HTTP on localhost (Material's search needs a served site)."""
    handler = functools.partial(QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # the server logs nothing
        pass


def test_the_test_extra_installs_the_docs_extra():
    """CI installs ``.[test]`` only, and builds the site."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert set(extras["docs"]) <= set(extras["test"])


def test_every_public_namespace_has_its_api_page(hooks, site):
    """The pages the hook generates are the namespaces the API test pins."""
    assert set(hooks.NAMESPACES) == set(API)
    for namespace in API:
        assert (site / "api" / namespace / "index.html").is_file(), namespace


def _pages(hooks) -> dict[str, list[str]]:
    """Each API page's address under the site (``api/...``), with the public names it documents:
    the top-level API on its topics' pages, each subpackage on its own page."""
    pages = {
        hooks.topic_uri(topic).removesuffix(".md") + "/": list(names)
        for topic, names in hooks.TOPICS.items()
    }
    for namespace in API:
        if namespace != "lens_heads":
            pages[f"api/{namespace}/"] = list(importlib.import_module(namespace).__all__)
    return pages


def test_every_top_level_name_stands_on_one_topic_page(hooks):
    """Issue 72: the API reference of ``lh`` is grouped by topic, one page each, and every name
    of ``lens_heads.__all__`` is on exactly one of them."""
    import lens_heads as lh

    listed = [name for names in hooks.TOPICS.values() for name in names]
    assert sorted(listed) == sorted(lh.__all__), "each lh name on exactly one topic"
    assert len(hooks.TOPICS) >= 8


def test_the_docstrings_render_without_rest_markup(site, hooks):
    """Sphinx roles and doctest blocks (a ``>>>`` line would be a Markdown quote) are turned into
    Markdown before rendering (``RestDocstrings``)."""
    for page in _pages(hooks):
        html = (site / page / "index.html").read_text()
        assert ":func:`" not in html and ":class:`" not in html, page
        assert "<blockquote" not in html, page


def test_every_public_name_has_its_heading_on_the_api_page(browser, served, hooks):
    from selenium.webdriver.support.ui import WebDriverWait

    for page, names in _pages(hooks).items():
        namespace = "lens_heads" if page.startswith("api/lh/") else page.split("/")[1]
        browser.get(f"{served}/{page}")
        WebDriverWait(browser, 20).until(lambda d: d.execute_script("return !!document.body"))
        # each name's anchor: a mkdocstrings heading, or (a name its submodule shadows for
        # Griffe) an anchor right before the heading of the object rendered from the submodule
        headings = browser.execute_script(
            """const out = {};
            for (const name of arguments[1]) {
              const el = document.getElementById(arguments[0] + '.' + name);
              let heading = el && el.matches('.doc-heading') ? el : null;
              if (el && !heading) {
                heading = [...document.querySelectorAll('.doc-heading')].find(
                  h => el.compareDocumentPosition(h) & Node.DOCUMENT_POSITION_FOLLOWING);
              }
              out[name] = heading ? heading.textContent : null;
            }
            return out;""",
            namespace,
            list(names),
        )
        missing = [name for name in names if not headings[name]]
        assert not missing, f"{namespace}: no heading for {missing}"
        wrong = [name for name in names if name not in headings[name]]
        assert not wrong, f"{namespace}: the heading at these anchors names another object: {wrong}"


def test_the_search_finds_a_public_name(browser, served):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{served}/")
    box = WebDriverWait(browser, 20).until(
        lambda d: d.find_element(By.CSS_SELECTOR, "input.md-search__input")
    )
    box.click()
    box.send_keys("removal_sweep")
    WebDriverWait(browser, 30).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, ".md-search-result__item a")
    )
    links = [
        a.get_attribute("href")
        for a in browser.find_elements(By.CSS_SELECTOR, ".md-search-result__item a")
    ]
    assert any("/api/lens_heads/" in link for link in links), links


def test_a_link_to_a_notebook_opens_its_rendered_page(browser, served):
    """``docs/index.md`` links ``../notebooks/...ipynb`` (right in the repository); on the site
    the link leads to the notebook's page, which shows its code."""
    from selenium.webdriver.common.by import By

    browser.get(f"{served}/")
    link = browser.find_element(By.PARTIAL_LINK_TEXT, "removing heads one by one")
    assert link.get_attribute("href").endswith("/notebooks/figure2_removal_sweep/")
    link.click()
    assert "Figure 2" in browser.find_element(By.TAG_NAME, "h1").text
    assert "run_demo" in browser.find_element(By.CSS_SELECTOR, "article").text


def test_html_comments_leave_the_sentence_whole(hooks):
    """The number snippets are HTML comments; Python-Markdown would start a raw HTML block at
    one that begins a line and cut the sentence, so the pages are rendered without them."""
    text = "a\n<!-- value x :.1f -->0.5<!-- /value --> b\n`<!-- kept -->`\n<!-- generated -->\n|t|"
    assert hooks._outside_code(hooks._COMMENT, lambda m: "", text) == (
        "a\n0.5 b\n`<!-- kept -->`\n\n|t|"
    )


def test_rest_docstrings_become_markdown(hooks):
    text = "Use :func:`~lens_heads.core.load_model` or :class:`lh.HeadMask`.\n>>> 1 + 1\n2\n\nEnd."
    assert hooks.rest_to_markdown(hooks.rest_to_markdown(text)) == hooks.rest_to_markdown(text)
    assert hooks.rest_to_markdown(text).split("\n") == [
        "Use `load_model` or `lh.HeadMask`.",
        "",
        "```pycon",
        ">>> 1 + 1",
        "2",
        "```",
        "",
        "End.",
    ]


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """A copy of the docs with three broken links planted (to a missing page, to a missing
    anchor, and out of ``docs/`` to no file) and one good link out of ``docs/``, built with the
    site's configuration less its two slow plugins (the API pages' mkdocstrings and the
    notebooks' mkdocs-jupyter; the links are checked without them)."""
    where = tmp_path_factory.mktemp("planted")
    shutil.copytree(ROOT / "docs", where / "docs")
    for name in ("CHANGELOG.md", "lens_heads", "notebooks", "scripts"):  # the rest of the checkout
        (where / name).symlink_to(ROOT / name)
    page = where / "docs" / "training.md"
    page.write_text(
        page.read_text()
        + "\nSee [a page](no-such-page.md), [a section](reproduction.md#no-such-section),"
        " [a file](../no-such-file.md) and [the changelog](../CHANGELOG.md).\n"
    )
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    config["plugins"] = [
        plugin
        for plugin in config["plugins"]
        if not (isinstance(plugin, dict) and {"mkdocstrings", "mkdocs-jupyter"} & set(plugin))
    ]
    (where / "mkdocs.yml").write_text(yaml.safe_dump(config))
    return build(where / "mkdocs.yml", where / "site", cwd=where)


def test_a_broken_link_fails_the_build(planted):
    assert planted.returncode != 0
    log = planted.stderr
    assert "'no-such-page.md'" in log and "not found among documentation files" in log
    assert "'#no-such-section'" in log and "reproduction.md" in log
    assert "'../no-such-file.md', which is not a file of the repository" in log
    assert "'../CHANGELOG.md'" not in log  # a link to a file of the repository is fine


def test_a_stored_atlas_page_opens_from_the_atlas_guide(browser, served):
    """The atlas guide links each stored atlas's page (issue 47); on the site the link opens the
    page, whose heat map draws with the one plotly.js the stored pages share."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    stored = sorted((ROOT / "results" / "atlas").glob("*/atlas.html"))
    assert stored, "no stored atlas page: python scripts/rerun_results.py --only atlas/ stores one"
    browser.get(f"{served}/atlas/")
    hrefs = [link.get_attribute("href") for link in browser.find_elements(By.LINK_TEXT, "its page")]
    assert len(hrefs) == len(stored)
    for href in hrefs:  # each page: its heat map drawn, one table row per head of its heads.csv
        assert href.endswith("/atlas.html") and "/results/atlas/" in href
        folder = ROOT / "results" / "atlas" / href.split("/results/atlas/")[1].split("/")[0]
        browser.get(href)
        WebDriverWait(browser, 30).until(
            lambda d: d.execute_script(
                "const g = document.getElementById('atlas-map'); return !!(g && g._fullLayout);"
            )
        )
        rows = browser.find_elements(By.CSS_SELECTOR, "#atlas-table tbody tr.head")
        with open(folder / "heads.csv", newline="", encoding="utf-8") as table:
            heads = list(csv.DictReader(table))  # a token list may hold a newline
        assert len(rows) == len(heads), folder
