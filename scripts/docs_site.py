"""The documentation site's build hooks (``mkdocs.yml`` names this file under ``hooks:``).

``mkdocs build --strict`` turns every warning into a failure; these hooks add what the site needs
without a page written by hand, and keep the pages in ``docs/`` readable on their own in the
repository:

* **API reference** -- the top-level API by topic, one page each (:data:`TOPICS`,
  :func:`topic_page`, an index on ``api/lens_heads``), and one page per subpackage of
  :data:`NAMESPACES`, generated at build time from its ``__all__`` (:func:`api_page`), so a new
  public name of a subpackage appears on its page with no edit here (a new top-level name needs
  its topic: a test says so). The sections of the navigation are added by :func:`on_config`.
* **Notebooks** -- every ``notebooks/*.ipynb`` is added to the site as ``notebooks/<name>``,
  rendered (not executed) by mkdocs-jupyter; a new notebook gets its page and its nav entry.
* **Stored atlas pages** -- the files of :data:`SERVED` (each stored atlas's ``atlas.html`` and
  ``heads.csv``, and the one ``plotly.min.js`` they share) are copied into the site at their
  repository paths, so a page of ``docs/`` links them and the reader opens them in the browser.
* **Links out of docs/** -- a page in ``docs/`` may link a file of the repository outside
  ``docs/`` (``../README.md#tests-and-benchmarks``): right on GitHub, unknown to mkdocs, which
  cannot tell such a link from a broken one. :func:`on_page_markdown` rewrites each of them
  before mkdocs sees it: to the rendered page when the site holds the file (a notebook), else to
  the link's text followed by the repository path in code (there is no public URL to link to).
  A link whose target exists nowhere in the repository is an error, so it still fails the build;
  links between the pages of ``docs/`` are left to mkdocs' own checks (``validation`` in
  ``mkdocs.yml``: a missing page, anchor or nav entry is a warning, which ``--strict`` fails).
* **HTML comments** -- the number snippets of ``scripts/update_docs.py``
  (``<!-- value ... -->0.87<!-- /value -->``) are HTML comments, and Python-Markdown reads a
  line that starts with one as raw HTML, which cuts the sentence in two around the number; the
  comments are removed from a page before it is rendered (their text stays).
* **reST in docstrings** -- the docstrings are written for Sphinx; :class:`RestDocstrings`, a
  Griffe extension that mkdocstrings loads, turns the two reST forms they use that Markdown
  would garble into Markdown: a doctest block (``>>>`` lines up to a blank line) into a fenced
  ``pycon`` block, and a role (``:func:`x```, ``:class:`~a.B```) into inline code (Sphinx shows
  ``~a.B`` as ``B``). Double-backtick literals are Markdown code spans already.
"""

from __future__ import annotations

import logging
import os
import posixpath
import re
from collections.abc import Callable
from pathlib import Path

import griffe
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

