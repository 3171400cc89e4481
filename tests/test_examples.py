"""The spec's walkthroughs (sections 2 and 7) and every exercise in them, device-free."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from ml_dtypes import bfloat16

import iron
from iron.operators import AXPY, ReLU

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent.parent / "examples"))

import first_graph  # noqa: E402
import profiles  # noqa: E402


def _bf16(rng, n):
    return rng.standard_normal(n).astype(bfloat16)


@pytest.mark.parametrize("example", ["first_graph.py", "profiles.py"])
@pytest.mark.parametrize("device", ["npu1", "npu2"])
def test_example_prints_pass(root, example, device):
    """Exercise 1 of sections 2 and 7: the example prints PASS!."""
    env = {**os.environ, "IRON_DEVICE": device}
    done = subprocess.run(
        [sys.executable, str(root / "examples" / example)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith("PASS!")


def test_first_graph_records_two_steps_and_reads_tolerance_off_the_recording():
    graph = first_graph.ReluThenAxpy(scalar_factor=2.0)
    recording = graph.record(x=(2048,), y=(2048,))
    assert [type(s.op) for s in recording.steps] == [ReLU, AXPY]
    relu, axpy = recording.steps
    assert relu.inputs[0] is recording.inputs[0]
    assert axpy.inputs[0] is relu.outputs[0]
    assert axpy.op.size == 2048 and axpy.op.scalar_factor == 2.0
    rng = np.random.default_rng(1)
    x, y = _bf16(rng, 2048), _bf16(rng, 2048)
    expected = 2.0 * np.maximum(x.astype(np.float64), 0) + y.astype(np.float64)
    assert iron.compare(graph.reference(x, y), expected, axpy.op.tolerance())


def test_exercise_2_a_third_operator_joins_the_chain():
    class ReluThenTwoAxpys(first_graph.ReluThenAxpy):
        def body(self, x, y, z):
            partial = super().body(x, y)
            return AXPY.step(partial, z, scalar_factor=1.0)

    graph = ReluThenTwoAxpys(scalar_factor=2.0)
    recording = graph.record(x=(2048,), y=(2048,), z=(2048,))
    assert [type(s.op).__name__ for s in recording.steps] == ["ReLU", "AXPY", "AXPY"]
    rng = np.random.default_rng(2)
    x, y, z = (_bf16(rng, 2048) for _ in range(3))
    f = [a.astype(np.float32) for a in (x, y, z)]
    expected = (
        (2 * np.maximum(f[0], 0) + f[1]).astype(bfloat16).astype(np.float32) + f[2]
    ).astype(bfloat16)
    np.testing.assert_array_equal(graph.reference(x, y, z), expected)


def test_exercise_3_print_the_recording_and_inspect_its_steps():
    graph = first_graph.ReluThenAxpy()
    recording = graph.record(x=(2048,), y=(2048,))
    text = str(recording)
    assert text.splitlines()[0] == "Recording ReluThenAxpy: 2 steps"
    assert "ReLU(size=2048" in text and "AXPY(size=2048, scalar_factor=2.0" in text
    for step in recording.steps:
        assert isinstance(step.op, iron.Operator)
        assert all(isinstance(h, iron.Handle) for h in (*step.inputs, *step.outputs))


def test_exercise_4_relu_tolerance_is_exact():
    tolerance = ReLU(size=2048).resolved().tolerance()
    assert tolerance == iron.Tolerance.exact(note=tolerance.note)
    assert (tolerance.rtol, tolerance.atol, tolerance.ulps) == (None, None, None)


def test_section_7_profile_picks_its_entry():
    profile = iron.Profile()
    profile.add(AXPY, size=2048, tile_size=1024, num_aie_columns=2)
    graph = profiles.Scaled()
    graph.profile = profile
    (step,) = graph.record(x=(2048,), y=(2048,)).steps
    assert (step.op.tile_size, step.op.num_aie_columns) == (1024, 2)
    assert step.op.pinned == frozenset()


def test_section_7_exercise_2_another_shape_picks_the_other_entry():
    profile = iron.Profile()
    profile.add(AXPY, size=2048, tile_size=1024, num_aie_columns=2)
    profile.add(AXPY, size=1024, tile_size=256, num_aie_columns=1)
    graph = profiles.Scaled()
    graph.profile = profile
    (big,) = graph.record(x=(2048,), y=(2048,)).steps
    (small,) = graph.record(x=(1024,), y=(1024,)).steps
    assert (big.op.tile_size, big.op.num_aie_columns) == (1024, 2)
    assert (small.op.tile_size, small.op.num_aie_columns) == (256, 1)


def test_section_7_exercise_3_the_call_keyword_wins():
    class Pinned(iron.Graph):
        def body(self, x, y):
            return AXPY.step(x, y, scalar_factor=1.5, num_aie_columns=1)

    profile = iron.Profile()
    profile.add(AXPY, size=2048, tile_size=1024, num_aie_columns=2)
    graph = Pinned()
    graph.profile = profile
    (step,) = graph.record(x=(2048,), y=(2048,)).steps
    assert step.op.num_aie_columns == 1  # the call's own value
    assert step.op.tile_size == 1024  # the profile still gives the rest
    assert step.op.pinned == frozenset({"num_aie_columns"})


def test_section_7_reference_uses_the_profile():
    """graph.reference constructs the same operators under the same profile."""
    profile = iron.Profile()
    profile.add(AXPY, size=2048, tile_size=1024, num_aie_columns=2)
    graph = profiles.Scaled()
    graph.profile = profile
    x = np.ones(2048, bfloat16)
    np.testing.assert_array_equal(graph.reference(x, x), np.full(2048, 2.5, bfloat16))
    (recording,) = graph.__dict__["_references"].values()
    assert recording.steps[0].op.tile_size == 1024
