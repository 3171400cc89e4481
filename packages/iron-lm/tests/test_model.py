"""The Llama graph and loading: one arena, device = reference, errors, memory.

The device runs (the emulated npu1 and npu2) are compared bit for bit with
``graph.reference`` of a second graph loaded from the same checkpoint: the
host computation through each operator's reference, with its own KV cache.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from lm_support import (
    CONTEXT,
    ROWS,
    bits,
    chunk_of,
    prompt_ids,
    reference_graph,
    write_tiny,
)

import iron
from iron.lm import tiny
from iron.lm.checkpoint import Checkpoint, open_checkpoint, save_checkpoint
from iron.lm.config import LlamaConfig, UnsupportedModelError
from iron.lm.generate import Decoder
from iron.lm.model import Llama

# -- the graph ------------------------------------------------------------------------


def test_rows_and_context_are_checked() -> None:
    config = LlamaConfig.tiny()
    graph = Llama(config, context=10_000, rows=16)
    assert graph.context == config.max_position_embeddings  # clipped to the model's
    # rows is a knob: more than the context holds runs as the largest chunk
    assert Llama(config, context=64, rows=65).rows == 16
    with pytest.raises(ValueError, match="rows=0"):
        Llama(config, context=64, rows=0)


@pytest.mark.parametrize("device", ["npu1", "npu2"])
def test_both_versions_share_one_arena_plan(decoders, device) -> None:
    decoder = decoders("tied", device)
    prompt, decode = decoder.prompt, decoder.decode
    assert prompt.arena is decode.arena
    # the graph's arena took both plans' layouts (each plan keeps a snapshot)
    arena = prompt.arena.plan
    assert set(arena.versions) == {prompt.plan.version, decode.plan.version}
    graph = decoder.graph
    held = {
        "model.embed_tokens.weight",
        "model.norm.weight",
        "rope",
        "generated",
        *(
            f"model.layers.{i}.self_attn.{cache}"
            for i in range(graph.config.num_hidden_layers)
            for cache in ("k_cache", "v_cache", "q_proj.weight", "o_proj.weight")
        ),
    }
    assert held <= set(arena.residents)
    p, d = arena.versions[prompt.plan.version], arena.versions[decode.plan.version]
    for name, place in arena.residents.items():
        assert p[name].offset == d[name].offset == place.offset, name
        assert p[name].nbytes == d[name].nbytes == place.nbytes, name
    # every weight once, at its own bytes: the tied head is the embedding
    spans = sorted((r.offset, r.end) for r in arena.residents.values())
    assert all(a_end <= b for (_, a_end), (b, _) in zip(spans, spans[1:]))
    assert "lm_head.weight" not in arena.residents
    assert arena.size <= decoder.prompt.arena.nbytes


@pytest.mark.parametrize(
    ("variant", "device"),
    [("tied", "npu2"), ("untied", "npu2"), ("llama3", "npu2"), ("tied", "npu1")],
)
def test_device_equals_reference_bit_for_bit(checkpoints, variant, device) -> None:
    """Prompt chunks at several positions and n, decode steps between them."""
    directory = checkpoints(variant)
    decoder = Decoder.from_pretrained(
        directory, device=device, context=CONTEXT, rows=ROWS, progress=False
    ).compile()
    graph = reference_graph(directory)
    ids = prompt_ids(40, seed=1)
    # (start, n) of a prompt chunk, or None for a decode step from the carry
    calls = [(0, 16), (16, 16), (32, 5), None, None, None]  # 37 ids, then 3 steps
    calls += [(0, 1), None, None, (3, 9), None, (13, 2), None]  # restarted
    seed = 5
    carry_d = carry_r = None
    with iron.use_device(device):
        for call in calls:
            if call is None:
                values = {
                    "token": int(carry_d["token"]),
                    "position": int(carry_d["position"]),
                    "seed": seed,
                }
                out_d, carry_d = decoder.decode(n=1, **values)
                out_r, carry_r = graph.reference(n=1, **values)
                assert out_d.shape == (graph.config.vocab_size,)
            else:
                start, n = call
                chunk = chunk_of(ids, start, n)
                out_d, carry_d = decoder.prompt(
                    chunk, token=0, position=start, n=n, seed=seed
                )
                out_r, carry_r = graph.reference(
                    chunk, token=0, position=start, n=n, seed=seed
                )
                assert out_d.shape[0] == n  # the logits of the n valid rows
            assert out_d.dtype == out_r.dtype
            np.testing.assert_array_equal(bits(out_d), bits(out_r), err_msg=str(call))
            assert dict(carry_d) == dict(carry_r), call
    # what the device holds across calls: every cache and the generated ids
    for layer_d, layer_r in zip(decoder.graph.model.layers, graph.model.layers):
        for name in ("k_cache", "v_cache"):
            got = decoder.decode.read(getattr(layer_d.self_attn, name))
            want = getattr(layer_r.self_attn, name).host
            np.testing.assert_array_equal(bits(got), bits(want), err_msg=name)
    got = decoder.decode.read(decoder.graph.generated)
    np.testing.assert_array_equal(got, graph.generated.host)


def test_logits_equal_the_reference_over_the_same_chunks(checkpoint) -> None:
    decoder = Decoder.from_pretrained(
        checkpoint, device="npu2", context=CONTEXT, rows=ROWS, progress=False
    )
    graph = reference_graph(checkpoint)
    ids = prompt_ids(37, seed=2)  # chunks of 16, 16 and 5
    got = decoder.logits(ids.tolist())
    assert got.dtype == np.float32
    assert got.shape == (37, graph.config.vocab_size)
    want = []
    with iron.use_device("npu2"):
        for start in range(0, len(ids), ROWS):
            n = min(ROWS, len(ids) - start)
            logits, _ = graph.reference(
                chunk_of(ids, start, n), token=0, position=start, n=n
            )
            want.append(np.asarray(logits, np.float32)[:n])
    np.testing.assert_array_equal(bits(got), bits(np.concatenate(want)))
    # Each row depends on the ids up to it alone (causal, the padding unseen),
    # to a bf16 rounding: a chunk of fewer valid rows may sum in another order.
    for length in (20, 1):
        np.testing.assert_allclose(
            decoder.logits(ids[:length]), got[:length], rtol=0, atol=2**-7
        )


def test_logits_refuse_bad_input(decoders) -> None:
    decoder = decoders("tied", "npu2")
    limit = CONTEXT - ROWS
    with pytest.raises(ValueError, match=f"context of {CONTEXT}.*\\({limit}\\)"):
        decoder.logits([5] * (limit + 1))
    with pytest.raises(ValueError, match="no tokens"):
        decoder.logits([])
    with pytest.raises(ValueError, match=r"token id 512 .*\[0, 512\)"):
        decoder.logits([3, 512])
    with pytest.raises(ValueError, match="token id -1"):
        decoder.logits([-1])
    assert decoder.logits([5] * limit).shape == (limit, 512)


# -- loading ----------------------------------------------------------------------------


def test_from_pretrained_binds_hugging_face_names(checkpoint) -> None:
    decoder = Decoder.from_pretrained(checkpoint, device="npu2", progress=False)
    ck = open_checkpoint(checkpoint)
    graph = decoder.graph
    layer = graph.model.layers[1]
    pairs = {
        "model.embed_tokens.weight": graph.model.embed_tokens.weight,
        "model.layers.1.self_attn.k_proj.weight": layer.self_attn.k_proj.weight,
        "model.layers.1.mlp.down_proj.weight": layer.mlp.down_proj.weight,
        "model.layers.1.post_attention_layernorm.weight": (
            layer.post_attention_layernorm.weight
        ),
        "model.norm.weight": graph.model.norm.weight,
    }
    if not ck.config.tie_word_embeddings:
        pairs["lm_head.weight"] = graph.lm_head.weight
        assert graph.head is graph.lm_head.weight
    else:
        assert graph.head is graph.model.embed_tokens.weight
    for name, bound in pairs.items():
        np.testing.assert_array_equal(bits(bound), bits(ck.tensor(name)), name)
    assert graph.context == ck.config.max_position_embeddings


def test_from_pretrained_errors(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        Decoder.from_pretrained(tmp_path / "nowhere", device="npu2")
    no_config = write_tiny(tmp_path / "no-config")
    (no_config / "config.json").unlink()
    with pytest.raises(FileNotFoundError, match="no config.json"):
        Decoder.from_pretrained(no_config, device="npu2")
    mistral = write_tiny(tmp_path / "mistral")
    config = json.loads((mistral / "config.json").read_text())
    config["architectures"] = ["MistralForCausalLM"]
    (mistral / "config.json").write_text(json.dumps(config))
    with pytest.raises(UnsupportedModelError, match="MistralForCausalLM"):
        Decoder.from_pretrained(mistral, device="npu2")


def test_bad_tensors_are_named_in_one_error(tmp_path) -> None:
    config = LlamaConfig.tiny(tie_word_embeddings=False)
    weights = tiny.random_state_dict(config, seed=3)
    q = "model.layers.0.self_attn.q_proj.weight"
    weights[q] = weights[q][:64]  # (64, 128), not (128, 128)
    del weights["model.layers.1.mlp.up_proj.weight"]
    del weights["lm_head.weight"]
    weights["model.layers.0.self_attn.q_norm.weight"] = np.ones(32, np.float32)
    save_checkpoint(tmp_path, config, weights, max_shard_bytes=300_000)
    with pytest.raises(ValueError) as caught:
        Decoder.from_pretrained(tmp_path, device="npu2")
    message = str(caught.value)
    for name in (
        f"{q} (64, 128), not (128, 128)",
        "model.layers.1.mlp.up_proj.weight",
        "lm_head.weight",
        "model.layers.0.self_attn.q_norm.weight",
    ):
        assert name in message, message
    assert "missing" in message and "wrong shape" in message and "extra" in message


def test_upload_releases_every_checkpoint_byte_once(checkpoint, monkeypatch) -> None:
    """Each piece uploaded is released right after; the tied head is not
    uploaded (nor released) a second time."""
    pieces: list[tuple[int, int, int]] = []  # (address, bytes, bytes advised)
    original = Checkpoint.release

    def counting(self, piece):
        advised = original(self, piece)
        pieces.append((piece.ctypes.data, piece.nbytes, advised))
        return advised

    monkeypatch.setattr(Checkpoint, "release", counting)
    decoder = Decoder.from_pretrained(checkpoint, device="npu2", progress=False)
    decoder.compile()
    ck = decoder.checkpoint
    spans = {}
    for name in ck.names():
        view = ck.tensor(name)
        spans[name] = (view.ctypes.data, view.ctypes.data + view.nbytes)
    released = {name: [] for name in spans}
    other = 0
    for address, nbytes, advised in pieces:
        owner = [n for n, (lo, hi) in spans.items() if lo <= address < hi]
        if not owner:
            assert advised == 0  # not a view of the checkpoint: the rope table
            other += nbytes
            continue
        lo, hi = spans[owner[0]]
        assert address + nbytes <= hi and advised >= nbytes
        released[owner[0]].append((address, address + nbytes))
    for name, (lo, hi) in spans.items():
        parts = sorted(released[name])
        assert parts, f"{name} was never released"
        assert parts[0][0] == lo and parts[-1][1] == hi, name
        assert all(a[1] == b[0] for a, b in zip(parts, parts[1:])), name  # once
    assert sum(n for _, n, a in pieces if a) == ck.nbytes
    assert other == decoder.graph.rope.nbytes
    # both versions' weights are on the device: a call uploads nothing more
    loaded = decoder.prompt.arena.loaded
    for version in (decoder.prompt, decoder.decode):
        assert {h.name for _, h in version.recording.weights.values()} <= loaded


# A config whose bf16 weights are about 32 MB, in 4 shards of at most 9 MiB.
MEMORY_CONFIG = dict(
    hidden_size=512,
    intermediate_size=1536,
    num_attention_heads=8,
    num_key_value_heads=4,
    head_dim=64,
    num_hidden_layers=5,
)

MEMORY_PROBE = textwrap.dedent(
    """
    import json, sys
    import iron.runtime
    from iron.lm import checkpoint
    from iron.lm.generate import Decoder

    iron.runtime.set_backend("emu")
    directory, warm, keep = sys.argv[1], sys.argv[2], sys.argv[3] == "keep"

    def status():
        with open("/proc/self/status") as f:
            rows = (line.split(":", 1) for line in f)
            return {k: int(v.split()[0]) * 1024 for k, v in rows if k.startswith("Vm")}

    # Everything imported and one model compiled, so what follows is loading.
    Decoder.from_pretrained(warm, device="npu2", progress=False).compile()
    if keep:  # the control: pages never released
        checkpoint.Checkpoint.release = lambda self, piece: 0
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the peak (VmHWM) starts again from here
    before = status()
    decoder = Decoder.from_pretrained(directory, device="npu2", progress=False)
    decoder.compile()
    after = status()
    print(json.dumps({
        "before": before["VmRSS"],
        "reset_peak": before["VmHWM"],
        "peak": after["VmHWM"],
        "arena": decoder.prompt.arena.nbytes,
        "weights": decoder.checkpoint.nbytes,
    }))
    """
)


@pytest.mark.skipif(
    not os.path.exists("/proc/self/clear_refs"), reason="needs Linux /proc"
)
@pytest.mark.parametrize("dtype", ["bfloat16", "float32", "float16"])
def test_loading_peaks_near_one_shard_beyond_the_arena(
    tmp_path, checkpoints, dtype
) -> None:
    """Host memory while loading stays near one shard, not the model twice.

    Measured in a fresh interpreter as the growth of its peak resident set
    (VmHWM, reset with /proc/self/clear_refs once everything is imported)
    over Decoder.from_pretrained(...).compile() of a ~32 MB checkpoint in 4
    shards. On the emulated NPU device memory is host memory: each buffer
    has a host view and a separate device copy; an uploaded weight's host
    view is given back piece by piece (issue 20), so the arena counts once.
    What the test bounds is the host memory beyond that emulated device
    memory,

        peak growth - arena bytes,

    which on a real NPU is what loading costs the host: checkpoint pages
    mapped in and not yet released, and everything else loading allocates.
    It must stay below 1.5 x the largest shard. A control run with release
    disabled keeps every mapped page and must exceed that bound (the
    measure sees what it is meant to).

    float32 and float16 checkpoints too (issue 14): they are narrowed to
    bf16 a piece at a time as they are uploaded, not converted whole at load
    (which kept a bf16 copy of the model and every float32 page read).
    """
    config = LlamaConfig.tiny(**MEMORY_CONFIG, dtype=dtype)
    weights = tiny.random_state_dict(config, seed=4, dtype=np.dtype(dtype))
    save_checkpoint(tmp_path, config, weights, max_shard_bytes=9 << 20)
    shards = sorted(tmp_path.glob("*.safetensors"))
    assert len(shards) == (9 if dtype == "float32" else 4)
    largest = max(p.stat().st_size for p in shards)
    bound = 1.5 * largest

    def measure(mode: str) -> dict:
        done = subprocess.run(
            [sys.executable, "-c", MEMORY_PROBE, str(tmp_path), str(checkpoints())]
            + [mode],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode and "clear_refs" in done.stderr:
            pytest.skip(f"cannot reset the peak RSS here: {done.stderr[-300:]}")
        assert done.returncode == 0, done.stderr
        figures = json.loads(done.stdout.strip().splitlines()[-1])
        assert figures["reset_peak"] <= figures["before"] + (1 << 20)  # reset took
        figures["beyond"] = figures["peak"] - figures["before"] - figures["arena"]
        return figures

    released = measure("release")
    mib = 1 << 20
    print(
        f"loading {dtype} {released['weights'] / mib:.1f} MiB in {len(shards)} "
        f"shards (largest "
        f"{largest / mib:.1f} MiB): peak growth "
        f"{(released['peak'] - released['before']) / mib:.1f} MiB, arena "
        f"{released['arena'] / mib:.1f} MiB (the emulator's device copy), beyond it "
        f"{released['beyond'] / mib:.1f} MiB; bound {bound / mib:.1f} MiB"
    )
    assert released["weights"] > 3 * largest
    assert released["beyond"] < bound, released
    kept = measure("keep")
    print(f"control, pages kept: beyond the arena {kept['beyond'] / mib:.1f} MiB")
    assert kept["beyond"] > bound, kept


def test_llama_from_pretrained_binds_views_of_the_checkpoint(checkpoint) -> None:
    """``Llama.from_pretrained``: weights bound by name, memory-mapped, nothing copied."""
    graph = Llama.from_pretrained(checkpoint, context=64, rows=16)
    assert isinstance(graph.checkpoint, Checkpoint)
    weight = graph.model.layers[0].mlp.up_proj.weight
    mapped = graph.checkpoint.tensor("model.layers.0.mlp.up_proj.weight")
    np.testing.assert_array_equal(bits(weight), bits(mapped))
    assert np.shares_memory(weight, mapped)  # a view of the mapping: no copy
    assert graph.context == 64 and graph.rows == 16
    with iron.use_device("npu2"):
        assert len(graph.record().steps) > 0
