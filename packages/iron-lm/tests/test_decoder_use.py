"""A Decoder serves one use at a time, from any thread, and goes when dropped.

A generation in progress owns the decoder's KV cache and device loop: a
second ``generate()`` or a ``logits()`` meanwhile raises ``InUseError``
naming it, and the suspended generation then yields exactly the tokens it
would have without the attempt. Calls from several threads are serialized.
Ctrl-C inside a generation leaves the decoder usable. ``del decoder;
gc.collect()`` frees the model: its arena, its images, the open shard.
"""

from __future__ import annotations

import gc
import os
import threading
import tracemalloc
import weakref
from pathlib import Path

import numpy as np
import pytest
from lm_support import CONTEXT, ROWS, prompt_ids, write_tiny

import iron
from iron.lm.generate import Decoder
from iron.runtime import InUseError
from iron.runtime.emu import EmuRun

SAMPLED = {"temperature": 0.8, "top_k": 8}
#: (device, device_loop) of each way to loop the decode step
LOOPS = [("npu2", True), ("npu2", False), ("npu1", None)]


@pytest.mark.parametrize(("device", "loop"), LOOPS)
def test_a_second_generation_while_one_is_live_raises_naming_it(
    decoders, device, loop
) -> None:
    decoder = decoders("tied", device, **SAMPLED)
    ids, other = prompt_ids(11, seed=21), prompt_ids(5, seed=22)
    full = list(decoder.generate(ids, max_new_tokens=10, seed=3, stop=[]))
    made_before = decoder.generate(other, max_new_tokens=4, stop=[], device_loop=loop)
    stream = decoder.generate(ids, max_new_tokens=10, seed=3, stop=[], device_loop=loop)
    try:
        assert [next(stream) for _ in range(4)] == full[:4]
        with pytest.raises(InUseError, match="11-token prompt.*after 4 tokens"):
            decoder.generate(other, max_new_tokens=4, stop=[], device_loop=loop)
        with pytest.raises(InUseError, match="generation on a 11-token prompt"):
            next(made_before)  # made earlier, first asked for now
        assert list(stream) == full[4:]
    finally:
        stream.close()
    # over: the decoder is free again, and the cache it left is a normal one
    assert list(decoder.generate(ids, max_new_tokens=10, seed=3, stop=[])) == full


@pytest.mark.parametrize(("device", "loop"), LOOPS)
def test_logits_while_a_generation_is_suspended_raise_and_it_goes_on(
    decoders, device, loop
) -> None:
    decoder = decoders("tied", device, **SAMPLED)
    ids = prompt_ids(19, seed=23)  # two prompt chunks
    full = list(decoder.generate(ids, max_new_tokens=8, seed=5, stop=[]))
    scores = decoder.logits(ids)
    stream = decoder.generate(ids, max_new_tokens=8, seed=5, stop=[], device_loop=loop)
    try:
        assert next(stream) == full[0]  # suspended after its first token
        with pytest.raises(InUseError, match="Decoder.logits") as info:
            decoder.logits(ids)
        assert "close()" in str(info.value) and "Nothing ran" in str(info.value)
        assert list(stream) == full[1:]
    finally:
        stream.close()
    np.testing.assert_array_equal(decoder.logits(ids), scores)


def test_a_stream_closed_or_dropped_frees_the_decoder(decoders) -> None:
    decoder = decoders("tied", "npu2", **SAMPLED)
    ids = prompt_ids(7, seed=24)
    full = list(decoder.generate(ids, max_new_tokens=6, seed=1, stop=[]))
    stream = decoder.generate(ids, max_new_tokens=6, seed=1, stop=[])
    next(stream)
    stream.close()
    assert list(decoder.generate(ids, max_new_tokens=6, seed=1, stop=[])) == full
    stream = decoder.generate(ids, max_new_tokens=6, seed=1, stop=[])
    next(stream)
    del stream  # its last reference: closed on the spot
    assert list(decoder.generate(ids, max_new_tokens=6, seed=1, stop=[])) == full