#: the public namespaces: each gets ``api/<name>.md`` listing its ``__all__``
NAMESPACES = (
    "lens_heads",
    "lens_heads.core",
    "lens_heads.engine",
    "lens_heads.heads_up",
    "lens_heads.alignment",
    "lens_heads.lahis",
    "lens_heads.atlas",
    "lens_heads.scale",
    "lens_heads.finders",
    "lens_heads.demo",
    "lens_heads.testing",
    "lens_heads.cli",
)
#: the top-level API (``lh``) by what a researcher looks for, one page each (issue 72); a test
#: holds that every name of ``lens_heads.__all__`` stands on exactly one of them
TOPICS: dict[str, tuple[str, ...]] = {
    "Models": (
        "load_model", "tiny_model", "random_model", "verify_model", "head_shape",
        "MODEL_ALIASES", "plan", "Plan", "PlanConfig", "LensHeadsError",
    ),
    "Tasks and prompts": ("get_task", "list_tasks", "Task", "PromptFormat"),
    "Masks": (
        "HeadMask", "HeadScale", "apply_mask", "mask_hooks", "ablated", "jaccard",
        "expected_random_jaccard", "load_masks", "mask_statistics", "MaskStatistics",
        "tasks_per_head", "TasksPerHead",
    ),
    "Training": (
        "train_mask", "TrainingConfig", "MaskTrainingResult", "train_family_masks",
        "run_grid", "GridConfig", "GridResult",
    ),
    "Evaluation and generation": (
        "evaluate", "EvaluationConfig", "EvaluationResult", "generate", "greedy_generate",
        "Generation", "GenerationConfig", "DecodingConfig", "alpha_curve", "AlphaCurve",
        "functional_pathways", "PathwaysResult", "run_demo", "DemoConfig", "DemoReport",
    ),
    "Sweeps": ("removal_sweep", "SweepConfig", "SweepResult", "plot_sweeps"),
    "Lenses and similarity": (
        "logit_lens", "top_tokens", "LensConfig", "TopTokensConfig", "figure4_similarity",
        "layer_similarity", "ReadoutConfig", "HiddenStatesConfig", "SimilarityStats",
        "attention_on_target", "AttentionConfig",
    ),
    "Atlas": ("head_atlas", "AtlasConfig", "HeadAtlas"),
    "Roles": ("head_roles", "RolesConfig", "HeadRoles"),
    "Alignment and languages": (
        "translation_scores", "ScoreConfig", "TranslationScores", "ablate_heads",
        "AblationResult", "trater_scores", "TRaterConfig", "TRaterResult", "head_importance",
        "ImportanceConfig", "HeadImportance", "language_heads", "LanguageHeadsConfig",
        "LanguageHeads",
    ),
}  # fmt: skip
NOTEBOOKS = "notebooks"
#: stored results the site serves as they are (the atlases' pages, tables and shared plotly.js)
SERVED = ("results/atlas/*/atlas.html", "results/atlas/*/heads.csv", "results/atlas/plotly.min.js")
#: a markdown inline link or image: [text](target) -- the pages use no reference-style links
_LINK = re.compile(r"(?P<bang>!?)\[(?P<text>[^\]\n]*)\]\((?P<target>[^)\s]+)\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")
#: an HTML comment: a line of one comment becomes an empty line, one inside a line goes
_COMMENT = re.compile(r"^[ \t]*<!--(?:(?!-->).)*-->[ \t]*$|<!--(?:(?!-->).)*-->", re.M)
_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|attr|data|exc|obj|const):`(?P<target>[^`]+)`")

log = logging.getLogger("mkdocs.hooks.docs_site")


def api_page(namespace: str, package: griffe.Module) -> str:
    """The markdown of the API page of ``namespace``: the names of its ``__all__`` (as Griffe
    reads it, without importing the package), grouped by kind, in ``__all__``'s order.

    Griffe keeps one member per name and gives a submodule precedence over a name imported
    from it, so ``from .agreement import agreement`` documents the module; each such name
    (the runtime object is the imported one) is rendered from its submodule, under an anchor
    ``namespace.name`` like the others'."""
    module = package if namespace == package.path else package[namespace.partition(".")[2]]
    names = [name if isinstance(name, str) else name.name for name in module.exports or ()]
    shadowed = [
        name
        for name in names
        if (member := module.members.get(name)) is not None
        and not member.is_alias
        and member.is_module
        and name in member.members
    ]
    page = [
        f"# `{namespace}`\n",
        f"The public names of `{namespace}` (its `__all__`), from their docstrings.\n",
        f"::: {namespace}",
        "    options:",
        f"      members: [{', '.join(n for n in names if n not in shadowed)}]",
        "      show_submodules: false",
        "      members_order: __all__\n",
    ]
    for name in shadowed:
        page += [
            f'<a id="{namespace}.{name}"></a>\n',
            f"::: {namespace}.{name}.{name}",
            "    options:",
            "      show_root_heading: true",
            "      show_root_full_path: false\n",
        ]
    return "\n".join(page)


def api_uri(namespace: str) -> str:
    return f"api/{namespace}.md"


def topic_uri(topic: str) -> str:
    """The page of one topic of the top-level API: ``api/lh/<slug>.md``."""
    slug = re.sub(r"[^a-z]+", "-", topic.lower()).strip("-")
    return f"api/lh/{slug}.md"


def topic_page(topic: str) -> str:
    """The markdown of one topic's page: its names of ``lens_heads``, in the topic's order."""
    names = TOPICS[topic]
    return "\n".join(
        [
            f"# {topic}\n",
            f"`import lens_heads as lh`: {', '.join(f'`lh.{name}`' for name in names)}.\n",
            "::: lens_heads",
            "    options:",
            f"      members: [{', '.join(names)}]",
            "      show_submodules: false",
            "      members_order: __all__\n",
        ]
    )


def index_page() -> str:
    """The top-level API's page: the topics, each with its names, linking the topic pages."""
    lines = [
        "# `lens_heads`\n",
        "The top-level API, `import lens_heads as lh`, by topic; each name is documented on its "
        "topic's page (the subpackages' pages list every public name of each layer).\n",
    ]
    for topic, names in TOPICS.items():
        page = topic_uri(topic).removeprefix("api/")
        listed = ", ".join(f"[`{name}`]({page}#lens_heads.{name})" for name in names)
        lines.append(f"- **[{topic}]({page})**: {listed}")
    return "\n".join(lines) + "\n"


def repository(config: MkDocsConfig) -> Path:
    """The checkout the site is built from: the folder of ``mkdocs.yml``."""
    return Path(os.path.abspath(config.config_file_path)).parent


def notebooks(config: MkDocsConfig) -> list[Path]:
    return sorted((repository(config) / NOTEBOOKS).glob("*.ipynb"))


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Append the generated sections to the navigation ``mkdocs.yml`` writes by hand."""
    nav = list(config.nav or [])
    nav.append({"Notebooks": [f"{NOTEBOOKS}/{path.name}" for path in notebooks(config)]})
    topics = [{topic: topic_uri(topic)} for topic in TOPICS]
    top = {NAMESPACES[0]: [{"By topic": api_uri(NAMESPACES[0])}, *topics]}
    nav.append({"API reference": [top, *({ns: api_uri(ns)} for ns in NAMESPACES[1:])]})
    config.nav = nav
    return config


@event_priority(50)  # before mkdocs-jupyter's on_files, which turns .ipynb files into pages
def on_files(files: Files, config: MkDocsConfig) -> Files:
    root = repository(config)
    package = griffe.load(NAMESPACES[0], search_paths=[str(root)], resolve_aliases=False)
    files.append(File.generated(config, api_uri(NAMESPACES[0]), content=index_page()))
    for topic in TOPICS:
        files.append(File.generated(config, topic_uri(topic), content=topic_page(topic)))
    for namespace in NAMESPACES[1:]:
        page = api_page(namespace, package)
        files.append(File.generated(config, api_uri(namespace), content=page))
    for path in notebooks(config):
        # a File read from the repository root (not File.generated: mkdocs-jupyter's wrapper
        # of a file finds its source through src_dir)
        uri = f"{NOTEBOOKS}/{path.name}"
        files.append(File(uri, str(root), config.site_dir, config.use_directory_urls))
    for pattern in SERVED:  # copied into the site at their repository paths
        for path in sorted(root.glob(pattern)):
            uri = path.relative_to(root).as_posix()
            files.append(File(uri, str(root), config.site_dir, config.use_directory_urls))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """A ``docs/`` page without its HTML comments, and with its links that leave ``docs/``
    rewritten (see the module docstring)."""
    if page.file.generated_by or page.file.abs_src_path is None:
        return markdown
    docs = Path(os.path.abspath(config.docs_dir))
    root = repository(config)
    source = Path(page.file.abs_src_path).parent

    def rewrite(match: re.Match[str]) -> str:
        target = match["target"]
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith(("#", "/")):
            return match[0]  # external, an anchor on this page, or absolute: mkdocs' concern
        path, _, anchor = target.partition("#")
        resolved = Path(os.path.normpath(source / path))  # a symbolic link stays where it is
        if resolved.is_relative_to(docs):
            return match[0]  # a page or file of the site: mkdocs validates it
        if not resolved.is_relative_to(root) or not resolved.exists():
            log.error(
                "%s links %r, which is not a file of the repository", page.file.src_uri, target
            )
            return match[0]
        in_repo = resolved.relative_to(root).as_posix()
        site_file = files.get_file_from_path(in_repo)
        if site_file is not None and not match["bang"]:  # the site renders it (a notebook)
            relative = posixpath.relpath(in_repo, posixpath.dirname(page.file.src_uri) or ".")
            return f"[{match['text']}]({relative}{'#' + anchor if anchor else ''})"
        where = in_repo + (f"#{anchor}" if anchor else "")
        return f"{match['text']} (`{where}` in the repository)"

    markdown = _outside_code(_COMMENT, lambda match: "", markdown)
    return _outside_code(_LINK, rewrite, markdown)


def _outside_code(
    pattern: re.Pattern[str], replace: Callable[[re.Match[str]], str], text: str
) -> str:
    """``pattern.sub(replace, text)`` where a match does not start in code (fenced or inline)."""
    code = [(m.start(), m.end()) for found in (_FENCE, _CODE) for m in found.finditer(text)]
    return pattern.sub(
        lambda m: m[0] if any(start <= m.start() < end for start, end in code) else replace(m),
        text,
    )


def rest_to_markdown(text: str) -> str:
    """A reST docstring's doctest blocks fenced as ``pycon`` and its roles as inline code
    (``tests/unit/docs/test_site.py`` shows an example)."""
    lines, out, i, fenced = text.split("\n"), [], 0, False
    while i < len(lines):
        stripped = lines[i].lstrip()
        if stripped.startswith(("```", "~~~")):
            fenced = not fenced  # a fenced block is Markdown already: left as it is
        if fenced or stripped.startswith(("```", "~~~")) or not stripped.startswith(">>>"):
            out.append(lines[i] if fenced else _ROLE.sub(_role, lines[i]))
            i += 1
            continue
        indent = lines[i][: len(lines[i]) - len(stripped)]
        if out and out[-1].strip():
            out.append("")
        out.append(f"{indent}```pycon")
        while i < len(lines) and lines[i].strip():  # reST: a doctest block ends at a blank line
            out.append(lines[i])
            i += 1
        out.append(f"{indent}```")
    return "\n".join(out)


def _role(match: re.Match[str]) -> str:
    target = match["target"]
    return f"`{target[1:].rsplit('.', 1)[-1] if target.startswith('~') else target}`"


class RestDocstrings(griffe.Extension):
    """Griffe extension (``mkdocs.yml``: ``extensions: [scripts/docs_site.py:RestDocstrings]``)
    that applies :func:`rest_to_markdown` to every docstring before mkdocstrings renders it."""

    def on_object(self, *, obj: griffe.Object, **kwargs: object) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rest_to_markdown(obj.docstring.value)

    def on_package(self, *, pkg: griffe.Module, **kwargs: object) -> None:
        self.on_object(obj=pkg)  # the package itself is not among the objects on_object sees
