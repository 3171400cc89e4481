"""Checkpoints: memory-mapped round trips, shards and index, release, errors."""

from __future__ import annotations

import json
import mmap
import sys
from collections.abc import Mapping
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iron.lm.checkpoint import (
    Checkpoint,
    CheckpointError,
    CheckpointNotFoundError,
    open_checkpoint,
    read_header,
    save_checkpoint,
    write_safetensors,
)
from iron.lm.config import LlamaConfig, UnsupportedModelError

BF16 = ml_dtypes.bfloat16


def mixed_tensors(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "a.bf16": rng.standard_normal((8, 16), dtype=np.float32).astype(BF16),
        "b.f32": rng.standard_normal((3, 5), dtype=np.float32),
        "c.f16": rng.standard_normal((7,), dtype=np.float32).astype(np.float16),
        "d.i64": np.arange(6, dtype=np.int64).reshape(2, 3),
        "e.scalar": np.array(2.5, dtype=np.float32),
        "f.u8": np.arange(5, dtype=np.uint8),
    }


def bits(a: np.ndarray) -> np.ndarray:
    """Compare bf16 (and everything else) bit for bit."""
    return np.ascontiguousarray(a).view(np.uint8)


def write_dir(root: Path, tensors: dict[str, np.ndarray], name="model.safetensors"):
    root.mkdir(parents=True, exist_ok=True)
    LlamaConfig.tiny().to_json(root / "config.json")
    write_safetensors(root / name, tensors, metadata={"format": "pt"})
    return root


def mapped(ck: Checkpoint, a: np.ndarray) -> bool:
    """Whether ``a`` points into one of the checkpoint's mapped files."""
    return any(np.shares_memory(a, s.bytes) for s in ck._shards if s.bytes is not None)


def test_single_file_round_trip_is_zero_copy(tmp_path) -> None:
    tensors = mixed_tensors()
    with open_checkpoint(write_dir(tmp_path, tensors)) as ck:
        assert ck.config == LlamaConfig.tiny()
        assert sorted(ck.names()) == sorted(tensors)
        for name, expected in tensors.items():
            got = ck.tensor(name)
            assert got.dtype == expected.dtype and got.shape == expected.shape
            assert ck.shape(name) == expected.shape
            assert ck.dtype(name) == expected.dtype
            np.testing.assert_array_equal(bits(got), bits(expected))
            assert not got.flags.writeable
            assert mapped(ck, got)
        assert ck.tensor("a.bf16").dtype == np.dtype(BF16)
        assert ck.nbytes == sum(t.nbytes for t in tensors.values())


def test_reads_what_safetensors_writes(tmp_path) -> None:
    from safetensors.numpy import save_file

    tensors = {
        "x": np.arange(12, dtype=np.float32).reshape(3, 4),
        "y": np.ones((2, 2), np.float16),
        "z": np.arange(4, dtype=np.int32),
    }
    tmp_path.joinpath("config.json").write_text(
        json.dumps(LlamaConfig.tiny().to_dict())
    )
    save_file(tensors, str(tmp_path / "model.safetensors"))
    with open_checkpoint(tmp_path) as ck:
        for name, expected in tensors.items():
            np.testing.assert_array_equal(ck.tensor(name), expected)


def test_safetensors_reads_what_we_write(tmp_path) -> None:
    from safetensors import safe_open

    tensors = mixed_tensors(1)
    path = tmp_path / "t.safetensors"
    write_safetensors(path, tensors, metadata={"format": "pt"})
    with safe_open(str(path), framework="numpy") as f:
        assert set(f.keys()) == set(tensors)
        assert f.metadata() == {"format": "pt"}
        for name, t in tensors.items():
            assert list(f.get_slice(name).get_shape()) == list(t.shape)
            if t.dtype != np.dtype(BF16):
                np.testing.assert_array_equal(f.get_tensor(name), t)
    try:  # safetensors >= 0.6 builds bf16 numpy arrays too
        with safe_open(str(path), framework="numpy") as f:
            got = f.get_tensor("a.bf16")
    except (TypeError, ValueError, KeyError):
        return
    np.testing.assert_array_equal(bits(got), bits(tensors["a.bf16"]))


def test_sharded_with_index(tmp_path) -> None:
    config = LlamaConfig.tiny()
    tensors = {f"t{i}": np.full((64, 64), i, dtype=BF16) for i in range(4)}
    paths = save_checkpoint(tmp_path, config, tensors, max_shard_bytes=2 * 64 * 64 * 2)
    assert [p.name for p in paths] == [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ]
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"].values()) == {p.name for p in paths}
    assert index["metadata"]["total_size"] == 4 * 64 * 64 * 2
    with open_checkpoint(tmp_path) as ck:
        assert ck.files == tuple(paths)
        assert ck.names() == ["t0", "t1", "t2", "t3"]
        assert ck.info("t3").path == paths[1]
        for name, expected in tensors.items():
            np.testing.assert_array_equal(bits(ck.tensor(name)), bits(expected))
            assert mapped(ck, ck.tensor(name))


