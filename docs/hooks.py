"""MkDocs hooks for IRON's site: the API sources, docstring coverage, runnable pages.

``mkdocs.yml`` loads this file (``hooks:``). It does five things:

1. The four distributions each ship part of the ``iron`` package (iron-core
   owns ``iron/__init__.py`` and extends ``__path__`` with ``pkgutil``), which
   griffe's finder does not merge across search paths. Before mkdocstrings
   starts, a temporary tree is made whose ``iron/`` links iron-core's
   ``__init__.py`` and each distribution's subpackage, and the python
   handler's ``paths`` point at it, so ``::: iron.runtime.carried`` resolves
   and each "Source code in" block reads ``iron/runtime/carried.py``.
2. Every public module, class, function and method of the four packages
   must have a docstring, and every public module must be rendered by a
   ``::: module`` block on some page: a miss is a warning, so ``mkdocs
   build --strict`` (the ``docs`` nox session) fails on it.
3. The ``<!-- iron-names -->`` marker (docs/reference/api/iron.md) becomes
   a table of the names ``import iron`` gives, read from ``iron._LAZY``,
   each with its docstring's summary and a link to its entry.
4. On ``mkdocs build``, every page's runnable blocks (those after a
   ``<!-- runnable -->`` line, found and run by ``docs/runnable.py``, as
   ``tests/test_docs.py`` runs them) run as one program per page in a fresh
   interpreter, and every ``examples/*.py`` runs; one that fails stops the
   build. Each block that printed, on a page under ``tutorial/`` or on
   the troubleshooting page (``runnable.SHOWN``), is followed on the site
   by what it printed, captured by this run, so it cannot go stale.
   ``IRON_DOCS_RUN=0`` skips the runs, and the outputs with them
   (``mkdocs serve`` never runs them).
5. The site header shows the version (iron-core's ``__about__.py``, added
   to ``site_name``) and links the repository: mkdocs.yml's ``repo_url``, or
   where none is set, the clone's ``origin`` remote (docs/header.py).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

# docs/header.py and docs/runnable.py: mkdocs puts this file's folder on sys.path
import header
import runnable
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority

log = logging.getLogger("mkdocs.plugins.iron")

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PACKAGES = {
    "core": "iron-core",
    "operators": "iron-operators",
    "runtime": "iron-runtime",
    "lm": "iron-lm",
}
MARKER = runnable.MARKER
NAMES_MARKER = "<!-- iron-names -->"
ROLE = re.compile(r":\w+:`~?(?P<target>[\w.]+)`")
# An inline code span that is one name (no space, no markup inside):
# docs/stylesheets/iron.css keeps it on one line in a table cell.
NAME_SPAN = re.compile(r"<code>(?P<name>[^<\s]+)</code>")
RENDER = re.compile(r"^::: ([\w.]+)\s*$", re.M)
# Generous: a page or an example takes seconds on the emulated NPU.
TIMEOUT_S = 600

_state: dict[str, Any] = {"command": "build", "tree": None, "iron": None, "outputs": {}}


def _merged_tree() -> Path:
    """Make the temporary ``iron`` tree griffe reads (see the module docstring)."""
    top = Path(tempfile.mkdtemp(prefix="iron-docs-api-"))
    package = top / "iron"
    package.mkdir()
    core = ROOT / "packages" / "iron-core" / "src" / "iron"
    (package / "__init__.py").symlink_to(core / "__init__.py")
    for sub, dist in PACKAGES.items():
        source = ROOT / "packages" / dist / "src" / "iron" / sub
        if not source.is_dir():
            raise PluginError(f"docs: {source} is missing; is {dist} checked out?")
        (package / sub).symlink_to(source, target_is_directory=True)
    return top


def on_startup(command: str, dirty: bool) -> None:
    """Remember whether this is a build (runs the examples) or a serve."""
    _state["command"] = command


@event_priority(100)  # before mkdocstrings reads its handler options
def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Point the python handler at the merged ``iron`` tree; the header's facts."""
    previous = _state.get("tree")
    if isinstance(previous, Path):  # mkdocs serve reloads the config
        shutil.rmtree(previous, ignore_errors=True)
    tree = _merged_tree()
    _state["tree"] = tree
    plugin = config.plugins["mkdocstrings"]
    python = plugin.config["handlers"].setdefault("python", {})
    python["paths"] = [str(tree)]
    config.site_name = f"{config.site_name} {header.version()}"
    if not config.repo_url:
        config.repo_url = header.repository_url()
        if config.repo_url is None:
            log.info("docs: no repo_url and no git remote 'origin': no repository link")
    return config


