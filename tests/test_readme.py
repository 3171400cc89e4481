"""The README's quick start and .ci/run agree: CI runs exactly the README's test command."""

from __future__ import annotations

import re


def quick_start(readme: str) -> list[str]:
    """The commands of the bash block after the ``<!-- test-command -->`` marker."""
    match = re.search(r"<!-- test-command -->\s*```bash\n(.*?)```", readme, re.S)
    assert match, "README.md has no bash block after <!-- test-command -->"
    return [line for line in match.group(1).splitlines() if line.strip()]


def test_quick_start_has_two_commands(root):
    assert len(quick_start((root / "README.md").read_text())) == 2


def test_ci_runs_the_readme_test_command(root):
    test_command = quick_start((root / "README.md").read_text())[-1]
    lines = [
        line.strip()
        for line in (root / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert lines[-1] == test_command
