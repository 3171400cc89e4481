"""The test time by session: noxfile.py records it, the bench shows it (issue 20).

The default test command (``python3 -m nox``) is reported session by session
in BENCHMARKS.md: each session's wall time is written to
``.nox/session-times.json`` as it ends, and ``benchmarks/run.py`` renders
the default sessions from it.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import session_times  # noqa: E402


@functools.cache
def _noxfile():
    """noxfile.py as a module, loaded once (loading registers its sessions)."""
    pytest.importorskip("nox")
    spec = importlib.util.spec_from_file_location(
        "noxfile_under_test", ROOT / "noxfile.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_session_records_its_time_as_it_ends_passed_or_failed(tmp_path, monkeypatch):
    nox_file = _noxfile()
    monkeypatch.setattr(nox_file, "TIMES", tmp_path / ".nox" / "session-times.json")
    monkeypatch.setattr(sys, "argv", ["nox", "-R", "-s", "lint"])

    def ok(session):
        """A session that passes."""

    def broken(session):
        raise RuntimeError("a test failed")

    nox_file._timed(ok)(SimpleNamespace(name="lint", posargs=[]))
    with pytest.raises(RuntimeError, match="a test failed"):
        nox_file._timed(broken)(SimpleNamespace(name="core", posargs=["-k", "x"]))
    times = json.loads(nox_file.TIMES.read_text())
    lint, core = times["sessions"]["lint"], times["sessions"]["core"]
    assert lint["status"] == "passed" and lint["reused"] and lint["posargs"] == []
    assert core["status"] == "failed" and core["posargs"] == ["-k", "x"]
    assert lint["seconds"] >= lint["body_s"] >= 0
    assert times["default"][0] == "core" and "lint" in times["default"]
    assert nox_file._timed(ok).__doc__ == "A session that passes."
    assert not lint["install_only"]
    monkeypatch.setattr(sys, "argv", ["nox", "-s", "lint", "--install-only"])
    nox_file._timed(ok)(SimpleNamespace(name="lint", posargs=[]))
    assert json.loads(nox_file.TIMES.read_text())["sessions"]["lint"]["install_only"]


def test_every_session_is_timed():
    text = (ROOT / "noxfile.py").read_text()
    assert text.count("@nox.session(") == text.count("@_timed\ndef ")


@pytest.mark.parametrize(
    ("arg", "reusing"),
    [
        ("-R", True),
        ("-rs", True),
        ("--reuse-venv=yes", True),
        ("-s", False),
        ("lint", False),
    ],
)
def test_reuse_is_read_off_nox_s_arguments(arg, reusing):
    assert _noxfile()._reusing(arg) is reusing


def test_the_bench_shows_the_default_sessions_in_order_and_their_total(tmp_path):
    assert session_times.load(tmp_path) is None
    assert "Not recorded" in " ".join(session_times.section(None))
    record = {"seconds": 90.0, "body_s": 80.0, "status": "passed", "posargs": []}
    data = {
        "default": ["core", "lm", "docs", "lint"],
        "sessions": {
            "lint": {**record, "seconds": 10.0, "reused": True},
            "core": record,
            "lm": {**record, "posargs": ["-k", "x"]},  # a targeted run
            "docs": {**record, "install_only": True},  # nothing ran
        },
    }
    (tmp_path / ".nox").mkdir()
    (tmp_path / ".nox" / "session-times.json").write_text(json.dumps(data))
    loaded = session_times.load(tmp_path)
    rows, total = session_times.rows(loaded)
    assert [r[0] for r in rows] == ["core", "lm", "docs", "lint"]
    assert total == 100.0
    assert rows[1][1] == "-"  # lm's record is a targeted run's
    assert rows[2][1] == "-"  # docs only installed
    assert "virtualenv reused" in rows[3][3]
    text = "\n".join(session_times.section(loaded))
    assert "## Test time by session" in text and "total 100 s" in text
