"""Graph.body's signature: which parameters are inputs and which per-call values.

Positional parameters are the inputs in order (an optional one defaults to
None); keyword-only ones are iron.Scratchpad[int] or iron.Carried[int] values
with int defaults; signature() may name them instead of body's parameters.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from graphs_for_tests import Head, ScaleThenMul, bf16, mul, scale
from ml_dtypes import bfloat16
from operators_for_tests import Mul, Scale

import iron

# -- body's signature ---------------------------------------------------------


def test_positional_parameters_are_the_inputs_in_order():
    recording = ScaleThenMul().record(y=(16,), x=(16,))
    assert [h.name for h in recording.inputs] == ["x", "y"]
    assert [h.shape for h in recording.inputs] == [(16,), (16,)]
    assert all(h.dtype == np.dtype(bfloat16) for h in recording.inputs)
    assert all(h.buffer.role == "input" for h in recording.inputs)
    assert recording.values == []


class MaybeMul(iron.Graph):
    """``3 * x``, times ``y`` when given."""

    def body(self, x, y=None):
        out = Scale.step(x, factor=3.0)
        return out if y is None else Mul.step(out, y)


def test_an_optional_input_left_out_is_none_and_not_an_input():
    graph = MaybeMul()
    for recording in (graph.record(x=(8,)), graph.record(x=(8,), y=None)):
        assert [h.name for h in recording.inputs] == ["x"]
        assert len(recording.steps) == 1
    recording = graph.record(x=(8,), y=(8,))
    assert [h.name for h in recording.inputs] == ["x", "y"]
    assert len(recording.steps) == 2


def test_an_optional_input_in_the_reference():
    x, y = bf16(8), bf16(8, seed=1)
    graph = MaybeMul()
    np.testing.assert_array_equal(graph.reference(x), scale(x, 3.0))
    np.testing.assert_array_equal(graph.reference(x, None), scale(x, 3.0))
    np.testing.assert_array_equal(graph.reference(x, y), mul(scale(x, 3.0), y))


def test_an_input_defaulting_to_anything_but_none_raises():
    class Defaulted(iron.Graph):
        def body(self, x, y=0):
            return x

    with pytest.raises(TypeError, match=r"Defaulted\.body: input y defaults to 0; "):
        Defaulted().record(x=(8,))
    with pytest.raises(TypeError, match="may only default to None"):
        Defaulted().reference(bf16(8))


def _with_value(annotation):
    """A graph whose keyword-only ``position`` has ``annotation`` (or none)."""

    carried = annotation is iron.Carried[int]

    class Valued(iron.Graph):
        def body(self, x, *, position):
            return (x, iron.carry(position=position)) if carried else x

    if annotation is not inspect.Parameter.empty:
        Valued.body.__annotations__["position"] = annotation
    return Valued()


@pytest.mark.parametrize(
    "annotation",
    [
        inspect.Parameter.empty,
        int,
        iron.Scratchpad[float],
        iron.Carried[str],
        iron.Scratchpad,
        "int",
    ],
    ids=["none", "int", "scratchpad-float", "carried-str", "bare", "string"],
)
def test_a_keyword_only_value_must_be_annotated_scratchpad_or_carried(annotation):
    with pytest.raises(TypeError) as info:
        _with_value(annotation).record(x=(8,))
    message = str(info.value)
    assert "keyword-only position" in message
    assert "iron.Scratchpad[int] or iron.Carried[int]" in message


@pytest.mark.parametrize("annotation", [iron.Scratchpad[int], iron.Carried[int]])
def test_annotated_keyword_only_values_are_per_call_values(annotation):
    recording = _with_value(annotation).record(x=(8,))
    (value,) = recording.values
    assert value.name == "position"
    assert value.kind.value == annotation.__metadata__[0]


def test_var_positional_and_var_keyword_are_refused():
    class Star(iron.Graph):
        def body(self, *xs):
            return xs[0]

    class StarStar(iron.Graph):
        def body(self, x, **values):
            return x

    with pytest.raises(TypeError, match=r"Star\.body: \*xs is not allowed"):
        Star().record()
    with pytest.raises(TypeError, match=r"StarStar\.body: \*\*values is not allowed"):
        StarStar().record(x=(8,))


def test_a_graph_without_a_body_says_so():
    class NoBody(iron.Graph):
        pass

    with pytest.raises(NotImplementedError, match="NoBody defines no body()"):
        NoBody().record()


@pytest.mark.parametrize("default", [True, 1.5, "2", None])
def test_a_per_call_default_is_an_int(default):
    class Defaulted(iron.Graph):
        def body(self, x, *, n: iron.Scratchpad[int] = default):
            return x

    with pytest.raises(TypeError) as info:
        Defaulted().record(x=(8,))
    assert str(info.value) == (
        f"Defaulted.body: per-call n defaults to {default!r}; a per-call value's "
        f"default is an int"
    )


def test_per_call_defaults_are_used_when_not_given():
    graph = Head()
    assert graph.record(x=(8,)).defaults == {"n": 4}
    x = bf16(8)
    np.testing.assert_array_equal(graph.reference(x), scale(x[:4], 3.0))
    np.testing.assert_array_equal(graph.reference(x, n=6), scale(x[:6], 3.0))


class Named(iron.Graph):
    """Names its inputs and values in signature(), not body's parameters."""

    def signature(self):
        p = inspect.Parameter
        return inspect.Signature(
            [
                p("a", p.POSITIONAL_OR_KEYWORD),
                p("b", p.POSITIONAL_OR_KEYWORD, default=None),
                p("k", p.KEYWORD_ONLY, annotation=iron.Scratchpad[int], default=2),
            ]
        )

    def body(self, *tensors, **values):
        a, b = tensors
        out = Scale.step(a[: values["k"]], factor=2.0)
        return out if b is None else (out, Scale.step(b))


def test_signature_may_name_the_inputs_and_values():
    graph = Named()
    recording = graph.record(a=(8,))
    assert [h.name for h in recording.inputs] == ["a"]
    assert [v.name for v in recording.values] == ["k"]
    assert recording.defaults == {"k": 2}
    a, b = bf16(8), bf16(4, seed=1)
    np.testing.assert_array_equal(graph.reference(a), scale(a[:2], 2.0))
    out, same = graph.reference(a, b, k=5)
    np.testing.assert_array_equal(out, scale(a[:5], 2.0))
    np.testing.assert_array_equal(same, b)


def test_the_default_signature_leaves_out_self():
    assert list(ScaleThenMul().signature().parameters) == ["x", "y"]
    assert list(Head().signature().parameters) == ["x", "n"]
