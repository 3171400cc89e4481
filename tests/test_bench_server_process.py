"""The benchmarks' server runner (``figures.common.ServerProcess``).

A server that logs more than a pipe holds before it answers must still
start: llama.cpp's server logs about 210 KB while loading a model, and with
its stderr on a pipe nobody read it blocked and never answered (figure 15's
peer run). A server that dies shows its log's tail.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from figures.common import ServerProcess, free_port  # noqa: E402

#: Writes ``sys.argv[2]`` bytes to stderr, then serves 200 on port argv[1].
CHATTY = """
import http.server, sys
sys.stderr.write("x" * int(sys.argv[2]) + "\\n")
sys.stderr.flush()
class Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Ok).serve_forever()
"""


def test_a_server_that_logs_more_than_a_pipe_holds_still_answers():
    port = free_port()
    argv = [sys.executable, "-c", CHATTY, str(port), str(512 * 1024)]
    server = ServerProcess(argv, port, "/ready", dict(os.environ), start_timeout_s=30)
    try:
        assert server.process.poll() is None
        assert server.log_tail(10).strip() == "x" * 9
    finally:
        server.stop()
    assert server.process.returncode is not None


def test_a_server_that_exits_shows_its_log():
    argv = [sys.executable, "-c", "import sys; sys.exit('no model at /nowhere')"]
    with pytest.raises(RuntimeError, match="no model at /nowhere"):
        ServerProcess(argv, free_port(), "/ready", dict(os.environ), 60)
