"""GGUF files: config, weights in every supported type, the rotary
permutation, the tokenizer, and malformed or lying files.

The files are written by the tests (``gguf_support``) from the tiny preset's
seeded random weights; the corrupted ones are byte-patched copies.
"""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
import time
from dataclasses import replace
from importlib import resources
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from gguf_support import (
    TYPES,
    decoded,
    dequantized_state_dict,
    k_mixture,
    pack_q4_k,
    pack_q5_k,
    pack_q6_k,
    permute,
    tiny_bpe,
    tiny_spm,
    write_gguf,
    write_llama_cpp_gguf,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from lm_support import CONTEXT, ROWS, smollm2_gguf

from iron.lm import tiny
from iron.lm.checkpoint import CheckpointNotFoundError, save_checkpoint
from iron.lm.config import LlamaConfig, RopeScaling
from iron.lm.generate import Decoder
from iron.lm.gguf import GGUFError, find_gguf, open_gguf, unpermute_rotary
from iron.lm.tokenizer import Tokenizer
from iron.operators.rope import rope_inv_freq

#: Rows of 256 so that Q4_K and Q6_K (blocks of 256) hold every matrix.
CONFIG = LlamaConfig.tiny(
    hidden_size=256, intermediate_size=512, head_dim=64, tie_word_embeddings=False
)

CORPUS = [
    "def f(x):\n    return x ** 2  # square\n",
    "for (int i = 0; i < n; ++i) { a[i] += b[i]; }",
    "   leading spaces and trailing   ",
    "a\n\n\nb\r\n c\t\td",
    "12345 67890 3.14159 1e-5",
    "the in the they're I'll we've",
    "été über naïve café Ωmega",
    "emoji 🤖🧠 and CJK 日本語のテキスト",
    "tabs\t\tand\u00a0nbsp",
    "<|start_header_id|>user<|end_header_id|>hi<|eot_id|>",
    "",
    " ",
]


def state_dict(config: LlamaConfig = CONFIG, seed: int = 0) -> dict[str, np.ndarray]:
    return {
        k: np.asarray(v, np.float32)
        for k, v in tiny.random_state_dict(config, seed=seed).items()
    }


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("gguf")
    sd = state_dict()
    return {k: write_gguf(root / f"tiny-{k}.gguf", CONFIG, sd, k) for k in TYPES}


# -- reading ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", TYPES)
def test_weights_are_the_files_values_in_bf16(files, kind) -> None:
    expected = dequantized_state_dict(CONFIG, state_dict(), kind)
    with open_gguf(files[kind]) as ck:
        # The file holds eps as float32 and one eos id (the tiny tokenizer's
        # <|end_of_text|>); llama.cpp also ends generation at <|eot_id|> (2).
        eps = float(np.float32(CONFIG.rms_norm_eps))
        assert ck.config == replace(CONFIG, rms_norm_eps=eps, eos_token_id=[1, 2])
        tree = ck.tree(quantized=False)
        assert sorted(tree) == sorted(expected)
        for name, want in expected.items():
            got = tree[name]
            assert got.dtype == ml_dtypes.bfloat16 and got.shape == want.shape
            np.testing.assert_array_equal(
                got.astype(np.float32),
                want.astype(ml_dtypes.bfloat16).astype(np.float32),
                err_msg=name,
            )


#: The GGUF types whose repacking keeps every value (the K types are bounded).
EXACT = ("Q8_0", "Q4_0", "Q4_1")


@pytest.mark.parametrize("kind", TYPES)
def test_quantized_types_stay_packed_in_the_device_format(files, kind) -> None:
    """A quantized tensor is its packed rows (uint8) in the format its type
    repacks into, dequantizing to the file's values (the K types within the
    bound iron.operators.quantized states); floats and norms are bf16."""
    from iron.operators.quantized import GGUF_FORMATS, dequantize

    expected = dequantized_state_dict(CONFIG, state_dict(), kind)
    with open_gguf(files[kind]) as ck:
        tree, formats = ck.tree(), ck.formats()
        with pytest.raises(GGUFError, match=r"laid out with quantized=True"):
            ck.tree(quantized=False)
        for name, want in expected.items():
            got, fmt = tree[name], formats[name]
            if kind not in GGUF_FORMATS or want.ndim == 1:
                assert fmt is None and got.dtype == ml_dtypes.bfloat16, name
                continue
            assert fmt is GGUF_FORMATS[kind] and got.dtype == np.uint8, name
            assert got.shape == (want.shape[0], fmt.row_bytes(want.shape[1]))
            values = dequantize(got, fmt)
            if kind in EXACT:
                np.testing.assert_array_equal(values, want, err_msg=name)
            else:
                scale = np.abs(want).max()
                np.testing.assert_allclose(values, want, rtol=0, atol=2**-10 * scale)


def test_the_config_comes_from_the_metadata(files) -> None:
    with open_gguf(files["Q8_0"]) as ck:
        c = ck.config
    assert (c.hidden_size, c.intermediate_size, c.num_hidden_layers) == (256, 512, 2)
    assert (c.num_attention_heads, c.num_key_value_heads, c.head_dim) == (4, 2, 64)
    assert c.vocab_size == 512 and c.max_position_embeddings == 256
    assert c.rms_norm_eps == pytest.approx(1e-5) and c.rope_theta == 10000.0
    assert (
        not c.tie_word_embeddings and c.bos_token_id == 0 and c.eos_token_ids == (1, 2)
    )


def _llama3_divisors(head_dim, theta, factor, low, high, original) -> np.ndarray:
    """llama.cpp's rope_freqs.weight (convert_hf_to_gguf.py, LlamaModel's
    generate_extra_tensors): each frequency's divisor under Llama 3 scaling."""
    freqs = 1.0 / theta ** (np.arange(0, head_dim, 2) / head_dim)
    out = []
    for f in freqs:
        wavelength = 2 * np.pi / f
        if wavelength < original / high:
            out.append(1.0)
        elif wavelength > original / low:
            out.append(factor)
        else:
            s = (original / wavelength - low) / (high - low)
            out.append(1 / ((1 - s) / factor + s))
    return np.asarray(out, np.float32)


def test_llama3_scaling_is_read_from_rope_freqs(tmp_path) -> None:
    config = replace(CONFIG, rope_theta=500000.0)
    divisors = _llama3_divisors(64, 500000.0, 32.0, 1.0, 4.0, 8192)
    path = write_gguf(
        tmp_path / "l3.gguf",
        config,
        state_dict(config),
        "Q8_0",
        extra={"rope_freqs.weight": divisors},
    )
    with open_gguf(path) as ck:
        assert ck.config.rope_scaling == RopeScaling(32.0, 1.0, 4.0, 8192)
        assert "rope_freqs.weight" not in str(ck.names())
        scaled = rope_inv_freq(64, 500000.0, ck.config.rope_scaling.to_dict())
    plain = rope_inv_freq(64, 500000.0)
    np.testing.assert_allclose(plain / scaled, divisors, rtol=1e-5)
    odd = write_gguf(
        tmp_path / "odd.gguf",
        config,
        state_dict(config),
        "Q8_0",
        extra={"rope_freqs.weight": divisors * 1.5},
    )
    with pytest.raises(GGUFError, match=r"odd.gguf': tensor 'rope_freqs.weight' holds"):
        open_gguf(odd)


def test_a_directory_holding_one_gguf_is_that_file(files, tmp_path) -> None:
    assert find_gguf(files["F16"]) == files["F16"]
    os.link(files["F16"], tmp_path / "model.gguf")
    assert find_gguf(tmp_path) == tmp_path / "model.gguf"
    os.link(files["F32"], tmp_path / "other.gguf")
    with pytest.raises(GGUFError, match=r"holds 2 GGUF files \(model.gguf, other"):
        find_gguf(tmp_path)
    with pytest.raises(CheckpointNotFoundError, match="does not exist"):
        open_gguf(tmp_path / "missing.gguf")


def test_the_rotary_permutation_is_undone_as_transformers_does() -> None:
    # One head of width 4 stored by llama.cpp as rows (0, 2, 1, 3) of HF's.
    hf = np.arange(4 * 3, dtype=np.float32).reshape(4, 3)
    stored = permute(hf, 1)
    np.testing.assert_array_equal(stored, hf[[0, 2, 1, 3]])
    np.testing.assert_array_equal(unpermute_rotary(stored, 1), hf)
    # Several heads, and k with its own (key/value) head count.
    w = np.random.default_rng(0).normal(size=(4 * 64, 8)).astype(np.float32)
    for heads in (1, 2, 4):
        np.testing.assert_array_equal(unpermute_rotary(permute(w, heads), heads), w)
    assert not np.array_equal(unpermute_rotary(permute(w, 4), 2), w)
    with pytest.raises(ValueError, match="does not split into 3 heads"):
        unpermute_rotary(w, 3)


def test_the_file_stores_q_and_k_permuted(files) -> None:
    """Without the un-permutation q_proj would differ from the written weights."""
    sd = state_dict()
    with open_gguf(files["F32"]) as ck:
        stored = ck.dequantized("blk.0.attn_q.weight")
        loaded = ck.tree()["model.layers.0.self_attn.q_proj.weight"]
        q = sd["model.layers.0.self_attn.q_proj.weight"]
        assert not np.array_equal(stored, q)
        np.testing.assert_array_equal(stored, permute(q, 4))
        np.testing.assert_array_equal(loaded, q.astype(ml_dtypes.bfloat16))
        k = ck.tree()["model.layers.1.self_attn.k_proj.weight"]
        want = sd["model.layers.1.self_attn.k_proj.weight"].astype(ml_dtypes.bfloat16)
        np.testing.assert_array_equal(k, want)


@pytest.mark.parametrize(
    "pack, step, kind",
    [(pack_q4_k, 15, "Q4_K"), (pack_q5_k, 31, "Q5_K"), (pack_q6_k, 63, "Q6_K")],
)
def test_hand_packed_k_quants_round_trip(pack, step, kind) -> None:
    w = np.random.default_rng(1).normal(size=(4, 512)).astype(np.float32)
    back = decoded(w, kind)
    # Within one quantization step of each 16/32-element group, plus the
    # 6-bit rounding of the group's scale.
    assert np.abs(back - w).max() < 2.5 * (w.max() - w.min()) / step
    assert np.corrcoef(back.ravel(), w.ravel())[0, 1] > 0.99


def test_weight_is_the_float32_before_bf16_rounding(files) -> None:
    expected = dequantized_state_dict(CONFIG, state_dict(), "Q6_K")
    with open_gguf(files["Q6_K"]) as ck:
        for name in ("model.layers.0.self_attn.k_proj.weight", "lm_head.weight"):
            got = ck.weight(name)
            assert got.dtype == np.float32
            np.testing.assert_array_equal(got, expected[name])
            np.testing.assert_array_equal(
                got.astype(ml_dtypes.bfloat16), ck.tree(quantized=False)[name]
            )
        with pytest.raises(KeyError, match="has no weight 'nope'"):
            ck.weight("nope")


def test_release_drops_the_pages_of_uploaded_pieces(files) -> None:
    with open_gguf(files["Q4_0"]) as ck:
        embed = ck.tree()["model.embed_tokens.weight"]
        assert ck.release(embed) >= embed.nbytes - 2 * 4096
        assert ck.release(np.zeros(4)) == 0
        embed.astype(np.float32)  # still readable: the pages come back


# -- running --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "weights"), [("Q4_1", None), ("Q8_0", None), ("Q4_K", "bf16")]
)
def test_a_gguf_decoder_equals_one_on_the_same_bf16_weights(
    files, tmp_path, kind, weights
) -> None:
    """Bit for bit: a type repacked with its values unchanged, on the device
    quantized (the quantized products are the bf16 ones over the dequantized
    weights), and any type dequantized to bf16 with weights="bf16"."""
    expected = dequantized_state_dict(CONFIG, state_dict(), kind)
    save_checkpoint(
        tmp_path, CONFIG, {k: v.astype(ml_dtypes.bfloat16) for k, v in expected.items()}
    )
    ids = np.random.default_rng(2).integers(0, CONFIG.vocab_size, 24)
    settings = dict(device="npu2", context=CONTEXT, rows=ROWS, progress=False)
    ours = Decoder.from_pretrained(files[kind], weights=weights, **settings)
    theirs = Decoder.from_pretrained(tmp_path, **settings)
    assert (ours.weight_bytes < theirs.weight_bytes) == (weights is None)
    np.testing.assert_array_equal(ours.logits(ids), theirs.logits(ids))


