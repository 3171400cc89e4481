"""Writing tiny Llamas as GGUF files, in every type IRON reads.

``write_gguf`` writes a Hugging Face style float32 state dict as llama.cpp
would: llama.cpp's tensor names, q/k rows permuted for its rotary layout
(``LlamaModel.permute`` in llama.cpp's ``convert_hf_to_gguf.py``), the
``llama.*`` and ``tokenizer.ggml.*`` metadata, and each matrix in the type
asked. The ``gguf`` package quantizes Q8_0, Q4_0 and Q4_1 (and BF16); it has
no Q4_K, Q5_K or Q6_K quantizer, so those blocks are packed here from the block
layouts of ggml's ``block_q4_K``/``block_q5_K``/``block_q6_K`` (ggml/src/ggml-common.h),
and the tests check the packing round-trips through ``gguf.quants.dequantize``.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

gguf = __import__("pytest").importorskip("gguf", reason="needs iron-lm[gguf]")

from iron.lm.config import LlamaConfig  # noqa: E402

TYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q5_K", "Q6_K")
#: The k-quant types (blocks of 256).
K_TYPES = ("Q4_K", "Q5_K", "Q6_K")

_HF_TO_GGUF = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}
_LAYER = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def gguf_name(hf: str) -> str:
    """llama.cpp's name for Hugging Face tensor ``hf``."""
    if hf in _HF_TO_GGUF:
        return _HF_TO_GGUF[hf]
    _, _, layer, rest = hf.split(".", 3)
    return f"blk.{layer}.{_LAYER[rest]}"


