"""Tests for iron.core.declare: params, tunables, operands and what a class collects."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ml_dtypes import bfloat16
from operators_for_tests import Mode

from iron.core.declare import (
    MISSING,
    Declaration,
    Divisors,
    Input,
    Output,
    ParamSpec,
    collect,
    domain_text,
    domain_values,
    param,
    tunable,
)
from iron.core.operator import Operator


class Base(Operator):
    size: int = param(doc="elements")
    scale: float = param(1.0)
    tile: int = tunable(domain=Divisors("size"), doc="elements per tile")
    columns: int = tunable(domain=(1, 2, 4, 8))
    inputs = (Input("x", "size"),)
    outputs = (Output("out", "size"),)


class Child(Base):
    mode: Mode = tunable(domain=Mode)
    extra: int = param(0)


class OneColumn(Child):
    columns = 1  # fixes the inherited tunable


class OneColumnAgain(OneColumn):
    pass


def _half(self):
    return self.size // 2


class Derived(Operator):
    size: int = param()
    half: int = param(_half)
    blocks: int = param(derive=lambda self: self.size // 64)
    quarter: int = param(derive=lambda self: self.half // 2)
    inputs = (Input("x", "size"),)
    outputs = (Output("out", "half"),)


# -- params and tunables ---------------------------------------------------------


def test_param_and_tunable_return_specs():
    p = param(3, per_call=True, doc="a count")
    assert isinstance(p, ParamSpec)
    assert (p.default, p.per_call, p.doc, p.tunable, p.derive) == (
        3,
        True,
        "a count",
        False,
        None,
    )
    assert param().default is MISSING
    t = tunable(domain=(1, 2), doc="a knob")
    assert (t.tunable, t.domain, t.doc, t.default) == (True, (1, 2), "a knob", MISSING)
    assert repr(MISSING) == "MISSING"


def test_params_collected_in_declaration_order_base_first():
    assert list(Base.declaration.params) == ["size", "scale", "tile", "columns"]
    assert list(Child.declaration.params) == [
        "size",
        "scale",
        "tile",
        "columns",
        "mode",
        "extra",
    ]
    for name, spec in Child.declaration.params.items():
        assert spec.name == name


def test_redeclared_param_keeps_its_base_position():
    class Redeclared(Base):
        scale: float = param(2.0)
        more: int = param(1)

    params = Redeclared.declaration.params
    assert list(params) == ["size", "scale", "tile", "columns", "more"]
    assert params["scale"].default == 2.0
    assert Base.declaration.params["scale"].default == 1.0


def test_tunables_lists_open_tunables_in_order():
    assert Base.declaration.tunables == ("tile", "columns")
    assert Child.declaration.tunables == ("tile", "columns", "mode")


def test_dimensions_are_the_non_tunable_params():
    assert Child.declaration.dimensions == ("size", "scale", "extra")
    assert Derived.declaration.dimensions == ("size", "half", "blocks", "quarter")


def test_subclass_assigning_a_value_fixes_a_tunable():
    params = OneColumn.declaration.params
    assert params["columns"].tunable
    assert params["columns"].default == 1
    assert params["columns"].domain == (1, 2, 4, 8)
    assert "columns" not in OneColumn.declaration.tunables
    assert OneColumn.declaration.tunables == ("tile", "mode")
    # The base is untouched.
    assert Child.declaration.tunables == ("tile", "columns", "mode")
    assert Child.declaration.params["columns"].default is MISSING


def test_fixed_tunable_stays_fixed_in_further_subclasses():
    params = OneColumnAgain.declaration.params
    assert params["columns"].tunable and params["columns"].default == 1
    assert OneColumnAgain.declaration.tunables == ("tile", "mode")


def test_fixed_tunable_has_its_value_on_instances():
    op = OneColumn(size=64)
    assert op.columns == 1
    assert op.open_tunables() == ("tile", "mode")
    assert op.pinned == frozenset()


def test_fixing_a_tunable_outside_its_domain_is_refused_on_construction():
    class Three(Base):
        columns = 3

    with pytest.raises(ValueError, match=r"columns=3 is outside its domain"):
        Three(size=64)


def test_methods_do_not_fix_tunables():
    class WithMethod(Base):
        def resolve(self, dev):
            return {"tile": 1, "columns": 1}

    assert WithMethod.declaration.tunables == ("tile", "columns")


def test_redeclaring_a_fixed_tunable_reopens_it():
    class Reopened(OneColumn):
        columns: int = tunable(domain=(1, 2))

    assert "columns" in Reopened.declaration.tunables
    assert Reopened.declaration.params["columns"].domain == (1, 2)


# -- derived params -----------------------------------------------------------------


def test_derived_params_are_marked_derived():
    params = Derived.declaration.params
    assert not params["size"].derived
    assert params["half"].derived  # a function default
    assert params["blocks"].derived  # derive=
    assert params["quarter"].derived
    assert not Base.declaration.params["scale"].derived


def test_derived_params_are_computed():
    op = Derived(size=256)
    assert (op.half, op.blocks, op.quarter) == (128, 4, 64)
    assert op.fields() == {"size": 256, "half": 128, "blocks": 4, "quarter": 64}


def test_derived_param_is_not_required():
    Derived(size=64)  # no TypeError for half, blocks or quarter


def test_derived_param_given_explicitly_wins():
    op = Derived(size=256, blocks=7)
    assert op.blocks == 7
    assert op.half == 128


def test_lambda_default_is_derived():
    class Lam(Operator):
        n: int = param()
        twice: int = param(lambda self: 2 * self.n)

    assert Lam.declaration.params["twice"].derived
    assert Lam(n=5).twice == 10


# -- operands ---------------------------------------------------------------------


def test_input_and_output_construction():
    x = Input("x", "m", 4)
    assert (x.name, x.dims, x.dtype, x.optional) == ("x", ("m", 4), bfloat16, False)
    opt = Input("bias", "m", dtype=None, optional=True)
    assert (opt.dims, opt.dtype, opt.optional) == (("m",), None, True)
    out = Output("y", "m")
    assert (out.name, out.dims, out.dtype) == ("y", ("m",), None)
    assert Output("i", "m", dtype="int32").dtype == "int32"


def test_operands_are_frozen_and_compare_by_value():
    assert Input("x", "m") == Input("x", "m")
    assert Input("x", "m") != Input("x", "n")
    with pytest.raises(AttributeError):
        Input("x", "m").name = "y"  # type: ignore[misc]


def test_declaration_collects_operands():
    assert Base.declaration.inputs == (Input("x", "size"),)
    assert Base.declaration.outputs == (Output("out", "size"),)


def test_subclass_inherits_operands():
    assert Child.declaration.inputs == Base.declaration.inputs
    assert OneColumn.declaration.outputs == Base.declaration.outputs


def test_subclass_may_replace_operands():
    class Two(Base):
        inputs = (Input("x", "size"), Input("y", "size"))

    assert [i.name for i in Two.declaration.inputs] == ["x", "y"]
    assert Two.declaration.outputs == Base.declaration.outputs


@pytest.mark.parametrize("where", ["inputs", "outputs"])
def test_operand_dims_must_name_declared_params(where):
    body = {
        "size": param(),
        "inputs": (Input("x", "size"),),
        "outputs": (Output("out", "size"),),
    }
    body[where] = (
        (Input("x", "size", "width"),)
        if where == "inputs"
        else (Output("out", "width"),)
    )
    operand = "x" if where == "inputs" else "out"
    with pytest.raises(TypeError) as info:
        type("Bad", (Operator,), body)
    message = str(info.value)
    assert message.startswith("Bad: ")
    assert f"operand {operand!r} has dimension 'width'" in message
    assert "not a declared param()" in message


def test_operand_dims_checked_against_inherited_params():
    class Wide(Base):
        width: int = param()
        inputs = (Input("x", "size", "width"),)

    assert Wide.declaration.inputs[0].dims == ("size", "width")
    with pytest.raises(TypeError, match="'depth'"):

        class Deep(Base):
            inputs = (Input("x", "size", "depth"),)


def test_int_dims_need_no_param():
    class Fixed(Operator):
        n: int = param()
        inputs = (Input("x", "n", 16),)
        outputs = (Output("y", 16),)

    assert Fixed.declaration.inputs[0].dims == ("n", 16)


# -- collect() directly ----------------------------------------------------------


def test_collect_from_a_namespace():
    namespace = {
        "m": param(),
        "tile": tunable(domain=(8, 16)),
        "inputs": [Input("a", "m")],
        "outputs": [Output("b", "m")],
        "helper": lambda self: None,
    }
    declaration = collect("Op", (Operator,), namespace)
    assert isinstance(declaration, Declaration)
    assert list(declaration.params) == ["m", "tile"]
    assert declaration.tunables == ("tile",)
    assert declaration.inputs == (Input("a", "m"),)
    assert declaration.outputs == (Output("b", "m"),)


def test_collect_fixing_a_base_tunable():
    declaration = collect("Fixed", (Base,), {"tile": 8})
    assert declaration.params["tile"].default == 8
    assert declaration.params["tile"].tunable
    assert declaration.tunables == ("columns",)


def test_collect_ignores_non_declarations():
    declaration = collect("Plain", (object,), {"x": 1})
    assert declaration == Declaration({}, (), (), ())


# -- domains --------------------------------------------------------------------------


def test_divisors_values():
    assert Divisors("n").values({"n": 12}) == [1, 2, 3, 4, 6, 12]
    assert Divisors("n", multiple_of=2).values({"n": 12}) == [2, 4, 6, 12]
    assert Divisors("n", at_most=4).values({"n": 12}) == [1, 2, 3, 4]
    assert Divisors("n", multiple_of=16, at_most=1024).values({"n": 4096}) == [
        16,
        32,
        64,
        128,
        256,
        512,
        1024,
    ]
    assert Divisors("n", multiple_of=16).values({"n": 8}) == []
    assert Divisors("n").values({"n": 1}) == [1]


def test_divisors_values_reads_the_named_field_as_int():
    assert Divisors("size").values({"size": "6", "other": 100}) == [1, 2, 3, 6]


def test_divisors_text():
    assert str(Divisors("size")) == "divisors of size"
    assert (
        str(Divisors("size", multiple_of=16, at_most=1024))
        == "divisors of size, multiples of 16, at most 1024"
    )


@given(
    n=st.integers(1, 5000),
    multiple_of=st.integers(1, 64),
    at_most=st.none() | st.integers(1, 5000),
)
def test_divisors_values_match_brute_force(n, multiple_of, at_most):
    got = Divisors("n", multiple_of=multiple_of, at_most=at_most).values({"n": n})
    want = [
        d
        for d in range(1, n + 1)
        if n % d == 0 and d % multiple_of == 0 and (at_most is None or d <= at_most)
    ]
    assert got == want


def test_domain_values_of_each_kind():
    assert domain_values(None, {}) is None
    assert domain_values(Mode, {}) == [Mode.FAST, Mode.EXACT]
    assert domain_values((1, 2, 4), {}) == [1, 2, 4]
    assert domain_values(Divisors("n"), {"n": 6}) == [1, 2, 3, 6]


def test_domain_text_of_each_kind():
    assert domain_text(None) == "any value"
    assert domain_text(Mode) == "one of 'fast', 'exact'"
    assert domain_text((1, 2, 4)) == "one of 1, 2, 4"
    assert domain_text(Divisors("n", multiple_of=2)) == "divisors of n, multiples of 2"