def test_a_k_quant_decoder_is_close_to_one_on_the_bf16_weights(files, tmp_path) -> None:
    """Q4_K's scales are rounded to float16 on the device (a stated bound):
    the logits stay within a few bf16 units of the bf16 model's."""
    expected = dequantized_state_dict(CONFIG, state_dict(), "Q4_K")
    save_checkpoint(
        tmp_path, CONFIG, {k: v.astype(ml_dtypes.bfloat16) for k, v in expected.items()}
    )
    ids = np.random.default_rng(2).integers(0, CONFIG.vocab_size, 24)
    settings = dict(device="npu2", context=CONTEXT, rows=ROWS, progress=False)
    ours = Decoder.from_pretrained(files["Q4_K"], **settings).logits(ids)
    theirs = Decoder.from_pretrained(tmp_path, **settings).logits(ids)
    ours, theirs = ours.astype(np.float32), theirs.astype(np.float32)
    assert np.abs(ours - theirs).max() <= 0.05 * np.abs(theirs).max()
    assert (ours.argmax(-1) == theirs.argmax(-1)).mean() >= 0.9


def test_iron_lm_generate_runs_a_gguf_file(files) -> None:
    env = {**os.environ, "IRON_BACKEND": "emu", "IRON_EMU_POISON": "1"}
    env.pop("IRON_DEVICE", None)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "iron.lm",
            "generate",
            "--checkpoint",
            str(files["Q8_0"]),
            "--prompt",
            "The NPU",
            "--max-new-tokens",
            "4",
            "--context",
            "64",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert done.stdout.startswith("The NPU")
    assert "new tokens at" in done.stderr