def permute(weight: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's rotary permutation (convert_hf_to_gguf.py, LlamaModel.permute)."""
    return (
        weight.reshape(heads, 2, weight.shape[0] // heads // 2, *weight.shape[1:])
        .swapaxes(1, 2)
        .reshape(weight.shape)
    )


# -- hand-packed k-quants ----------------------------------------------------------------


def _f16(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, np.float16)


def _k_fit(w: np.ndarray, top: int) -> tuple:
    """A min/max fit of Q4_K's and Q5_K's 256-blocks: codes 0..``top``.

    Returns d and dmin (float64, f16-exact), the 12 bytes of six-bit scales
    and mins per block, and the codes (n, 8 sub-blocks, 32) uint8.
    """
    b = w.reshape(-1, 8, 32).astype(np.float64)
    lo = np.minimum(b.min(-1), 0)
    scale = (b.max(-1) - lo) / top
    mn = -lo
    d = _f16(scale.max(-1) / 63).astype(np.float64)
    dmin = _f16(mn.max(-1) / 63).astype(np.float64)
    sc = np.clip(np.rint(scale / np.where(d > 0, d, 1)[:, None]), 0, 63).astype(
        np.uint8
    )
    m = np.clip(np.rint(mn / np.where(dmin > 0, dmin, 1)[:, None]), 0, 63).astype(
        np.uint8
    )
    step = d[:, None] * sc
    q = np.rint(
        (b + (dmin[:, None] * m)[..., None]) / np.where(step > 0, step, 1)[..., None]
    )
    q = np.clip(q, 0, top).astype(np.uint8)
    scales = np.zeros((b.shape[0], 12), np.uint8)
    scales[:, 0:4] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
    scales[:, 4:8] = (m[:, 0:4] & 63) | ((m[:, 4:8] >> 4) << 6)
    scales[:, 8:12] = (sc[:, 4:8] & 15) | ((m[:, 4:8] & 15) << 4)
    return d, dmin, scales, q


def _add_tokenizer(w: Any, tok: dict[str, Any]) -> None:
    """The tokenizer's keys both writers give: model, pre, tokens, types,
    merges or scores, bos and eos."""
    w.add_tokenizer_model(tok["model"])
    w.add_tokenizer_pre(tok["pre"])
    w.add_token_list(tok["tokens"])
    w.add_token_types(tok["types"])
    if "merges" in tok:
        w.add_token_merges(tok["merges"])
    if "scores" in tok:
        w.add_token_scores(tok["scores"])
    w.add_bos_token_id(tok["bos"])
    w.add_eos_token_id(tok["eos"])


def pack_q4_k(w: np.ndarray) -> np.ndarray:
    """(rows, cols) float32 -> Q4_K bytes (rows, cols // 256 * 144).

    Per 256 block: d, dmin (f16), 8 six-bit scales and mins packed in 12
    bytes, 128 bytes of nibbles; element l of sub-block j is
    ``d * sc_j * q - dmin * m_j`` (a plain min/max fit, not llama.cpp's search).
    """
    rows, cols = w.shape
    d, dmin, scales, q = _k_fit(w, 15)
    n = q.shape[0]
    qs = (q[:, 0::2] | (q[:, 1::2] << 4)).reshape(n, 128)
    out = np.concatenate(
        [
            _f16(d)[:, None].view(np.uint8),
            _f16(dmin)[:, None].view(np.uint8),
            scales,
            qs,
        ],
        axis=1,
    )
    return out.reshape(rows, -1)


def pack_q5_k(w: np.ndarray) -> np.ndarray:
    """(rows, cols) float32 -> Q5_K bytes (rows, cols // 256 * 176).

    Per 256 block (ggml-common.h ``block_q5_K``): d, dmin (f16), Q4_K's 12
    bytes of six-bit scales and mins, 32 bytes of high bits, 128 bytes of low
    nibbles; element l of sub-block j is ``d * sc_j * q - dmin * m_j`` with q
    in 0..31 (bit j of ``qh[l % 32]`` its fifth bit; a min/max fit).
    """
    rows, cols = w.shape
    d, dmin, scales, q = _k_fit(w, 31)  # q: (n, 8 sub-blocks, 32)
    n = q.shape[0]
    low = q & 15
    # 64-element chunk c: sub-block 2c in the low nibbles, 2c + 1 in the high
    qs = (low[:, 0::2] | (low[:, 1::2] << 4)).reshape(n, 128)
    qh = np.zeros((n, 32), np.uint8)
    for j in range(8):
        qh |= ((q[:, j] >> 4) & 1) << j
    out = np.concatenate(
        [
            _f16(d)[:, None].view(np.uint8),
            _f16(dmin)[:, None].view(np.uint8),
            scales,
            qh,
            qs,
        ],
        axis=1,
    )
    return out.reshape(rows, -1)


def pack_q6_k(w: np.ndarray) -> np.ndarray:
    """(rows, cols) float32 -> Q6_K bytes (rows, cols // 256 * 210).

    Per 256 block: 128 bytes of low nibbles, 64 of high bit pairs, 16 int8
    scales, d (f16); element e is ``d * scales[e // 16] * (q - 32)``.
    """
    rows, cols = w.shape
    b = w.reshape(-1, 16, 16).astype(np.float64)
    amax = np.abs(b).max(-1)
    scale = amax / 31
    d = _f16(scale.max(-1) / 127).astype(np.float64)
    sc = np.clip(np.rint(scale / np.where(d > 0, d, 1)[:, None]), -128, 127).astype(
        np.int8
    )
    step = d[:, None] * sc
    q = np.rint(b / np.where(step != 0, step, 1)[..., None]) + 32
    q = np.clip(q, 0, 63).astype(np.uint8).reshape(-1, 2, 4, 32)  # half, k, l
    n = q.shape[0]
    ql = np.zeros((n, 2, 64), np.uint8)
    ql[:, :, 0:32] = (q[:, :, 0] & 15) | ((q[:, :, 2] & 15) << 4)
    ql[:, :, 32:64] = (q[:, :, 1] & 15) | ((q[:, :, 3] & 15) << 4)
    qh = (
        (q[:, :, 0] >> 4)
        | ((q[:, :, 1] >> 4) << 2)
        | ((q[:, :, 2] >> 4) << 4)
        | ((q[:, :, 3] >> 4) << 6)
    ).astype(np.uint8)
    out = np.concatenate(
        [
            ql.reshape(n, 128),
            qh.reshape(n, 64),
            sc.view(np.uint8),
            _f16(d)[:, None].view(np.uint8),
        ],
        axis=1,
    )
    return out.reshape(rows, -1)


def encode(w: np.ndarray, kind: str) -> tuple[np.ndarray, Any]:
    """``w`` (float32, numpy order) stored as ``kind``: (array, raw ggml type or None)."""
    Q = gguf.GGMLQuantizationType
    w = np.ascontiguousarray(w, np.float32)
    if kind == "F32":
        return w, None
    if kind == "F16":
        return w.astype(np.float16), None
    if kind == "Q4_K":
        return pack_q4_k(w), Q.Q4_K
    if kind == "Q5_K":
        return pack_q5_k(w), Q.Q5_K
    if kind == "Q6_K":
        return pack_q6_k(w), Q.Q6_K
    return gguf.quants.quantize(w, Q[kind]), Q[kind]


def decoded(w: np.ndarray, kind: str) -> np.ndarray:
    """What a reader gets back from ``w`` stored as ``kind`` (float32)."""
    data, raw = encode(w, kind)
    if raw is None:
        return np.asarray(data, np.float32)
    return gguf.quants.dequantize(data, raw).astype(np.float32).reshape(w.shape)


# -- the tokenizer metadata ----------------------------------------------------------------


def tiny_bpe() -> dict[str, Any]:
    """The packaged tiny byte-level BPE tokenizer as tokenizer.ggml.* fields."""
    data = resources.files("iron.lm") / "data" / "tiny" / "tokenizer.json"
    spec = json.loads(data.read_text(encoding="utf-8"))
    vocab = dict(spec["model"]["vocab"])
    for added in spec["added_tokens"]:
        vocab[added["content"]] = added["id"]
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    special = {a["content"] for a in spec["added_tokens"] if a.get("special")}
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
    return {
        "model": "gpt2",
        "pre": "gpt-2",  # its tokenizer.json splits as GPT-2's ByteLevel
        "tokens": tokens,
        "merges": merges,
        "types": [3 if t in special else 1 for t in tokens],
        "bos": 0,
        "eos": 1,
        "add_bos": True,
    }


def tiny_spm() -> dict[str, Any]:
    """A small SentencePiece ("llama") vocabulary: specials, the 256 byte
    tokens, and pieces with scores (higher merges first)."""
    pieces = [
        "\u2581",
        "\u2581t",
        "he",
        "\u2581the",
        "in",
        "\u2581a",
        "er",
        "\u2581in",
        "on",
        "re",
        "\u2581s",
        "\u2581c",
        "at",
        "en",
        "\u2581(",
        "):",
        "  ",
        "\u2581\u2581",
        "\u2581\u2581\u2581\u2581",
        "de",
        "f",
        "d",
        "e",
        "h",
        "t",
        "a",
        "i",
        "n",
        "o",
        "r",
        "s",
        "c",
        "(",
        ")",
        ":",
        "\u00e9",
        "\u00fc",
    ]
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)] + pieces
    scores = [0.0, 0.0, 0.0] + [0.0] * 256 + [-float(i) for i in range(len(pieces))]
    types = [2, 3, 3] + [6] * 256 + [1] * len(pieces)
    return {
        "model": "llama",
        "pre": "default",
        "tokens": tokens,
        "scores": scores,
        "types": types,
        "bos": 1,
        "eos": 2,
        "unk": 0,
        "add_bos": True,
    }


