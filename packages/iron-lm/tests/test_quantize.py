"""Quantized weights on the device: ``weights="q8"``/``"q4"`` and ``weight_bytes``.

A bf16 checkpoint quantized while loading runs exactly as a bf16 checkpoint
holding the dequantized weights (the quantized products are the bf16 ones
over them), its weights take the packed bytes on the device and nothing
else, and a bad ``weights=`` is refused by name.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from lm_support import CONTEXT, ROWS, write_tiny

from iron.lm import quantize as quantize_module
from iron.lm.checkpoint import open_checkpoint, save_checkpoint
from iron.lm.generate import Decoder
from iron.lm.model import Llama
from iron.lm.quantize import check_weights, quantize_checkpoint
from iron.operators.quantized import FORMATS, dequantize, quantize

SETTINGS = dict(device="npu2", context=CONTEXT, rows=ROWS, progress=False)


@pytest.fixture(scope="module", params=["tied", "untied"])
def tiny_dir(request, tmp_path_factory):
    return write_tiny(tmp_path_factory.mktemp(request.param), request.param)


def _dequantized_copy(directory, weights, target):
    """The checkpoint with each matrix replaced by its quantized values, bf16."""
    fmt = FORMATS[weights]
    with open_checkpoint(directory) as ck:
        tree = {}
        for name, t in ck.tree().items():
            t = np.asarray(t)
            if t.ndim == 2:
                t = dequantize(quantize(t, fmt), fmt).astype(ml_dtypes.bfloat16)
            tree[name] = np.array(t)
        config = ck.config
    save_checkpoint(target, config, tree)
    return target


@pytest.mark.parametrize("weights", ["q8", "q4"])
def test_a_quantized_decoder_equals_bf16_on_the_quantized_values(
    tiny_dir, tmp_path, weights
):
    ids = np.random.default_rng(3).integers(0, 300, 21)  # two prompt chunks
    ours = Decoder.from_pretrained(tiny_dir, weights=weights, **SETTINGS)
    theirs = Decoder.from_pretrained(
        _dequantized_copy(tiny_dir, weights, tmp_path), **SETTINGS
    )
    np.testing.assert_array_equal(ours.logits(ids), theirs.logits(ids))
    # decode steps on the device (QGEMV, DequantRows of one token's row)
    ours_tokens = list(ours.generate(ids[:5], max_new_tokens=6))
    assert ours_tokens == list(theirs.generate(ids[:5], max_new_tokens=6))
    assert ours.stats.loop == "device"


def test_q4_weights_take_at_most_0_35_of_bf16s_bytes(tiny_dir):
    bf16 = Decoder.from_pretrained(tiny_dir, **SETTINGS).weight_bytes
    q8 = Decoder.from_pretrained(tiny_dir, weights="q8", **SETTINGS).weight_bytes
    q4 = Decoder.from_pretrained(tiny_dir, weights="q4", **SETTINGS).weight_bytes
    assert q4 <= 0.35 * bf16
    assert q4 < q8 < 0.6 * bf16
    explicit = Decoder.from_pretrained(tiny_dir, weights="bf16", **SETTINGS)
    assert explicit.weight_bytes == bf16
    with open_checkpoint(tiny_dir) as ck:
        held = sum(int(np.prod(ck.shape(n))) * 2 for n in ck.names())
    graph = Llama.from_pretrained(tiny_dir, context=CONTEXT, rows=ROWS)
    assert bf16 == held + graph.rope.size * 2  # every tensor, and the rotary table


def test_the_device_arena_holds_only_the_packed_bytes(tiny_dir):
    """Every matrix's resident handle is its packed rows (uint8), the
    weights' handles add up to weight_bytes, and no step writes a buffer the
    size of a bf16 weight (no dequantized copy on the device)."""
    decoder = Decoder.from_pretrained(tiny_dir, weights="q4", **SETTINGS).compile()
    with open_checkpoint(tiny_dir) as ck:
        matrices = {n: ck.shape(n) for n in ck.names() if len(ck.shape(n)) == 2}
    q4 = FORMATS["q4"]
    for version in (decoder.prompt, decoder.decode):
        recording = version.recording
        total, seen = 0, set()
        for path, (_, h) in recording.weights.items():
            total += int(np.prod(h.shape)) * np.dtype(h.dtype).itemsize
            name = path.removeprefix("graph.")
            if name in matrices:
                rows, k = matrices[name]
                assert np.dtype(h.dtype) == np.uint8, path
                assert tuple(h.shape) == (rows, q4.row_bytes(k)), path
                seen.add(name)
        assert seen == set(matrices)  # every matrix, each packed
        assert total == decoder.weight_bytes
        copies = {(tuple(s), np.dtype(ml_dtypes.bfloat16)) for s in matrices.values()}
        for step in recording.steps:
            for h in step.outputs:
                assert (tuple(h.shape), np.dtype(h.dtype)) not in copies, (step.op, h)
        assert any(type(s.op).__name__ == "DequantRows" for s in recording.steps)


def test_quantizing_goes_piece_by_piece_releasing_each(tiny_dir, monkeypatch):
    monkeypatch.setattr(quantize_module, "_PIECE", 4 * 128 * 8)  # 8 rows of 128
    released = []
    with open_checkpoint(tiny_dir) as ck:
        real = ck.release
        monkeypatch.setattr(ck, "release", lambda p: released.append(p) or real(p))
        tensors = dict(ck.tree())
        q = quantize_checkpoint(ck, tensors, "q4")
        embed = tensors["model.embed_tokens.weight"]
        pieces = [p for p in released if p.shape[1] == embed.shape[1]]
        assert len(pieces) > embed.shape[0] // 8  # every 8 rows of each matrix
        assert max(p.shape[0] for p in pieces) == 8
        packed = q.packed()["model.embed_tokens.weight"]
        assert (
            packed.dtype == np.uint8
            and q.formats()["model.embed_tokens.weight"] is FORMATS["q4"]
        )
        assert "model.norm.weight" not in q.packed()  # norms stay bf16
        assert q.release(packed) > 0  # a view of the scratch mapping: released
        np.testing.assert_array_equal(
            packed[:3], quantize(np.asarray(embed[:3]), FORMATS["q4"])
        )
        q.close()


@pytest.mark.parametrize(
    ("weights", "error", "message"),
    [
        ("q5", ValueError, r"weights takes 'bf16', 'q8' or 'q4' .*got 'q5'"),
        ("Q4", ValueError, r"got 'Q4'"),
        (4, TypeError, r"weights takes 'bf16', 'q8' or 'q4' .*got 4"),
    ],
)
def test_a_bad_weights_value_is_refused_by_name(tiny_dir, weights, error, message):
    with pytest.raises(error, match=message):
        Decoder.from_pretrained(tiny_dir, weights=weights, **SETTINGS)
    with pytest.raises(error, match=message):
        check_weights(weights)


def test_a_gguf_file_refuses_q4_naming_its_own_types(tmp_path):
    path = tmp_path / "m.gguf"
    path.write_bytes(b"")
    with pytest.raises(ValueError, match=r"weights='q4' quantizes a bf16 .*m.gguf"):
        Llama.from_pretrained(path, weights="q4")


def test_no_room_for_the_quantized_weights_is_an_error_naming_it(tiny_dir, monkeypatch):
    from iron.lm.checkpoint import CheckpointError

    class Full:
        f_bavail, f_frsize = 0, 4096

    monkeypatch.setattr("iron.lm._scratch.os.statvfs", lambda fd: Full())
    with pytest.raises(CheckpointError, match=r"needs \d+ MiB of scratch disk"):
        Decoder.from_pretrained(tiny_dir, weights="q4", **SETTINGS)
