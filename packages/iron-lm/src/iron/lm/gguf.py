"""GGUF checkpoints (llama.cpp's one-file format): open, check, lay out for the device.

``open_gguf(path)`` takes a ``.gguf`` file (or a directory holding exactly
one) and returns a :class:`GGUFCheckpoint`: the ``LlamaConfig`` read from the
``llama.*`` metadata, the ``tokenizer.ggml.*`` metadata the tokenizer is
built from (``iron.lm.gguf_tokenizer``, ``Tokenizer.from_gguf``), and the
weights at their Hugging Face names as the device holds them: a quantized
tensor's blocks repacked into a device format (``iron.operators.quantized``:
Q8_0, Q4_0 and Q4_1 with every value unchanged, Q4_K and Q6_K within the
bound stated there), the float ones (F32, F16, BF16) and Q5_K (which no
device format holds) dequantized to bf16.

Reading: the header is first walked and checked by
:func:`iron.lm.gguf_header.walk_header` (every count, length, type and byte
range against the file), then the metadata is read by the ``gguf``
package's ``GGUFReader`` (https://github.com/ggml-org/llama.cpp,
``gguf-py``) and the tensors through a read-only mapping of the file whose
pages are let go as each piece is laid out (below).

Laying out: a bounded number of rows at a time, each quantized tensor's
blocks are repacked (``iron.operators.quantized.repack``) and each float
tensor (or, with ``tree(quantized=False)``, every tensor, dequantized with
``gguf.quants.dequantize``) rounded to bf16, and written to an unlinked
scratch file beside the GGUF file (its directory, else the system's
temporary directory), which is then mapped: the graph's weights are views of
it, and ``release`` drops their pages once they are uploaded, as for a
safetensors checkpoint. Host memory therefore stays near one piece in
flight, never a second copy of the model; the disk holds the device's
weights while the checkpoint is open.

llama.cpp stores the q and k projections of a Llama with each head's rows
interleaved for its rotary layout (``LlamaModel.permute`` in llama.cpp's
``convert_hf_to_gguf.py``); they are put back in Hugging Face's order as
transformers does when it reads a GGUF file (``reverse_permute_weights`` in
transformers v4.57 ``src/transformers/modeling_gguf_pytorch_utils.py``, the
``ReversePermuteAttnQ``/``ReversePermuteAttnK`` operations in later
versions): row ``h * d + j * d/2 + i`` of head ``h`` (``d`` its width) is
stored at ``h * d + 2 * i + j``, with the key/value head count for k.
"""

from __future__ import annotations

import logging
import math
import mmap
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from iron.lm._scratch import ScratchWeights, ScratchWriter, drop_pages
from iron.lm.checkpoint import (
    CheckpointNotFoundError,
    GGUFError,
    NonFiniteWeightError,
)
from iron.lm.config import ConfigError, LlamaConfig, RopeScaling
from iron.lm.gguf_header import (
    INTEGER_TYPES,
    NUMBER_TYPES,
    SUPPORTED_TYPES,
    GGUFTensor,
    walk_header,
)
from iron.operators.qmatmul import K_MULTIPLE
from iron.operators.quantized import GGUF_FORMATS, QuantFormat, repack

__all__ = [
    "SUPPORTED_TYPES",
    "GGUFCheckpoint",
    "GGUFError",
    "GGUFTensor",
    "find_gguf",
    "open_gguf",
    "end_of_generation_ids",
    "special_ids",
    "unpermute_rotary",
]

logger = logging.getLogger("iron.lm")

#: Output bytes dequantized per piece.
_PIECE = 8 << 20

# llama.cpp's tensor names -> Hugging Face's (blk.N. -> model.layers.N.).
_GLOBAL_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
_LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}


# -- finding the file -------------------------------------------------------------


def find_gguf(path: str | os.PathLike[str]) -> Path | None:
    """The GGUF file ``path`` names, or None when it names none.

    A path ending in ``.gguf`` is the file; a directory with no
    ``config.json`` and ``*.gguf`` files must hold exactly one.

    Raises:
        CheckpointNotFoundError: A ``.gguf`` path that does not exist.
        GGUFError: A directory holding several ``.gguf`` files.
    """
    p = Path(path)
    if p.suffix.lower() == ".gguf":
        if not p.is_file():
            raise CheckpointNotFoundError(f"GGUF file {str(p)!r} does not exist")
        return p
    if not p.is_dir() or (p / "config.json").is_file():
        return None
    found = sorted(q for q in p.glob("*.gguf") if q.is_file())
    if len(found) > 1:
        raise GGUFError(
            f"directory {str(p)!r} holds {len(found)} GGUF files "
            f"({', '.join(q.name for q in found)}); pass the one to load"
        )
    return found[0] if found else None


