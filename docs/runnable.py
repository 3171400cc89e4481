"""Runnable blocks of the docs' pages: find them, run them, show what they print.

A block is runnable when the line before its opening fence is
``<!-- runnable -->``. A page's runnable blocks run in order as one program
in a fresh interpreter (so a page cannot lean on another's state or on the
caller's bound device), with a marker line printed after each block, so the
standard output splits into what each block printed. ``show_outputs`` then
writes each block's output in a fenced block right under it.

``docs/hooks.py`` runs every page this way in ``mkdocs build`` and shows the
outputs of the pages ``SHOWN`` names (the tutorial, troubleshooting);
``tests/test_docs.py`` runs them too. Neither imports the other (the tests have no mkdocs), so both import
this module, which needs only the standard library.

What a page prints must not change between runs, or the site would change
with every build. Pages print stable things (seeded random numbers, sizes,
verdicts); what cannot be (an object's address, a path in a temporary
directory, a rate) is replaced by ``stable`` under fixed rules, listed in
``RULES``, never by hand.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from html import unescape
from pathlib import Path

MARKER = "<!-- runnable -->"
FENCE = re.compile(r"^```(\w*)\s*$")
# Printed after each block; a block's output is what comes before its one.
SEPARATOR = "@@iron-docs-block-{index}@@"
_SPLIT = re.compile(r"\n?@@iron-docs-block-(\d+)@@\n")
OUTPUT_TITLE = "Output"
# The pages (paths under docs/, or folders ending in "/") whose blocks are
# followed by what they printed; the others print what depends on the
# machine (an NPU's toolchain, a driver), which the site should not freeze.
SHOWN = ("tutorial/", "guide/troubleshooting.md")
# Generous: a page takes seconds on the emulated NPU.
TIMEOUT_S = 600

# (pattern, replacement): what varies between runs, elided the same way on
# every page. An address in a default repr; a temporary directory (its name
# is random); a rate measured on this machine.
RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r" at 0x[0-9a-fA-F]+>"), " at 0x...>"),
    (re.compile(re.escape(tempfile.gettempdir()) + r"/[^/\s'\"]+"), "<tmp>"),
    (re.compile(r"\b\d+(?:\.\d+)? (tokens/s|ms|s)\b"), r"... \1"),
)


class RunnableError(ValueError):
    """A ``<!-- runnable -->`` marker that does not stand before a python fence."""


@dataclass(frozen=True)
class Block:
    """One runnable block: its code and the line index of its closing fence."""

    code: str
    end: int


@dataclass(frozen=True)
class PageRun:
    """What running a page's blocks gave: the exit status and each block's output."""

    returncode: int
    outputs: tuple[str, ...]
    stdout: str
    stderr: str


def blocks(text: str) -> list[Block]:
    """The python blocks after a ``<!-- runnable -->`` line, in order."""
    found: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == MARKER:
            opening = FENCE.match(lines[i + 1].strip()) if i + 1 < len(lines) else None
            if not (opening and opening.group(1) == "python"):
                raise RunnableError(
                    f"{MARKER} must stand right before a ```python fence "
                    f"(line {i + 2}); put the marker on the line before the fence"
                )
            body: list[str] = []
            i += 2
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            found.append(Block("\n".join(body), i))
        i += 1
    return found


def runnable_blocks(text: str) -> list[str]:
    """The code of each runnable block of a page, in order."""
    return [block.code for block in blocks(text)]


def program(text: str) -> str:
    """A page's runnable blocks as one program that marks where each block ends."""
    parts = []
    for index, code in enumerate(runnable_blocks(text)):
        mark = SEPARATOR.format(index=index)
        parts.append(f"{code}\n\nprint({mark!r}, flush=True)")
    return "\n\n".join(parts)


def stable(output: str) -> str:
    """``output`` with what varies between runs replaced under ``RULES``."""
    for pattern, replacement in RULES:
        output = pattern.sub(replacement, output)
    return output


def split_outputs(stdout: str, count: int) -> tuple[str, ...]:
    """Each of ``count`` blocks' output in ``stdout`` (a block never reached: "")."""
    outputs = [""] * count
    start = 0
    for match in _SPLIT.finditer(stdout):
        index = int(match.group(1))
        if index < count:
            outputs[index] = stdout[start : match.start()]
        start = match.end()
    return tuple(stable(output) for output in outputs)


def run_page(page: Path, env: dict[str, str] | None = None) -> PageRun:
    """Run ``page``'s runnable blocks as one program in a fresh interpreter.

    Args:
        page: a Markdown file with ``<!-- runnable -->`` blocks.
        env: the environment (default: this process's without any
            ``IRON_*`` variable, so a page runs as a reader runs it: no bound
            device, backend or emulator setting the reader would not have).

    Returns:
        The exit status, each block's output (stable) and the raw streams.
    """
    text = page.read_text()
    count = len(blocks(text))
    if env is None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("IRON_")}
    with tempfile.TemporaryDirectory(prefix="iron-docs-page-") as scratch:
        script = Path(scratch) / "page.py"
        script.write_text(program(text))
        try:
            done = subprocess.run(
                [sys.executable, str(script)],
                capture_output=True,
                text=True,
                env=env,
                cwd=scratch,
                check=False,
                timeout=TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            return PageRun(-1, ("",) * count, "", f"no result after {TIMEOUT_S} s")
    outputs = split_outputs(done.stdout, count)
    return PageRun(done.returncode, outputs, done.stdout, done.stderr)


def output_fence(output: str) -> str:
    """``output`` as a titled text block, fenced longer than any run of backticks in it."""
    longest = max((len(run) for run in re.findall(r"`+", output)), default=0)
    fence = "`" * max(3, longest + 1)
    return f'{fence}text title="{OUTPUT_TITLE}"\n{output.rstrip()}\n{fence}'


def show_outputs(text: str, outputs: tuple[str, ...] | list[str]) -> str:
    """``text`` with each runnable block that printed followed by its output.

    Raises:
        RunnableError: ``outputs`` is not one per runnable block of ``text``.
    """
    found = blocks(text)
    if len(found) != len(outputs):
        raise RunnableError(
            f"{len(outputs)} outputs for {len(found)} runnable blocks; "
            "run the page again (it changed since it ran)"
        )
    lines = text.splitlines()
    after = {block.end: output for block, output in zip(found, outputs)}
    shown: list[str] = []
    for index, line in enumerate(lines):
        shown.append(line)
        output = after.get(index, "")
        if output.strip():  # indented as the block is (a block in a list item)
            indent = line[: len(line) - len(line.lstrip())]
            fenced = output_fence(output).splitlines()
            shown.extend(["", *(indent + part if part else part for part in fenced)])
    return "\n".join(shown) + ("\n" if text.endswith("\n") else "")


def visible_text(html: str) -> str:
    """The text a reader sees in ``html``: tags dropped, entities decoded."""
    return unescape(re.sub(r"<[^>]+>", "", html))


def shown(path: str) -> bool:
    """Whether the page at ``path`` (relative to docs/) shows its blocks' output."""
    return any(
        path.startswith(entry) if entry.endswith("/") else path == entry
        for entry in SHOWN
    )