# -- the tokenizer --------------------------------------------------------------------


def test_the_bpe_tokenizer_encodes_as_its_tokenizer_json(files) -> None:
    ours = Tokenizer.from_gguf(files["F16"])
    data = resources.files("iron.lm") / "data" / "tiny"
    with resources.as_file(data) as directory:
        theirs = Tokenizer.from_directory(directory)
    for text in CORPUS:
        assert ours.encode(text) == theirs.encode(text), text
        assert ours.encode(text, add_bos=False) == theirs.encode(text, add_bos=False)
        ids = ours.encode(text, add_bos=False)
        stream = ours.detokenizer()
        assert stream.extend(ids) + stream.flush() == ours.decode(ids) == text
    assert ours.bos_token == "<|begin_of_text|>" and ours.eos_ids == (1, 2)
    assert ours.apply_chat_template([{"role": "user", "content": "hi"}]).endswith(
        "user: hi\nassistant:"
    )


def test_a_sentencepiece_tokenizer_with_byte_fallback(tmp_path) -> None:
    tok = tiny_spm()
    config = LlamaConfig.tiny(vocab_size=len(tok["tokens"]))
    path = write_gguf(tmp_path / "spm.gguf", config, state_dict(config), tokenizer=tok)
    ours = Tokenizer.from_directory(tmp_path)
    assert ours.encode("the") == [1, tok["tokens"].index("\u2581the")]
    # "x" is no piece: its UTF-8 byte token; "中" is three byte tokens.
    assert ours.encode("x", add_bos=False) == [tok["tokens"].index("\u2581"), 3 + 0x78]
    assert ours.encode("中", add_bos=False)[1:] == [3 + 0xE4, 3 + 0xB8, 3 + 0xAD]
    for text in CORPUS:
        ids = ours.encode(text, add_bos=False)
        stream = ours.detokenizer()
        assert stream.extend(ids) + stream.flush() == ours.decode(ids)
        if not text.startswith(" "):  # SentencePiece drops a leading space
            assert ours.decode(ids) == text, text
    assert open_gguf(path).config.vocab_size == len(tok["tokens"])


# -- malformed and lying files ----------------------------------------------------------


def _patched(src: Path, dst: Path, patch) -> Path:
    data = bytearray(src.read_bytes())
    patch(data)
    dst.write_bytes(bytes(data))
    return dst


def _string_at(data: bytearray, text: str) -> int:
    """The offset just past the length-prefixed string ``text`` in the header."""
    raw = text.encode()
    at = data.find(struct.pack("<Q", len(raw)) + raw)
    assert at >= 0, text
    return at + 8 + len(raw)


def _tensor_info(data: bytearray, name: str) -> tuple[int, int]:
    """(offset of the dims, the dimension count) of tensor ``name``'s info."""
    at = _string_at(data, name)
    (n_dims,) = struct.unpack_from("<I", data, at)
    return at + 4, n_dims


def truncate(data: bytearray) -> None:
    del data[len(data) - 1000 :]


def truncate_header(data: bytearray) -> None:
    del data[3000:]  # inside the token list


def past_the_end(data: bytearray) -> None:
    dims, n = _tensor_info(data, "blk.1.ffn_down.weight")
    struct.pack_into("<Q", data, dims + 8 * n + 4, len(data))


def overlapping(data: bytearray) -> None:
    dims, n = _tensor_info(data, "blk.0.ffn_up.weight")
    (offset,) = struct.unpack_from("<Q", data, dims + 8 * n + 4)
    dims2, n2 = _tensor_info(data, "blk.0.ffn_gate.weight")
    struct.pack_into("<Q", data, dims2 + 8 * n2 + 4, offset + 64)


def block_size(data: bytearray) -> None:
    dims, _ = _tensor_info(data, "blk.0.attn_v.weight")
    struct.pack_into("<Q", data, dims, 100)


def huge_shape(data: bytearray) -> None:
    dims, _ = _tensor_info(data, "blk.0.attn_v.weight")
    struct.pack_into("<Q", data, dims + 8, 1 << 40)


