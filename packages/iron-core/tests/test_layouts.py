"""Layout kinds: consumers ask the HandleLayout protocol, never the kind.

A test-only kind (a run read backwards) goes through the recorder, the
host reference, per-call words and a handle's repr without any of them
knowing it; and no source module outside ``iron/core/layout.py`` and
``iron/core/handle.py`` (which makes layouts from indexing) names a layout
class to branch on it.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable, Mapping
from math import prod
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from ml_dtypes import bfloat16
from operators_for_tests import Copy, Scale

import iron
from iron.core import access
from iron.core.handle import Handle
from iron.core.layout import HandleLayout, ViewWalks, offset_parts
from iron.core.percall import Affine, evaluate
from iron.core.recorder import ViewOperandError
from iron.core.words import words_of

ROOT = Path(__file__).resolve().parents[3]
LAYOUT_CLASSES = {"Dense", "Strided", "Gather"}
LAYOUT_MODULES = {
    Path("packages/iron-core/src/iron/core/layout.py"),
    Path("packages/iron-core/src/iron/core/handle.py"),
}


@dataclasses.dataclass(frozen=True, slots=True)
class Backwards:
    """Test-only: ``n`` elements from ``offset``, last first (slots: no ``vars``)."""

    offset: int | Affine = 0
    kind: ClassVar[str] = "backwards"
    contiguous: ClassVar[bool] = False

    @property
    def start(self) -> int | Affine:
        return self.offset

    @property
    def static_offset(self) -> int | None:
        return None

    def per_call_parts(self) -> tuple[tuple[str, Any], ...]:
        return (("offset", self.offset),)

    def reads(self) -> tuple[Handle, ...]:
        return ()

    def indices(
        self,
        shape: tuple[int, ...],
        values: Mapping[str, int],
        read: Callable[[Handle], np.ndarray],
    ) -> np.ndarray:
        n = prod(shape)
        first = evaluate(self.offset, values)
        return (first + n - 1 - np.arange(n, dtype=np.int64)).reshape(shape)

    def dma_walks(self, elements: int) -> ViewWalks:
        const, per_call = offset_parts(self.offset)
        walks = tuple((const + elements - 1 - i, (1,), (1,)) for i in range(elements))
        return ViewWalks(walks, per_call)


def test_the_test_kind_is_a_handle_layout():
    kind: HandleLayout = Backwards(3)
    assert kind.dma_walks(2) == ViewWalks(((4, (1,), (1,)), (3, (1,), (1,))))


class Reverse(iron.Graph):
    """Row ``position`` of x (16,), as 4 elements read backwards, copied."""

    def body(self, x, *, position: iron.Scratchpad[int]):
        view = Handle(x.buffer, (4,), x.dtype, {}, Backwards(position * 4))
        return Copy.step(view)


class Misuse(iron.Graph):
    def body(self, x):
        return Scale.step(Handle(x.buffer, (4,), x.dtype, {}, Backwards(0)))


def test_a_new_kind_runs_through_the_consumers_untouched():
    x = np.arange(16, dtype=np.float32).astype(bfloat16)
    with iron.use_device("npu2"):
        out = Reverse().reference(x, position=2)
        rec = Reverse().record(x=((16,), bfloat16))
        (word,) = words_of(rec, iron.core.device.as_device("npu2"))
    np.testing.assert_array_equal(out, x[8:12][::-1])
    assert word.expr.key() == (Affine((("position", 4),), 0)).key()
    assert repr(rec.steps[0].inputs[0]).endswith(" backwards")
    assert [v.name for v in rec.reads] == ["position"]


def test_a_new_kind_is_refused_where_only_a_mover_reads_it():
    with iron.use_device("npu2"):
        with pytest.raises(ViewOperandError, match="a backwards view: only a data"):
            Misuse().record(x=(16,))


def test_host_reads_and_writes_go_through_the_kind():
    h = Handle.whole((8,), np.float32, "x", "state")
    view = dataclasses.replace(h, shape=(3,), layout=Backwards(2))
    buffers = {"x": np.arange(8, dtype=np.float32)}
    np.testing.assert_array_equal(access.read(view, {}, buffers), [4, 3, 2])
    access.write(view, {}, buffers, np.array([-4, -3, -2], np.float32))
    np.testing.assert_array_equal(buffers["x"][2:5], [-2, -3, -4])
    assert view.is_view and view.ref().offset is None


def _layout_branches(path: Path) -> list[str]:
    """Where a module names a layout class: imports it, or isinstance on it."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in (
            "iron.core.handle",
            "iron.core.layout",
        ):
            names = {a.name for a in node.names} & LAYOUT_CLASSES
            found.extend(f"line {node.lineno}: imports {n}" for n in sorted(names))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "isinstance"
            and len(node.args) == 2
        ):
            kinds = node.args[1]
            parts = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
            for part in parts:
                name = part.attr if isinstance(part, ast.Attribute) else None
                name = part.id if isinstance(part, ast.Name) else name
                if name in LAYOUT_CLASSES:
                    found.append(f"line {node.lineno}: isinstance(..., {name})")
    return found


def test_no_consumer_branches_on_a_layout_class():
    sources = sorted((ROOT / "packages").glob("*/src/iron/**/*.py"))
    assert len(sources) > 50, f"found only {len(sources)} sources under {ROOT}"
    problems = [
        f"{path.relative_to(ROOT)} {where}: ask HandleLayout instead"
        for path in sources
        if path.relative_to(ROOT) not in LAYOUT_MODULES
        for where in _layout_branches(path)
    ]
    assert not problems, "\n".join(problems)


def test_the_branch_scanner_sees_a_branch(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from iron.core.layout import Dense\n"
        "def f(h):\n    return isinstance(h.layout, (handle.Strided, Dense))\n"
    )
    assert len(_layout_branches(bad)) == 3
