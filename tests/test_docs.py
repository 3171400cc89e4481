"""Every runnable code block in docs/ runs, and the tutorial shows what it prints.

A block is runnable when the line before its opening fence is
``<!-- runnable -->``. Each page's blocks run in order as one program in a
fresh interpreter (docs/runnable.py, which docs/hooks.py uses in the build),
so a page cannot lean on another's state or on the test process's bound
device. On the site, each tutorial block that printed is followed by its
output, captured by the build.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
sys.path.insert(0, str(DOCS))
try:
    import header
    import runnable
finally:
    sys.path.remove(str(DOCS))

MARKER = runnable.MARKER
PAGES = sorted(p for p in DOCS.rglob("*.md") if MARKER in p.read_text())
TUTORIAL = sorted((DOCS / "tutorial").glob("*.md"))
SHOWN = [p for p in PAGES if runnable.shown(p.relative_to(DOCS).as_posix())]


def test_the_tutorial_pages_have_runnable_examples():
    assert len(TUTORIAL) == 9, "docs/tutorial has nine sections"
    for page in TUTORIAL:
        assert runnable.runnable_blocks(page.read_text()), (
            f"{page} has no runnable block"
        )


def test_a_marker_must_precede_a_python_fence():
    with pytest.raises(runnable.RunnableError, match="must stand right before"):
        runnable.blocks(f"{MARKER}\ntext\n")
    with pytest.raises(runnable.RunnableError, match="must stand right before"):
        runnable.blocks(f"text\n{MARKER}\n")  # the last line


def test_a_page_runs_as_a_reader_runs_it(tmp_path, monkeypatch):
    # No IRON_* variable reaches a page, and a page that names no device gets
    # the default the CLI takes (the NPU present, else the emulated npu2).
    monkeypatch.setenv("IRON_DEVICE", "npu1")
    monkeypatch.setenv("IRON_EMU_POISON", "1")
    page = tmp_path / "page.md"
    page.write_text(
        f"{MARKER}\n```python\nimport os\nimport iron.core.device\n"
        "print(sorted(k for k in os.environ if k.startswith('IRON_')))\n"
        "print(iron.core.device.require_device())\n```\n"
    )
    done = runnable.run_page(page)
    assert done.returncode == 0, done.stderr
    assert done.outputs[0].splitlines()[0] == "[]"
    assert "no device named: using" in done.stderr


def _shown(page: Path, outputs) -> str:
    return runnable.show_outputs(page.read_text(), outputs)


def test_every_tutorial_page_and_troubleshooting_show_their_output():
    assert set(TUTORIAL) <= set(SHOWN)
    assert DOCS / "guide" / "troubleshooting.md" in SHOWN
    # pages whose output depends on the machine's NPU stack are not frozen
    assert not runnable.shown("guide/npu-install.md")
    assert not runnable.shown("tutorialx.md")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_page_runs(page: Path):
    done = runnable.run_page(page)
    assert done.returncode == 0, f"{page}:\n{done.stdout}\n{done.stderr}"
    code = runnable.runnable_blocks(page.read_text())
    assert len(done.outputs) == len(code)
    if page not in SHOWN:
        return
    # The page as the site shows it: each block, then what it printed.
    shown = _shown(page, done.outputs)
    printed = 0
    for block, output in zip(code, done.outputs):
        if not output.strip():
            continue
        printed += 1
        fenced = runnable.output_fence(output)
        assert f"{block}\n```\n\n{fenced}\n" in shown, (
            f"{page.name}: this output is not right under its block:\n{output}"
        )
    assert shown.count(f'title="{runnable.OUTPUT_TITLE}"') == printed
    assert printed, f"{page.name} prints nothing to show"


def test_outputs_split_by_block_and_a_block_that_prints_nothing_shows_nothing():
    text = (
        f"# Page\n\n{MARKER}\n```python\nprint('one')\n```\n\nprose\n\n"
        f"{MARKER}\n```python\nx = 1\n```\n\n"
        f"{MARKER}\n```python\nprint('three', end='')\nprint('```')\n```\n"
    )
    program = runnable.program(text)
    namespace: dict = {}
    from contextlib import redirect_stdout
    from io import StringIO

    captured = StringIO()
    with redirect_stdout(captured):
        exec(program, namespace)
    outputs = runnable.split_outputs(captured.getvalue(), 3)
    assert outputs == ("one", "", "three```")
    shown = runnable.show_outputs(text, outputs)
    assert shown == (
        f"# Page\n\n{MARKER}\n```python\nprint('one')\n```\n\n"
        '```text title="Output"\none\n```\n\nprose\n\n'
        f"{MARKER}\n```python\nx = 1\n```\n\n"
        f"{MARKER}\n```python\nprint('three', end='')\nprint('```')\n```\n\n"
        '````text title="Output"\nthree```\n````\n'
    )


def test_the_build_reads_a_rendered_page_as_a_reader_sees_it():
    """What docs/hooks.py checks an output against: tags dropped, entities read."""
    html = (
        '<div class="highlight"><pre><code>a &lt; b\n<span>c</span></code></pre></div>'
    )
    assert runnable.visible_text(html) == "a < b\nc"


def test_a_block_never_reached_shows_nothing():
    assert runnable.split_outputs("a\n@@iron-docs-block-0@@\nb\n", 3) == ("a", "", "")


def test_outputs_must_match_the_blocks():
    text = f"{MARKER}\n```python\nprint(1)\n```\n"
    with pytest.raises(runnable.RunnableError, match="1 runnable blocks"):
        runnable.show_outputs(text, ("1\n", "2\n"))


def test_an_output_in_a_list_item_is_indented_as_its_block():
    text = f"1. Item:\n\n   {MARKER}\n   ```python\n   print(1)\n   ```\n"
    shown = runnable.show_outputs(text, ("1\n",))
    assert shown.endswith('   ```\n\n   ```text title="Output"\n   1\n   ```\n')


@pytest.mark.parametrize(
    ("printed", "shown"),
    [
        ("<Thing object at 0x7f3a2c1b9e50>", "<Thing object at 0x...>"),
        (
            "7 prompt tokens, first token in 41.3 ms, 12 new tokens at 812.5 tokens/s",
            "7 prompt tokens, first token in ... ms, 12 new tokens at ... tokens/s",
        ),
        ("took 3 s", "took ... s"),
        ("3 steps, 4096 bytes, 2 versions", "3 steps, 4096 bytes, 2 versions"),
    ],
)
def test_what_varies_between_runs_is_elided_by_rule(printed, shown):
    assert runnable.stable(printed) == shown


def test_a_temporary_path_is_elided_by_rule():
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="iron-tiny-"))
    try:
        assert runnable.stable(f"wrote {path}/config.json") == "wrote <tmp>/config.json"
    finally:
        path.rmdir()


def test_the_llama_page_prints_the_same_twice():
    """Section 9 prints a timing: elided, its output is the same every run."""
    page = DOCS / "tutorial" / "09-llama.md"
    first, second = runnable.run_page(page), runnable.run_page(page)
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    assert any("tokens/s" in output for output in first.outputs)
    assert first.outputs == second.outputs


@pytest.mark.parametrize(
    ("remote", "url"),
    [
        ("git@github.com:owner/iron.git", "https://github.com/owner/iron"),
        ("ssh://git@gitlab.com/group/iron.git", "https://gitlab.com/group/iron"),
        ("https://github.com/owner/iron.git\n", "https://github.com/owner/iron"),
        ("https://github.com/owner/iron/", "https://github.com/owner/iron"),
        ("/srv/git/iron.git", None),
    ],
)
def test_the_header_links_a_remote_web_page(remote, url):
    assert header.web_address(remote) == url


def test_the_header_reads_iron_cores_version():
    from iron.core.__about__ import __version__

    assert header.version() == __version__


def test_a_clone_without_origin_has_no_repository_link(tmp_path: Path):
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert header.repository_url(tmp_path) is None
    subprocess.run(
        [
            "git",
            "-C",
            str(tmp_path),
            "remote",
            "add",
            "origin",
            "git@github.com:o/n.git",
        ],
        check=True,
    )
    assert header.repository_url(tmp_path) == "https://github.com/o/n"


def test_the_operator_reference_is_current(root):
    """docs/reference/operators.md is what docs/gen_operators.py writes."""
    sys.path.insert(0, str(root / "docs"))
    try:
        import gen_operators
    finally:
        sys.path.remove(str(root / "docs"))
    committed = (root / "docs" / "reference" / "operators.md").read_text()
    assert committed == gen_operators.page(), (
        "docs/reference/operators.md is stale: run docs/gen_operators.py"
    )


def test_the_operator_reference_covers_the_catalog(root):
    from iron.operators import CATALOG

    page = (root / "docs" / "reference" / "operators.md").read_text()
    for name in CATALOG:
        assert f"\n## {name}\n" in page, f"docs/reference/operators.md lacks {name}"