def absurd_counts(data: bytearray) -> None:
    struct.pack_into("<Q", data, 16, 1 << 62)


def absurd_string_array(data: bytearray) -> None:
    at = _string_at(data, "tokenizer.ggml.tokens")
    struct.pack_into("<Q", data, at + 8, 1 << 60)  # type, item type, then count


def absurd_string(data: bytearray) -> None:
    raw = b"general.name"
    at = data.find(struct.pack("<Q", len(raw)) + raw)
    struct.pack_into("<Q", data, at + 8 + len(raw) + 4, 1 << 61)


def wrong_type(data: bytearray) -> None:
    at = _string_at(data, "llama.block_count")
    struct.pack_into("<I", data, at, 6)  # UINT32 -> FLOAT32, same width


def unsupported_type(data: bytearray) -> None:
    dims, n = _tensor_info(data, "blk.0.attn_v.weight")
    struct.pack_into("<I", data, dims + 8 * n, 6)  # Q5_0


def not_utf8(data: bytearray) -> None:
    at = _string_at(data, "general.architecture")
    data[at + 12] = 0xFF  # after the type and the length: the value's first byte


def bad_magic(data: bytearray) -> None:
    data[0:4] = b"GGML"


CORRUPTIONS = {
    truncate: r"tensor '[\w.]+' .* ends past the file's end",
    truncate_header: r"'tokenizer.ggml.tokens'.*(past the file's end|bytes left can hold)",
    past_the_end: r"tensor 'blk.1.ffn_down.weight' .* ends past the file's end",
    overlapping: r"tensors 'blk.0.ffn_\w+.weight' .* and 'blk.0.ffn_\w+.weight' .* overlap",
    block_size: r"tensor 'blk.0.attn_v.weight' is Q8_0 \(blocks of 32\) but its rows "
    r"have 100 elements",
    huge_shape: r"tensor 'blk.0.attn_v.weight' \(Q8_0 \[256, 1099511627776\]",
    absurd_counts: r"claims \d+ metadata keys and \d+ tensors; IRON reads at most",
    absurd_string_array: r"key 'tokenizer.ggml.tokens' claims 1152921504606846976 items",
    absurd_string: r"the value of 'general.name' \(2305843009213693952 bytes\)",
    wrong_type: r"key 'llama.block_count' has type \[FLOAT32\], not an integer",
    unsupported_type: r"tensor 'blk.0.attn_v.weight' has type Q5_0, which IRON does "
    r"not read; supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K: "
    r"convert the model to one of them, e.g. with llama.cpp's llama-quantize",
    bad_magic: r"does not start with the GGUF magic",
    not_utf8: r"key 'general.architecture' holds text that is not UTF-8",
}


@pytest.mark.parametrize("corrupt", list(CORRUPTIONS), ids=lambda f: f.__name__)
def test_a_malformed_file_is_an_error_naming_it(files, tmp_path, corrupt) -> None:
    bad = _patched(files["Q8_0"], tmp_path / f"{corrupt.__name__}.gguf", corrupt)
    with pytest.raises(GGUFError, match=CORRUPTIONS[corrupt]) as error:
        open_gguf(bad)
    assert str(bad) in str(error.value)
    assert isinstance(error.value, ValueError)
    # The same through the Decoder and the tokenizer.
    with pytest.raises(GGUFError, match=CORRUPTIONS[corrupt]):
        Decoder.from_pretrained(bad, device="npu2", context=CONTEXT, progress=False)
    with pytest.raises(GGUFError, match=CORRUPTIONS[corrupt]):
        Tokenizer.from_gguf(bad)


def test_other_architectures_and_experts_are_refused(tmp_path) -> None:
    gguf = pytest.importorskip("gguf")
    w = gguf.GGUFWriter(str(tmp_path / "qwen.gguf"), "qwen2")
    w.add_tensor("token_embd.weight", np.zeros((8, 32), np.float32))
    for step in (
        w.write_header_to_file,
        w.write_kv_data_to_file,
        w.write_tensors_to_file,
    ):
        step()
    w.close()
    with pytest.raises(GGUFError, match="'general.architecture' is 'qwen2'; IRON runs"):
        open_gguf(tmp_path / "qwen.gguf")


REFUSED = {
    "experts": (
        lambda w: w.add_uint32("llama.expert_count", 8),
        r"key 'llama.expert_count' is 8: a mixture of experts",
    ),
    "partial rotary": (
        lambda w: w.add_uint32("llama.rope.dimension_count", 32),
        r"key 'llama.rope.dimension_count' is 32, not the head width 64",
    ),
    "yarn": (
        lambda w: w.add_string("llama.rope.scaling.type", "yarn"),
        r"key 'llama.rope.scaling.type' is 'yarn'",
    ),
    "another architecture's key": (
        lambda w: w.add_string("general.architecture", "mistral3"),
        r"key 'general.architecture' is 'mistral3'; IRON runs 'llama' only",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_settings_iron_does_not_run_are_refused_by_key(tmp_path, case) -> None:
    edit, message = REFUSED[case]  # the writer overwrites a key set twice
    path = write_gguf(tmp_path / "m.gguf", CONFIG, state_dict(), "F32", edit=edit)
    with pytest.raises(GGUFError, match=message) as error:
        open_gguf(path)
    assert str(path) in str(error.value)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"model": "bert"}, r"'tokenizer.ggml.model' is 'bert'; IRON builds 'gpt2'"),
        (
            {"pre": "kimi-k2"},
            r"'tokenizer.ggml.pre' is 'kimi-k2', a pre-tokenizer IRON does not "
            r"split text as .*IRON knows: a.x-4.0, bailingmoe",
        ),
        ({"pre": "no-such"}, r"'tokenizer.ggml.pre' is 'no-such'"),
        (
            {"tokens": [*tiny_bpe()["tokens"][:-1], "<|end_of_text|>"]},
            r"'tokenizer.ggml.tokens' lists '<\|end_of_text\|>' twice \(ids 1 and 511\)",
        ),
    ],
)
def test_tokenizers_iron_does_not_build_are_refused_by_key(
    tmp_path, change, message
) -> None:
    tok = {**tiny_bpe(), **change}
    path = write_gguf(tmp_path / "m.gguf", CONFIG, state_dict(), tokenizer=tok)
    with pytest.raises(GGUFError, match=message):
        Tokenizer.from_gguf(path)


