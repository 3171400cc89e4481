"""Generation: the device loop and the host loop agree, stop, limits and stats.

The device loop (CarriedLoop, npu2's full ELF) and the host loop (npu1, and
npu2 with ``device_loop=False``) must give the same tokens for the same
seed, greedy and sampled, and those of ``graph.reference`` run the same way.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from lm_support import (
    CONTEXT,
    ROWS,
    chunk_of,
    prompt_ids,
    reference_graph,
    variant_seed,
)

import iron
from iron.lm import tiny
from iron.lm.config import LlamaConfig
from iron.lm.generate import Decoder

SAMPLED = {"temperature": 0.8, "top_k": 8}
SETTINGS = {"greedy": {}, "sampled": SAMPLED}
#: (device, device_loop) of each way to loop the decode step
LOOPS = [("npu2", True), ("npu2", False), ("npu1", None)]


def reference_tokens(directory, ids, steps: int, seed: int, **settings) -> list[int]:
    """The tokens ``graph.reference`` samples: prompt chunks, then decode steps."""
    graph = reference_graph(directory, **settings)
    tokens = []
    with iron.use_device("npu2"):
        for start in range(0, len(ids), ROWS):
            n = min(ROWS, len(ids) - start)
            _, carry = graph.reference(
                chunk_of(ids, start, n), token=0, position=start, n=n, seed=seed
            )
        tokens.append(int(carry["token"]))
        for _ in range(steps - 1):
            _, carry = graph.reference(
                token=int(carry["token"]),
                position=int(carry["position"]),
                n=1,
                seed=seed,
            )
            tokens.append(int(carry["token"]))
    return tokens


@pytest.mark.parametrize("mode", list(SETTINGS))
def test_every_loop_gives_the_same_tokens(decoders, checkpoints, mode) -> None:
    settings = SETTINGS[mode]
    ids = prompt_ids(21, seed=3)  # two chunks
    runs = {}
    for device, loop in LOOPS:
        decoder = decoders("tied", device, **settings)
        runs[device, loop] = list(
            decoder.generate(ids, max_new_tokens=12, seed=7, stop=[], device_loop=loop)
        )
        assert decoder.stats.loop == ("device" if loop else "host")
        assert decoder.stats.device == device
    first = runs["npu2", True]
    assert len(first) == 12
    assert all(tokens == first for tokens in runs.values()), runs
    assert first == reference_tokens(checkpoints(), ids, 12, seed=7, **settings)
    decoder = decoders("tied", "npu2", **settings)
    again = list(decoder.generate(ids, max_new_tokens=12, seed=8, stop=[]))
    if mode == "greedy":
        assert again == first  # the seed is not read
    else:
        assert again != first  # draws follow the seed
        assert len(set(first)) > 2  # and are draws, not the argmax repeated


@pytest.mark.parametrize("variant", ["untied", "llama3", "sharded"])
def test_variants_loop_alike(decoders, checkpoints, variant) -> None:
    ids = prompt_ids(9, seed=4)
    runs = [
        list(
            decoders(variant, device, **SAMPLED).generate(
                ids, max_new_tokens=6, seed=2, stop=[], device_loop=loop
            )
        )
        for device, loop in LOOPS
    ]
    assert runs[0] == runs[1] == runs[2]
    assert runs[0] == reference_tokens(checkpoints(variant), ids, 6, 2, **SAMPLED)


@pytest.mark.parametrize(("device", "loop"), LOOPS)
def test_stops_at_a_stop_id_and_yields_it(decoders, tmp_path, device, loop) -> None:
    decoder = decoders("tied", device, **SAMPLED)
    ids = prompt_ids(5, seed=5)
    free = list(decoder.generate(ids, max_new_tokens=16, seed=1, stop=[]))
    # a stop id first seen after a few tokens
    at = next(k for k in range(3, len(free)) if free[k] not in free[:k])
    tokens = list(
        decoder.generate(
            ids, max_new_tokens=16, seed=1, stop=[free[at]], device_loop=loop
        )
    )
    assert tokens == free[: at + 1]
    assert decoder.stats.new_tokens == at + 1
    # by default, the model's eos ids stop it (random weights: none came up)
    assert not set(decoder.config.eos_token_ids) & set(free)
    assert list(decoder.generate(ids, max_new_tokens=16, seed=1)) == free
    # the same weights under a config.json whose eos came up at ``at``
    config = LlamaConfig.tiny(eos_token_id=(2, free[at]))
    directory = tiny.write_checkpoint(
        tmp_path, config=config, seed=variant_seed("tied")
    )
    eos = Decoder.from_pretrained(
        directory, device=device, context=CONTEXT, rows=ROWS, progress=False, **SAMPLED
    )
    tokens = list(eos.generate(ids, max_new_tokens=16, seed=1, device_loop=loop))
    assert tokens == free[: at + 1]


@pytest.mark.parametrize(("device", "loop"), LOOPS)
def test_max_new_tokens_and_the_context_end(decoders, device, loop) -> None:
    decoder = decoders("tied", device)
    ids = prompt_ids(7, seed=6)
    for limit in (1, 2, 5):
        tokens = list(
            decoder.generate(ids, max_new_tokens=limit, stop=[], device_loop=loop)
        )
        assert len(tokens) == limit
        assert decoder.stats.new_tokens == limit
    assert list(decoder.generate(ids, max_new_tokens=0, device_loop=loop)) == []
    # near the end of the context: as many as the cache has room for
    long = prompt_ids(CONTEXT - ROWS, seed=7)
    tokens = list(decoder.generate(long, max_new_tokens=100, stop=[], device_loop=loop))
    assert len(tokens) == ROWS


def test_a_prompt_too_long_is_refused_at_the_call(decoders) -> None:
    decoder = decoders("tied", "npu2")
    limit = CONTEXT - ROWS
    with pytest.raises(ValueError, match=f"{limit + 1} tokens.*\\({limit}\\)"):
        decoder.generate([5] * (limit + 1))  # raised before any iteration
    with pytest.raises(ValueError, match="no tokens"):
        decoder.generate([])
    with pytest.raises(ValueError, match="vocabulary"):
        decoder.generate([3, 9999])
    with pytest.raises(ValueError, match="npu1 runs no full ELF"):
        decoders("tied", "npu1").generate([3, 4], device_loop=True)


def test_stats_are_filled(decoders) -> None:
    for device, loop in LOOPS:
        decoder = decoders("tied", device)
        tokens = list(
            decoder.generate(
                prompt_ids(19), max_new_tokens=6, stop=[], device_loop=loop
            )
        )
        stats = decoder.stats
        assert stats.prompt_tokens == 19
        assert stats.new_tokens == len(tokens) == 6
        assert stats.first_token_s > 0
        assert stats.decode_s > 0 and stats.decode_tokens_per_s > 0
        assert stats.backend == "emu"
        assert stats.device == device
        assert stats.loop == ("device" if loop else "host")
        summary = stats.summary()
        for part in ("19 prompt tokens", "6 new tokens", "tokens/s", f"emu {device}"):
            assert part in summary


def test_a_loop_left_early_leaves_nothing_behind(decoders) -> None:
    """Steps still in flight when the consumer stops are waited out, and the
    next generation starts clean: the same tokens as the first time."""
    decoder = decoders("tied", "npu2", **SAMPLED)
    ids = prompt_ids(11, seed=9)
    full = list(decoder.generate(ids, max_new_tokens=10, seed=4, stop=[]))
    stream = decoder.generate(ids, max_new_tokens=10, seed=4, stop=[])
    assert list(itertools.islice(stream, 3)) == full[:3]
    stream.close()
    assert list(decoder.generate(ids, max_new_tokens=10, seed=4, stop=[])) == full
    # a host call of the decode step between device loops does not break them
    decoder.decode(token=5, position=20, n=1, seed=0)
    assert list(decoder.generate(ids, max_new_tokens=10, seed=4, stop=[])) == full
    logits = decoder.logits(ids)
    assert np.isfinite(logits).all()
    assert list(decoder.generate(ids, max_new_tokens=10, seed=4, stop=[])) == full


@pytest.mark.npu
@pytest.mark.parametrize("device", ["npu1", "npu2"])
def test_the_npu_decodes_the_reference_tokens(checkpoints, device) -> None:
    """On a Ryzen AI NPU (IRON_BACKEND=xrt): greedy tokens equal the reference's."""
    from iron.runtime import set_backend, xrt

    lacks = xrt.missing()
    if lacks:
        pytest.skip("no NPU here: this machine lacks " + "; ".join(lacks))
    ids = prompt_ids(21, seed=3)
    set_backend("xrt")
    try:
        decoder = Decoder.from_pretrained(
            checkpoints(), device=device, context=CONTEXT, rows=ROWS, progress=False
        )
        tokens = list(decoder.generate(ids, max_new_tokens=12, stop=[]))
    finally:
        set_backend(None)
    assert tokens == reference_tokens(checkpoints(), ids, 12, seed=0)


