"""The oracle's figures: collected by the tests, written as JSON, summarized.

Each configuration's measurements (KL to the float32 reference, the bf16
peer's KL, top-1 agreement, greedy agreement) go into a session-wide dict;
at the end of the session they are written to ``oracle_figures.json`` under
pytest's temporary directory and printed in the terminal summary (with or
without ``-s``), so the figures can be quoted.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

FIGURES = pytest.StashKey[dict[str, dict[str, Any]]]()
PATH = pytest.StashKey[str]()


@pytest.fixture(scope="session")
def oracle_figures(request: pytest.FixtureRequest, tmp_path_factory):
    """A dict of figures by configuration name, written to JSON at the end."""
    figures: dict[str, dict[str, Any]] = {}
    request.config.stash[FIGURES] = figures
    yield figures
    if figures:
        path = tmp_path_factory.mktemp("oracle") / "oracle_figures.json"
        path.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
        request.config.stash[PATH] = str(path)


def summary_lines(figures: dict[str, dict[str, Any]]) -> list[str]:
    """One line per configuration: the teacher-forced and greedy figures."""
    lines = []
    for name, f in figures.items():
        line = f"{name:>12}:"
        if "kl" in f:
            line += (
                f" KL {f['kl']:.2e} vs peer {f['peer_kl']:.2e}"
                f" (ratio {f['kl_ratio']:.2f}) over {f['positions']} positions;"
                f" top-1 {f['top1_above_margin']:.1%} of {f['positions_above_margin']}"
                f" above margin (peer {f['peer_top1_above_margin']:.1%}),"
                f" {f['top1_overall']:.1%} overall (peer {f['peer_top1_overall']:.1%})"
            )
        if "greedy_checked" in f:
            line += (
                f"; greedy {f['greedy_agree']}/{f['greedy_checked']} steps equal"
                f" before the first margin <= {f['margin']}"
                f" ({f['greedy_equal_all']}/{f['greedy_steps']} overall)"
            )
        if "peer_block_kl" in f:
            line += (
                f" block KL {f['block_kl'][0]:.2e} .. {f['block_kl'][-1]:.2e}"
                f" (worst {max(f['block_kl']):.2e}), at most"
                f" {f['worst_ratio']:.2f}x the bf16 peer's block"
                f" ({f['positions']} positions in blocks of {f['block']}; prompt"
                f" and decode versions bit-equal)"
            )
        if "seconds" in f:
            line += f"; {f['seconds']:.1f} s"
        lines.append(line)
    return lines


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    figures = config.stash.get(FIGURES, None)
    if not figures:
        return
    terminalreporter.section("IRON vs transformers (oracle figures)")
    for line in summary_lines(figures):
        terminalreporter.write_line(line)
    path = config.stash.get(PATH, None)
    if path:
        terminalreporter.write_line(f"written to {path}")