def test_the_scratch_file_leaves_nothing_behind(files) -> None:
    before = set(os.listdir(files["F16"].parent))
    with open_gguf(files["F16"]) as ck:
        ck.tree()
        assert set(os.listdir(files["F16"].parent)) == before  # unlinked at once
    assert json.dumps(sorted(before))  # the directory is as it was


@pytest.mark.parametrize("kind", ["Q4_1", "F16"])
def test_laying_out_lets_each_pieces_file_pages_go(files, kind, monkeypatch) -> None:
    """The file is read through a mapping whose pages under each piece are
    let go once the piece is laid out: every tensor's bytes, once each."""
    import iron.lm.gguf as reader

    asked: list[tuple[int, int]] = []
    real = reader.drop_pages

    def spy(mapped, piece):
        if piece.size:
            base = np.frombuffer(mapped, np.uint8).ctypes.data
            asked.append((piece.ctypes.data - base, piece.nbytes))
        return real(mapped, piece)

    monkeypatch.setattr(reader, "drop_pages", spy)
    with open_gguf(files[kind]) as ck:
        ck.tree()
        spans = sorted((t.begin, t.end - t.begin) for t in ck.tensors.values())
    # each tensor's pieces tile its byte range exactly
    merged = []
    for begin, nbytes in sorted(asked):
        if merged and merged[-1][0] + merged[-1][1] == begin:
            merged[-1] = (merged[-1][0], merged[-1][1] + nbytes)
        else:
            merged.append((begin, nbytes))
    covered = {b: n for b, n in merged}
    for begin, nbytes in spans:
        assert any(b <= begin and begin + nbytes <= b + n for b, n in covered.items())
    assert sum(n for _, n in asked) == sum(n for _, n in spans)


def test_no_room_for_the_scratch_file_is_an_error_naming_it(files, monkeypatch) -> None:
    class Full:
        f_bavail, f_frsize = 0, 4096

    monkeypatch.setattr("iron.lm._scratch.os.statvfs", lambda fd: Full())
    with open_gguf(files["Q4_1"]) as ck:
        with pytest.raises(
            GGUFError, match=r"tiny-Q4_1.gguf'.* needs \d+ MiB of scratch"
        ):
            ck.tree()


@pytest.mark.parametrize("kind", ["F32", "F16"])
def test_a_non_finite_weight_is_refused_by_name(tmp_path, kind) -> None:
    """As for safetensors: NaN (or a value bf16 cannot hold) never loads."""
    from iron.lm.checkpoint import NonFiniteWeightError
    from iron.lm.model import Llama

    weights = state_dict()
    name = "model.layers.1.mlp.up_proj.weight"
    weights[name][3, 5] = np.nan if kind == "F16" else 1e39
    path = write_gguf(tmp_path / "bad.gguf", CONFIG, weights, kind)
    with pytest.raises(NonFiniteWeightError, match=f"tensor {name!r} of GGUF file"):
        Llama.from_pretrained(path, context=CONTEXT, rows=ROWS)


# -- files as llama.cpp's converter writes them -------------------------------------------


def test_a_file_as_llama_cpp_writes_it_loads_with_its_defaults(tmp_path) -> None:
    """No key_length or value_length (llama.cpp: n_embd / n_head each), no
    rotary scaling type (llama.cpp: "linear", factor 1), no add_eos_token."""
    path = write_llama_cpp_gguf(tmp_path / "m.gguf", CONFIG, state_dict())
    with open_gguf(path) as ck:
        assert "llama.attention.value_length" not in ck.metadata
        assert ck.config.head_dim == CONFIG.hidden_size // CONFIG.num_attention_heads
        assert ck.config.rope_theta == CONFIG.rope_theta
        assert ck.config.vocab_size == CONFIG.vocab_size
        assert ck.config.bos_token_id == 0 and ck.config.eos_token_ids == (1, 2)


DEFAULTS = {
    "per-layer head counts": (
        lambda w: w.add_array("llama.attention.head_count", [4] * 2),
        None,
    ),
    "linear scaling by 1": (
        lambda w: (
            w.add_string("llama.rope.scaling.type", "linear"),
            w.add_float32("llama.rope.scaling.factor", 1.0),
        ),
        None,
    ),
    "layers that differ": (
        lambda w: w.add_array("llama.feed_forward_length", [512, 256]),
        r"key 'llama.feed_forward_length' differs between layers",
    ),
    "linear scaling by 4": (
        lambda w: w.add_float32("llama.rope.scale_linear", 4.0),
        r"key 'llama.rope.scale_linear' is 4.0 with linear rotary scaling",
    ),
    "no epsilon": (
        lambda w: w.kv_data[0].pop("llama.attention.layer_norm_rms_epsilon"),
        r"key 'llama.attention.layer_norm_rms_epsilon' is missing \(llama.cpp",
    ),
    "a value width of its own": (
        lambda w: w.add_uint32("llama.attention.value_length", 32),
        r"'llama.attention.value_length' is 32, not the key length 64",
    ),
    "a block count the tensors do not hold": (
        lambda w: w.add_uint32("llama.block_count", 3),
        r"'llama.block_count' is 3 but the file holds no tensors for layers \[2\]",
    ),
    "an absurd block count": (
        lambda w: w.add_uint32("llama.block_count", 1 << 30),
        r"'llama.block_count' is 1073741824, outside 1..1024",
    ),
    "a vocabulary the embedding does not hold": (
        lambda w: w.add_uint32("llama.vocab_size", 100),
        r"'token_embd.weight' has shape \[512, 256\], not \[100, 256\]",
    ),
}


@pytest.mark.parametrize("case", list(DEFAULTS))
def test_optional_keys_are_read_as_llama_cpp_reads_them(tmp_path, case) -> None:
    edit, message = DEFAULTS[case]
    assert CONFIG.num_attention_heads == 4 and CONFIG.num_hidden_layers == 2
    path = write_llama_cpp_gguf(tmp_path / "m.gguf", CONFIG, state_dict(), edit=edit)
    if message is None:
        with open_gguf(path) as ck:
            assert ck.config.num_attention_heads == 4
            assert ck.config.rope_scaling is None
    else:
        with pytest.raises(GGUFError, match=message):
            open_gguf(path)


