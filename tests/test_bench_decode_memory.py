"""Figure 12 (decode memory) quick-run; figure 4 runs at the default budget.

The quick run decodes the tiny Llama in fresh processes at the default
budget and with every float32 copy kept: checked for what it reports (the
same tokens either way, copies kept only where the budget allows), not for
the target, which a tiny model's fixed costs dwarf.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from figures import FIGURES, decode_memory  # noqa: E402
from figures.common import Context  # noqa: E402


def test_the_quick_figure_reports_both_budgets_and_the_same_tokens(tmp_path):
    figure = decode_memory.run(Context(quick=True, scratch=tmp_path))
    data = figure["details"]["data"]
    default, every = data["iron_default"], data["iron_every_copy"]
    assert default["tokens"] == every["tokens"]
    # inf keeps every copy the default keeps, and any it does not; with the
    # compiled products (GEMV and the prompt's GEMM read bf16) the tiny model
    # has nothing past the default's budget to keep
    assert every["kept"] >= default["kept"]
    assert figure["value"] == default["peak"] / data["weights"] > 0
    assert "tokens are the same" in " ".join(figure["details"]["notes"])


def test_figure_4_runs_at_the_default_budget():
    assert FIGURES[4].__module__ == "figures.decode"
    assert FIGURES[12] is decode_memory.run
