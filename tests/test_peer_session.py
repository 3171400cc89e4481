"""The llama.cpp peer is a session of its own, out of the default run.

``nox -s peer`` installs llama-cpp-python (a source build of llama.cpp unless
``IRON_PEER_WHEELS`` names a wheel directory) and runs
packages/iron-lm/tests/peer: nox's default sessions must not select it, and
the sessions that run iron-lm's tests without llama.cpp (``lm``,
``pythons``) must leave that directory out, as they leave out the oracle's.
"""

from __future__ import annotations

import ast
from pathlib import Path

from test_quick_start import nox

ROOT = Path(__file__).resolve().parent.parent


def test_the_peer_session_exists_and_is_not_a_default():
    listed = nox("--list")
    names = {
        line[2:].split(" -> ")[0]
        for line in listed.stdout.splitlines()
        if line[:2] in ("* ", "- ")
    }
    selected = {
        line[2:].split(" -> ")[0]
        for line in listed.stdout.splitlines()
        if line.startswith("* ")
    }
    assert "peer" in names, listed.stdout
    assert "peer" not in selected, listed.stdout


def test_the_sessions_without_llama_cpp_leave_out_the_peer_tests():
    source = (ROOT / "noxfile.py").read_text()
    functions = {
        node.name: ast.get_source_segment(source, node)
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef)
    }
    for name in ("lm", "pythons"):
        body = functions[name] or ""
        assert '"--ignore",\n' in body and 'f"{LM}/tests/peer"' in body, (
            f"nox session {name!r} runs iron-lm's tests without llama.cpp: it "
            "must pass --ignore packages/iron-lm/tests/peer"
        )
    assert 'f"{LM}/tests/peer"' in (functions["peer"] or "")
