"""Every runnable code block in docs/ runs: the blocks of a page, in order, as one program.

A block is runnable when the line before its opening fence is
``<!-- runnable -->``. Each page runs in a fresh interpreter, so a page cannot
lean on another's state or on the test process's bound device.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
MARKER = "<!-- runnable -->"
FENCE = re.compile(r"^```(\w*)\s*$")


def runnable_blocks(text: str) -> list[str]:
    """The runnable python blocks of a page, in order."""
    blocks: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == MARKER and i + 1 < len(lines):
            opening = FENCE.match(lines[i + 1].strip())
            assert opening and opening.group(1) == "python", (
                f"{MARKER} must stand right before a ```python fence (line {i + 2})"
            )
            body: list[str] = []
            i += 2
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            blocks.append("\n".join(body))
        i += 1
    return blocks


PAGES = sorted(p for p in DOCS.rglob("*.md") if MARKER in p.read_text())


def test_the_tutorial_pages_have_runnable_examples():
    tutorial = sorted((DOCS / "tutorial").glob("*.md"))
    assert tutorial, "docs/tutorial has no pages"
    for page in tutorial:
        assert runnable_blocks(page.read_text()), f"{page} has no runnable block"


def test_a_marker_must_precede_a_python_fence():
    with pytest.raises(AssertionError, match="must stand right before"):
        runnable_blocks(f"{MARKER}\ntext\n")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_page_runs(page: Path, tmp_path: Path):
    program = "\n\n".join(runnable_blocks(page.read_text()))
    script = tmp_path / "page.py"
    script.write_text(program)
    env = {k: v for k, v in os.environ.items() if k != "IRON_DEVICE"}
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, f"{page}:\n{done.stdout}\n{done.stderr}"


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
