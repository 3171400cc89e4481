"""Tests for iron.core.operator: construction, resolution, inference and recording."""

from __future__ import annotations

from enum import Enum

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import iron
from iron.core import context, plugins
from iron.core.declare import Divisors, Input, Output, param, tunable
from iron.core.device import NPU1, NPU2, Device, NoDeviceError
from iron.core.handle import Handle
from iron.core.operator import (
    Cost,
    DimensionConflictError,
    Operator,
    RefusedShapeError,
    StepOutsideBodyError,
)
from iron.core.percall import Affine, PerCall


class Mode(Enum):
    FAST = "fast"
    EXACT = "exact"


class Scale(Operator):
    """``factor * x``: a flat op with one Divisors, one tuple and one Enum tunable."""

    size: int = param()
    factor: float = param(1.0)
    tile: int = tunable(domain=Divisors("size", multiple_of=16))
    columns: int = tunable(domain=(1, 2, 4, 8))
    mode: Mode = tunable(domain=Mode)
    inputs = (Input("x", "size"),)
    outputs = (Output("out", "size"),)

    def resolve(self, dev: Device) -> dict:
        return {"tile": 16, "columns": min(dev.columns, 8), "mode": Mode.FAST}

    def check(self, dev: Device) -> None:
        if self.columns > dev.columns:
            raise RefusedShapeError(
                f"Scale on {dev}: columns={self.columns} exceeds {dev.columns}"
            )

    def reference(self, x: np.ndarray) -> np.ndarray:
        return (np.float32(self.factor) * x.astype(np.float32)).astype(x.dtype)


class MatVec(Operator):
    """``w @ x``: M and K read off two operands."""

    M: int = param()
    K: int = param()
    tile: int = tunable(domain=Divisors("K"))
    inputs = (Input("w", "M", "K"), Input("x", "K"))
    outputs = (Output("y", "M"),)

    def resolve(self, dev: Device) -> dict:
        return {"tile": self.K}

    def reference(self, w: np.ndarray, x: np.ndarray) -> np.ndarray:
        return (w.astype(np.float32) @ x.astype(np.float32)).astype(w.dtype)


