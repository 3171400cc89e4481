"""Operator shapes: output shapes, dtypes and bounds, and dims inferred off handles.

infer() reads each dimension off the operands' shapes and names both sources
when two disagree; output_valid() carries a leading-axis row bound through.
"""

from __future__ import annotations

import numpy as np
import pytest
from handles_for_tests import handle
from hypothesis import given
from hypothesis import strategies as st
from operators_for_tests import DomainScale, PerCallRows, TiledMatVec

from iron.core.declare import Input, param
from iron.core.operator import DimensionConflictError, Operator
from iron.core.percall import PerCall

# -- shapes ----------------------------------------------------------------------------


def test_output_shapes_and_dtypes():
    op = PerCallRows(rows=3)
    assert op.output_shapes() == [(3, 16), (16,)]
    assert op.output_dtypes([np.dtype("float32")]) == [
        np.dtype("float32"),
        np.dtype("float32"),
    ]
    assert TiledMatVec(M=4, K=8).output_shapes() == [(4,)]


def test_output_valid_propagates_a_leading_axis_bound():
    n = PerCall("n").affine()
    x = handle("x", 8, 16, valid={0: n})
    valid = PerCallRows(rows=8).output_valid([x, None])
    # out (rows, 16) takes x's row bound; sums (16,) has another leading dim.
    assert valid == [{0: n}, {}]


def test_output_valid_takes_int_bounds_and_skips_unbounded_inputs():
    bias = handle("bias", 16)
    x = handle("x", 8, 16, valid={0: 5})
    assert PerCallRows(rows=8).output_valid([bias, x]) == [{0: 5}, {}]
    assert PerCallRows(rows=8).output_valid([handle("x", 8, 16), None]) == [{}, {}]


def test_output_valid_needs_a_matching_leading_dimension():
    x = handle("x", 16, valid={0: 4})
    # TiledMatVec's y is (M,) = (4,), not x's leading 16.
    assert TiledMatVec(M=4, K=16).output_valid([handle("w", 4, 16), x]) == [{}]
    assert DomainScale(size=16).output_valid([x]) == [{0: 4}]


def test_infer_reads_dims_off_handles():
    found = TiledMatVec.infer({"w": handle("w", 8, 32), "x": handle("x", 32)})
    assert found == {"M": (8, "w.shape[0]"), "K": (32, "w.shape[1]")}


def test_infer_skips_missing_operands():
    assert TiledMatVec.infer({"w": None, "x": handle("x", 32)}) == {
        "K": (32, "x.shape[0]")
    }
    assert TiledMatVec.infer({}) == {}


def test_infer_conflict_names_both_sources():
    with pytest.raises(DimensionConflictError) as info:
        TiledMatVec.infer({"w": handle("w", 8, 2048), "x": handle("x", 1024)})
    assert isinstance(info.value, ValueError)
    assert str(info.value) == (
        "TiledMatVec: K is 2048 from w.shape[1] but 1024 from x.shape[0]"
    )


def test_infer_conflict_within_one_operand():
    class Square(Operator):
        n: int = param()
        inputs = (Input("a", "n", "n"),)

    assert Square.infer({"a": handle("a", 4, 4)}) == {"n": (4, "a.shape[0]")}
    with pytest.raises(
        DimensionConflictError,
        match=r"n is 4 from a.shape\[0\] but 5 from a.shape\[1\]",
    ):
        Square.infer({"a": handle("a", 4, 5)})


def test_infer_rank_mismatch_is_a_value_error():
    with pytest.raises(ValueError) as info:
        TiledMatVec.infer({"w": handle("w", 8), "x": handle("x", 8)})
    assert not isinstance(info.value, DimensionConflictError)
    assert (
        str(info.value)
        == "TiledMatVec: w has shape [8], but its operand is 2-D (M, K); "
        "for a single row write w.reshape(1, -1)"
    )


def test_infer_checks_int_dims():
    assert PerCallRows.infer({"x": handle("x", 3, 16)}) == {"rows": (3, "x.shape[0]")}
    with pytest.raises(DimensionConflictError) as info:
        PerCallRows.infer({"x": handle("x", 3, 8)})
    assert str(info.value) == "PerCallRows: x.shape[1] is 8, but the operand needs 16"
    with pytest.raises(DimensionConflictError, match=r"bias.shape\[0\] is 4"):
        PerCallRows.infer({"x": handle("x", 3, 16), "bias": handle("bias", 4)})


@given(m=st.integers(1, 1 << 20), k=st.integers(1, 1 << 20), k2=st.integers(1, 1 << 20))
def test_infer_agrees_or_conflicts(m, k, k2):
    operands = {"w": handle("w", m, k), "x": handle("x", k2)}
    if k == k2:
        assert TiledMatVec.infer(operands) == {
            "M": (m, "w.shape[0]"),
            "K": (k, "w.shape[1]"),
        }
    else:
        with pytest.raises(DimensionConflictError) as info:
            TiledMatVec.infer(operands)
        assert str(info.value) == (
            f"TiledMatVec: K is {k} from w.shape[1] but {k2} from x.shape[0]"
        )
