"""Operator.resolved() and bind(): filling an operator for a device and a call.

resolved() takes open tunables from resolve() for the given, bound or
IRON_DEVICE device and runs check(); per-call params take per-call values,
which bind() evaluates.
"""

from __future__ import annotations

import pytest
from operators_for_tests import DomainScale, Mode, NoResolve, PerCallRows

import iron
from iron.core import context
from iron.core.device import NPU1, NPU2, NoDeviceError
from iron.core.operator import RefusedShapeError
from iron.core.percall import Affine, PerCall


@pytest.fixture
def no_device(monkeypatch):
    """Nothing bound and no IRON_DEVICE, for the duration of a test."""
    monkeypatch.delenv("IRON_DEVICE", raising=False)
    with iron.use_device(None):
        yield


# -- resolved ---------------------------------------------------------------------------


def test_resolved_fills_open_tunables_from_resolve():
    op = DomainScale(size=64).resolved("npu2")
    assert (op.tile, op.columns, op.mode) == (16, 8, Mode.FAST)
    assert op.open_tunables() == ()
    assert op.pinned == frozenset()
    assert DomainScale(size=64).resolved(NPU1).columns == 4


def test_resolved_keeps_pinned_values():
    op = DomainScale(size=64, tile=32, mode="exact").resolved("npu2")
    assert (op.tile, op.columns, op.mode) == (32, 8, Mode.EXACT)
    assert op.pinned == frozenset({"tile", "mode"})


def test_resolved_uses_the_current_device(no_device):
    with iron.use_device("npu1"):
        assert DomainScale(size=64).resolved().columns == 4
    with iron.use_device("npu2"):
        assert DomainScale(size=64).resolved().columns == 8


def test_resolved_reads_iron_device(no_device, monkeypatch):
    monkeypatch.setenv("IRON_DEVICE", "npu1")
    assert DomainScale(size=64).resolved().columns == 4


def test_resolved_without_a_device_takes_the_default(no_device, emulated_default):
    assert DomainScale(size=64).resolved().columns == 8  # npu2, as the CLI


def test_resolved_without_a_device_names_the_three_ways(no_device, no_runtime):
    with pytest.raises(RuntimeError) as info:
        DomainScale(size=64).resolved()
    assert isinstance(info.value, NoDeviceError)
    message = str(info.value)
    assert 'iron.set_current_device("npu2")' in message
    assert 'with iron.use_device("npu2")' in message
    assert "IRON_DEVICE=npu2" in message


def test_resolved_with_nothing_open_returns_an_equal_operator():
    op = DomainScale(size=64, tile=16, columns=1, mode="fast")
    assert op.resolved("npu1") == op


def test_resolved_without_a_value_from_resolve_is_not_implemented():
    with pytest.raises(
        NotImplementedError, match=r"NoResolve.resolve\(npu2\).*\['tile'\]"
    ):
        NoResolve(size=4).resolved("npu2")
    assert NoResolve(size=4, tile=2).resolved("npu2").tile == 2


def test_resolved_calls_check():
    with pytest.raises(RefusedShapeError) as info:
        DomainScale(size=64, columns=8).resolved("npu1")
    assert isinstance(info.value, ValueError)
    assert str(info.value) == "DomainScale on npu1: columns=8 exceeds 4"


def test_resolved_checks_even_when_nothing_is_open():
    with pytest.raises(RefusedShapeError):
        DomainScale(size=64, tile=16, columns=8, mode="fast").resolved("npu1")


def test_resolved_skips_check_when_device_fit_is_off():
    token = context.device_fit.set(False)
    try:
        op = DomainScale(size=64, columns=8).resolved("npu1")
    finally:
        context.device_fit.reset(token)
    assert op.columns == 8
    assert context.device_fit.get() is True


def test_resolved_check_sees_the_filled_operator():
    seen = []

    class Spy(DomainScale):
        def check(self, dev):
            seen.append((self.tile, self.columns, dev))

    Spy(size=64).resolved("npu2")
    assert seen == [(16, 8, NPU2)]


# -- per-call values -------------------------------------------------------------------


def test_per_call_params_accept_per_call_values():
    n = PerCall("n")
    op = PerCallRows(rows=4, length=n)
    assert op.length is n
    op = PerCallRows(rows=4, length=n + 3)
    assert isinstance(op.length, Affine)


def test_non_per_call_params_refuse_per_call_values():
    with pytest.raises(TypeError) as info:
        PerCallRows(rows=PerCall("n"))
    assert str(info.value) == (
        "PerCallRows.rows is fixed when the graph is recorded; it cannot be the "
        "per-call value n"
    )
    with pytest.raises(TypeError, match="fixed when the graph is recorded"):
        PerCallRows(rows=PerCall("n") * 2)


def test_bind_evaluates_per_call_fields():
    n = PerCall("n")
    op = PerCallRows(rows=4, length=2 * n + 1)
    bound = op.bind({"n": 5})
    assert bound.length == 11
    assert bound.half == 5  # derived from the per-call length
    assert bound.rows == 4
    assert type(bound) is PerCallRows
    # The recorded operator is unchanged.
    assert isinstance(op.length, Affine) and isinstance(op.half, Affine)


def test_bind_without_per_call_values_is_identity():
    op = PerCallRows(rows=4, length=6)
    assert op.bind({"n": 1}) is op


def test_bind_missing_value_is_a_key_error():
    with pytest.raises(KeyError):
        PerCallRows(rows=4, length=PerCall("n")).bind({})
