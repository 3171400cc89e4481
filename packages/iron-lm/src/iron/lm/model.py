"""The Llama decoder as an ``iron.Graph``: two versions sharing one arena.

One body serves both versions. Given ``tokens`` (a prompt chunk of ``rows``
ids, the first ``n`` valid this call) it is the *prompt* version: embedding
rows gathered by id, every layer on ``rows`` rows with causal attention that
continues the KV cache from ``position``, logits for every row, and the next
token sampled from row ``n - 1``. Given no tensor it is the *decode* version:
the carried ``token`` embedded at ``position``, matrix-vector products,
attention over the first ``position + 1`` cache positions, the next token
sampled on the device. Both write the sampled token into ``generated`` at
the position it will take, and carry ``token``, ``position`` and ``n`` so a
device loop can run the decode version run after run.

Per layer: RMSNorm -> q/k/v projections -> RoPE (the cos/sin table held as a
weight, its rows taken at the position) -> K and V written into the layer's
cache state at the position -> attention -> output projection + residual ->
RMSNorm -> SwiGLU MLP + residual; then the final norm and the LM head (the
embedding when tied).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import numbers
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from ml_dtypes import bfloat16

import iron
import iron.core.held
from iron.core.device import DEVICES
from iron.lm.applications.llama import PROFILES, profiles_for
from iron.lm.config import LlamaConfig
from iron.lm.sizes import chunk_rows, padded_size, padded_tree
from iron.operators.activations import SiLUMul
from iron.operators.attention import CausalAttention, DecodeAttention
from iron.operators.binary import ElementwiseAdd
from iron.operators.matmul import GEMM, GEMV
from iron.operators.movers import Copy
from iron.operators.norms import RMSNorm
from iron.operators.qmatmul import QGEMM, QGEMV, DequantRows
from iron.operators.quantized import QuantFormat, format_of
from iron.operators.rope import RoPE, rope_table
from iron.operators.sample import MAX_TOP_K, Sample, temperature_code, top_p_code

if TYPE_CHECKING:
    from iron.lm.checkpoint import Checkpoint
    from iron.lm.gguf import GGUFCheckpoint
    from iron.lm.quantize import QuantizedCheckpoint

__all__ = [
    "BATCHES",
    "BATCH_ROWS",
    "MAX_SLOTS",
    "Attention",
    "Layer",
    "Linear",
    "Llama",
    "Mlp",
    "Model",
    "Norm",
]

#: The padded logits are floored over an aligned tail: elementwise steps take
#: whole 16-element tiles.
_FLOOR_ALIGN = 16

#: The rows a batched decode step may have (:meth:`Llama.body`).
BATCHES = (1, 2, 4, 8)

#: Rows every product of a batched decode step runs on: a device GEMM's M is
#: a multiple of twice the mmul's m (4 on AIE2 and AIE2P,
#: :func:`iron.operators.matmul.mmul_shape`), so a step of fewer rows pads to
#: 8 (the padding rows read zeros, or a larger step's stale rows; no row is
#: ever summed with another, so they change no other row's bits).
BATCH_ROWS = 8

#: The most slots a graph holds: the batched step's rows take one per-call
#: word each for the position, one for the length attended (``position + 1``).
MAX_SLOTS = BATCHES[-1]

#: ``top_p=1`` (keep every candidate) as the per-call code Sample reads.
_TOP_P_ONE = top_p_code(1.0)

logger = logging.getLogger("iron.lm")

#: The rotary frequencies old transformers versions saved per layer as a
#: buffer. transformers drops them on load, the table being computed from the
#: config (huggingface/transformers src/transformers/modeling_utils.py: "Old
#: checkpoints may have keys for rotary_emb.inv_freq for each layer", since
#: https://github.com/huggingface/transformers/pull/34858).
_INV_FREQ = re.compile(r"(^|\.)rotary_emb\.inv_freq$")


@dataclasses.dataclass
class Linear:
    """A Hugging Face ``nn.Linear`` without bias: its ``weight`` is (out, in)."""

    weight: np.ndarray

    @classmethod
    def declare(
        cls, out_features: int, in_features: int, fmt: QuantFormat | None = None
    ) -> Linear:
        """A linear layer whose weight ``load_state_dict`` binds: bf16 (out,
        in), or with ``fmt`` packed rows (out, row_bytes) uint8
        (:mod:`iron.operators.quantized`)."""
        return cls(_declared((out_features, in_features), fmt))


@dataclasses.dataclass
class Norm:
    """A Hugging Face ``LlamaRMSNorm``: its ``weight`` is (hidden,)."""

    weight: np.ndarray


@dataclasses.dataclass
class Attention:
    """A layer's attention weights and KV cache (Hugging Face's ``self_attn``)."""

    q_proj: Linear
    k_proj: Linear
    v_proj: Linear
    o_proj: Linear
    k_cache: iron.core.held.State | None
    v_cache: iron.core.held.State | None
    #: With slots: every slot's keys and values, ``(slots, 2, kv_heads,
    #: context, head_dim)``: a slot's values right after its keys, so one
    #: shim descriptor alternates them (its step reaches 2^20 words; the
    #: keys of every slot before the values would put them past it).
    kv_cache: iron.core.held.State | None = None

    @classmethod
    def declare(cls, c: LlamaConfig, context: int, slots: int = 1) -> Attention:
        """Weights to bind, and caches of ``context`` positions: a
        ``(kv_heads, context, head_dim)`` key cache and value cache, or with
        ``slots`` above 1 one :attr:`kv_cache` holding both for each slot."""
        q_out = c.num_attention_heads * c.head_dim
        kv_out = c.num_key_value_heads * c.head_dim
        shape = (c.num_key_value_heads, context, c.head_dim)
        linears = (
            Linear.declare(q_out, c.hidden_size),
            Linear.declare(kv_out, c.hidden_size),
            Linear.declare(kv_out, c.hidden_size),
            Linear.declare(c.hidden_size, q_out),
        )
        if slots > 1:
            both = iron.state((slots, 2, *shape), bfloat16)
            return cls(*linears, None, None, both)
        return cls(*linears, iron.state(shape, bfloat16), iron.state(shape, bfloat16))


@dataclasses.dataclass
class Mlp:
    """A layer's SwiGLU MLP weights (Hugging Face's ``mlp``)."""

    gate_proj: Linear
    up_proj: Linear
    down_proj: Linear

    @classmethod
    def declare(cls, c: LlamaConfig) -> Mlp:
        """Weights to bind, at the padded MLP width (:func:`~iron.lm.sizes.padded_size`)."""
        width = padded_size(c.intermediate_size)
        return cls(
            Linear.declare(width, c.hidden_size),
            Linear.declare(width, c.hidden_size),
            Linear.declare(c.hidden_size, width),
        )


@dataclasses.dataclass
class Layer:
    """One decoder layer (Hugging Face's ``model.layers.{i}``)."""

    input_layernorm: Norm
    self_attn: Attention
    post_attention_layernorm: Norm
    mlp: Mlp

    @classmethod
    def declare(cls, c: LlamaConfig, context: int, slots: int = 1) -> Layer:
        """Weights to bind, and caches of ``context`` positions (per slot)."""
        return cls(
            Norm(iron.param(c.hidden_size)),
            Attention.declare(c, context, slots),
            Norm(iron.param(c.hidden_size)),
            Mlp.declare(c),
        )


@dataclasses.dataclass
class Model:
    """Hugging Face's ``model``: embeddings, layers, final norm."""

    embed_tokens: Norm  # an nn.Embedding: its weight is (vocab, hidden)
    layers: list[Layer]
    norm: Norm

    @classmethod
    def declare(cls, c: LlamaConfig, context: int, slots: int = 1) -> Model:
        """Weights to bind, and caches of ``context`` positions (per slot)."""
        return cls(
            Norm(iron.param(padded_size(c.vocab_size), c.hidden_size)),
            [Layer.declare(c, context, slots) for _ in range(c.num_hidden_layers)],
            Norm(iron.param(c.hidden_size)),
        )


class Llama(iron.Graph):
    """A Llama decoder: prompt chunks and device-side decode steps.

    Weights are held at Hugging Face's names (``model.layers.3.mlp.up_proj.weight``)
    for ``load_state_dict``; the KV caches and the generated tokens are states.

    Args:
        config: The model's configuration.
        context: Positions the caches hold (at most the model's
            ``max_position_embeddings``).
        rows: Tokens in one prompt chunk (the prompt version's input length),
            a tuning knob: :func:`~iron.lm.sizes.chunk_rows` turns it into the nearest chunk
            every device runs (``graph.rows``), and longer prompts run in
            several chunks.
        temperature: Sampling temperature; 0 is greedy. This and ``top_k``
            and ``top_p`` are the defaults of each call: the graph reads them
            per call (``body``'s ``temperature``, ``top_k`` and ``top_p``,
            see :meth:`sampling`), so a call may change them without
            compiling anything.
        top_k: Candidates a draw is from: the ``top_k`` largest logits; None
            (the default) cuts nothing beyond the device sampler's own limit,
            the :data:`~iron.operators.sample.MAX_TOP_K` largest (or the whole
            vocabulary where it is smaller). Greedy decoding ignores it.
        top_p: Nucleus sampling: the draw keeps the fewest candidates whose
            probability mass reaches ``top_p`` (in ``(0, 1]``; 1, the
            default, keeps them all). Greedy decoding ignores it.
        profile: The tunables' profile (``Graph.profile``): by default the
            Llama application's shipped profiles directory
            (``iron/lm/applications/llama/profiles``, one ``<device>.json``
            per device, written by ``python -m iron.lm.tune llama``; for a
            Llama-3.2-3B or Llama-3.1-8B config its own subdirectory,
            :func:`~iron.lm.applications.llama.profiles_for`); a
            :class:`iron.Profile`, another directory, or None for each
            operator's own ``resolve()`` defaults.
        slots: Sequences whose KV caches the graph holds at once (1 to
            :data:`MAX_SLOTS`). With more than one, each layer's caches get
            a leading slot axis, the prompt and decode versions read and
            write slot ``slot`` (a per-call value), and the *batched decode*
            version runs one decode step for slots ``0 .. B - 1`` together
            (:meth:`body`): the weights are read once for the B rows.
    """

    #: The checkpoint :meth:`from_pretrained` loaded the weights from (set there).
    checkpoint: Checkpoint | GGUFCheckpoint | QuantizedCheckpoint

    def __init__(
        self,
        config: LlamaConfig,
        *,
        context: int | None = None,
        rows: int = 16,
        temperature: float = 0.0,
        top_k: int | None = None,
        top_p: float = 1.0,
        profile: iron.Profile | str | os.PathLike | None = PROFILES,
        slots: int = 1,
    ) -> None:
        _check_settings(context=context, rows=rows, slots=slots)
        context = min(
            context or config.max_position_embeddings, config.max_position_embeddings
        )
        if rows < 1:
            raise ValueError(
                f"a prompt chunk of rows={rows} must hold 1 or more tokens"
            )
        self.config = config
        self.context = context
        self.rows = chunk_rows(rows, context)
        _check_sampling(temperature, top_k, top_p, config.vocab_size)
        self._settings = (temperature, top_k, top_p)  # sampling()'s defaults
        self._defaults = self.sampling()
        self.temperature = float(temperature)
        # greedy: top_k 1 and top_p 1, whatever is asked (it reads neither)
        self.top_k = self._defaults["top_k"]
        self.top_p = float(top_p) if temperature else 1.0
        self.slots = int(slots)
        self.model = Model.declare(config, context, self.slots)
        if not config.tie_word_embeddings:
            self.lm_head = Linear.declare(
                padded_size(config.vocab_size), config.hidden_size
            )
        scaling = config.rope_scaling.to_dict() if config.rope_scaling else None
        self.rope = iron.param(
            rope_table(context, config.head_dim, config.rope_theta, scaling)
        )
        self.generated = iron.state((context + 1, 1), np.int32)
        self._declare_padded_logits()
        # The batched decode step's rows: its embedded tokens, rotary rows and
        # attention outputs, BATCH_ROWS of them (the rows a device GEMM takes
        # at least); a step of B rows writes the first B, written per row and
        # read as one block. Rows past B are never read into rows below it.
        width = config.num_attention_heads * config.head_dim
        self.batch_x = iron.state((BATCH_ROWS, config.hidden_size), bfloat16)
        self.batch_rope = iron.state(
            (BATCH_ROWS, *self.rope.shape[1:]), self.rope.dtype
        )
        self.batch_attention = iron.state((BATCH_ROWS, width), bfloat16)
        kv = (BATCH_ROWS, config.num_key_value_heads, config.head_dim)
        self.batch_k = iron.state(kv, bfloat16)
        self.batch_v = iron.state(kv, bfloat16)
        if isinstance(profile, os.PathLike) and profile == PROFILES:
            profile = profiles_for(config)  # a 3B or 8B config's own
        self.profile = profile

    @classmethod
    def from_pretrained(
        cls,
        directory: str | os.PathLike,
        *,
        context: int | None = None,
        rows: int = 16,
        temperature: float = 0.0,
        top_k: int | None = None,
        top_p: float = 1.0,
        weights: str | None = None,
        slots: int = 1,
    ) -> Llama:
        """A Llama graph with the weights of a Hugging Face checkpoint directory.

        ``directory`` may also be a GGUF file (or a directory holding exactly
        one ``.gguf`` and no config.json): see ``iron.lm.gguf``.

        ``weights`` is how the device holds the projections, the embedding
        and the LM head (``iron.lm.quantize``): ``"bf16"``; ``"q8"`` or
        ``"q4"``, a bf16 checkpoint quantized while loading, piece by piece
        (llama.cpp's Q8_0 and Q4_1 schemes, groups of 32); None (the
        default) is ``"bf16"`` for a safetensors checkpoint and, for a GGUF
        file, its own types (Q8_0, Q4_0, Q4_1, Q4_K, Q6_K kept quantized, Q5_K as bf16,
        repacked as uploaded; ``"bf16"`` dequantizes them instead). The
        projections read quantized weights with ``QGEMV``/``QGEMM``
        (``iron.operators.qmatmul``). ``slots`` is as for :class:`Llama`.

        Reads ``config.json`` and every ``*.safetensors`` shard memory-mapped
        and binds the tensors by their Hugging Face names through
        ``load_state_dict``; nothing is copied until a version uploads them.
        The open checkpoint is kept as ``graph.checkpoint`` so an upload can
        release its pages as it goes (``iron.lm.generate.Decoder`` does).

        Loads as transformers does: a tied config's stored ``lm_head.weight``
        is not used (the head is the embedding), and old per-layer
        ``rotary_emb.inv_freq`` buffers are ignored (the table comes from the
        config). Every floating weight is checked finite once narrowed to
        bf16, and narrowing float32/float16 weights is logged, as is a
        ``torch_dtype`` in config.json that the tensors disagree with.

        Raises:
            FileNotFoundError: No such directory, or no config.json or shards.
            ValueError: An unsupported architecture or setting (named), or
                tensors missing, extra or of the wrong shape (all named), or
                a ``weights`` that is none of the choices (or ``"q8"``/``"q4"``
                for a GGUF file, already quantized).
            TypeError: ``weights`` is not a string or None.
            iron.lm.fit.ModelTooLargeError: The weights, KV caches and
                loading's peak do not fit this machine's memory, or one
                buffer reaches 2^31 bytes (named, with the longest context
                that fits); checked before any tensor is read. A ValueError.
            iron.lm.checkpoint.NonFiniteWeightError: A weight holds NaN or
                infinity, or a float32 value beyond bf16's range (naming
                the tensor and the index). A ValueError.
        """
        from iron.lm.checkpoint import open_checkpoint
        from iron.lm.gguf import GGUFCheckpoint, find_gguf, open_gguf
        from iron.lm.quantize import check_weights, quantize_checkpoint

        # A .gguf file, or a directory holding one and no config.json, is
        # llama.cpp's format (its quantized tensors kept quantized).
        gguf = find_gguf(directory)
        check_weights(weights, gguf=gguf)
        checkpoint: Any = (
            open_checkpoint(directory) if gguf is None else open_gguf(gguf)
        )
        try:
            _check_fits(checkpoint, context, weights, gguf is not None)
            graph = cls(
                checkpoint.config,
                context=context,
                rows=rows,
                temperature=temperature,
                top_k=top_k,
                top_p=top_p,
                slots=slots,
            )
            if isinstance(checkpoint, GGUFCheckpoint):
                quantized = weights is None
                _declare_formats(graph, checkpoint.formats(quantized))
                tensors = dict(checkpoint.tree(quantized))
            else:
                tensors = _loadable(checkpoint)
                _report_dtypes(checkpoint, tensors)
                checkpoint.check_finite(tensors)
                if weights in ("q8", "q4"):
                    checkpoint = quantize_checkpoint(checkpoint, tensors, weights)
                    _declare_formats(graph, checkpoint.formats())
                    tensors = {**tensors, **checkpoint.packed()}
            graph.load_state_dict(tensors)
        except BaseException:
            checkpoint.close()
            raise
        graph.checkpoint = checkpoint
        return graph

    def __call__(self, *tensors: Any, **values: Any) -> Any:
        """Call the version matching ``tensors`` (see ``iron.Graph.__call__``).

        A graph loaded by :meth:`from_pretrained` first checks that its
        checkpoint's shards are the files it mapped: a call after
        ``release()`` uploads the weights again from the mapping.

        Raises:
            iron.lm.checkpoint.CheckpointChangedError: A shard changed on disk.
        """
        self._verify_checkpoint()
        return super().__call__(*tensors, **{**self._defaults, **values})

    def reference(self, *tensors: Any, dev: Any = None, **values: Any) -> Any:
        """The host reference (see ``iron.Graph.reference``), reading the mapped
        weights only if the checkpoint's shards are unchanged."""
        self._verify_checkpoint()
        return super().reference(*tensors, dev=dev, **{**self._defaults, **values})

    def sampling(
        self,
        *,
        temperature: float | None = None,
        top_k: int | None = None,
        top_p: float | None = None,
    ) -> dict[str, int]:
        """The per-call values that make a call sample with these settings.

        A setting left None is this graph's own (as constructed; its
        ``top_k`` None is off, the sampler's limit). Greedy (``temperature=0``)
        reads neither ``top_k`` nor ``top_p`` and gives both as 1. Pass the
        result to a call (``graph(chunk, position=0, **graph.sampling(...))``
        or a compiled version's): the settings are per-call values, so
        changing them compiles nothing.

        Returns:
            ``{"temperature": ..., "top_k": ..., "top_p": ...}``, the codes
            :class:`~iron.operators.sample.Sample` reads
            (:func:`~iron.operators.sample.temperature_code`,
            :func:`~iron.operators.sample.top_p_code`).

        Raises:
            TypeError: A setting of the wrong type (named).
            ValueError: ``temperature`` is negative or not finite, ``top_p``
                is not in ``(0, 1]``, or ``top_k`` is below 1 or above the
                device sampler's limit (``min(256, vocab)``); named, before
                anything runs.
        """
        own_t, own_k, own_p = self._settings
        temperature = own_t if temperature is None else temperature
        top_k = own_k if top_k is None else top_k
        top_p = own_p if top_p is None else top_p
        _check_sampling(temperature, top_k, top_p, self.config.vocab_size)
        if temperature == 0:
            return {"temperature": 0, "top_k": 1, "top_p": _TOP_P_ONE}
        limit = min(MAX_TOP_K, self.config.vocab_size)
        return {
            "temperature": temperature_code(temperature),
            "top_k": limit if top_k is None else int(top_k),
            "top_p": top_p_code(top_p),
        }

    def _verify_checkpoint(self) -> None:
        checkpoint = self.__dict__.get("checkpoint")
        if checkpoint is not None:
            checkpoint.verify()

    def load_state_dict(self, tree: Any, *, path: str = "") -> None:
        """Bind the weights (see ``iron.Graph.load_state_dict``), padded.

        An MLP width or a vocabulary that is not a multiple of
        :data:`~iron.lm.sizes.PAD_MULTIPLE` is held padded with zeros (:func:`~iron.lm.sizes.padded_size`):
        the embedding's and the LM head's rows, the gate and up projections'
        rows and the down projection's columns are copied into zeroed bf16
        arrays of the padded shape; every other tensor binds as it is.
        """
        super().load_state_dict(padded_tree(self.config, tree, path), path=path)

    @property
    def head(self) -> np.ndarray:
        """The LM head's (vocab, hidden) weight: the embedding when tied
        (padded to :func:`~iron.lm.sizes.padded_size` rows)."""
        if self.config.tie_word_embeddings:
            return self.model.embed_tokens.weight
        return self.lm_head.weight

    def body(
        self,
        tokens=None,
        *,
        token: iron.Carried[int] = 0,
        position: iron.Carried[int] = 0,
        n: iron.Carried[int] = 1,
        seed: iron.Carried[int] = 0,
        temperature: iron.Carried[int] = 0,
        top_k: iron.Carried[int] = 1,
        top_p: iron.Carried[int] = _TOP_P_ONE,
        slot: iron.Scratchpad[int] = 0,
        position1: iron.Scratchpad[int] = 0,
        position2: iron.Scratchpad[int] = 0,
        position3: iron.Scratchpad[int] = 0,
        position4: iron.Scratchpad[int] = 0,
        position5: iron.Scratchpad[int] = 0,
        position6: iron.Scratchpad[int] = 0,
        position7: iron.Scratchpad[int] = 0,
    ):
        """The three versions, chosen by ``tokens``.

        - None: the decode step of slot ``slot``: the carried ``token`` at
          ``position``, the next token sampled on the device.
        - ``(rows,)`` ids: a prompt chunk of slot ``slot`` from ``position``,
          ``n`` of them valid.
        - ``(B, 1)`` ids (B in :data:`BATCHES`, at most ``slots``): the
          batched decode step, row ``i`` slot ``i``'s last token at its
          position (``position`` for row 0, ``position1`` ... for the
          others). It returns the ``(B, vocab)`` logits; the host draws each
          row's token (:func:`iron.operators.sample.draw`, the draw the
          device's Sample makes), so each row keeps its own sampling
          settings. Row ``i``'s logits have the bits the decode step of
          slot ``i`` alone gives at that position.
        """
        draw = {"temperature": temperature, "top_k": top_k, "top_p": top_p}
        if tokens is None:
            return self._decode(token, position, seed, draw, slot)
        if tokens.ndim == 2:
            rest = (position1, position2, position3, position4)
            rest += (position5, position6, position7)
            logits = self._batched(tokens, (position, *rest))
            # nothing to carry: the host samples and feeds each row again
            return logits, iron.carry(
                token=token, position=position, n=n, seed=seed, **draw
            )
        return self._prompt(tokens, position, n, seed, draw, slot)

    def _caches(self, attn: Attention, slot: Any) -> tuple[Any, Any]:
        """A layer's key and value caches of ``slot``, ``(kv_heads, context,
        head_dim)`` each (the only ones when the graph holds one slot)."""
        if attn.kv_cache is None:
            return attn.k_cache, attn.v_cache
        return attn.kv_cache[slot, 0], attn.kv_cache[slot, 1]

    # -- the prompt version ------------------------------------------------------

    def _prompt(
        self,
        tokens: Any,
        position: Any,
        n: Any,
        seed: Any,
        draw: dict[str, Any],
        slot: Any = 0,
    ) -> Any:
        c = self.config
        rows = tokens.shape[0]
        # (rows, hidden), n valid
        x = _embed(self.model.embed_tokens.weight, tokens[:n], c.hidden_size)
        cos_sin = self.rope[position : position + rows]
        for layer in self.model.layers:
            x = self.prompt_layer(layer, x, cos_sin, position, rows, slot)
        h = RMSNorm.step(x, weight=self.model.norm.weight, eps=c.rms_norm_eps)
        logits = self._head_logits(h)  # (rows, padded vocab)
        last = self._sampled(logits[n - 1], copy=True)
        token = Sample.step(last, seed=seed + position + n, **draw)
        Copy.step(token, out=self.generated[position + n])
        if padded_size(c.vocab_size) != c.vocab_size:
            logits = logits[:n, : c.vocab_size]  # the state's rows, n valid
        return logits, iron.carry(
            token=token, position=position + n, n=1, seed=seed, **draw
        )

    # -- a padded vocabulary ----------------------------------------------------

    def _declare_padded_logits(self) -> None:
        """States the LM head writes when the vocabulary is padded, and the floor.

        A padded vocabulary's extra logits are 0 (zero weights), which a draw
        could pick. Before sampling, the aligned tail of the sampled logits
        from the last multiple of ``_FLOOR_ALIGN`` (16) on gets ``floor``
        added: 0 for the vocabulary's own logits (unchanged) and bf16's
        lowest finite value for the padded ones, which no draw then picks.
        The logits returned are the vocabulary's own.
        """
        vocab = self.config.vocab_size
        wide = padded_size(vocab)
        if wide == vocab:
            return
        self.prompt_logits = iron.state((self.rows, wide), bfloat16)
        self.decode_logits = iron.state((wide,), bfloat16)
        start = vocab // _FLOOR_ALIGN * _FLOOR_ALIGN
        floor = np.zeros(wide - start, bfloat16)
        floor[vocab - start :] = np.finfo(bfloat16).min
        self.logits_floor = iron.param(floor)

    def _head_logits(self, h: Any) -> Any:
        """The LM head over ``h``, (rows, hidden) or (hidden,): padded logits
        are written to the padded vocabulary's states."""
        vocab = self.config.vocab_size
        padded = padded_size(vocab) != vocab
        if h.ndim == 1:
            if not padded:
                return _vector(self.head, h)
            _vector(self.head, h, out=self.decode_logits)
            return self.decode_logits
        if not padded:
            return _rows(h, self.head)
        _rows(h, self.head, out=self.prompt_logits)
        return self.prompt_logits

    def _sampled(self, row: Any, *, copy: bool) -> Any:
        """The (padded vocab,) logits ``row`` to sample from, padded ones floored.

        ``copy``: ``row`` is not the decode state yet (a prompt row) and is
        copied there first, so the prompt's returned logits stay as computed.
        """
        vocab = self.config.vocab_size
        if padded_size(vocab) == vocab:
            return row
        if copy:
            Copy.step(row, out=self.decode_logits)
        tail = self.decode_logits[vocab // _FLOOR_ALIGN * _FLOOR_ALIGN :]
        Copy.step(ElementwiseAdd.step(tail, self.logits_floor), out=tail)
        return self.decode_logits

    def prompt_layer(
        self,
        layer: Layer,
        x: Any,
        cos_sin: Any,
        position: Any,
        rows: int,
        slot: Any = 0,
    ) -> Any:
        """Record one decoder layer over a prompt chunk of ``rows`` tokens.

        ``x`` is the chunk's ``(rows, hidden)`` activations, ``cos_sin`` the
        rotary table's rows for its positions and ``position`` the cache
        position of its first row (a per-call value): the chunk's keys and
        values are written to the layer's caches (of ``slot``, when the
        graph holds several) there. Returns the layer's
        output, ``(rows, hidden)``. The prompt version calls it per layer;
        a graph of another prompt layout (the prefill benchmark's wide
        chunks) can too.
        """
        c = self.config
        attn = layer.self_attn
        h = RMSNorm.step(x, weight=layer.input_layernorm.weight, eps=c.rms_norm_eps)
        q = _rows(h, attn.q_proj.weight)
        k = _rows(h, attn.k_proj.weight)
        v = _rows(h, attn.v_proj.weight)
        q = RoPE.step(q.reshape(rows, c.num_attention_heads, c.head_dim), cos_sin)
        k = RoPE.step(k.reshape(rows, c.num_key_value_heads, c.head_dim), cos_sin)
        v = v.reshape(rows, c.num_key_value_heads, c.head_dim)
        window = slice(position, position + rows)
        k_cache, v_cache = self._caches(attn, slot)
        _write_cache(k_cache, k, window)
        _write_cache(v_cache, v, window)
        o = CausalAttention.step(q, k_cache, v_cache, start=position)
        return self._tail(layer, x, o.reshape(rows, -1))

    def _tail(self, layer: Layer, x: Any, attended: Any) -> Any:
        """A layer's rows after attention: ``attended``'s projection added to
        ``x``, then the MLP block and its residual (a prompt chunk's and a
        batched decode step's, which differ only before)."""
        c = self.config
        rows = attended.shape[0]
        x = _add(x, _rows(attended, layer.self_attn.o_proj.weight))
        h = RMSNorm.step(
            x, weight=layer.post_attention_layernorm.weight, eps=c.rms_norm_eps
        )
        mlp = layer.mlp
        gate = _rows(h, mlp.gate_proj.weight)
        up = _rows(h, mlp.up_proj.weight)
        act = SiLUMul.step(gate.reshape(-1), up.reshape(-1)).reshape(rows, -1)
        return _add(x, _rows(act, mlp.down_proj.weight))

    # -- the decode version --------------------------------------------------------

    def _decode(
        self,
        token: Any,
        position: Any,
        seed: Any,
        draw: dict[str, Any],
        slot: Any = 0,
    ) -> Any:
        c = self.config
        x = _embed(self.model.embed_tokens.weight, token, c.hidden_size)  # (hidden,)
        cos_sin = self.rope[position : position + 1]
        for layer in self.model.layers:
            x = self._decode_layer(layer, x, cos_sin, position, slot)
        h = RMSNorm.step(
            x.reshape(1, -1), weight=self.model.norm.weight, eps=c.rms_norm_eps
        )
        logits = self._head_logits(h.reshape(-1))  # (padded vocab,)
        nxt = Sample.step(
            self._sampled(logits, copy=False), seed=seed + position + 1, **draw
        )
        Copy.step(nxt, out=self.generated[position + 1])
        return logits[: c.vocab_size], iron.carry(
            token=nxt, position=position + 1, n=1, seed=seed, **draw
        )

    def _decode_layer(
        self, layer: Layer, x: Any, cos_sin: Any, position: Any, slot: Any = 0
    ):
        c = self.config
        attn = layer.self_attn
        h = RMSNorm.step(
            x.reshape(1, -1), weight=layer.input_layernorm.weight, eps=c.rms_norm_eps
        ).reshape(-1)
        q = _vector(attn.q_proj.weight, h)
        k = _vector(attn.k_proj.weight, h)
        v = _vector(attn.v_proj.weight, h)
        q = RoPE.step(q.reshape(1, c.num_attention_heads, c.head_dim), cos_sin)
        k = RoPE.step(k.reshape(1, c.num_key_value_heads, c.head_dim), cos_sin)
        v = v.reshape(1, c.num_key_value_heads, c.head_dim)
        at = slice(position, position + 1)
        k_cache, v_cache = self._caches(attn, slot)
        _write_cache(k_cache, k, at)
        _write_cache(v_cache, v, at)
        o = DecodeAttention.step(
            q.reshape(c.num_attention_heads, c.head_dim),
            k_cache,
            v_cache,
            length=position + 1,
        )
        o = _vector(attn.o_proj.weight, o.reshape(-1))
        x = ElementwiseAdd.step(x, o)
        h = RMSNorm.step(
            x.reshape(1, -1),
            weight=layer.post_attention_layernorm.weight,
            eps=c.rms_norm_eps,
        ).reshape(-1)
        mlp = layer.mlp
        act = SiLUMul.step(
            _vector(mlp.gate_proj.weight, h), _vector(mlp.up_proj.weight, h)
        )
        return ElementwiseAdd.step(x, _vector(mlp.down_proj.weight, act))

    # -- the batched decode version -----------------------------------------------

    def _batched(self, tokens: Any, positions: tuple[Any, ...]) -> Any:
        """One decode step of slots ``0 .. B - 1``: ``tokens`` is ``(B, 1)``.

        Every projection is one skinny GEMM over the B rows (the weights are
        streamed once for all of them); a GEMM row has the bits of GEMV on
        that row (``iron.operators.matvec.matvecs``), and attention runs per
        row on its own slot's cache at its own length, so row ``i`` is the
        decode step of slot ``i`` alone, bit for bit.
        """
        c = self.config
        batch = tokens.shape[0]
        if tokens.shape[1:] != (1,) or batch not in BATCHES or batch > self.slots:
            raise ValueError(
                f"the batched decode step takes (B, 1) token ids with B in "
                f"{BATCHES} and at most slots={self.slots}, got {tokens.shape}; "
                f"pad the batch to the next size (idle rows decode a free slot)"
            )
        positions = positions[:batch]
        # the gather first: the host gathers an input's rows before the run
        x = _embed(self.model.embed_tokens.weight, tokens.reshape(-1), c.hidden_size)
        for i, position in enumerate(positions):  # each row's rotary row
            Copy.step(
                self.rope[position : position + 1], out=self.batch_rope[i : i + 1]
            )
        Copy.step(x, out=self.batch_x[:batch])
        x = self.batch_x[:]  # (BATCH_ROWS, hidden), the first ``batch`` this step's
        for layer in self.model.layers:
            x = self._batched_layer(layer, x, positions)
        h = RMSNorm.step(x, weight=self.model.norm.weight, eps=c.rms_norm_eps)
        logits = _rows(h, self.head)  # (BATCH_ROWS, padded vocab)
        return logits[:batch, : c.vocab_size]

    def _batched_layer(self, layer: Layer, x: Any, positions: tuple[Any, ...]) -> Any:
        c = self.config
        attn = layer.self_attn
        rows = BATCH_ROWS
        cos_sin = self.batch_rope[:]
        h = RMSNorm.step(x, weight=layer.input_layernorm.weight, eps=c.rms_norm_eps)
        q = _rows(h, attn.q_proj.weight)
        k = _rows(h, attn.k_proj.weight)
        # the keys and values go to the step's rows (states), then each row
        # to its slot's cache (a mover reads a row of a state at its offset)
        _rows(h, attn.v_proj.weight, out=self.batch_v[:].reshape(rows, -1))
        q = RoPE.step(q.reshape(rows, c.num_attention_heads, c.head_dim), cos_sin)
        RoPE.step(
            k.reshape(rows, c.num_key_value_heads, c.head_dim),
            cos_sin,
            out=self.batch_k[:],
        )
        heads = (rows, c.num_attention_heads, c.head_dim)
        out = self.batch_attention[:].reshape(heads)
        for i, position in enumerate(positions):
            k_cache, v_cache = self._caches(attn, i)
            at = slice(position, position + 1)
            row = slice(i, i + 1)
            _write_cache(k_cache, self.batch_k[row], at)
            _write_cache(v_cache, self.batch_v[row], at)
            DecodeAttention.step(
                q[i], k_cache, v_cache, length=position + 1, out=out[i]
            )
        return self._tail(layer, x, self.batch_attention[:])


#: Bytes one step of a shim buffer descriptor spans, on every known device
#: (20-bit steps in 4-byte words: 4 MiB; iron.core.device).
_STEP_BYTES = min(d.dma_granule_bytes << d.dma_stride_bits for d in DEVICES.values())


def _write_cache(cache: Any, kv: Any, window: slice) -> None:
    """Write ``kv`` ``(rows, kv_heads, head_dim)`` into ``cache[:, window]``.

    One Copy moves every kv head's rows when the cache's step from one kv
    head to the next (``context * head_dim`` bf16) is within one descriptor
    step; a longer cache (8B's 128-wide heads past 16384 positions, 1B's
    64-wide ones from 32768) is written a kv head at a time, each a
    contiguous run of rows, so no walk steps past the shim's limit.
    """
    heads, context, dim = cache.shape
    if context * dim * np.dtype(bfloat16).itemsize < _STEP_BYTES:
        Copy.step(kv.transpose(1, 0, 2), out=cache[:, window])
        return
    rows = kv.shape[0]
    flat = kv.reshape(heads, dim) if rows == 1 else None  # one position
    for h in range(heads):
        Copy.step(kv[:, h] if flat is None else flat[h : h + 1], out=cache[h, window])


def _check_fits(checkpoint: Any, context: Any, weights: Any, gguf: bool) -> None:
    """Refuse a model or context the machine cannot hold, before it loads
    (:func:`iron.lm.fit.check_fits`)."""
    from iron.lm.fit import check_fits

    _check_settings(context=context, rows=1)
    config = checkpoint.config
    positions = min(
        context or config.max_position_embeddings, config.max_position_embeddings
    )
    if gguf:
        formats: Any = checkpoint.formats(weights is None)
    else:
        formats = weights or "bf16"
    check_fits(config, positions, formats)


def _check_settings(*, context: Any, rows: Any, slots: Any = 1) -> None:
    """Refuse shape settings of the wrong type rather than coerce them."""
    takes = {
        "context": "a positive int (cache positions) or None",
        "rows": "a positive int (tokens per prompt chunk)",
        "slots": f"an int in [1, {MAX_SLOTS}] (sequences held at once)",
    }
    for name, value in {"context": context, "rows": rows, "slots": slots}.items():
        if value is None and name == "context":
            continue
        if not _is_int(value):
            raise TypeError(f"{name} takes {takes[name]}, got {value!r}")
        if value < 1 and name != "rows":  # rows: checked against the context
            raise ValueError(f"{name} takes {takes[name]}, got {value!r}")
    if slots > MAX_SLOTS:
        raise ValueError(f"slots takes {takes['slots']}, got {slots!r}")


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check_sampling(temperature: Any, top_k: Any, top_p: Any, vocab: int) -> None:
    """Refuse sampling settings of the wrong type or out of range, by name.

    ``top_k=2.5`` or ``temperature=None`` would otherwise reach the sampler
    as something else; each is named with what it takes.
    """
    limit = min(MAX_TOP_K, vocab)
    takes = {
        "top_k": f"an int in [1, {limit}] (candidates a token is drawn from; "
        f"the device sampler holds at most {limit}) or None (off)",
        "temperature": "a finite number >= 0 (0 is greedy)",
        "top_p": "a number in (0, 1] (the probability mass kept; 1 keeps all)",
    }
    if top_k is not None:
        if not _is_int(top_k):
            raise TypeError(f"top_k takes {takes['top_k']}, got {top_k!r}")
        if not 1 <= top_k <= limit:
            raise ValueError(f"top_k takes {takes['top_k']}, got {top_k!r}")
    for name, value in (("temperature", temperature), ("top_p", top_p)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{name} takes {takes[name]}, got {value!r}")
    if not math.isfinite(temperature) or temperature < 0:
        raise ValueError(
            f"temperature takes {takes['temperature']}, got {temperature!r}"
        )
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p takes {takes['top_p']}, got {top_p!r}")
    if temperature:
        try:
            temperature_code(temperature)
        except ValueError as e:
            raise ValueError(f"temperature takes {takes['temperature']}: {e}") from None


def _loadable(checkpoint: Checkpoint) -> dict[str, np.ndarray]:
    """The checkpoint's tensors that bind, as transformers loads them.

    A tied config's ``lm_head.weight`` is dropped: transformers ties the head
    to the embedding after loading (``PreTrainedModel.tie_weights``), so the
    stored copy is not used. Per-layer ``rotary_emb.inv_freq`` buffers are
    dropped as transformers drops them.
    """
    tensors = dict(checkpoint.tree())
    dropped = [n for n in tensors if _INV_FREQ.search(n)]
    if checkpoint.config.tie_word_embeddings and "lm_head.weight" in tensors:
        dropped.append("lm_head.weight")
        logger.info(
            "%s: tie_word_embeddings is true, so the stored lm_head.weight is not "
            "used: the head is model.embed_tokens.weight, as in transformers",
            checkpoint.directory,
        )
    if any(_INV_FREQ.search(n) for n in dropped):
        logger.info(
            "%s: ignoring old rotary_emb.inv_freq buffers (the rotary table comes "
            "from config.json), as transformers does",
            checkpoint.directory,
        )
    for name in dropped:
        del tensors[name]
    return tensors


def _report_dtypes(checkpoint: Checkpoint, tensors: Mapping[str, np.ndarray]) -> None:
    """Log narrowing to bf16, and a torch_dtype the tensors disagree with."""
    stored: dict[str, int] = {}
    for tensor in tensors.values():
        kind = tensor.dtype
        if kind.kind in "fV":
            label = _dtype_label(kind)
            stored[label] = stored.get(label, 0) + 1
    narrowed = {k: n for k, n in stored.items() if k != "bfloat16"}
    if narrowed:
        logger.info(
            "%s: narrowing %s weights to bfloat16 (the NPU computes in bf16) as "
            "they are uploaded",
            checkpoint.directory,
            " and ".join(f"{n} {k}" for k, n in sorted(narrowed.items())),
        )
    said = checkpoint.config.dtype
    if said is not None and stored and set(stored) != {said}:
        logger.warning(
            "%s: config.json says torch_dtype %r, but the tensors' headers hold %s; "
            "the headers are what is read",
            checkpoint.directory,
            said,
            ", ".join(f"{n} {k}" for k, n in sorted(stored.items())),
        )


def _dtype_label(dtype: np.dtype) -> str:
    """A float dtype as torch names it (``bfloat16``, ``float32``)."""
    return "bfloat16" if dtype == np.dtype(bfloat16) else str(dtype)


# -- projections: bf16 or quantized weights ------------------------------------------


def _declared(shape: tuple[int, int], fmt: QuantFormat | None) -> np.ndarray:
    """A weight to bind: bf16 ``shape``, or ``fmt``'s packed rows (uint8)."""
    if fmt is None:
        return iron.param(*shape)
    return iron.param(shape[0], fmt.row_bytes(shape[1]), dtype=np.uint8)


def _is_packed(weight: Any) -> bool:
    return np.dtype(weight.dtype) == np.uint8


def _vector(weight: Any, x: Any, out: Any = None) -> Any:
    """``weight @ x`` (decode): GEMV, or QGEMV when the weight is packed."""
    if _is_packed(weight):
        return QGEMV.step(weight, x, out=out)
    return GEMV.step(weight, x, out=out)


def _rows(h: Any, weight: Any, out: Any = None) -> Any:
    """``h @ weight.T`` (a prompt chunk): GEMM, or QGEMM when it is packed."""
    if _is_packed(weight):
        return QGEMM.step(h, weight, out=out)
    return GEMM.step(h, weight, b_transposed=True, out=out)


def _embed(table: Any, ids: Any, hidden: int) -> Any:
    """The embedding rows of ``ids``: copied, or when packed their packed rows
    copied and dequantized (a row's bytes, never the table's)."""
    if not _is_packed(table):
        return Copy.step(table[ids])
    fmt = format_of(hidden, int(table.shape[-1]))
    rows = Copy.step(table[ids])  # the packed rows gathered (a mover reads a gather)
    if len(rows.shape) == 1:  # one token: a row of the table
        return DequantRows.step(
            rows.reshape(1, -1), K=hidden, bits=fmt.bits, group=fmt.group
        ).reshape(-1)
    return DequantRows.step(rows, K=hidden, bits=fmt.bits, group=fmt.group)


def _declare_formats(graph: Llama, formats: Mapping[str, QuantFormat | None]) -> None:
    """Declare each weight ``formats`` quantizes as its packed rows instead.

    ``formats`` maps Hugging Face names (``model.layers.0.mlp.up_proj.weight``)
    to a format, or None for bf16; a tied head is the embedding, so it
    follows the embedding's.
    """
    for name, fmt in formats.items():
        if fmt is None:
            continue
        *path, leaf = name.split(".")
        node: Any = graph
        for part in path:
            node = node[int(part)] if part.isdigit() else getattr(node, part, None)
            if node is None:
                break
        if node is None or not hasattr(node, leaf):
            continue  # not held (a tied config's stored lm_head): left to binding
        shape = tuple(getattr(node, leaf).shape)
        if len(shape) == 2:
            setattr(node, leaf, _declared((shape[0], shape[1]), fmt))


def _add(a: Any, b: Any) -> Any:
    """A residual add of two (rows, hidden) handles, as one flat elementwise step."""
    return ElementwiseAdd.step(a.reshape(-1), b.reshape(-1)).reshape(a.shape)