# -- metadata, typed ---------------------------------------------------------------------


class _Metadata:
    """The reader's fields with typed access; a wrong type is an error naming the key."""

    def __init__(self, path: Path, fields: Mapping[str, Any]) -> None:
        self.path = path
        self.fields = fields

    def __contains__(self, key: str) -> bool:
        return key in self.fields

    def _types(self, key: str) -> list[str]:
        return [t.name for t in self.fields[key].types]

    def _wrong(self, key: str, wanted: str) -> GGUFError:
        shown = "[" + ", ".join(self._types(key)) + "]"
        return GGUFError(
            f"GGUF file {str(self.path)!r}: key {key!r} has type {shown}, not {wanted}"
        )

    def get(self, key: str, kind: str, default: Any = None) -> Any:
        """The value of ``key`` as ``kind`` ("int", "float", "str", "bool"), or
        ``default`` when absent."""
        if key not in self.fields:
            return default
        types = self._types(key)
        allowed = {
            "int": INTEGER_TYPES,
            "float": NUMBER_TYPES,
            "str": {"STRING"},
            "bool": {"BOOL"},
        }[kind]
        if len(types) != 1 or types[0] not in allowed:
            raise self._wrong(
                key,
                {"int": "an integer", "float": "a number"}.get(
                    kind, kind.upper().replace("STR", "STRING")
                ),
            )
        value = self._contents(key)
        return {"int": int, "float": float, "str": str, "bool": bool}[kind](value)

    def _contents(self, key: str) -> Any:
        try:
            return self.fields[key].contents()
        except UnicodeDecodeError:
            raise GGUFError(
                f"GGUF file {str(self.path)!r}: key {key!r} holds text that is not "
                "UTF-8"
            ) from None

    def is_array(self, key: str) -> bool:
        """Whether ``key`` (present) holds an array."""
        return self._types(key)[0] == "ARRAY"

    def array_length(self, key: str) -> int | None:
        """How many items the array ``key`` holds (None when absent), read
        from the header without building the list."""
        if key not in self.fields:
            return None
        if not self.is_array(key):
            raise self._wrong(key, "an array")
        return len(self.fields[key].data)

    def array(self, key: str, kind: str) -> list[Any] | None:
        """The array ``key`` of ``kind`` items ("str", "int", "float"), or None."""
        if key not in self.fields:
            return None
        types = self._types(key)
        allowed = {"str": {"STRING"}, "int": INTEGER_TYPES, "float": NUMBER_TYPES}[kind]
        if types[0] != "ARRAY" or (len(types) > 1 and types[1] not in allowed):
            raise self._wrong(key, f"an array of {kind}")
        return list(self._contents(key))


# -- the checkpoint -------------------------------------------------------------------------