@pytest.mark.parametrize("mode", list(SETTINGS))
def test_on_logits_gives_the_scores_each_token_is_sampled_from(decoders, mode) -> None:
    settings = SETTINGS[mode]
    decoder = decoders("tied", "npu2", **settings)
    ids = prompt_ids(21, seed=3)  # two chunks
    rows: list[np.ndarray] = []
    seen = []
    for token in decoder.generate(
        ids, max_new_tokens=8, seed=7, stop=[], on_logits=rows.append
    ):
        seen.append((token, len(rows)))  # its row came before it
    tokens = [token for token, _ in seen]
    assert [count for _, count in seen] == list(range(1, 9))
    assert decoder.stats.loop == "host"  # each step read before the next runs
    device = list(decoder.generate(ids, max_new_tokens=8, seed=7, stop=[]))
    assert decoder.stats.loop == "device" and device == tokens  # the same tokens
    vocab = decoder.config.vocab_size
    assert all(r.shape == (vocab,) and r.dtype == np.float32 for r in rows)
    if mode == "greedy":
        assert [int(np.argmax(r)) for r in rows] == tokens
    else:  # a draw among the top_k largest of its row
        top_k = SAMPLED["top_k"]
        assert all((r > r[t]).sum() < top_k for r, t in zip(rows, tokens, strict=True))
    # the rows are the model's logits at those positions: scoring the same
    # ids with the prompt version (GEMM, not the decode step's GEMV) agrees to
    # bf16's rounding of the logits
    scored = decoder.logits([*ids, *tokens[:-1]])[len(ids) - 1 :]
    np.testing.assert_allclose(np.stack(rows), scored, rtol=2**-7, atol=2**-7)
    np.testing.assert_array_equal(rows[0], scored[0])  # the same prompt chunk