def test_index_is_the_authority(tmp_path) -> None:
    tensors = {f"t{i}": np.full((4,), i, dtype=np.float32) for i in range(4)}
    save_checkpoint(tmp_path, LlamaConfig.tiny(), tensors, max_shard_bytes=32)
    # A stray shard beside the indexed ones is not read.
    write_safetensors(tmp_path / "stray.safetensors", {"t0": np.zeros(4, np.float32)})
    with open_checkpoint(tmp_path) as ck:
        assert sorted(ck.names()) == ["t0", "t1", "t2", "t3"]
        np.testing.assert_array_equal(ck.tensor("t0"), tensors["t0"])


def test_without_index_every_shard_is_scanned(tmp_path) -> None:
    write_dir(tmp_path, {"a": np.ones(3, np.float32)}, "one.safetensors")
    write_safetensors(tmp_path / "two.safetensors", {"b": np.zeros(2, np.float16)})
    with open_checkpoint(tmp_path) as ck:
        assert ck.names() == ["a", "b"]
        assert [p.name for p in ck.files] == ["one.safetensors", "two.safetensors"]


def test_tree_is_a_lazy_mapping(tmp_path) -> None:
    tensors = mixed_tensors()
    with open_checkpoint(write_dir(tmp_path, tensors)) as ck:
        tree = ck.tree()
        assert isinstance(tree, Mapping)
        assert len(tree) == len(tensors) and set(tree) == set(tensors)
        assert "b.f32" in tree and "nope" not in tree
        for name, value in tree.items():
            assert mapped(ck, value)
            np.testing.assert_array_equal(bits(value), bits(tensors[name]))


def test_unknown_name_is_a_key_error(tmp_path) -> None:
    with open_checkpoint(write_dir(tmp_path, mixed_tensors())) as ck:
        with pytest.raises(KeyError, match="lm_head.weight"):
            ck.tensor("lm_head.weight")