def test_a_special_id_outside_the_vocabulary_falls_back_as_in_llama_cpp(
    tmp_path, caplog
) -> None:
    """llama.cpp: "bad special token ... using default id" (GPT-2 BPE's
    default 11; SentencePiece's 1 and 2)."""
    path = write_llama_cpp_gguf(
        tmp_path / "m.gguf", CONFIG, state_dict(), tokenizer={**tiny_bpe(), "bos": 9999}
    )
    with open_gguf(path) as ck:
        assert ck.config.bos_token_id == 11
    assert "'tokenizer.ggml.bos_token_id' is 9999" in caplog.text


# -- pre-tokenizers as llama.cpp maps them --------------------------------------------------

#: Text that splits differently under different expressions.
SPLIT_CORPUS = [
    *CORPUS,
    "x" + " " * 9 + "y\n\n\n" + "\t" * 5 + "z   ",
    "1 12 123 1234 12345678 3.14 ١٢٣ ⅷ",
    "don't DON'T we'RE you'll I'd",
    "e\u0301 n\u0303 a\u0308\u0332 \u0915\u094d\u0937",
    "👩\u200d👩\u200d👧 🇫🇷 ✨!!",
    "中文字符 한국어 にほんご カタカナ",
    "x=a+b; if(a<=b&&c|d){return ~e^f;} $1 #2 @3 `4`",
    "<|im_start|>user\nhi<|im_end|>\n",
    "  leading",
    "trailing\n",
]

#: The Hugging Face pre-tokenizers (tokenizer.json) that llama.cpp's
#: expressions for these names stand for.
_LLAMA3_ORIGINAL = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2_ORIGINAL = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def _hf_pre(name: str):
    from tokenizers import Regex
    from tokenizers import pre_tokenizers as pt

    byte = pt.ByteLevel(add_prefix_space=False, use_regex=False)
    split = {"llama3": _LLAMA3_ORIGINAL, "qwen2": _QWEN2_ORIGINAL}
    if name in split:  # Meta's Llama 3 and Qwen2's tokenizer.json
        return pt.Sequence([pt.Split(Regex(split[name]), "isolated"), byte])
    if name == "gpt2":  # GPT-2's tokenizer.json
        return pt.ByteLevel(add_prefix_space=False, use_regex=True)
    # StarCoder's and SmolLM's tokenizer.json: digits one by one, then GPT-2's
    return pt.Sequence(
        [pt.Digits(individual_digits=True), pt.ByteLevel(add_prefix_space=False)]
    )


@pytest.mark.parametrize(
    "pre, hf",
    [
        ("llama-bpe", "llama3"),
        ("llama3", "llama3"),
        ("smaug-bpe", "llama3"),
        ("dbrx", "llama3"),
        ("gpt-2", "gpt2"),
        ("olmo", "gpt2"),
        ("qwen2", "qwen2"),
        ("stablelm2", "qwen2"),
        ("smollm", "starcoder"),
        ("starcoder", "starcoder"),
        ("command-r", "starcoder"),
    ],
)
def test_pre_tokenizers_split_as_their_tokenizer_json(tmp_path, pre, hf) -> None:
    """llama.cpp's expressions for a name split text as the Hugging Face
    pre-tokenizer they were adapted from."""
    from iron.lm.gguf_tokenizer import tokenizer_parts

    path = write_llama_cpp_gguf(
        tmp_path / "m.gguf", CONFIG, state_dict(), tokenizer={**tiny_bpe(), "pre": pre}
    )
    with open_gguf(path) as ck:
        ours = tokenizer_parts(ck)["tokenizer"].pre_tokenizer
    theirs = _hf_pre(hf)
    for text in SPLIT_CORPUS:
        assert ours.pre_tokenize_str(text) == theirs.pre_tokenize_str(text), text


def test_every_pre_tokenizer_llama_cpp_maps_builds_and_round_trips(tmp_path) -> None:
    from iron.lm._gguf_pre import PRE_TOKENIZERS

    for pre in PRE_TOKENIZERS:
        path = write_llama_cpp_gguf(
            tmp_path / f"{pre}.gguf",
            CONFIG,
            state_dict(),
            tokenizer={**tiny_bpe(), "pre": pre},
        )
        tok = Tokenizer.from_gguf(path)
        for text in SPLIT_CORPUS:
            ids = tok.encode(text, add_bos=False)
            assert tok.decode(ids) == text, (pre, text)


def test_llama_cpp_defaults_for_add_bos_by_pre_tokenizer(tmp_path) -> None:
    """llama.cpp adds bos by default for Llama 3's names (and SentencePiece),
    not for other byte-level BPE names; add_eos is false unless set."""
    no_flag = {k: v for k, v in tiny_bpe().items() if k != "add_bos"}
    for pre, adds in (("llama-bpe", True), ("smaug-bpe", False), ("gpt-2", False)):
        path = write_llama_cpp_gguf(
            tmp_path / f"{pre}.gguf",
            CONFIG,
            state_dict(),
            tokenizer={**no_flag, "pre": pre},
        )
        assert (Tokenizer.from_gguf(path).encode("hi")[0] == 0) is adds, pre
    path = write_llama_cpp_gguf(
        tmp_path / "eos.gguf",
        CONFIG,
        state_dict(),
        tokenizer=no_flag,
        edit=lambda w: w.add_add_eos_token(True),
    )
    ids = Tokenizer.from_gguf(path).encode("hi")
    assert ids[0] != 0 and ids[-1] == 1  # gpt-2: no bos; eos as the key says


def test_a_file_without_a_pre_tokenizer_splits_as_llama_cpp_default(
    tmp_path, caplog
) -> None:
    path = write_llama_cpp_gguf(
        tmp_path / "m.gguf", CONFIG, state_dict(), tokenizer={**tiny_bpe(), "pre": ""}
    )
    tok = Tokenizer.from_gguf(path)
    assert "no 'tokenizer.ggml.pre'" in caplog.text
    # llama.cpp's 'default' isolates punctuation runs before GPT-2's expression
    pieces = [tok.decode([i]) for i in tok.encode("they're", add_bos=False)]
    assert "'" in pieces