def test_on_logits_refuses_the_device_loop(decoders) -> None:
    decoder = decoders("tied", "npu2")
    with pytest.raises(ValueError, match="on_logits .* device_loop=False"):
        decoder.generate([1, 2, 3], on_logits=print, device_loop=True)
    assert list(decoder.generate([1, 2, 3], max_new_tokens=2, stop=[])) != []


def test_decode_logits_are_the_same_bits_in_the_lean_loop_and_step_by_step(
    checkpoints,
) -> None:
    """The emulator's lean loop (poison off) takes each step's operator and
    fixed operands from its load-time program; poisoned, every step is bound,
    read and written one by one as ``Recording.run_step`` does. A decode
    step's logits are the same bits either way (issue 20)."""
    ids = prompt_ids(21, seed=3)  # two chunks, then decode steps
    rows: dict[bool, list[np.ndarray]] = {}
    tokens: dict[bool, list[int]] = {}
    for poison in (True, False):
        iron.runtime.set_poison(poison)
        try:
            decoder = Decoder.from_pretrained(
                checkpoints(), device="npu2", context=CONTEXT, rows=ROWS, progress=False
            ).compile()
            rows[poison] = []
            tokens[poison] = list(
                decoder.generate(
                    ids,
                    max_new_tokens=6,
                    seed=7,
                    stop=[],
                    on_logits=rows[poison].append,
                )
            )
        finally:
            iron.runtime.set_poison(True)  # the session's setting
    assert tokens[True] == tokens[False]
    for on, off in zip(rows[True], rows[False], strict=True):
        np.testing.assert_array_equal(on.view(np.uint32), off.view(np.uint32))