def test_release_keeps_values(tmp_path) -> None:
    big = np.arange(64 * 1024, dtype=np.float32).reshape(256, 256)
    with open_checkpoint(write_dir(tmp_path, {"big": big, "small": big[:1]})) as ck:
        view = ck.tensor("big")
        np.testing.assert_array_equal(view, big)
        released = ck.release(view[10:20])
        if hasattr(mmap, "MADV_DONTNEED"):
            assert released >= 10 * 256 * 4 and released % mmap.PAGESIZE == 0
        assert ck.release("big") >= 0
        assert ck.release(view[:, 3]) >= 0  # strided pieces are fine
        np.testing.assert_array_equal(view, big)  # pages read back in
        assert ck.release(np.array(view)) == 0  # a copy is not mapped
        assert ck.release(view[:0]) == 0


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads /proc/self/smaps (Linux)"
)
def test_release_gives_pages_back(tmp_path) -> None:
    n = 4 * 1024 * 1024  # 16 MiB of float32
    root = write_dir(tmp_path, {"w": np.ones(n, np.float32)})
    shard = str(root / "model.safetensors")

    def resident_kib() -> int:
        total, inside = 0, False
        for line in Path("/proc/self/smaps").read_text().splitlines():
            if line[:1] in "0123456789abcdef" and "-" in line.split(" ")[0]:
                inside = line.rstrip().endswith(shard)
            elif inside and line.startswith("Rss:"):
                total += int(line.split()[1])
        return total

    with open_checkpoint(root) as ck:
        w = ck.tensor("w")
        assert float(w[::1024].sum()) == n / 1024  # touch every page
        before = resident_kib()
        assert before >= 15 * 1024
        for piece in range(0, n, n // 8):  # piecewise, as the uploader does
            ck.release(w[piece : piece + n // 8])
        assert resident_kib() < 1024
        assert float(w[-1]) == 1.0


def test_close_and_reopen(tmp_path) -> None:
    root = write_dir(tmp_path, mixed_tensors())
    ck = open_checkpoint(root)
    kept = ck.tensor("b.f32")
    ck.close()  # a live view keeps its mapping; closing does not fail
    np.testing.assert_array_equal(kept, mixed_tensors()["b.f32"])
    with pytest.raises(ValueError, match="closed"):
        ck.tensor("b.f32")
    assert "Checkpoint(" in repr(open_checkpoint(root))


def test_missing_directory(tmp_path) -> None:
    with pytest.raises(CheckpointNotFoundError, match="does not exist") as info:
        open_checkpoint(tmp_path / "nope")
    assert isinstance(info.value, FileNotFoundError)
    assert "nope" in str(info.value)
    (tmp_path / "file").write_text("x")
    with pytest.raises(CheckpointNotFoundError, match="not a directory"):
        open_checkpoint(tmp_path / "file")


def test_missing_config(tmp_path) -> None:
    write_safetensors(tmp_path / "model.safetensors", {"a": np.ones(2, np.float32)})
    with pytest.raises(CheckpointNotFoundError, match="config.json"):
        open_checkpoint(tmp_path)


def test_missing_shards(tmp_path) -> None:
    LlamaConfig.tiny().to_json(tmp_path / "config.json")
    (tmp_path / "pytorch_model.bin").write_bytes(b"pickle")
    with pytest.raises(CheckpointNotFoundError, match=r"\*\.safetensors"):
        open_checkpoint(tmp_path)


def test_index_names_a_missing_shard(tmp_path) -> None:
    tensors = {f"t{i}": np.ones(4, np.float32) for i in range(2)}
    paths = save_checkpoint(tmp_path, LlamaConfig.tiny(), tensors, max_shard_bytes=16)
    paths[1].unlink()
    with pytest.raises(CheckpointNotFoundError, match=paths[1].name):
        open_checkpoint(tmp_path)


def test_index_names_a_tensor_its_shard_lacks(tmp_path) -> None:
    tensors = {f"t{i}": np.ones(4, np.float32) for i in range(2)}
    save_checkpoint(tmp_path, LlamaConfig.tiny(), tensors, max_shard_bytes=16)
    index_path = tmp_path / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    index["weight_map"]["ghost"] = "model-00001-of-00002.safetensors"
    index_path.write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match="ghost"):
        open_checkpoint(tmp_path)
    index_path.write_text("[]")
    with pytest.raises(CheckpointError, match="weight_map"):
        open_checkpoint(tmp_path)


def test_a_name_in_two_shards(tmp_path) -> None:
    write_dir(tmp_path, {"a": np.ones(3, np.float32)}, "one.safetensors")
    write_safetensors(tmp_path / "two.safetensors", {"a": np.ones(3, np.float32)})
    with pytest.raises(CheckpointError, match="'a' is in both"):
        open_checkpoint(tmp_path)


def test_a_corrupt_shard_is_named(tmp_path) -> None:
    LlamaConfig.tiny().to_json(tmp_path / "config.json")
    (tmp_path / "model.safetensors").write_bytes(
        b"\x10\x00\x00\x00\x00\x00\x00\x00{bad"
    )
    with pytest.raises(CheckpointError, match="model.safetensors"):
        open_checkpoint(tmp_path)


def test_unsupported_config_is_refused(tmp_path) -> None:
    root = write_dir(tmp_path, {"a": np.ones(2, np.float32)})
    config = json.loads((root / "config.json").read_text())
    config["architectures"] = ["Qwen2ForCausalLM"]
    (root / "config.json").write_text(json.dumps(config))
    with pytest.raises(UnsupportedModelError, match="Qwen2ForCausalLM"):
        open_checkpoint(root)


DTYPES = [BF16, np.float32, np.float16, np.int32, np.int8, np.uint8, np.bool_]


@settings(max_examples=40, deadline=None)
@given(
    st.dictionaries(
        st.text("abcdefgh.0123456789_", min_size=1, max_size=12),
        st.tuples(
            st.sampled_from(DTYPES),
            st.lists(st.integers(0, 5), min_size=0, max_size=3),
            st.integers(0, 2**32 - 1),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_write_read_property(tmp_path_factory, specs) -> None:
    """Any set of tensors reads back bit for bit, each a mapped view."""
    tensors = {}
    for name, (dtype, shape, seed) in specs.items():
        raw = np.random.default_rng(seed).integers(0, 255, size=shape, dtype=np.uint8)
        tensors[name] = (
            (raw % 2).astype(dtype) if dtype is np.bool_ else raw.astype(dtype)
        )
    root = tmp_path_factory.mktemp("prop")
    write_dir(root, tensors)
    infos = read_header(root / "model.safetensors")
    for info in infos.values():  # every tensor aligned to its item size
        assert (info.begin - 8) % info.dtype.itemsize == 0
    with open_checkpoint(root) as ck:
        for name, expected in tensors.items():
            got = ck.tensor(name)
            assert got.shape == expected.shape and got.dtype == expected.dtype
            np.testing.assert_array_equal(bits(got), bits(expected))