CHAT_TEMPLATE = (
    "{% for m in messages %}<|begin_of_text|>{{ m['role'] }}: {{ m['content'] }}\n"
    "{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"
)


# -- the file ---------------------------------------------------------------------------


def write_gguf(
    path: Path,
    config: LlamaConfig,
    state_dict: dict[str, np.ndarray],
    kind: str = "F32",
    *,
    tokenizer: dict[str, Any] | None = None,
    norms: str = "F32",
    extra: dict[str, np.ndarray] | None = None,
    edit: Any = None,
) -> Path:
    """Write ``state_dict`` (Hugging Face names, float) as a llama GGUF file.

    Matrices are stored as ``kind`` (Q4_K/Q6_K need rows of 256: narrower
    ones fall back to Q8_0, as llama.cpp does), 1-D norm weights as
    ``norms``; ``extra`` tensors (llama.cpp names) are written as F32;
    ``edit(writer)``, if given, adds metadata last.
    """
    tok = tokenizer if tokenizer is not None else tiny_bpe()
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny")
    w.add_context_length(config.max_position_embeddings)
    w.add_embedding_length(config.hidden_size)
    w.add_block_count(config.num_hidden_layers)
    w.add_feed_forward_length(config.intermediate_size)
    w.add_head_count(config.num_attention_heads)
    w.add_head_count_kv(config.num_key_value_heads)
    w.add_key_length(config.head_dim)
    w.add_value_length(config.head_dim)
    w.add_rope_dimension_count(config.head_dim)
    w.add_rope_freq_base(config.rope_theta)
    w.add_layer_norm_rms_eps(config.rms_norm_eps)
    w.add_vocab_size(config.vocab_size)
    _add_tokenizer(w, tok)
    if "unk" in tok:
        w.add_unk_token_id(tok["unk"])
    w.add_add_bos_token(tok["add_bos"])
    w.add_add_eos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)
    for hf in sorted(state_dict):
        a = np.asarray(state_dict[hf], np.float32)
        if hf.endswith("q_proj.weight"):
            a = permute(a, config.num_attention_heads)
        elif hf.endswith("k_proj.weight"):
            a = permute(a, config.num_key_value_heads)
        t = kind if a.ndim == 2 else norms
        if t in K_TYPES and a.shape[-1] % 256:
            t = "Q8_0"
        data, raw = encode(a, t)
        w.add_tensor(gguf_name(hf), data, raw_dtype=raw)
    if edit is not None:
        edit(w)
    for name, a in (extra or {}).items():
        w.add_tensor(name, np.asarray(a, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def dequantized_state_dict(
    config: LlamaConfig,
    state_dict: dict[str, np.ndarray],
    kind: str,
    norms: str = "F32",
) -> dict[str, np.ndarray]:
    """The float32 weights a reader of ``write_gguf``'s file gets, in
    Hugging Face's layout (the rotary permutation undone)."""
    out = {}
    for hf, a in state_dict.items():
        a = np.asarray(a, np.float32)
        heads = None
        if hf.endswith("q_proj.weight"):
            heads = config.num_attention_heads
        elif hf.endswith("k_proj.weight"):
            heads = config.num_key_value_heads
        t = kind if a.ndim == 2 else norms
        if t in K_TYPES and a.shape[-1] % 256:
            t = "Q8_0"
        stored = decoded(permute(a, heads) if heads else a, t)
        if heads:
            half = stored.shape[0] // heads // 2
            stored = (
                stored.reshape(heads, half, 2, -1).swapaxes(1, 2).reshape(stored.shape)
            )
        out[hf] = stored
    return out


def k_mixture(main: str) -> Any:
    """llama.cpp's "_M" mixture of ``main`` (Q4_K or Q5_K), roughly as
    llama-quantize makes it (src/llama-quant.cpp): Q6_K for the LM head, the
    value projections and the down projections, ``main`` elsewhere."""

    def kind(hf: str) -> str:
        heavy = ("lm_head", "v_proj", "down_proj")
        return "Q6_K" if any(h in hf for h in heavy) else main

    return kind


def write_llama_cpp_gguf(
    path: Path,
    config: LlamaConfig,
    state_dict: dict[str, np.ndarray],
    kind: Any = "F32",
    *,
    tokenizer: dict[str, Any] | None = None,
    edit: Any = None,
) -> Path:
    """Write ``state_dict`` with the key set llama.cpp's converter writes for
    a Llama whose config.json has no ``head_dim`` (``convert_hf_to_gguf.py``,
    ``TextModel.set_gguf_parameters`` and ``LlamaModel``): general.* keys,
    context, width, layers, feed-forward width, heads, key/value heads, rotary
    base and width, RMSNorm epsilon, vocabulary size, the file type, and no
    ``attention.key_length`` or ``attention.value_length``; the tokenizer
    keys without ``add_eos_token`` or token 11 defaults spelled out.
    ``edit(writer)`` adds or overrides keys last.
    """
    tok = tokenizer if tokenizer is not None else {**tiny_bpe(), "pre": "llama-bpe"}
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_type("model")
    w.add_name("Tiny")
    w.add_size_label("1M")
    w.add_block_count(config.num_hidden_layers)
    w.add_context_length(config.max_position_embeddings)
    w.add_embedding_length(config.hidden_size)
    w.add_feed_forward_length(config.intermediate_size)
    w.add_head_count(config.num_attention_heads)
    w.add_head_count_kv(config.num_key_value_heads)
    w.add_rope_freq_base(config.rope_theta)
    w.add_layer_norm_rms_eps(config.rms_norm_eps)
    w.add_file_type(0 if kind == "F32" else 1 if kind == "F16" else 15)
    w.add_vocab_size(config.vocab_size)
    w.add_rope_dimension_count(config.hidden_size // config.num_attention_heads)
    w.add_quantization_version(2)
    _add_tokenizer(w, tok)
    if "add_bos" in tok:
        w.add_add_bos_token(tok["add_bos"])
    w.add_chat_template(CHAT_TEMPLATE)
    if edit is not None:
        edit(w)
    for hf in sorted(state_dict):
        a = np.asarray(state_dict[hf], np.float32)
        if hf.endswith("q_proj.weight"):
            a = permute(a, config.num_attention_heads)
        elif hf.endswith("k_proj.weight"):
            a = permute(a, config.num_key_value_heads)
        t = (kind if isinstance(kind, str) else kind(hf)) if a.ndim == 2 else "F32"
        if t in K_TYPES and a.shape[-1] % 256:
            t = "Q8_0"
        data, raw = encode(a, t)
        w.add_tensor(gguf_name(hf), data, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
