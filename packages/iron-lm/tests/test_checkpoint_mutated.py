"""A damaged safetensors checkpoint is refused by name, quickly (issue 37, item 5).

Bytes of a shard's header overwritten (its length, its JSON: names, dtypes,
shapes, offsets) or cut short: opening the checkpoint and loading its
weights into a Llama either works or raises a ``ValueError`` subclass
(``CheckpointError``, ``ConfigError``, a shape refused by name), never
another exception, a hang or a huge allocation.
"""

from __future__ import annotations

import json
import shutil
import struct
import time
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iron.lm import tiny
from iron.lm.checkpoint import CheckpointError, open_checkpoint
from iron.lm.model import Llama

#: Seconds one damaged open-and-load may take (the tiny model loads in well under one).
LOAD_S = 10.0
#: Peak Python allocation of one damaged open-and-load (the tiny model is about 1 MB).
PEAK_BYTES = 64 * 2**20

SHARD = "model.safetensors"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return tiny.write_checkpoint(tmp_path_factory.mktemp("tiny"))


def _load(directory) -> None:
    with open_checkpoint(directory):
        pass
    Llama.from_pretrained(directory, context=64, rows=8)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_a_mutated_header_is_refused_by_name_quickly(pristine, tmp_path_factory, data):
    directory = tmp_path_factory.mktemp("mutated")
    for item in pristine.iterdir():
        shutil.copy(item, directory / item.name)
    raw = bytearray((directory / SHARD).read_bytes())
    (size,) = struct.unpack("<Q", raw[:8])
    how = data.draw(st.sampled_from(["json", "bytes", "length", "cut"]))
    if how == "json":  # a valid header whose entries say something else
        header = json.loads(raw[8 : 8 + size])
        name = data.draw(
            st.sampled_from(sorted(n for n in header if n != "__metadata__"))
        )
        key = data.draw(st.sampled_from(["dtype", "shape", "data_offsets", None]))
        odd = st.one_of(
            st.sampled_from(["BF16", "F32", "F64", "I8", "U8", "BOOL", "F8_E4M3", "X"]),
            st.lists(st.integers(-(2**63), 2**64), max_size=4),
            st.none(),
            st.integers(),
        )
        if key is None:
            header[name] = data.draw(st.sampled_from([None, [], "x", {}]))
        else:
            header[name][key] = data.draw(odd)
        text = json.dumps(header).encode()
        raw[: 8 + size] = struct.pack("<Q", len(text)) + text
    elif how == "bytes":  # characters of the JSON header overwritten
        for _ in range(data.draw(st.integers(1, 4))):
            at = data.draw(st.integers(8, 8 + size - 1))
            raw[at] = data.draw(st.sampled_from(list(b'0123456789"{}[],:-e.x ')))
    elif how == "length":
        value = data.draw(
            st.sampled_from([0, 1, size - 1, size + 1, 2**31, 2**63, 2**64 - 1])
        )
        raw[:8] = struct.pack("<Q", value)
    else:
        del raw[data.draw(st.integers(0, len(raw) - 1)) :]
    (directory / SHARD).write_bytes(bytes(raw))
    tracemalloc.start()
    start = time.monotonic()
    try:
        _load(directory)
    except ValueError as e:
        assert str(e), "an error without a message"
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert time.monotonic() - start < LOAD_S
    assert peak < PEAK_BYTES, f"{peak} bytes allocated loading a damaged shard"


def test_a_header_length_past_the_file_is_a_checkpoint_error(pristine, tmp_path):
    for item in pristine.iterdir():
        shutil.copy(item, tmp_path / item.name)
    raw = bytearray((tmp_path / SHARD).read_bytes())
    raw[:8] = struct.pack("<Q", len(raw))
    (tmp_path / SHARD).write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match=SHARD):
        _load(tmp_path)