class Rows(Operator):
    """Per-row op over a ``(rows, 16)`` input, ``rows`` optionally per call."""

    rows: int = param()
    length: int = param(0, per_call=True)
    half: int = param(derive=lambda self: self.length // 2)
    inputs = (Input("x", "rows", 16), Input("bias", 16, optional=True))
    outputs = (Output("out", "rows", 16), Output("sums", 16))

    def reference(self, x, bias=None):
        return x, x.sum(axis=0)


class NoResolve(Operator):
    size: int = param()
    tile: int = tunable()


class Shuffled(Operator):
    """Declares a tunable before its dimensions."""

    tile: int = tunable()
    size: int = param()
    scale: float = param(2.0)
    columns: int = tunable()


class Tiled(Operator):
    """A tunable whose domain is the divisors of a derived field."""

    rows: int = param()
    cols: int = param()
    n: int = param(derive=lambda self: self.rows * self.cols)
    tile: int = tunable(domain=Divisors("n"))


def handle(name: str, *shape: int, valid=None, dtype="bfloat16") -> Handle:
    h = Handle.whole(shape, dtype, name, "input")
    if valid:
        h = Handle(h.buffer, h.shape, h.dtype, dict(valid), h.layout)
    return h


@pytest.fixture
def no_device(monkeypatch):
    """Nothing bound and no IRON_DEVICE, for the duration of a test."""
    monkeypatch.delenv("IRON_DEVICE", raising=False)
    with iron.use_device(None):
        yield


# -- construction ------------------------------------------------------------------


def test_construction_sets_fields():
    op = Scale(size=64, factor=2.0, tile=32)
    assert (op.size, op.factor, op.tile, op.columns, op.mode) == (
        64,
        2.0,
        32,
        None,
        None,
    )
    assert op.fields() == {
        "size": 64,
        "factor": 2.0,
        "tile": 32,
        "columns": None,
        "mode": None,
    }
    assert op.open_tunables() == ("columns", "mode")


def test_param_default_applies():
    assert Scale(size=64).factor == 1.0


def test_unknown_field_is_a_type_error_listing_fields():
    with pytest.raises(TypeError) as info:
        Scale(size=64, bogus=1, other=2)
    assert str(info.value) == (
        "Scale declares no field ['bogus', 'other']; its fields are "
        "['size', 'factor', 'tile', 'columns', 'mode']"
    )


def test_missing_required_is_a_type_error_naming_them():
    with pytest.raises(TypeError) as info:
        MatVec()
    assert (
        str(info.value)
        == "MatVec needs ['M', 'K']: give them as keywords (M=..., K=...)"
    )
    with pytest.raises(TypeError, match=r"needs \['K'\]"):
        MatVec(M=4)


def test_tunables_and_defaulted_and_derived_params_are_not_required():
    Scale(size=16)
    Rows(rows=4)


def test_tunable_outside_tuple_domain_names_the_domain():
    with pytest.raises(ValueError) as info:
        Scale(size=64, columns=3)
    assert str(info.value) == (
        "Scale.columns=3 is outside its domain (one of 1, 2, 4, 8)"
    )


def test_tunable_outside_divisors_domain_names_the_domain():
    with pytest.raises(ValueError) as info:
        Scale(size=64, tile=24)
    assert str(info.value) == (
        "Scale.tile=24 is outside its domain (divisors of size, multiples of 16)"
    )
    with pytest.raises(ValueError, match="divisors of size"):
        Scale(size=64, tile=128)


def test_tunable_outside_enum_domain_names_the_domain():
    with pytest.raises(ValueError) as info:
        Scale(size=64, mode="slow")
    assert str(info.value) == (
        "Scale.mode='slow' is outside its domain (one of 'fast', 'exact')"
    )


def test_enum_domain_coerces_values():
    assert Scale(size=64, mode="exact").mode is Mode.EXACT
    assert Scale(size=64, mode=Mode.FAST).mode is Mode.FAST


def test_divisors_domain_of_a_derived_field_is_checked():
    assert Tiled(rows=4, cols=8, tile=16).tile == 16
    with pytest.raises(ValueError, match=r"Tiled.tile=7 is outside its domain"):
        Tiled(rows=4, cols=8, tile=7)
    with pytest.raises(ValueError, match=r"Tiled.tile=64 is outside"):
        Tiled(rows=4, cols=8, tile=64)
    # Given explicitly, the derived field is what the domain reads.
    assert Tiled(rows=4, cols=8, n=7, tile=7).tile == 7


@given(size=st.integers(1, 4096).map(lambda k: 16 * k), tile=st.integers(1, 1 << 16))
def test_divisors_domain_accepts_exactly_its_values(size, tile):
    allowed = size % tile == 0 and tile % 16 == 0
    if allowed:
        assert Scale(size=size, tile=tile).tile == tile
    else:
        with pytest.raises(ValueError, match="outside its domain"):
            Scale(size=size, tile=tile)


# -- pinned ----------------------------------------------------------------------------


def test_pinned_is_the_given_tunables_by_default():
    assert Scale(size=64).pinned == frozenset()
    assert Scale(size=64, tile=16, mode="fast").pinned == frozenset({"tile", "mode"})


def test_pinned_leaves_out_dimensions_and_none():
    assert Scale(size=64, factor=3.0).pinned == frozenset()
    assert Scale(size=64, tile=None).pinned == frozenset()


def test_pinned_as_passed():
    op = Scale(size=64, tile=16, pinned=frozenset({"columns"}))
    assert op.pinned == frozenset({"columns"})
    assert Scale(size=64, tile=16, pinned=frozenset()).pinned == frozenset()
    assert Scale(size=64, pinned={"tile"}).pinned == frozenset({"tile"})


# -- immutability, equality, repr -------------------------------------------------------


def test_fields_are_immutable_after_construction():
    op = Scale(size=64)
    for name in ("size", "factor", "tile"):
        with pytest.raises(
            AttributeError, match=rf"Scale.{name} is fixed once constructed"
        ):
            setattr(op, name, 32)
    with pytest.raises(AttributeError, match="fixed once constructed"):
        del op.size
    assert op.size == 64 and op.tile is None


def test_non_field_attributes_may_be_set():
    op = Scale(size=64)
    op.note = "scratch"
    assert op.note == "scratch"


def test_equality_and_hash_follow_fields():
    a, b = Scale(size=64, tile=16), Scale(size=64, tile=16)
    assert a == b and hash(a) == hash(b)
    assert a != Scale(size=64, tile=32)
    assert Scale(size=64) != NoResolve(size=64)
    assert len({a, b, Scale(size=32)}) == 2


def test_repr_lists_dimensions_before_tunables():
    op = Shuffled(size=8, tile=2, columns=1)
    assert repr(op) == "Shuffled(size=8, scale=2.0, tile=2, columns=1)"
    assert repr(Scale(size=64, mode="fast")) == (
        "Scale(size=64, factor=1.0, tile=None, columns=None, mode=<Mode.FAST: 'fast'>)"
    )
    assert repr(Rows(rows=2)) == "Rows(rows=2, length=0, half=0)"


# -- replace ---------------------------------------------------------------------------


def test_replace_changes_fields_and_returns_a_new_operator():
    op = Scale(size=64, tile=16)
    new = op.replace(factor=3.0)
    assert new is not op and type(new) is Scale
    assert (new.size, new.factor, new.tile) == (64, 3.0, 16)
    assert (op.factor, op.tile) == (1.0, 16)


def test_replace_recomputes_derived_fields():
    op = Rows(rows=4, length=10)
    assert op.half == 5
    assert op.replace(length=20).half == 10


def test_replace_pins_the_tunables_it_sets():
    op = Scale(size=64, tile=16)
    assert op.replace(columns=2).pinned == frozenset({"tile", "columns"})
    assert op.replace(factor=2.0).pinned == frozenset({"tile"})
    assert op.replace(tile=None).pinned == frozenset()
    assert op.replace(tile=None).tile is None


def test_replace_checks_domains_and_fields():
    op = Scale(size=64, tile=64)
    with pytest.raises(ValueError, match="outside its domain"):
        op.replace(size=48)  # 64 does not divide 48
    with pytest.raises(TypeError, match="declares no field"):
        op.replace(bogus=1)


# -- resolved ---------------------------------------------------------------------------


def test_resolved_fills_open_tunables_from_resolve():
    op = Scale(size=64).resolved("npu2")
    assert (op.tile, op.columns, op.mode) == (16, 8, Mode.FAST)
    assert op.open_tunables() == ()
    assert op.pinned == frozenset()
    assert Scale(size=64).resolved(NPU1).columns == 4


def test_resolved_keeps_pinned_values():
    op = Scale(size=64, tile=32, mode="exact").resolved("npu2")
    assert (op.tile, op.columns, op.mode) == (32, 8, Mode.EXACT)
    assert op.pinned == frozenset({"tile", "mode"})


def test_resolved_uses_the_current_device(no_device):
    with iron.use_device("npu1"):
        assert Scale(size=64).resolved().columns == 4
    with iron.use_device("npu2"):
        assert Scale(size=64).resolved().columns == 8


def test_resolved_reads_iron_device(no_device, monkeypatch):
    monkeypatch.setenv("IRON_DEVICE", "npu1")
    assert Scale(size=64).resolved().columns == 4


def test_resolved_without_a_device_names_the_three_ways(no_device):
    with pytest.raises(RuntimeError) as info:
        Scale(size=64).resolved()
    assert isinstance(info.value, NoDeviceError)
    message = str(info.value)
    assert 'iron.set_current_device("npu2")' in message
    assert 'with iron.use_device("npu2")' in message
    assert "IRON_DEVICE=npu2" in message


def test_resolved_with_nothing_open_returns_an_equal_operator():
    op = Scale(size=64, tile=16, columns=1, mode="fast")
    assert op.resolved("npu1") == op


def test_resolved_without_a_value_from_resolve_is_not_implemented():
    with pytest.raises(
        NotImplementedError, match=r"NoResolve.resolve\(npu2\).*\['tile'\]"
    ):
        NoResolve(size=4).resolved("npu2")
    assert NoResolve(size=4, tile=2).resolved("npu2").tile == 2


def test_resolved_calls_check():
    with pytest.raises(RefusedShapeError) as info:
        Scale(size=64, columns=8).resolved("npu1")
    assert isinstance(info.value, ValueError)
    assert str(info.value) == "Scale on npu1: columns=8 exceeds 4"


def test_resolved_checks_even_when_nothing_is_open():
    with pytest.raises(RefusedShapeError):
        Scale(size=64, tile=16, columns=8, mode="fast").resolved("npu1")


def test_resolved_skips_check_when_device_fit_is_off():
    token = context.device_fit.set(False)
    try:
        op = Scale(size=64, columns=8).resolved("npu1")
    finally:
        context.device_fit.reset(token)
    assert op.columns == 8
    assert context.device_fit.get() is True


def test_resolved_check_sees_the_filled_operator():
    seen = []

    class Spy(Scale):
        def check(self, dev):
            seen.append((self.tile, self.columns, dev))

    Spy(size=64).resolved("npu2")
    assert seen == [(16, 8, NPU2)]


# -- per-call values -------------------------------------------------------------------


def test_per_call_params_accept_per_call_values():
    n = PerCall("n")
    op = Rows(rows=4, length=n)
    assert op.length is n
    op = Rows(rows=4, length=n + 3)
    assert isinstance(op.length, Affine)


def test_non_per_call_params_refuse_per_call_values():
    with pytest.raises(TypeError) as info:
        Rows(rows=PerCall("n"))
    assert str(info.value) == (
        "Rows.rows is fixed when the graph is recorded; it cannot be the "
        "per-call value n"
    )
    with pytest.raises(TypeError, match="fixed when the graph is recorded"):
        Rows(rows=PerCall("n") * 2)


def test_bind_evaluates_per_call_fields():
    n = PerCall("n")
    op = Rows(rows=4, length=2 * n + 1)
    bound = op.bind({"n": 5})
    assert bound.length == 11
    assert bound.half == 5  # derived from the per-call length
    assert bound.rows == 4
    assert type(bound) is Rows
    # The recorded operator is unchanged.
    assert isinstance(op.length, Affine) and isinstance(op.half, Affine)


def test_bind_without_per_call_values_is_identity():
    op = Rows(rows=4, length=6)
    assert op.bind({"n": 1}) is op


def test_bind_missing_value_is_a_key_error():
    with pytest.raises(KeyError):
        Rows(rows=4, length=PerCall("n")).bind({})


# -- shapes ----------------------------------------------------------------------------


def test_output_shapes_and_dtypes():
    op = Rows(rows=3)
    assert op.output_shapes() == [(3, 16), (16,)]
    assert op.output_dtypes([np.dtype("float32")]) == [
        np.dtype("float32"),
        np.dtype("float32"),
    ]
    assert MatVec(M=4, K=8).output_shapes() == [(4,)]


def test_output_valid_propagates_a_leading_axis_bound():
    n = PerCall("n").affine()
    x = handle("x", 8, 16, valid={0: n})
    valid = Rows(rows=8).output_valid([x, None])
    # out (rows, 16) takes x's row bound; sums (16,) has another leading dim.
    assert valid == [{0: n}, {}]


def test_output_valid_takes_int_bounds_and_skips_unbounded_inputs():
    bias = handle("bias", 16)
    x = handle("x", 8, 16, valid={0: 5})
    assert Rows(rows=8).output_valid([bias, x]) == [{0: 5}, {}]
    assert Rows(rows=8).output_valid([handle("x", 8, 16), None]) == [{}, {}]


def test_output_valid_needs_a_matching_leading_dimension():
    x = handle("x", 16, valid={0: 4})
    # MatVec's y is (M,) = (4,), not x's leading 16.
    assert MatVec(M=4, K=16).output_valid([handle("w", 4, 16), x]) == [{}]
    assert Scale(size=16).output_valid([x]) == [{0: 4}]


def test_infer_reads_dims_off_handles():
    found = MatVec.infer({"w": handle("w", 8, 32), "x": handle("x", 32)})
    assert found == {"M": (8, "w.shape[0]"), "K": (32, "w.shape[1]")}


def test_infer_skips_missing_operands():
    assert MatVec.infer({"w": None, "x": handle("x", 32)}) == {"K": (32, "x.shape[0]")}
    assert MatVec.infer({}) == {}


def test_infer_conflict_names_both_sources():
    with pytest.raises(DimensionConflictError) as info:
        MatVec.infer({"w": handle("w", 8, 2048), "x": handle("x", 1024)})
    assert isinstance(info.value, ValueError)
    assert str(info.value) == (
        "MatVec: K is 2048 from w.shape[1] but 1024 from x.shape[0]"
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
        MatVec.infer({"w": handle("w", 8), "x": handle("x", 8)})
    assert not isinstance(info.value, DimensionConflictError)
    assert str(info.value) == "MatVec: w has shape [8], but its operand is 2-D (M, K)"


def test_infer_checks_int_dims():
    assert Rows.infer({"x": handle("x", 3, 16)}) == {"rows": (3, "x.shape[0]")}
    with pytest.raises(DimensionConflictError) as info:
        Rows.infer({"x": handle("x", 3, 8)})
    assert str(info.value) == "Rows: x.shape[1] is 8, but the operand needs 16"
    with pytest.raises(DimensionConflictError, match=r"bias.shape\[0\] is 4"):
        Rows.infer({"x": handle("x", 3, 16), "bias": handle("bias", 4)})


@given(m=st.integers(1, 1 << 20), k=st.integers(1, 1 << 20), k2=st.integers(1, 1 << 20))
def test_infer_agrees_or_conflicts(m, k, k2):
    operands = {"w": handle("w", m, k), "x": handle("x", k2)}
    if k == k2:
        assert MatVec.infer(operands) == {
            "M": (m, "w.shape[0]"),
            "K": (k, "w.shape[1]"),
        }
    else:
        with pytest.raises(DimensionConflictError) as info:
            MatVec.infer(operands)
        assert str(info.value) == (
            f"MatVec: K is {k} from w.shape[1] but {k2} from x.shape[0]"
        )


# -- step and graphs ---------------------------------------------------------------------


class MatVecGraph(iron.Graph):
    def __init__(self, **fields):
        self.fields = fields

    def body(self, w, x):
        return MatVec.step(w, x, **self.fields)


def test_step_outside_a_body_raises():
    with pytest.raises(StepOutsideBodyError) as info:
        MatVec.step(handle("w", 4, 8), handle("x", 8))
    assert isinstance(info.value, TypeError)
    message = str(info.value)
    assert "MatVec.step records a step into a Graph.body" in message
    assert "MatVec(...)(arrays...)" in message
    assert "MatVec(...).reference(arrays...)" in message


def test_step_infers_dimensions_in_a_graph():
    with iron.use_device("npu2"):
        recording = MatVecGraph().record(w=(8, 32), x=(32,))
    (step,) = recording.steps
    assert step.op == MatVec(M=8, K=32, tile=32)
    assert step.op.pinned == frozenset()
    assert recording.outputs[0].shape == (8,)


def test_step_keyword_agreeing_with_a_handle_is_fine():
    with iron.use_device("npu2"):
        recording = MatVecGraph(K=32, tile=8).record(w=(8, 32), x=(32,))
    op = recording.steps[0].op
    assert (op.K, op.tile, op.pinned) == (32, 8, frozenset({"tile"}))


def test_step_keyword_conflicting_with_a_handle_raises():
    with iron.use_device("npu2"):
        with pytest.raises(DimensionConflictError) as info:
            MatVecGraph(K=64).record(w=(8, 32), x=(32,))
    assert str(info.value) == (
        "MatVec: K is 64 from the call's keyword but 32 from w.shape[1]"
    )


def test_step_keyword_conflicting_with_x_raises():
    class Sized(iron.Graph):
        def body(self, x):
            return Scale.step(x, size=64)

    with iron.use_device("npu2"):
        with pytest.raises(DimensionConflictError) as info:
            Sized().record(x=(32,))
    assert str(info.value) == (
        "Scale: size is 64 from the call's keyword but 32 from x.shape[0]"
    )


def test_step_needs_its_required_operands():
    class OnlyX(iron.Graph):
        def body(self, x):
            return MatVec.step(None, x, M=4, K=8)

    with iron.use_device("npu2"):
        with pytest.raises(TypeError, match="needs operand w"):
            OnlyX().record(x=(16,))


def test_step_keyword_fills_what_no_handle_gives():
    class WithTile(iron.Graph):
        def body(self, x):
            return Scale.step(x, factor=3.0, columns=2)

    with iron.use_device("npu1"):
        recording = WithTile().record(x=(64,))
    op = recording.steps[0].op
    assert (op.size, op.factor, op.columns, op.tile) == (64, 3.0, 2, 16)
    assert op.pinned == frozenset({"columns"})


def test_step_refuses_what_the_device_cannot_run():
    class TooWide(iron.Graph):
        def body(self, x):
            return Scale.step(x, columns=8)

    with iron.use_device("npu1"):
        with pytest.raises(RefusedShapeError, match="columns=8 exceeds 4"):
            TooWide().record(x=(64,))


def test_step_handles_conflicting_in_a_graph():
    with iron.use_device("npu2"):
        with pytest.raises(DimensionConflictError, match="K is 2048 from w.shape"):
            MatVecGraph().record(w=(8, 2048), x=(1024,))


def test_graph_reference_runs_the_operator_reference():
    w = np.arange(8 * 16, dtype=np.float32).reshape(8, 16) / 64
    x = np.linspace(-1, 1, 16, dtype=np.float32)
    w16, x16 = w.astype("bfloat16"), x.astype("bfloat16")
    with iron.use_device("npu2"):
        result = MatVecGraph().reference(w16, x16)
    want = (w16.astype(np.float32) @ x16.astype(np.float32)).astype("bfloat16")
    np.testing.assert_array_equal(result, want)


def test_step_propagates_a_per_call_row_bound():
    class Bounded(iron.Graph):
        def body(self, x, *, n: iron.Scratchpad[int]):
            return Rows.step(x[:n])[0]

    with iron.use_device("npu2"):
        recording = Bounded().record(x=(8, 16))
    (out,) = recording.outputs
    assert out.shape == (8, 16)
    assert set(out.valid) == {0}
    assert out.valid[0] == PerCall("n").affine()


def test_standalone_call_without_runtime_names_iron_runtime(monkeypatch):
    monkeypatch.setattr(plugins, "entry_points", lambda group: [])
    op = Scale(size=16).resolved("npu2")
    with pytest.raises(ImportError) as info:
        op(np.zeros(16, "bfloat16"))
    assert "iron-runtime" in str(info.value)


def test_base_hooks():
    op = NoResolve(size=4, tile=1)
    assert op.resolve(NPU2) == {}
    assert op.check(NPU2) is None
    with pytest.raises(NotImplementedError, match="NoResolve has no reference"):
        op.reference()
    with pytest.raises(NotImplementedError, match="NoResolve has no tolerance"):
        op.tolerance()
    with pytest.raises(NotImplementedError, match="NoResolve has no cost"):
        op.cost(NPU2)
    assert Cost(macs=1, bytes=2) == Cost(1, 2)


def test_graph_reference_runs_shapes_the_device_refuses():
    class TooWide(iron.Graph):
        def body(self, x):
            return Scale.step(x, columns=8, factor=2.0)

    x = np.arange(64, dtype=np.float32).astype("bfloat16")
    # Recorded for its host reference, a graph does not fit the device.
    result = TooWide().reference(x, dev="npu1")
    np.testing.assert_array_equal(result, (2 * x.astype(np.float32)).astype("bfloat16"))
    with pytest.raises(RefusedShapeError):
        with iron.use_device("npu1"):
            TooWide().record(x=(64,))