def test_logits_from_several_threads_each_get_their_own(decoders) -> None:
    decoder = decoders("tied", "npu2")
    prompts = [prompt_ids(5 + 7 * k, seed=30 + k) for k in range(3)]
    want = [decoder.logits(ids) for ids in prompts]
    barrier = threading.Barrier(len(prompts))
    got: list[list] = [[] for _ in prompts]

    def score(k: int) -> None:
        with iron.use_device("npu2"):
            for _ in range(4):
                barrier.wait(timeout=60)
                try:
                    got[k].append(decoder.logits(prompts[k]))
                except Exception as error:  # reported below
                    got[k].append(error)

    threads = [threading.Thread(target=score, args=(k,)) for k in range(len(prompts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    for k, results in enumerate(got):
        assert len(results) == 4
        for result in results:
            assert not isinstance(result, Exception), result
            np.testing.assert_array_equal(result, want[k])


def test_a_generation_from_another_thread_while_one_is_live_raises(decoders) -> None:
    decoder = decoders("tied", "npu2", **SAMPLED)
    ids = prompt_ids(9, seed=25)
    full = list(decoder.generate(ids, max_new_tokens=6, seed=2, stop=[]))
    stream = decoder.generate(ids, max_new_tokens=6, seed=2, stop=[])
    raised: list = []

    def other() -> None:
        with iron.use_device("npu2"):
            try:
                list(decoder.generate(ids, max_new_tokens=3, stop=[]))
            except InUseError as error:
                raised.append(error)

    try:
        assert next(stream) == full[0]
        thread = threading.Thread(target=other)
        thread.start()
        thread.join(timeout=60)
        assert len(raised) == 1 and "made in thread 'MainThread'" in str(raised[0])
        assert list(stream) == full[1:]
    finally:
        stream.close()


@pytest.mark.parametrize(("device", "loop"), LOOPS)
def test_ctrl_c_inside_a_generation_leaves_the_decoder_usable(
    decoders, monkeypatch, device, loop
) -> None:
    decoder = decoders("tied", device, **SAMPLED)
    ids = prompt_ids(13, seed=26)
    full = list(decoder.generate(ids, max_new_tokens=8, seed=4, stop=[]))
    original = EmuRun.wait
    waits = [0]

    def wait(self, timeout=None):
        waits[0] += 1
        if waits[0] == 6:  # a few runs in: Ctrl-C lands while one is in flight
            raise KeyboardInterrupt
        return original(self, timeout)

    monkeypatch.setattr(EmuRun, "wait", wait)
    stream = decoder.generate(ids, max_new_tokens=8, seed=4, stop=[], device_loop=loop)
    with pytest.raises(KeyboardInterrupt):
        list(stream)
    monkeypatch.undo()
    assert list(decoder.generate(ids, max_new_tokens=8, seed=4, stop=[])) == full
    assert np.isfinite(decoder.logits(ids)).all()


# -- del decoder frees the model --------------------------------------------------------------


def _mapped(path: Path) -> bool:
    """Whether this process maps or holds open ``path`` (Linux /proc)."""
    with open("/proc/self/maps") as maps:
        if any(str(path) in line for line in maps):
            return True
    fds = Path("/proc/self/fd")
    for fd in fds.iterdir():
        try:
            if os.readlink(fd) == str(path):
                return True
        except OSError:
            continue
    return False


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize(("device", "loop"), LOOPS)
def test_del_decoder_frees_the_model_and_the_shard(tmp_path, device, loop) -> None:
    """After the last reference: memory back, the shard unmapped and closed."""
    directory = write_tiny(tmp_path, "tied")  # a shard no other decoder maps
    shard = (directory / "model.safetensors").resolve()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        decoder = Decoder.from_pretrained(
            directory, device=device, context=CONTEXT, rows=ROWS, progress=False
        ).compile()
        tokens = list(
            decoder.generate(prompt_ids(9), max_new_tokens=5, stop=[], device_loop=loop)
        )
        assert len(tokens) == 5
        assert _mapped(shard)
        gone = {
            "decoder": weakref.ref(decoder),
            "graph": weakref.ref(decoder.graph),
            "arena buffer": weakref.ref(decoder.decode.arena.buffer()),
            "decode image": weakref.ref(decoder.decode.callable.images[0]),
        }
        held = tracemalloc.get_traced_memory()[0] - before
        del decoder
        gc.collect()
        kept = [name for name, ref in gone.items() if ref() is not None]
        assert not kept, f"still alive after `del decoder; gc.collect()`: {kept}"
        assert not _mapped(shard), "the shard is still mapped or open"
        left = tracemalloc.get_traced_memory()[0] - before
        assert left < held // 10, f"{left} bytes of {held} left"
    finally:
        tracemalloc.stop()
