"""Section 9, "A Llama Application with iron-lm": load a checkpoint, generate text.

With no checkpoint directory given, the embedded tiny Llama is written to a
temporary folder (``iron.lm.tiny.write_checkpoint``: a Hugging Face folder
with config.json, safetensors weights and a tokenizer). Its weights are
random (seeded), so the text is meaningless; the path is the real one.
``Decoder.from_pretrained`` loads it, ``generate`` streams token ids, and
the tokenizer turns them back into text.

The checks: the first greedy token is the argmax of the prompt's last
logits (``Decoder.logits``); the greedy tokens are the host reference's
(``Decoder.reference_tokens``); a sampled generation repeats for the same
seed; and where the device loops the decode step itself (npu2), the host
loop gives the same tokens. Runs on the device IRON_DEVICE names, else the
NPU present, else npu2 (the emulated NPU where no NPU is present). Usage:
``python examples/llama.py [--checkpoint DIR]``. Prints PASS! when it holds.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from iron.lm import tiny
from iron.lm.generate import Decoder
from iron.lm.tokenizer import Tokenizer
from iron.runtime import default_device

PROMPT = "The NPU"
NEW_TOKENS = 12


def main(directory: str | Path | None = None) -> bool:
    """Load, generate greedily and by sampling, and check; True on PASS."""
    device = default_device()  # IRON_DEVICE, else the NPU present, else npu2
    with tempfile.TemporaryDirectory(prefix="iron-tiny-") as scratch:
        if directory is None:
            print(tiny.NOTICE)
            directory = tiny.write_checkpoint(scratch)
        tokenizer = Tokenizer.from_directory(directory)
        ids = tokenizer.encode(PROMPT)
        print(f"prompt {PROMPT!r} -> ids {ids}")

        # Greedy: temperature 0 takes the largest logit each step.
        greedy = Decoder.from_pretrained(
            directory, device=device, context=128, progress=False
        )
        print(greedy.config)
        tokens = list(greedy.generate(ids, max_new_tokens=NEW_TOKENS))
        print(f"greedy: {tokens} -> {tokenizer.decode(tokens)!r}")
        print(greedy.stats.summary())
        last = greedy.logits(ids)[-1]  # the prompt version's scores
        ok = tokens[0] == int(np.argmax(last))
        # The host reference: every operator's numpy reference, no device.
        ok &= greedy.reference_tokens(ids, len(tokens)) == tokens

        # Sampled: a seeded top-k draw; the same seed gives the same tokens,
        # whether the decode step loops on the device or from the host.
        sampled = Decoder.from_pretrained(
            directory,
            device=device,
            context=128,
            temperature=0.8,
            top_k=20,
            progress=False,
        )
        detokenizer = tokenizer.detokenizer(skip_special_tokens=True)
        stream = []
        print("sampled: " + PROMPT, end="", flush=True)
        for token in sampled.generate(ids, max_new_tokens=NEW_TOKENS, seed=7):
            stream.append(token)
            print(detokenizer.push(token), end="", flush=True)
        print(detokenizer.flush())
        print(sampled.stats.summary())
        again = list(sampled.generate(ids, max_new_tokens=NEW_TOKENS, seed=7))
        ok &= again == stream
        if sampled.stats.loop == "device":
            host = list(
                sampled.generate(
                    ids, max_new_tokens=NEW_TOKENS, seed=7, device_loop=False
                )
            )
            print(f"host loop: {host}")
            ok &= host == stream

    print("PASS!" if ok else "FAIL!")
    return bool(ok)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--checkpoint",
        metavar="DIR",
        help="a Hugging Face Llama directory (default: the embedded tiny Llama)",
    )
    raise SystemExit(0 if main(parser.parse_args().checkpoint) else 1)
