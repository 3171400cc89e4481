"""The tutorial's walkthroughs: every example prints PASS!, and their exercises hold.

Sections 2 and 7 follow the spec's walkthroughs and every exercise in them;
the other sections' examples (1, 3, 4, 5, 6, 8, 9) are checked here for the
claims their pages make.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from ml_dtypes import bfloat16

import iron
from iron.core.graph_state import state_of
from iron.operators import AXPY, ReLU

EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES_DIR))

import carried_loop  # noqa: E402
import device_memory  # noqa: E402
import first_graph  # noqa: E402
import llama  # noqa: E402
import many_calls  # noqa: E402
import one_operator  # noqa: E402
import profiles  # noqa: E402
import tolerance_chain  # noqa: E402
import views  # noqa: E402


def _bf16(rng, n):
    return rng.standard_normal(n).astype(bfloat16)


EXAMPLES = sorted(p.name for p in EXAMPLES_DIR.glob("*.py"))


def test_every_section_has_its_example():
    for name in (
        "one_operator.py",
        "first_graph.py",
        "many_calls.py",
        "device_memory.py",
        "views.py",
        "tolerance_chain.py",
        "profiles.py",
        "carried_loop.py",
        "llama.py",
    ):
        assert name in EXAMPLES


@pytest.mark.parametrize("example", EXAMPLES)
@pytest.mark.parametrize("device", ["npu1", "npu2"])
def test_example_prints_pass(root, example, device):
    """Exercise 1 of every section: the example prints PASS! on both devices."""
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


@pytest.mark.npu
@pytest.mark.parametrize("example", EXAMPLES)
@pytest.mark.parametrize("device", ["npu1", "npu2"])
def test_example_prints_pass_on_the_npu(root, example, device):
    """The same examples on a Ryzen AI NPU (IRON_BACKEND=xrt); skipped without one."""
    from iron.runtime import xrt

    lacks = xrt.missing()
    if lacks:
        pytest.skip("no NPU here: this machine lacks " + "; ".join(lacks))
    env = {**os.environ, "IRON_DEVICE": device, "IRON_BACKEND": "xrt"}
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
    (recording,) = state_of(graph).references.values()
    assert recording.steps[0].op.tile_size == 1024


# -- Section 1: one operator on its own ----------------------------------------------


def test_section_1_main_passes_in_process():
    assert one_operator.main()


def test_section_1_exercise_2_a_pinned_tunable_stays_and_a_bad_one_is_refused():
    pinned = AXPY(size=2048, scalar_factor=2.0, num_aie_columns=2).resolved()
    assert pinned.num_aie_columns == 2 and pinned.pinned == {"num_aie_columns"}
    with pytest.raises(ValueError, match="outside its domain"):
        AXPY(size=2048, scalar_factor=2.0, tile_size=100)


def test_section_1_exercise_3_a_matmul_tolerance_depends_on_its_inputs():
    from iron.operators import GEMV

    gemv = GEMV(M=64, K=128).resolved()
    rng = np.random.default_rng(3)
    w = rng.standard_normal((64, 128)).astype(bfloat16)
    x = rng.standard_normal(128).astype(bfloat16)
    assert gemv.tolerance().kind == "relative"
    bound = gemv.tolerance(w, x)
    assert bound.kind == "bounded"
    exact = w.astype(np.float64) @ x.astype(np.float64)
    assert iron.compare(gemv(w, x), exact, bound)


def test_section_1_exercise_4_step_outside_a_body_is_a_type_error():
    x = np.zeros(2048, bfloat16)
    with pytest.raises(TypeError, match="records a step into a Graph.body"):
        AXPY.step(x, x, scalar_factor=2.0)


# -- Section 3: one compile, many calls -------------------------------------------------


def test_section_3_versions_by_shape_share_one_arena_allocated_once():
    graph = many_calls.ReluThenAxpy()
    small = graph.compile(x=(1024,), y=(1024,))
    big = graph.compile(x=(4096,), y=(4096,))
    tolerance = small.recording.steps[-1].op.tolerance()
    for n in (4096, 1024, 4096):
        assert many_calls._check(graph, *many_calls._inputs(n, n), tolerance)
    assert small.arena is big.arena and small.arena.generation == 1


def test_section_3_the_first_call_compiles_and_logs_then_a_new_shape_raises(caplog):
    graph = many_calls.ReluThenAxpy()
    x, y = many_calls._inputs(2048, 0)
    with caplog.at_level(logging.INFO, logger="iron.graph"):
        graph(x, y)
    assert "compiling shapes" in caplog.text and len(graph.versions) == 1
    with pytest.raises(ValueError, match="Compile every shape before the first call"):
        graph(*many_calls._inputs(512, 0))
    assert len(graph.versions) == 1


def test_section_3_exercise_3_a_late_compile_grows_the_arena(caplog):
    graph = many_calls.ReluThenAxpy()
    small = graph.compile(x=(1024,), y=(1024,))
    graph(*many_calls._inputs(1024, 0))
    graph.compile(x=(8192,), y=(8192,))
    with caplog.at_level(logging.WARNING, logger="iron.runtime"):
        graph(*many_calls._inputs(8192, 1))
    assert "grows the arena" in caplog.text and small.arena.generation == 2


# -- Section 4: device memory ----------------------------------------------------------


def test_section_4_residents_keep_one_offset_and_transients_share_bytes():
    graph = device_memory.Clipped()
    small = graph.compile(x=(device_memory.SMALL, device_memory.COLS))
    big = graph.compile(x=(device_memory.BIG, device_memory.COLS))
    arena = big.plan.arena
    arena.check()
    assert set(arena.residents) == {"bias", "first_row"}
    for name in arena.residents:
        assert small.plan.buffers[name].offset == big.plan.buffers[name].offset

    def transients(version):
        return {
            p.offset for p in version.plan.buffers.values() if p.kind == "transient"
        }

    assert transients(small) & transients(big)


def test_section_4_growth_keeps_the_state_and_warns(caplog):
    graph = device_memory.Clipped()
    first = graph.compile(x=(device_memory.SMALL, device_memory.COLS))
    x = device_memory._inputs(device_memory.SMALL, 5)
    graph(x)
    written = first.read(graph.first_row).copy()
    grown = graph.compile(x=(device_memory.BIG, device_memory.COLS))
    with caplog.at_level(logging.WARNING, logger="iron.runtime"):
        kept = grown.read(graph.first_row)
    assert "grows the arena" in caplog.text and grown.arena.generation == 2
    np.testing.assert_array_equal(kept, written)


def test_section_4_the_pictures_draw_the_examples_graph(root):
    for label in ("small", "big"):
        svg = (root / "docs" / "images" / f"arena-versions-{label}.svg").read_text()
        assert "Clipped(" in svg and "bias (resident)" in svg


# -- Section 5: views and per-call values ------------------------------------------------


@pytest.mark.parametrize("device", ["npu1", "npu2"])
def test_section_5_every_view_matches_numpy_for_any_values(device):
    with iron.use_device(device):
        rng = np.random.default_rng(8)
        table = rng.standard_normal((views.TABLE_ROWS, views.WIDTH)).astype(bfloat16)
        graph = views.Views(table)
        graph.compile(x=(views.ROWS, views.COLS), ids=((views.IDS,), np.int32))
        for n in range(views.ROWS + 1):
            start = int(rng.integers(0, 64))
            x = rng.standard_normal((views.ROWS, views.COLS)).astype(bfloat16)
            ids = rng.integers(0, views.TABLE_ROWS, views.IDS).astype(np.int32)
            got = graph(x, ids, n=n, start=start)
            for a, b in zip(got, views.expected(table, x, ids, n, start)):
                np.testing.assert_array_equal(a, b)


def test_section_5_a_value_outside_a_bound_is_refused_before_the_run():
    graph = views.Views(np.zeros((views.TABLE_ROWS, views.WIDTH), bfloat16))
    graph.compile(x=(views.ROWS, views.COLS), ids=((views.IDS,), np.int32))
    x = np.zeros((views.ROWS, views.COLS), bfloat16)
    ids = np.zeros(views.IDS, np.int32)
    with pytest.raises(IndexError, match="n is 9 this call"):
        graph(x, ids, n=views.ROWS + 1, start=0)


def test_section_5_a_per_call_value_in_python_control_flow_fails_at_record_time():
    class Branchy(iron.Graph):
        def body(self, x, *, n: iron.Scratchpad[int]):
            if n > 3:
                return ReLU.step(x)
            return x

    with pytest.raises(TypeError, match="computed per call"):
        Branchy().record(x=(64,))


# -- Section 6: tolerance along a chain -------------------------------------------------


def _nudge(values: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """Move positive bf16 values ``steps`` lattice steps (each -1, 0 or 1)."""
    bits = values.astype(bfloat16).view(np.uint16).astype(np.int32) + steps
    return bits.astype(np.uint16).view(bfloat16)


def test_section_6_the_end_to_end_bound_holds_for_a_device_using_every_allowance():
    """A device whose every step is up to 1 ulp off its reference stays in bound."""
    rng = np.random.default_rng(11)
    n = 1 << 14
    bound = tolerance_chain.chain_bound(3)
    for _ in range(4):
        x, w, b = (rng.uniform(0.5, 2.0, n).astype(bfloat16) for _ in range(3))
        s = _nudge(
            AXPY(size=n, scalar_factor=0.5).reference(x, b), rng.integers(-1, 2, n)
        )
        from iron.operators import ElementwiseMul

        p = _nudge(ElementwiseMul(size=n).reference(s, w), rng.integers(-1, 2, n))
        out = _nudge(
            AXPY(size=n, scalar_factor=1.5).reference(p, b), rng.integers(-1, 2, n)
        )
        f64 = [a.astype(np.float64) for a in (x, w, b)]
        exact = 1.5 * ((0.5 * f64[0] + f64[2]) * f64[1]) + f64[2]
        assert iron.compare(out, exact, bound)
        # One step's tolerance is not the chain's.
        assert not iron.compare(out, exact, iron.Tolerance.bf16_ulps(1))


def test_section_6_check_true_names_the_step_that_breaks_its_contract(monkeypatch):
    from iron.core.recording import Recording
    from iron.runtime import StepCheckError

    graph = tolerance_chain.Chain()
    size = 256
    graph.compile(x=(size,), w=(size,), b=(size,), check=True)
    rng = np.random.default_rng(2)
    x, w, b = (rng.uniform(0.5, 2.0, size).astype(bfloat16) for _ in range(3))
    original = Recording.run_step

    def faulty(step, values, buffers):
        original(step, values, buffers)
        if step.index == 1:
            buffers[step.outputs[0].name].reshape(-1).view(np.uint16)[:] += 3

    monkeypatch.setattr(Recording, "run_step", staticmethod(faulty))
    with pytest.raises(StepCheckError, match="step 1 ElementwiseMul"):
        graph(x, w, b)


def test_section_6_every_step_verdict_passes_on_the_device():
    graph = tolerance_chain.Chain(every_step=True)
    n = 512
    recording = graph.compile(x=(n,), w=(n,), b=(n,)).recording
    rng = np.random.default_rng(4)
    x, w, b = (rng.uniform(0.5, 2.0, n).astype(bfloat16) for _ in range(3))
    arrays = {"x": x, "w": w, "b": b}
    arrays.update(zip((h.name for h in recording.outputs), graph(x, w, b)))
    verdicts = tolerance_chain.step_verdicts(recording, arrays)
    assert len(verdicts) == 3 and all(verdicts)


# -- Section 8: carried values and device loops --------------------------------------------


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_section_8_every_depth_walks_the_same_tokens(depth):
    logits = carried_loop.table(depth)
    graph = carried_loop.Bigram(logits)
    version = graph.compile()
    assert version.emit is not None
    loop = carried_loop.CarriedLoop(version, version, depth=depth)
    assert list(loop.run(carried_loop.STEPS - 1, token=3, position=0)) == list(
        range(carried_loop.STEPS - 1)
    )
    want = carried_loop.walk(logits, 3, carried_loop.STEPS)
    assert version.read(graph.history).reshape(-1)[1:].tolist() == want[1:]


def test_section_8_the_walk_visits_every_token_once():
    walk = carried_loop.walk(carried_loop.table(0), 0, carried_loop.VOCAB)
    assert sorted(walk[1:]) == list(range(carried_loop.VOCAB))


def test_section_8_npu1_has_no_emit_and_loops_from_the_host():
    logits = carried_loop.table(0)
    with iron.use_device("npu1"):
        graph = carried_loop.Bigram(logits)
        version = graph.compile()
        assert version.emit is None
        with pytest.raises(ValueError, match="no Emit step"):
            carried_loop.CarriedLoop(version, version)
        carry = graph(token=5, position=0)
        for _ in range(carried_loop.STEPS - 1):
            carry = graph(token=carry.token, position=carry.position)
    want = carried_loop.walk(logits, 5, carried_loop.STEPS)
    assert version.read(graph.history).reshape(-1)[1:].tolist() == want[1:]


# -- Section 9: a Llama application -----------------------------------------------------


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    from iron.lm import tiny

    return tiny.write_checkpoint(tmp_path_factory.mktemp("tiny"))


def test_section_9_main_passes_in_process(tiny_checkpoint):
    assert llama.main(tiny_checkpoint)


def test_section_9_the_device_and_host_loops_give_the_same_tokens(tiny_checkpoint):
    from iron.lm.generate import Decoder
    from iron.lm.tokenizer import Tokenizer

    ids = Tokenizer.from_directory(tiny_checkpoint).encode("The NPU")
    decoder = Decoder.from_pretrained(
        tiny_checkpoint,
        device="npu2",
        context=64,
        temperature=0.8,
        top_k=20,
        progress=False,
    )
    device = list(decoder.generate(ids, max_new_tokens=10, seed=1))
    assert decoder.stats.loop == "device"
    host = list(decoder.generate(ids, max_new_tokens=10, seed=1, device_loop=False))
    assert decoder.stats.loop == "host" and host == device
