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
    pack_q4_k,
    pack_q6_k,
    permute,
    tiny_bpe,
    tiny_spm,
    write_gguf,
)
from lm_support import CONTEXT, ROWS

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
        # The file holds eps as float32 and one eos id (the tiny tokenizer's).
        eps = float(np.float32(CONFIG.rms_norm_eps))
        assert ck.config == replace(CONFIG, rms_norm_eps=eps, eos_token_id=1)
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
    assert not c.tie_word_embeddings and c.bos_token_id == 0 and c.eos_token_ids == (1,)


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


@pytest.mark.parametrize("pack, step", [(pack_q4_k, 15), (pack_q6_k, 63)])
def test_hand_packed_k_quants_round_trip(pack, step) -> None:
    w = np.random.default_rng(1).normal(size=(4, 512)).astype(np.float32)
    kind = "Q4_K" if pack is pack_q4_k else "Q6_K"
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
    assert ours.bos_token == "<|begin_of_text|>" and ours.eos_ids == (1,)
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
    struct.pack_into("<I", data, dims + 8 * n, 13)  # Q5_K


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
    absurd_counts: r"claims \d+ metadata keys and \d+ tensors, more than",
    absurd_string_array: r"key 'tokenizer.ggml.tokens' claims 1152921504606846976 strings",
    absurd_string: r"the value of 'general.name' \(2305843009213693952 bytes\)",
    wrong_type: r"key 'llama.block_count' has type \[FLOAT32\], not an integer",
    unsupported_type: r"tensor 'blk.0.attn_v.weight' has type Q5_K, which IRON does "
    r"not read; supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K",
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
        ({"pre": "qwen2"}, r"'tokenizer.ggml.pre' is 'qwen2'; IRON splits text as"),
        (
            {"bos": 9999},
            r"'tokenizer.ggml.bos_token_id' is 9999, outside the 512 tokens",
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
