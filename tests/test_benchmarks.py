"""The benchmark harness runs end to end: ``benchmarks/run.py --quick`` writes both files.

A CI-sized run into a temporary folder (``--out``, so the committed
``benchmarks/results.json`` and ``BENCHMARKS.md`` are untouched), checked for
every figure and every field. No figure's target is asserted: the figures
are measurements, reported met or missed.
"""

from __future__ import annotations

import json
import subprocess
import sys

FIELDS = {
    "figure",
    "value",
    "target",
    "met",
    "peer",
    "peer_value",
    "unit",
    "command",
    "details",
}


def test_quick_run_writes_results_and_markdown(root, tmp_path) -> None:
    out = tmp_path / "bench"
    done = subprocess.run(
        [
            sys.executable,
            str(root / "benchmarks" / "run.py"),
            "--quick",
            "--out",
            str(out),
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    results = json.loads((out / "results.json").read_text())
    assert results["quick"] is True
    for key in ("cpu", "cores", "python", "numpy", "torch", "date"):
        assert key in results["machine"]
    assert sorted(results["figures"], key=int) == [
        "1",
        "2",
        "3",
        "4",
        "5",
        "6",
        "7",
        "8",
        "9",
        "10",
        "11",
        "12",
        "13",
        "14",
        "15",
        "16",
        "17",
        "18",
    ]
    for number, figure in results["figures"].items():
        assert FIELDS <= set(figure), number
        assert "error" not in figure, figure.get("error")
        assert isinstance(figure["met"], bool)
        assert figure["command"].startswith("python benchmarks/run.py --only")
    markdown = (out / "BENCHMARKS.md").read_text()
    assert "| figure | value | target | peer | command |" in markdown
    for number, figure in results["figures"].items():
        assert f"## {number}. {figure['figure']}" in markdown


def test_only_runs_the_figures_asked(root, tmp_path) -> None:
    out = tmp_path / "bench"
    done = subprocess.run(
        [
            sys.executable,
            str(root / "benchmarks" / "run.py"),
            "--quick",
            "--only",
            # two of the quickest figures (without torch): the run above runs
            # every figure; this checks which ones --only runs
            "2,3",
            "--out",
            str(out),
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    results = json.loads((out / "results.json").read_text())
    assert sorted(results["figures"], key=int) == ["2", "3"]