def on_pre_build(config: MkDocsConfig) -> None:
    """Warn about undocumented names and modules; run the pages and examples."""
    tree = _state["tree"]
    assert isinstance(tree, Path), "on_config makes the tree first"
    iron = _load(tree)
    for problem in missing_docstrings(iron) + unrendered_modules(iron):
        log.warning(problem)
    _state["outputs"] = {}
    if _state["command"] == "build" and os.environ.get("IRON_DOCS_RUN", "1") != "0":
        failures = run_everything()
        if failures:
            raise PluginError("docs: these failed to run:\n\n" + "\n\n".join(failures))


def on_shutdown() -> None:
    """Remove the temporary tree."""
    tree = _state.get("tree")
    if isinstance(tree, Path):
        shutil.rmtree(tree, ignore_errors=True)


# -- the API reference: the tree, the iron names, every module rendered ----------


def on_page_markdown(markdown: str, page, config: MkDocsConfig, files) -> str:
    """Fill the ``<!-- iron-names -->`` table; show each block's output under it."""
    if NAMES_MARKER in markdown:
        markdown = markdown.replace(NAMES_MARKER, names_table(_state["iron"]))
    return show_outputs(markdown, page.file.src_uri)


def _load(tree: Path):
    """The whole ``iron`` package as griffe reads it, aliases resolved."""
    import griffe

    loader = griffe.GriffeLoader(search_paths=[str(tree)])
    iron = loader.load("iron")
    loader.resolve_aliases(implicit=False, external=False)
    _state["iron"] = iron
    return iron


def names_table(iron) -> str:
    """A Markdown table: each lazy name of ``iron``, its summary, where it lives."""
    import importlib

    lazy = importlib.import_module("iron")._LAZY
    rows = ["| name | what it is | defined in |", "|---|---|---|"]
    for name in sorted(lazy, key=str.lower):
        module, attribute = lazy[name]
        target = iron.modules_collection[f"{module}.{attribute}"]
        docstring = target.docstring.value if target.docstring else ""
        summary = docstring.strip().split("\n\n")[0].replace("\n", " ")
        if not summary:  # a constant: say what it is
            value = getattr(importlib.import_module(module), attribute)
            summary = (
                f"a ``{type(value).__name__}``: ``{getattr(value, 'name', value)}``"
            )
        summary = ROLE.sub(r"``\g<target>``", summary).replace("|", "\\|")
        path = f"{module}.{attribute}"
        rows.append(f"| [`iron.{name}`][{path}] | {summary} | `{module}` |")
    return "\n".join(rows)


def unrendered_modules(iron) -> list[str]:
    """Each public module or package that no ``::: module`` block renders."""
    rendered = set()
    for page in DOCS.rglob("*.md"):
        rendered.update(RENDER.findall(page.read_text()))
    problems = []

    def visit(module) -> None:
        for name, member in module.members.items():
            if member.is_alias or not member.is_module or name.startswith("_"):
                continue
            if member.path not in rendered:
                problems.append(
                    f"docs: no page renders module {member.path}; add "
                    f"'::: {member.path}' to a page of docs/reference/api"
                )
            visit(member)

    visit(iron)
    return problems


