"""docs/guide/troubleshooting.md quotes the errors IRON gives, word for word.

The page quotes each in a text block; each test makes the error happen and
checks the page holds its message. (The page's ``iron-lm`` refusals are
runnable blocks whose output the build captures, so they need no test
here: tests/test_docs.py runs them.)
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import iron
from iron.core import device as device_module
from iron.core.device import as_device, require_device
from iron.runtime import xrt
from iron.runtime.npu import build

PAGE = "docs/guide/troubleshooting.md"


def quoted(root) -> str:
    return (root / PAGE).read_text()


def message(call) -> str:
    with pytest.raises(Exception) as caught:
        call()
    return str(caught.value)


def test_it_says_plainly_that_iron_runs_on_linux(root):
    assert "**IRON runs on Linux.**" in quoted(root)


def test_the_missing_npu_stack_is_quoted(root):
    if len(xrt.missing()) != 3:
        pytest.skip("this machine has part of the NPU stack; the quote is for none")
    with pytest.raises(xrt.BackendUnavailableError) as caught:
        xrt.open_device(iron.NPU2)
    assert isinstance(caught.value, RuntimeError)
    assert str(caught.value) in quoted(root)


def test_the_auto_backend_log_line_is_quoted(root):
    """``iron-lm generate -v`` on a machine without the NPU stack says why."""
    if not xrt.missing():
        pytest.skip("this machine has the whole NPU stack")
    env = {
        k: v for k, v in os.environ.items() if k not in ("IRON_BACKEND", "IRON_DEVICE")
    }
    done = subprocess.run(
        [sys.executable, "-m", "iron.lm", "generate", "--max-new-tokens", "1", "-v"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    prefix = "iron.runtime: backend auto: the emulated NPU, because this machine lacks "
    assert any(line.startswith(prefix) for line in done.stderr.splitlines())
    assert prefix + "..." in quoted(root)


def test_the_missing_pyxrt_is_quoted(root):
    try:
        import pyxrt  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("pyxrt is installed here")
    assert message(xrt.detect) in quoted(root)


def test_the_missing_aiecc_is_quoted(root):
    text = message(lambda: build.find_toolchain(env={}, which=lambda name: None))
    assert text.startswith("aiecc (mlir-aie ")
    assert text in quoted(root)


def test_the_device_errors_are_quoted(root, monkeypatch, caplog):
    assert message(lambda: as_device("npu3")) in quoted(root)
    monkeypatch.delenv("IRON_DEVICE", raising=False)
    monkeypatch.setenv("IRON_BACKEND", "emu")
    monkeypatch.setattr(device_module, "_announced", set())
    with caplog.at_level("WARNING", logger="iron"), iron.use_device(None):
        assert require_device().name == "npu2"
    (text,) = [r.getMessage() for r in caplog.records if r.name == "iron"]
    assert text.startswith("no device named: using npu2")
    assert text in quoted(root)