# -- a real file llama.cpp's converter wrote ----------------------------------------------


def test_a_published_llama_cpp_file_loads_and_tokenizes_as_its_tokenizer_json() -> None:
    from tokenizers import AddedToken
    from tokenizers import Tokenizer as HF
    from tokenizers import pre_tokenizers as pt
    from tokenizers.models import BPE

    path = smollm2_gguf()
    with open_gguf(path) as ck:
        assert "llama.attention.value_length" not in ck.metadata
        assert ck.metadata.get("tokenizer.ggml.pre", "str") == "smollm"
        c = ck.config
        assert (c.hidden_size, c.head_dim, c.num_hidden_layers) == (576, 64, 30)
        assert (c.num_attention_heads, c.num_key_value_heads) == (9, 3)
        tokens = ck.metadata.array("tokenizer.ggml.tokens", "str")
        types = ck.metadata.array("tokenizer.ggml.token_type", "int")
        merges = [
            tuple(m.split(" "))
            for m in ck.metadata.array("tokenizer.ggml.merges", "str")
        ]
    # SmolLM2's tokenizer.json: digits one by one, then GPT-2's byte level
    theirs = HF(BPE({t: i for i, t in enumerate(tokens)}, merges))
    theirs.pre_tokenizer = pt.Sequence(
        [pt.Digits(individual_digits=True), pt.ByteLevel(add_prefix_space=False)]
    )
    theirs.add_special_tokens(
        [AddedToken(t, special=True) for t, k in zip(tokens, types) if k == 3]
    )
    ours = Tokenizer.from_gguf(path)
    for text in SPLIT_CORPUS:
        ids = ours.encode(text, add_bos=False)
        assert ids == theirs.encode(text, add_special_tokens=False).ids, text
        assert ours.decode(ids) == text


def test_iron_lm_generate_runs_the_published_file() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "iron.lm",
            "generate",
            "--checkpoint",
            str(smollm2_gguf()),
            "--chat",
            "--prompt",
            "What is the capital of France?",
            "--max-new-tokens",
            "8",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "IRON_BACKEND": "emu"},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "Paris" in done.stdout


def test_the_cli_refuses_an_unsupported_type_by_name_without_a_traceback(
    files, tmp_path
) -> None:
    data = bytearray(files["Q8_0"].read_bytes())
    unsupported_type(data)
    bad = tmp_path / "q5_0.gguf"
    bad.write_bytes(bytes(data))
    done = subprocess.run(
        [sys.executable, "-m", "iron.lm", "generate", "--checkpoint", str(bad)],
        capture_output=True,
        text=True,
        env={**os.environ, "IRON_BACKEND": "emu"},
        timeout=300,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "tensor 'blk.0.attn_v.weight' has type Q5_0" in done.stderr
    assert "llama-quantize" in done.stderr


@pytest.mark.parametrize("main", ["Q4_K", "Q5_K"])
def test_k_quant_m_mixtures_load_each_type_as_it_is_held(tmp_path, main) -> None:
    """Q4_K_M and Q5_K_M: Q4_K stays 4-bit and Q6_K 8-bit on the device,
    Q5_K is dequantized to bf16; a decoder runs close to the bf16 weights."""
    from iron.operators.quantized import GGUF_FORMATS

    path = write_llama_cpp_gguf(
        tmp_path / f"{main}_M.gguf", CONFIG, state_dict(), k_mixture(main)
    )
    with open_gguf(path) as ck:
        held = {
            t.type_name: ck.formats()[hf]
            for hf, (src, _) in ck._names.items()
            if (t := ck.tensors[src]).type_name != "F32"
        }
    kind = k_mixture(main)
    by_kind = {
        k: dequantized_state_dict(CONFIG, state_dict(), k) for k in (main, "Q6_K")
    }
    expected = {hf: by_kind[kind(hf)][hf] for hf in by_kind[main]}
    assert held == {main: GGUF_FORMATS.get(main), "Q6_K": GGUF_FORMATS["Q6_K"]}
    save_checkpoint(
        tmp_path / "bf16",
        CONFIG,
        {k: v.astype(ml_dtypes.bfloat16) for k, v in expected.items()},
    )
    ids = np.random.default_rng(2).integers(0, CONFIG.vocab_size, 16)
    settings = dict(device="npu2", context=CONTEXT, rows=ROWS, progress=False)
    ours = Decoder.from_pretrained(path, **settings).logits(ids).astype(np.float32)
    theirs = Decoder.from_pretrained(tmp_path / "bf16", **settings).logits(ids)
    theirs = theirs.astype(np.float32)
    assert np.abs(ours - theirs).max() <= 0.1 * np.abs(theirs).max()


# -- hostile headers ---------------------------------------------------------------------

#: A small llama.cpp-style file to mutate (the tiny config, F32).
SMALL = LlamaConfig.tiny()


@pytest.fixture(scope="module")
def small_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("small") / "m.gguf"
    return write_llama_cpp_gguf(path, SMALL, state_dict(SMALL))


def _header_end(data: bytes) -> int:
    """Where the tensor data starts (the mutations aim at the header)."""
    at = data.find(b"output_norm.weight")
    return max(at + 64, 64)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_a_mutated_header_is_refused_by_name_quickly(small_file, data) -> None:
    """Bytes of the header overwritten (counts, lengths, types, values):
    opening the file and building its tokenizer either work or raise
    GGUFError (a ValueError), never another exception, a hang or a huge
    allocation (each open is bounded loosely in time)."""
    raw = bytearray(small_file.read_bytes())
    end = _header_end(bytes(raw))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, end - 8))
        width = data.draw(st.sampled_from([1, 4, 8]))
        value = data.draw(
            st.one_of(
                st.sampled_from([0, 1, 2**31, 2**32 - 1, 2**40, 2**63 - 1, 2**64 - 1]),
                st.integers(0, 2 ** (8 * width) - 1),
            )
        )
        raw[at : at + width] = (value % 2 ** (8 * width)).to_bytes(width, "little")
    path = small_file.parent / "mutated.gguf"  # rewritten by each example
    path.write_bytes(bytes(raw))
    start = time.monotonic()
    try:
        with open_gguf(path):
            pass
        Tokenizer.from_gguf(path)
    except GGUFError:
        pass
    assert time.monotonic() - start < 10


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda w: w.add_uint64("llama.vocab_size", 1 << 40),
            r"key 'llama.vocab_size' is 1099511627776, outside 1\.\.",
        ),
        (
            lambda w: w.add_uint64("llama.context_length", 1 << 40),
            r"key 'llama.context_length' is 1099511627776, outside 1\.\.",
        ),
        (
            lambda w: w.add_uint32("llama.embedding_length", 1 << 30),
            r"key 'llama.embedding_length' is 1073741824, outside 1\.\.",
        ),
        (
            lambda w: w.add_uint32("llama.attention.head_count", 1 << 30),
            r"key 'llama.attention.head_count' is 1073741824, outside 1\.\.256",
        ),
    ],
)
def test_absurd_counts_are_refused_before_anything_is_sized(
    tmp_path, edit, message
) -> None:
    path = write_llama_cpp_gguf(
        tmp_path / "m.gguf", SMALL, state_dict(SMALL), edit=edit
    )
    start = time.monotonic()
    with pytest.raises(GGUFError, match=message):
        open_gguf(path)
    assert time.monotonic() - start < 10


