"""IRON's logits against llama.cpp's on llama.cpp's own quantized file.

SmolLM2-135M-Instruct in Q4_1 (``lm_support.smollm2_gguf``), read three ways
over the first ``POSITIONS`` tokens of this repository's user guide:

* IRON, the Q4_1 weights kept quantized (``weights=None``: QGEMV/QGEMM on
  the packed blocks), on the emulated npu2;
* the peer: llama.cpp's CPU path (llama-cpp-python, ``logits_all=True``),
  which multiplies Q4_1 weights by activations it quantizes to Q8_1;
* the reference: transformers in float32 on the same weights dequantized
  (it reads GGUF files with ``gguf``).

The rule (issue 29): IRON agrees with llama.cpp within what llama.cpp's own
CPU path differs from the float32 evaluation of the same dequantized
weights, with no absolute floor. Both are measured from that evaluation:
in every block of ``BLOCK`` positions the mean per-token KL(reference ||
IRON) is at most llama.cpp's KL(reference || llama.cpp), and IRON's top-1
agrees with the reference's at least as often as llama.cpp's does. The
direct KL(llama.cpp || IRON) is measured and reported, not bounded by
llama.cpp's own distance: the two err on different sides of the reference
(llama.cpp rounds activations to Q8_1, IRON keeps them bf16), so their
distance from each other is about the sum of their distances from it
(measured: 0.0049 nats against 0.0035 + 0.0012).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from lm_support import smollm2_gguf

from iron.lm.generate import Decoder

from .peer_support import kl, llama_cpp_module

llama_cpp = llama_cpp_module()
torch = pytest.importorskip("torch", reason="the float32 reference needs torch")
transformers = pytest.importorskip(
    "transformers", reason="the float32 reference needs transformers"
)

POSITIONS = 512
BLOCK = 64
GUIDE = Path(__file__).resolve().parents[4] / "docs" / "guide"


def _reference(gguf: Path, ids: np.ndarray) -> np.ndarray:
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(gguf.parent),
        gguf_file=gguf.name,
        dtype=torch.float32,
        attn_implementation="eager",
    ).eval()
    with torch.no_grad():
        out = model(torch.as_tensor(ids.astype(np.int64))[None])
    return out.logits[0].to(torch.float64).numpy()


def _llama_cpp(gguf: Path, ids: np.ndarray) -> np.ndarray:
    llm = llama_cpp.Llama(
        str(gguf),
        n_ctx=len(ids),
        n_batch=len(ids),
        n_ubatch=len(ids),
        logits_all=True,
        n_threads=2,
        verbose=False,
    )
    llm.eval([int(i) for i in ids])
    return np.array(llm.scores[: len(ids)], np.float64)


def test_logits_agree_with_llama_cpp_within_its_own_distance_from_float32(
    tmp_path_factory,
) -> None:
    started = time.perf_counter()
    gguf = smollm2_gguf()
    if not GUIDE.is_dir():
        pytest.skip(f"the user guide's text is not here ({GUIDE})")
    decoder = Decoder.from_pretrained(
        gguf, device="npu2", context=POSITIONS + 16, rows=16, progress=False
    )
    text = "\n\n".join(p.read_text() for p in sorted(GUIDE.glob("*.md")))
    ids = np.asarray(decoder.tokenizer.encode(text)[:POSITIONS], np.int32)
    assert len(ids) == POSITIONS, f"the guide gave only {len(ids)} tokens"

    ours = np.asarray(decoder.logits(ids), np.float64)
    peer = _llama_cpp(gguf, ids)
    reference = _reference(gguf, ids)
    assert np.isfinite(ours).all() and np.isfinite(peer).all()

    ours_vs_peer = kl(peer, ours)  # per token, nats
    peer_vs_reference = kl(reference, peer)
    ours_vs_reference = kl(reference, ours)
    top1 = {
        "iron_llama_cpp": float((ours.argmax(-1) == peer.argmax(-1)).mean()),
        "llama_cpp_reference": float((peer.argmax(-1) == reference.argmax(-1)).mean()),
        "iron_reference": float((ours.argmax(-1) == reference.argmax(-1)).mean()),
    }
    blocks = range(0, POSITIONS, BLOCK)
    figures = {
        "positions": POSITIONS,
        "kl_llama_cpp_iron": float(ours_vs_peer.mean()),
        "kl_reference_llama_cpp": float(peer_vs_reference.mean()),
        "kl_reference_iron": float(ours_vs_reference.mean()),
        # KL(reference || IRON) / KL(reference || llama.cpp) in each block
        "block_ratio": [
            float(
                ours_vs_reference[b : b + BLOCK].mean()
                / peer_vs_reference[b : b + BLOCK].mean()
            )
            for b in blocks
        ],
        "top1": top1,
        "seconds": round(time.perf_counter() - started, 1),
    }
    out = tmp_path_factory.mktemp("peer") / "peer_logits.json"
    out.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"\nIRON vs llama.cpp, SmolLM2-135M Q4_1: {json.dumps(figures)}\n({out})")

    worst = max(figures["block_ratio"])
    assert worst <= 1.0, (
        f"a block's mean KL(reference || IRON) is {worst:.2f}x llama.cpp's own "
        f"KL(reference || llama.cpp): {figures}"
    )
    assert top1["iron_reference"] >= top1["llama_cpp_reference"], figures