def missing_docstrings(iron) -> list[str]:
    """Each public module, class, function or method of ``iron`` with no docstring.

    Public as griffe judges it (no leading underscore, listed in ``__all__``
    where a module has one). A method that overrides a documented method of
    a base class inherits its docstring and counts as documented. Dunder
    methods and private modules (``__about__``, ``__main__``) are left out.
    """
    import griffe

    problems: list[str] = []

    def inherited(cls: griffe.Class, name: str) -> bool:
        try:
            bases = cls.mro()
        except ValueError:
            return False
        return any(
            name in base.members and base.members[name].docstring for base in bases
        )

    def visit(obj: griffe.Object) -> None:
        for name, member in obj.members.items():
            if member.is_alias or member.is_attribute:
                continue
            if member.is_module:
                if name.startswith("_"):
                    continue
                if not member.docstring:
                    problems.append(f"docs: module {member.path} has no docstring")
                visit(member)
                continue
            if name.startswith("_") or not member.is_public:
                continue
            if not member.docstring and not (
                obj.is_class and inherited(obj, name)  # type: ignore[arg-type]
            ):
                problems.append(
                    f"docs: {member.kind.value} {member.path} has no docstring "
                    f"({member.relative_package_filepath}:{member.lineno})"
                )
            if member.is_class:
                visit(member)

    if not iron.docstring:
        problems.append("docs: module iron has no docstring")
    visit(iron)
    return problems


# -- runnable pages and examples ----------------------------------------------------


def _environment() -> dict[str, str]:
    """This process's environment for a page or an example: no bound device, emulated."""
    env = {k: v for k, v in os.environ.items() if k != "IRON_DEVICE"}
    env.setdefault("IRON_BACKEND", "emu")
    return env


def _run_page(page: Path) -> str | None:
    name = str(page.relative_to(ROOT))
    try:
        done = runnable.run_page(page, env=_environment())
    except runnable.RunnableError as error:
        return f"{name}: {error}"
    if done.returncode != 0:
        return f"{name} (exit {done.returncode}):\n{done.stdout}\n{done.stderr}"
    _state["outputs"][page.relative_to(DOCS).as_posix()] = done.outputs
    return None


def _run_example(example: Path) -> str | None:
    name = str(example.relative_to(ROOT))
    try:
        done = subprocess.run(
            [sys.executable, str(example)],
            capture_output=True,
            text=True,
            env=_environment(),
            cwd=ROOT,
            check=False,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return f"{name}: no result after {TIMEOUT_S} s"
    if done.returncode != 0:
        return f"{name} (exit {done.returncode}):\n{done.stdout}\n{done.stderr}"
    if not done.stdout.rstrip().endswith("PASS!"):
        return f"{name} did not print PASS! last:\n{done.stdout}\n{done.stderr}"
    return None


def run_everything() -> list[str]:
    """Run every page's runnable blocks and every example; the failures.

    Each page's block outputs are kept for ``show_outputs``.
    """
    pages = sorted(p for p in DOCS.rglob("*.md") if MARKER in p.read_text())
    examples = sorted((ROOT / "examples").glob("*.py"))
    jobs = [(_run_page, p) for p in pages] + [(_run_example, e) for e in examples]
    workers = max(1, min(len(jobs), os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(lambda job: job[0](job[1]), jobs))
    log.info("docs: ran %d pages and %d examples", len(pages), len(examples))
    return [r for r in results if r is not None]


def on_page_content(html: str, page, config: MkDocsConfig, files) -> str:
    """Mark code spans that are one name; check a page shows its blocks' outputs."""
    html = NAME_SPAN.sub(r'<code class="iron-name">\g<name></code>', html)
    check_outputs_shown(html, page)
    return html


def check_outputs_shown(html: str, page) -> None:
    """Fail the build where a page shown with outputs lacks one in its HTML."""
    outputs = _state["outputs"].get(page.file.src_uri)
    if outputs is None or not runnable.shown(page.file.src_uri):
        return
    text = runnable.visible_text(html)
    for index, output in enumerate(outputs):
        if output.strip() and output.rstrip() not in text:
            raise PluginError(
                f"docs: {page.file.src_uri}: the output of runnable block "
                f"{index + 1} is not on the rendered page:\n{output}"
            )


def show_outputs(markdown: str, path: str) -> str:
    """``markdown`` of the page at ``path`` with its blocks' captured outputs shown.

    Only the pages ``runnable.SHOWN`` names, and only when the pages ran.
    """
    outputs = _state["outputs"].get(path)
    if outputs is None or not runnable.shown(path):
        return markdown
    try:
        return runnable.show_outputs(markdown, outputs)
    except runnable.RunnableError as error:
        raise PluginError(f"docs: {path}: {error}") from error