# -- SentencePiece files --------------------------------------------------------------------


@pytest.fixture(scope="module")
def sentencepiece_model(tmp_path_factory):
    """A small SentencePiece BPE model with byte fallback, trained here on
    the user guide with no normalization (as Llama's: identity rules, extra
    whitespace kept, a dummy prefix)."""
    spm = pytest.importorskip("sentencepiece", reason="needs sentencepiece")
    root = tmp_path_factory.mktemp("spm")
    guide = Path(__file__).resolve().parents[3] / "docs" / "guide"
    text = "\n".join(p.read_text(encoding="utf-8") for p in sorted(guide.glob("*.md")))
    (root / "corpus.txt").write_text(text, encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(root / "corpus.txt"),
        model_prefix=str(root / "m"),
        vocab_size=1000,
        model_type="bpe",
        byte_fallback=True,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        add_dummy_prefix=True,
        split_digits=False,
        character_coverage=1.0,
        minloglevel=2,
    )
    return spm.SentencePieceProcessor(model_file=str(root / "m.model"))


def _as_llama_cpp_writes(sp) -> dict:
    """The tokenizer keys llama.cpp's converter writes from a SentencePiece
    model (``convert_hf_to_gguf.py``, ``_create_vocab_sentencepiece``):
    pieces, scores and token types (1 normal, 2 unknown, 3 control, 6 byte)."""
    tokens, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        tokens.append(sp.id_to_piece(i))
        scores.append(sp.get_score(i))
        types.append(
            2
            if sp.is_unknown(i)
            else 3
            if sp.is_control(i)
            else 6
            if sp.is_byte(i)
            else 4
            if sp.is_unused(i)
            else 1
        )
    return {
        "model": "llama",
        "pre": "default",
        "tokens": tokens,
        "scores": scores,
        "types": types,
        "bos": sp.bos_id(),
        "eos": sp.eos_id(),
    }


def test_a_sentencepiece_file_encodes_as_sentencepiece(tmp_path, sentencepiece_model):
    sp = sentencepiece_model
    tok = _as_llama_cpp_writes(sp)
    config = LlamaConfig.tiny(vocab_size=len(tok["tokens"]))
    path = write_llama_cpp_gguf(
        tmp_path / "spm.gguf", config, state_dict(config), tokenizer=tok
    )
    ours = Tokenizer.from_gguf(path)
    for text in SPLIT_CORPUS:
        if "<|" in text:
            continue  # no special tokens in this vocabulary
        ids = ours.encode(text, add_bos=False)
        assert ids == sp.encode(text), text
    assert ours.encode("hi")[0] == sp.bos_id()  # llama.cpp adds bos by default
    # llama.cpp puts a space in front of the text after a special token too
    eos = sp.id_to_piece(sp.eos_id())
    assert ours.encode(f"hi{eos}hi", add_bos=False) == [
        *sp.encode("hi"),
        sp.eos_id(),
        *sp.encode("hi"),
    ]


def test_a_decoder_of_a_gguf_file_carries_its_tokenizer(tmp_path):
    path = smollm2_gguf()
    decoder = Decoder.from_pretrained(
        path, device="npu2", context=256, rows=16, progress=False, weights="bf16"
    )
    tokenizer = decoder.tokenizer
    assert tokenizer is not None
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}]
    )
    ids = tokenizer.encode(text)
    answer = tokenizer.decode(
        list(decoder.generate(ids, max_new_tokens=12, stop=tokenizer.eos_ids)),
        skip_special_tokens=True,
    )
    assert "Paris" in answer


def _python_blocks(page: Path) -> list[str]:
    """The ```python blocks of a docs page, as written."""
    return re.findall(r"^```python\n(.*?)^```", page.read_text(), re.M | re.S)


def test_the_guides_python_snippets_run_as_written(files, tmp_path):
    """Issue 35: the GGUF and Quantized pages' snippets failed with
    NoDeviceError (no device named, as a reader writes them); run verbatim,
    with no IRON_* variable, on a Q4_K file of the name they use."""
    docs = Path(__file__).resolve().parents[3] / "docs" / "guide"
    name = "Llama-3.2-1B-Instruct-Q4_K_M.gguf"
    (tmp_path / name).write_bytes(files["Q4_K"].read_bytes())
    (gguf_page,) = _python_blocks(docs / "gguf.md")
    first = _python_blocks(docs / "quantized.md")[0]
    env = {k: v for k, v in os.environ.items() if not k.startswith("IRON_")}
    for code in (gguf_page, first):
        assert name in code and "device" not in code
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        assert "no device named: using" in done.stderr
