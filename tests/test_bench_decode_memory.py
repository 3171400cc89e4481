"""Figure 12 (decode memory) quick-run, and figure 4 run with every copy kept.

The quick run decodes the tiny Llama in fresh processes at the default
budget and with every float32 copy kept: checked for what it reports (the
same tokens either way, copies kept only where the budget allows), not for
the target, which a tiny model's fixed costs dwarf.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from iron.runtime.emu.memory import DEFAULT_EMU_MEMORY, emu_memory

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from figures import FIGURES, decode_memory  # noqa: E402
from figures.common import Context  # noqa: E402


def test_the_quick_figure_reports_both_budgets_and_the_same_tokens(tmp_path):
    figure = decode_memory.run(Context(quick=True, scratch=tmp_path))
    data = figure["details"]["data"]
    default, every = data["iron_default"], data["iron_every_copy"]
    assert default["tokens"] == every["tokens"]
    assert every["kept"] > default["kept"]  # inf keeps the copies the default does not
    assert figure["value"] == default["peak"] / data["weights"] > 0
    assert "tokens are the same" in " ".join(figure["details"]["notes"])


def test_figure_4_runs_with_every_copy_kept_and_then_the_default_again():
    seen = []
    run = decode_memory.with_every_copy(lambda ctx: seen.append(emu_memory()) or {})
    assert run(None) == {}
    assert math.isinf(seen[0])
    assert emu_memory() == DEFAULT_EMU_MEMORY
    assert FIGURES[4].__wrapped__.__module__ == "figures.decode"
    assert FIGURES[12] is decode_memory.run