class GGUFCheckpoint:
    """An opened GGUF file: its config, tokenizer metadata and device weights.

    Attributes:
        path: The GGUF file.
        directory: The directory holding it.
        files: ``(path,)``.
        config: The ``LlamaConfig`` from its metadata.
        tensors: Each tensor as the header describes it, by llama.cpp name.
    """

    def __init__(self, path: Path) -> None:
        from gguf import GGUFReader

        self.path = path
        self.directory = path.parent
        self.files: tuple[Path, ...] = (path,)
        size = path.stat().st_size
        with open(path, "rb") as f:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else None
        try:
            infos = walk_header(path, mapped if mapped is not None else b"", size)
        except BaseException:
            if mapped is not None:
                mapped.close()
            raise
        # the tensors are read through this mapping, and each piece's pages
        # let go once it is laid out: the file is never resident whole
        self._file = mapped
        self.tensors: dict[str, GGUFTensor] = {t.name: t for t in infos}
        try:
            self._reader = GGUFReader(path)
        except Exception as e:  # the header was checked; anything left is named
            raise GGUFError(
                f"GGUF file {str(path)!r} cannot be read by the gguf package: {e}"
            ) from None
        self.metadata = _Metadata(path, self._reader.fields)
        self.config = _config(self)
        self._names = _hf_names(self)
        self._scratch: ScratchWeights | None = None
        self._quantized = True
        self._views: dict[str, np.ndarray] = {}

    # -- what is there ----------------------------------------------------------------

    def names(self) -> list[str]:
        """Every weight's Hugging Face name."""
        return list(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __len__(self) -> int:
        return len(self._names)

    @property
    def nbytes(self) -> int:
        """The tensor bytes in the file (as stored, quantized)."""
        return sum(t.end - t.begin for t in self.tensors.values())

    def raw(self, name: str) -> np.ndarray:
        """The stored bytes of llama.cpp tensor ``name``, (rows, bytes per row)."""
        t = self.tensors[name]
        rows = math.prod(t.shape[:-1])
        if self._file is None:  # an empty file has no tensor to read
            raise GGUFError(f"GGUF file {str(self.path)!r} is closed or empty")
        flat = np.frombuffer(self._file, np.uint8, t.end - t.begin, t.begin)
        return flat.reshape(rows, -1)

    def dequantized(self, name: str, rows: slice = slice(None)) -> np.ndarray:
        """Rows of llama.cpp tensor ``name`` as float32, as stored (permuted)."""
        from gguf import GGMLQuantizationType
        from gguf.quants import dequantize

        t = self.tensors[name]
        data = self.raw(name)[rows]
        cols = t.shape[-1]
        if t.type_name == "F32":
            return data.view("<f4").reshape(-1, cols)
        if t.type_name == "F16":
            return data.view("<f2").astype(np.float32).reshape(-1, cols)
        if t.type_name == "BF16":
            return data.view(ml_dtypes.bfloat16).astype(np.float32).reshape(-1, cols)
        out = dequantize(data, GGMLQuantizationType[t.type_name])
        return np.asarray(out, np.float32).reshape(-1, cols)

    def weight(self, name: str) -> np.ndarray:
        """Weight ``name`` (a Hugging Face name) as float32 in Hugging Face's
        layout: dequantized exactly, the rotary permutation undone, not yet
        rounded to bf16. One whole tensor: for inspection and tests."""
        if name not in self._names:
            raise KeyError(f"GGUF file {str(self.path)!r} has no weight {name!r}")
        src, heads = self._names[name]
        pieces = list(self._pieces(src, heads))
        return np.concatenate(pieces).reshape(self.tensors[src].shape)

    # -- the weights as the device holds them -----------------------------------------

    def formats(self, quantized: bool = True) -> dict[str, QuantFormat | None]:
        """Each weight's device format by Hugging Face name: None for bf16.

        A quantized type (Q8_0, Q4_0, Q4_1, Q4_K, Q6_K) keeps its codes in
        the device format it repacks into
        (:data:`iron.operators.quantized.GGUF_FORMATS`) when ``quantized``
        and its rows are a multiple of
        :data:`iron.operators.qmatmul.K_MULTIPLE` elements; F32, F16 and
        BF16 tensors, Q5_K ones (dequantized as they load), and every tensor
        when not ``quantized``, are bf16.
        """
        out: dict[str, QuantFormat | None] = {}
        for hf, (src, _) in self._names.items():
            t = self.tensors[src]
            fmt = GGUF_FORMATS.get(t.type_name) if quantized else None
            if fmt is not None and (len(t.shape) != 2 or t.shape[-1] % K_MULTIPLE):
                fmt = None
            out[hf] = fmt
        return out

    def tree(self, quantized: bool = True) -> Mapping[str, np.ndarray]:
        """Every weight by Hugging Face name, in Hugging Face's layout.

        A tensor :meth:`formats` gives a format is its packed rows (uint8,
        ``(rows, row_bytes)``: the file's blocks repacked, never a float
        copy); every other is bf16. The first call writes them into the
        scratch file (module docstring) piece by piece; the arrays are views
        of its mapping. A later call with the other ``quantized`` is refused.
        """
        if self._scratch is None:
            self._materialize(self.formats(quantized))
            self._quantized = quantized
        elif quantized != self._quantized:
            raise GGUFError(
                f"GGUF file {str(self.path)!r}: its weights were laid out with "
                f"quantized={self._quantized}; open the file again for the other"
            )
        return dict(self._views)

    def _materialize(self, formats: Mapping[str, QuantFormat | None]) -> None:
        def nbytes(hf: str) -> int:
            shape = self.tensors[self._names[hf][0]].shape
            fmt = formats[hf]
            return math.prod(shape) * 2 if fmt is None else fmt.nbytes(shape)

        total = sum(nbytes(hf) for hf in self._names)
        writer = ScratchWriter(
            self.directory,
            total,
            prefix=".iron-gguf-",
            what=f"GGUF file {str(self.path)!r}",
            error=GGUFError,
        )
        try:
            for hf, (src, heads) in self._names.items():
                shape = self.tensors[src].shape
                fmt = formats[hf]
                if fmt is None:
                    writer.tensor(hf, shape, ml_dtypes.bfloat16)
                    done = 0
                    for piece in self._pieces(src, heads):
                        rounded = np.ascontiguousarray(piece, ml_dtypes.bfloat16)
                        _check_finite(self.path, hf, rounded, done)
                        writer.write(rounded)
                        done += piece.size
                else:
                    writer.tensor(hf, (shape[0], fmt.row_bytes(shape[-1])), np.uint8)
                    for packed in self._packed_pieces(src, heads, hf):
                        writer.write(packed)
        except BaseException:
            writer.abandon()
            raise
        self._scratch = writer.finish()
        self._views = dict(self._scratch.views)

    def _packed_pieces(
        self, name: str, heads: int | None, hf: str
    ) -> Iterator[np.ndarray]:
        """Device-format pieces of a quantized tensor in Hugging Face's row order."""
        t = self.tensors[name]
        rows, width = t.shape[0], (t.end - t.begin) // t.shape[0]
        unit = rows // heads if heads else 1  # a q/k piece holds whole heads
        step = max(unit, _PIECE // max(1, 4 * width) // unit * unit)
        for start in range(0, rows, step):
            raw = self.raw(name)[start : min(rows, start + step)]
            try:
                _, packed = repack(raw, t.type_name)
            except ValueError as e:
                raise NonFiniteWeightError(
                    f"tensor {hf!r} of GGUF file {str(self.path)!r} (rows from "
                    f"{start}): {e}"
                ) from None
            if heads:
                packed = unpermute_rotary(packed, len(packed) // unit)
            yield packed
            drop_pages(self._file, raw)

    def _pieces(self, name: str, heads: int | None) -> Iterator[np.ndarray]:
        """Float32 pieces of a tensor in Hugging Face's row order."""
        t = self.tensors[name]
        rows = math.prod(t.shape[:-1])
        cols = t.shape[-1]
        unit = rows // heads if heads else 1  # a q/k piece holds whole heads
        step = max(unit, _PIECE // (4 * cols) // unit * unit)
        for start in range(0, rows, step):
            piece = self.dequantized(name, slice(start, min(rows, start + step)))
            if heads:
                piece = unpermute_rotary(piece, len(piece) // unit)
            yield piece
            drop_pages(self._file, self.raw(name)[start : min(rows, start + step)])

    def release(self, piece: np.ndarray | str) -> int:
        """Drop the scratch pages behind ``piece`` once it has been uploaded.

        Returns:
            The number of bytes advised away (0 when ``piece`` is not a view
            of this checkpoint's weights or the platform has no madvise).
        """
        if isinstance(piece, str):
            piece = self._views[piece]
        return self._scratch.release(piece) if self._scratch is not None else 0

    # -- lifetime ---------------------------------------------------------------------

    def verify(self) -> None:
        """Nothing to check: the weights were laid out (repacked or
        dequantized) into a private, unlinked scratch file when first read, so
        a change to the GGUF file since cannot reach them
        (``Checkpoint.verify``'s twin)."""

    def close(self) -> None:
        """Unmap the scratch weights and the file (views keep what they use)."""
        self._views.clear()
        if self._scratch is not None:
            self._scratch.close()
            self._scratch = None
        if self._file is not None:
            try:
                self._file.close()
            except BufferError:
                pass  # a raw view is alive; the mapping goes with it
            self._file = None

    def __enter__(self) -> GGUFCheckpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        kinds = sorted({t.type_name for t in self.tensors.values()})
        return (
            f"GGUFCheckpoint({str(self.path)!r}, {len(self.tensors)} tensors "
            f"({', '.join(kinds)}), {self.nbytes / 2**20:.1f} MiB)"
        )


def open_gguf(path: str | os.PathLike[str]) -> GGUFCheckpoint:
    """Open a GGUF file (or a directory holding exactly one), checked.

    Raises:
        CheckpointNotFoundError: No such file, or a directory without one.
        GGUFError: A malformed file, an unsupported tensor type, or a model
            IRON does not run (each named with the file and key or tensor).
        ImportError: The ``gguf`` package is not installed
            (``pip install iron-lm[gguf]``).
    """
    try:
        import gguf  # noqa: F401
    except ImportError:
        raise ImportError(
            "reading GGUF files needs the 'gguf' package: pip install 'iron-lm[gguf]'"
        ) from None
    found = find_gguf(path)
    if found is None:
        raise CheckpointNotFoundError(
            f"{str(path)!r} is neither a .gguf file nor a directory holding one"
        )
    checkpoint = GGUFCheckpoint(found)
    logger.info("opened %r", checkpoint)
    return checkpoint


# -- the config -------------------------------------------------------------------------
#
# The keys are read as llama.cpp reads them (llama_model::load_hparams in
# https://github.com/ggml-org/llama.cpp src/llama-model.cpp, key names from
# gguf-py/gguf/constants.py): required where llama.cpp requires them, and
# every optional one with llama.cpp's default.

#: llama.cpp's default special ids by tokenizer model (llama_vocab::impl::load
#: in src/llama-vocab.cpp): SentencePiece's <unk> <s> </s>; GPT-2 BPE's 11 (a
#: default it disables when the vocabulary has no token 11).
_DEFAULT_SPECIAL_IDS: dict[str, dict[str, int]] = {
    "llama": {"bos": 1, "eos": 2, "unk": 0},
    "gpt2": {"bos": 11, "eos": 11},
}
_SPECIAL_KEYS = {
    "bos": "tokenizer.ggml.bos_token_id",
    "eos": "tokenizer.ggml.eos_token_id",
    "eot": "tokenizer.ggml.eot_token_id",
    "eom": "tokenizer.ggml.eom_token_id",
    "unk": "tokenizer.ggml.unknown_token_id",
    "pad": "tokenizer.ggml.padding_token_id",
}


def special_ids(ck: GGUFCheckpoint) -> dict[str, int | None]:
    """bos, eos, eot, eom, unk and pad token ids as llama.cpp settles them.

    Each starts at llama.cpp's default for the tokenizer model (dropped if
    outside the vocabulary); a key in the file replaces it when it names a
    token, and is ignored with a warning when it does not (llama.cpp's "bad
    special token ... using default id"). The vocabulary's size is the
    length of ``tokenizer.ggml.tokens`` (else ``llama.vocab_size``, else the
    embedding's rows).
    """
    m = ck.metadata
    model = m.get("tokenizer.ggml.model", "str")
    n_tokens = _vocab_size(ck)
    out: dict[str, int | None] = {}
    for name, key in _SPECIAL_KEYS.items():
        default = _DEFAULT_SPECIAL_IDS.get(model or "", {}).get(name)
        if default is not None and default >= n_tokens:
            default = None
        value = m.get(key, "int")
        if value is not None and not 0 <= value < n_tokens:
            logger.warning(
                "GGUF file %r: key %r is %d, outside the %d tokens; using the "
                "default %s as llama.cpp does",
                str(ck.path),
                key,
                value,
                n_tokens,
                default,
            )
            value = None
        out[name] = default if value is None else value
    return out


#: Token texts llama.cpp ends generation at whatever the ids say (its
#: special_eog_ids, found by text in llama_vocab::impl::load,
#: src/llama-vocab.cpp; the entries for o200k_harmony, solar-open, gemma4 and
#: minimax, which come with workarounds of their own, are left out).
EOG_TEXTS = frozenset(
    {
        "<|eot_id|>",
        "<|im_end|>",
        "<|end|>",
        "<end_of_turn>",
        "<|endoftext|>",
        "</s>",
        "<|eom_id|>",
        "<EOT>",
        "_<EOT>",
        "[EOT]",
        "[EOS]",
        "<|end_of_text|>",
        "<end_of_utterance>",
        "<\uff5cend\u2581of\u2581sentence\uff5c>",
    }
)


def end_of_generation_ids(ck: GGUFCheckpoint) -> tuple[int, ...]:
    """The ids generation stops at, as llama.cpp settles them: eos, eot and
    eom (:func:`special_ids`), then every token whose text is one of
    :data:`EOG_TEXTS`, in id order."""
    ids = special_ids(ck)
    first = [i for i in (ids["eos"], ids["eot"], ids["eom"]) if i is not None]
    tokens = ck.metadata.array("tokenizer.ggml.tokens", "str") or []
    found = [i for i, t in enumerate(tokens) if t in EOG_TEXTS]
    return tuple(dict.fromkeys([*first, *found]))


def _vocab_size(ck: GGUFCheckpoint) -> int:
    """llama.cpp's vocabulary size: ``llama.vocab_size``, else the token
    list's length; a file with neither has the embedding's rows."""
    m = ck.metadata
    size = m.get("llama.vocab_size", "int")
    if size is None:
        size = m.array_length("tokenizer.ggml.tokens")
    if size is None:
        embed = ck.tensors.get("token_embd.weight")
        size = embed.shape[0] if embed is not None else 1
    if not 1 <= size <= MAX_VOCAB:
        raise GGUFError(
            f"GGUF file {str(ck.path)!r}: key 'llama.vocab_size' is {size}, outside "
            f"1..{MAX_VOCAB}: the file's header is damaged or lies"
        )
    return int(size)


def _per_layer(ck: GGUFCheckpoint, key: str, layers: int, default: Any) -> Any:
    """A key llama.cpp reads as one value or one per layer (get_key_or_arr):
    IRON's Llama needs the same value in every layer."""
    m = ck.metadata
    where = f"GGUF file {str(ck.path)!r}"
    if key in m and m.is_array(key):
        values = m.array(key, "int") or []
        if len(values) != layers:
            raise GGUFError(
                f"{where}: key {key!r} holds {len(values)} values, not one per "
                f"layer ({layers}, 'llama.block_count')"
            )
        if len(set(values)) > 1:
            raise GGUFError(
                f"{where}: key {key!r} differs between layers "
                f"({sorted(set(values))}): IRON's Llama needs every layer alike"
            )
        return values[0] if values else default
    return m.get(key, "int", default)


def _config(ck: GGUFCheckpoint) -> LlamaConfig:
    m = ck.metadata
    where = f"GGUF file {str(ck.path)!r}"
    arch = m.get("general.architecture", "str")
    if arch != "llama":
        raise GGUFError(
            f"{where}: key 'general.architecture' is {arch!r}; IRON runs 'llama' only"
        )

    def need(key: str, kind: str = "int") -> Any:
        value = m.get(key, kind)
        if value is None:
            raise GGUFError(
                f"{where}: metadata key {key!r} is missing (llama.cpp requires it too)"
            )
        return value

    for key in ("llama.expert_count", "llama.expert_used_count"):
        if m.get(key, "int", 0):
            raise GGUFError(
                f"{where}: key {key!r} is {m.get(key, 'int')}: a mixture of experts, "
                "which IRON's Llama does not run"
            )
    # required by llama.cpp: context length, width, layers, and for the
    # llama architecture the RMSNorm epsilon
    context = need("llama.context_length")
    hidden = need("llama.embedding_length")
    layers = need("llama.block_count")
    eps = need("llama.attention.layer_norm_rms_epsilon", "float")
    _check_limits(ck, hidden=hidden, layers=layers, context=context)
    # optional in llama.cpp (0 when absent, one value or one per layer); a
    # Llama cannot run without them, so IRON names them
    heads = _per_layer(ck, "llama.attention.head_count", layers, None)
    intermediate = _per_layer(ck, "llama.feed_forward_length", layers, None)
    for key, value in (
        ("llama.attention.head_count", heads),
        ("llama.feed_forward_length", intermediate),
    ):
        if not value:
            raise GGUFError(
                f"{where}: metadata key {key!r} is missing or 0: a Llama needs it"
            )
    kv_heads = _per_layer(ck, "llama.attention.head_count_kv", layers, heads)
    for key, value in (
        ("llama.attention.head_count", heads),
        ("llama.attention.head_count_kv", kv_heads),
        ("llama.feed_forward_length", intermediate),
        ("llama.attention.key_length", m.get("llama.attention.key_length", "int", 1)),
        (
            "llama.attention.value_length",
            m.get("llama.attention.value_length", "int", 1),
        ),
    ):
        limit = MAX_HEADS if "head_count" in key else MAX_WIDTH
        if not 1 <= value <= limit:
            raise GGUFError(
                f"{where}: key {key!r} is {value}, outside 1..{limit}: the file's "
                "header is damaged or lies"
            )
    # llama.cpp: key and value widths default to n_embd / n_head each (the
    # value width does not follow key_length), the rotary width to key_length
    head_dim = m.get("llama.attention.key_length", "int", hidden // heads)
    value_dim = m.get("llama.attention.value_length", "int", hidden // heads)
    if value_dim != head_dim:
        raise GGUFError(
            f"{where}: key 'llama.attention.value_length' is {value_dim}, not the key "
            f"length {head_dim}: IRON's Llama needs equal widths"
        )
    rotary = m.get("llama.rope.dimension_count", "int", head_dim)
    if rotary != head_dim:
        raise GGUFError(
            f"{where}: key 'llama.rope.dimension_count' is {rotary}, not the head "
            f"width {head_dim}: IRON's Llama rotates whole heads only (llama.cpp "
            "refuses it too: 'invalid n_rot')"
        )
    _check_rope_scaling(ck)
    embed = ck.tensors.get("token_embd.weight")
    if embed is None:
        raise GGUFError(f"{where}: tensor 'token_embd.weight' is missing")
    vocab = _vocab_size(ck)
    if embed.shape != (vocab, hidden):
        raise GGUFError(
            f"{where}: tensor 'token_embd.weight' has shape {list(embed.shape)}, not "
            f"[{vocab}, {hidden}] (the vocabulary and 'llama.embedding_length')"
        )
    ids = special_ids(ck)
    eos_ids = end_of_generation_ids(ck)
    scaling = _llama3_scaling(ck, head_dim)
    try:
        return LlamaConfig(
            hidden_size=hidden,
            intermediate_size=intermediate,
            num_attention_heads=heads,
            num_key_value_heads=kv_heads,
            head_dim=head_dim,
            num_hidden_layers=layers,
            vocab_size=vocab,
            rms_norm_eps=eps,
            rope_theta=m.get("llama.rope.freq_base", "float", 10000.0),
            rope_scaling=scaling,
            tie_word_embeddings="output.weight" not in ck.tensors,
            max_position_embeddings=context,
            bos_token_id=ids["bos"],
            eos_token_id=(eos_ids[0] if len(eos_ids) == 1 else eos_ids) or None,
            dtype="bfloat16",
        )
    except ConfigError as e:
        raise GGUFError(f"{where}: {e}") from None


def _check_rope_scaling(ck: GGUFCheckpoint) -> None:
    """llama.cpp's rotary scaling keys: ``rope.scaling.type`` (default
    "linear") with ``rope.scaling.factor`` (else the old
    ``rope.scale_linear``; 0 or absent is 1, no scaling). IRON runs none,
    linear by 1, or Llama 3's (``rope_freqs.weight``)."""
    m = ck.metadata
    where = f"GGUF file {str(ck.path)!r}"
    kind = m.get("llama.rope.scaling.type", "str", "linear")
    factor = m.get("llama.rope.scaling.factor", "float")
    key = "llama.rope.scaling.factor"
    if factor is None:
        key = "llama.rope.scale_linear"
        factor = m.get(key, "float", 0.0)
    if kind not in ("none", "linear", ""):
        raise GGUFError(
            f"{where}: key 'llama.rope.scaling.type' is {kind!r}; IRON's Llama "
            "supports no scaling or Llama 3's (a 'rope_freqs.weight' tensor)"
        )
    if kind == "linear" and factor not in (0.0, 1.0):
        raise GGUFError(
            f"{where}: key {key!r} is {factor} with linear rotary scaling, which "
            "IRON's Llama does not run (it runs a factor of 1, or Llama 3's scaling)"
        )
    attn = m.get("llama.rope.scaling.attn_factor", "float", 1.0)
    if attn != 1.0:
        raise GGUFError(
            f"{where}: key 'llama.rope.scaling.attn_factor' is {attn}; IRON's Llama "
            "runs 1 only"
        )


#: Sane limits on header counts (bigger than any published Llama's by far).
MAX_LAYERS = 1024
MAX_WIDTH = 1 << 17
MAX_CONTEXT = 1 << 24
MAX_HEADS = 256
MAX_VOCAB = 1 << 22


def _check_limits(
    ck: GGUFCheckpoint, *, hidden: int, layers: int, context: int
) -> None:
    """Widths, layers and context checked before anything is sized by them:
    within sane limits, and the layer count the file's tensors hold."""
    where = f"GGUF file {str(ck.path)!r}"
    for key, value, limit in (
        ("llama.embedding_length", hidden, MAX_WIDTH),
        ("llama.block_count", layers, MAX_LAYERS),
        ("llama.context_length", context, MAX_CONTEXT),
    ):
        if not 1 <= value <= limit:
            raise GGUFError(
                f"{where}: key {key!r} is {value}, outside 1..{limit}: the file's "
                "header is damaged or lies"
            )
    found = {
        int(parts[1])
        for parts in (name.split(".", 2) for name in ck.tensors)
        if len(parts) == 3 and parts[0] == "blk" and parts[1].isdigit()
    }
    missing = sorted(set(range(layers)) - found)
    extra = sorted(found - set(range(layers)))
    if missing or extra:
        raise GGUFError(
            f"{where}: key 'llama.block_count' is {layers} but the file holds "
            + (f"no tensors for layers {missing[:8]}" if missing else "")
            + (" and " if missing and extra else "")
            + (f"tensors for layers {extra[:8]}" if extra else "")
        )


#: Llama 3's rotary scalings as Meta published them (factor, low, high,
#: original context): Llama 3.1 and 3.2 (1B, 3B) configs on the Hugging Face Hub.
_LLAMA3_SCALINGS = ((8.0, 1.0, 4.0, 8192), (32.0, 1.0, 4.0, 8192))


def _llama3_scaling(ck: GGUFCheckpoint, head_dim: int) -> RopeScaling | None:
    """Llama 3's scaling, recognised from llama.cpp's ``rope_freqs.weight``.

    llama.cpp writes the per-frequency divisors of Llama 3's rotary scaling
    as a tensor, not the config's four numbers; they are matched against the
    scalings Meta published and refused by name when none fits.
    """
    t = ck.tensors.get("rope_freqs.weight")
    if t is None:
        return None
    where = f"GGUF file {str(ck.path)!r}"
    if t.shape != (head_dim // 2,):
        raise GGUFError(
            f"{where}: tensor 'rope_freqs.weight' has shape {list(t.shape)}, not "
            f"[{head_dim // 2}]"
        )
    stored = ck.dequantized("rope_freqs.weight").reshape(-1).astype(np.float64)
    theta = ck.metadata.get("llama.rope.freq_base", "float", 10000.0)
    inv = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    wavelength = 2 * np.pi / inv
    for factor, low, high, original in _LLAMA3_SCALINGS:
        smooth = (original / wavelength - low) / (high - low)
        divisor = np.where(
            wavelength < original / high,
            1.0,
            np.where(
                wavelength > original / low,
                factor,
                1.0 / ((1 - smooth) / factor + smooth),
            ),
        )
        if np.allclose(stored, divisor, rtol=1e-4, atol=0):
            return RopeScaling(factor, low, high, original)
    raise GGUFError(
        f"{where}: tensor 'rope_freqs.weight' holds rotary divisors that match no "
        "Llama 3 scaling IRON knows (factor 8 or 32, low 1, high 4, original 8192)"
    )


# -- names ---------------------------------------------------------------------------------


def _hf_names(ck: GGUFCheckpoint) -> dict[str, tuple[str, int | None]]:
    """Hugging Face name -> (llama.cpp name, heads to un-permute by or None)."""
    c = ck.config
    out: dict[str, tuple[str, int | None]] = {}
    unknown = []
    for name in ck.tensors:
        if name == "rope_freqs.weight":
            continue  # read into the config's rope scaling
        if name in _GLOBAL_NAMES:
            out[_GLOBAL_NAMES[name]] = (name, None)
            continue
        parts = name.split(".", 2)
        if len(parts) == 3 and parts[0] == "blk" and parts[1].isdigit():
            hf = _LAYER_NAMES.get(parts[2])
            if hf is not None:
                heads = {
                    "attn_q.weight": c.num_attention_heads,
                    "attn_k.weight": c.num_key_value_heads,
                }.get(parts[2])
                out[f"model.layers.{int(parts[1])}.{hf}"] = (name, heads)
                continue
        unknown.append(name)
    if unknown:
        raise GGUFError(
            f"GGUF file {str(ck.path)!r} holds tensors IRON's Llama does not use: "
            + ", ".join(repr(n) for n in unknown[:8])
            + (" ..." if len(unknown) > 8 else "")
        )
    return out


def _check_finite(path: Path, name: str, piece: np.ndarray, first: int) -> None:
    """Refuse a dequantized bf16 piece holding NaN or infinity (all exponent
    bits set), as ``Checkpoint.check_finite`` refuses a safetensors weight."""
    bad = np.flatnonzero((piece.view(np.uint16) & 0x7F80) == 0x7F80)
    if bad.size:
        index = first + int(bad[0])
        raise NonFiniteWeightError(
            f"tensor {name!r} of GGUF file {str(path)!r} holds a non-finite value "
            f"at flat index {index}: {float(piece.reshape(-1)[bad[0]])} once "
            "dequantized to bfloat16. A model with it computes NaN; the file is "
            "damaged or was saved wrongly (re-download or re-export it)"
        )


def unpermute_rotary(weight: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's rotary permutation of a q or k projection's rows.

    ``weight`` is (heads * head_dim, in) as llama.cpp stores it; the result is
    Hugging Face's order (see the module docstring), as transformers'
    ``reverse_permute_weights`` computes it.
    """
    rows = weight.shape[0]
    if heads <= 0 or rows % (2 * heads):
        raise ValueError(
            f"a rotary projection of {rows} rows does not split into {heads} heads "
            "of an even width"
        )
    half = rows // heads // 2
    return (
        weight.reshape(heads, half, 2, *weight.shape[1:])
        .swapaxes(1, 2)
        .reshape(weight.shape)
    )
