"""Files llama.cpp's own converter writes, read by IRON and by llama.cpp.

``convert_hf_to_gguf.py``, its ``conversion`` package and its gguf-py come
from the llama-cpp-python sdist the peer session installs from
(``IRON_PEER_SDIST``: the .tar.gz or a directory holding it), extracted to a
temporary directory and run as the script runs in llama.cpp's tree. (The
registry's gguf 0.19.0 cannot run this converter: it lacks
``gguf.LazyChunkedTensor``, an AttributeError.) IRON loads the file the
converter wrote and must generate the same tokens as from the Hugging Face
directory itself, and tokenize as llama.cpp does on the same file.

The directories:

* the tiny model (``iron.lm.tiny.write_checkpoint``'s weights) with a
  SentencePiece ``tokenizer.model`` trained here: the converter writes a
  'llama' (SentencePiece) vocabulary;
* SmolLM2-135M-Instruct made from its published GGUF file: IRON's bf16
  dequantization of the weights in Hugging Face's layout, and the
  tokenizer IRON builds from the file saved as ``tokenizer.json``. The
  converter names a BPE pre-tokenizer only when it recognizes the
  tokenizer's output on its own test text (``get_vocab_base_pre``): that it
  writes 'smollm' again says IRON's rebuilt tokenizer tokenizes that text as
  SmolLM2's original does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
from lm_support import smollm2_gguf

from iron.lm.checkpoint import save_checkpoint
from iron.lm.config import LlamaConfig
from iron.lm.generate import Decoder
from iron.lm.gguf import open_gguf
from iron.lm.gguf_tokenizer import tokenizer_parts
from iron.lm.tiny import random_state_dict
from iron.lm.tokenizer import Tokenizer

from .peer_support import CORPUS, llama_cpp_module, vocab_of
from .test_tokenization import differences

llama_cpp_module()
pytest.importorskip("torch", reason="llama.cpp's converter imports torch")
pytest.importorskip("gguf", reason="iron-lm reads GGUF files with gguf")

SDIST = "IRON_PEER_SDIST"
GUIDE = Path(__file__).resolve().parents[4] / "docs" / "guide"


@pytest.fixture(scope="module")
def converter(tmp_path_factory) -> Path:
    """``convert_hf_to_gguf.py`` extracted from llama-cpp-python's sdist."""
    where = os.environ.get(SDIST)
    if not where:
        pytest.skip(f"{SDIST} names no llama-cpp-python sdist (nox -s peer sets it)")
    sdist = Path(where)
    if sdist.is_dir():
        found = sorted(sdist.glob("llama_cpp_python-*.tar.gz"))
        if not found:
            pytest.skip(f"{SDIST}={where} holds no llama_cpp_python-*.tar.gz")
        sdist = found[-1]
    root = tmp_path_factory.mktemp("converter")
    with tarfile.open(sdist) as tar:
        wanted = [
            m
            for m in tar.getmembers()
            if m.isfile()
            and (
                m.name.endswith("/vendor/llama.cpp/convert_hf_to_gguf.py")
                or "/vendor/llama.cpp/conversion/" in m.name
                or "/vendor/llama.cpp/gguf-py/gguf/" in m.name
            )
        ]
        if not wanted:
            pytest.skip(f"{sdist} has no vendor/llama.cpp/convert_hf_to_gguf.py")
        tar.extractall(root, members=wanted, filter="data")
    return next(root.glob("*/vendor/llama.cpp/convert_hf_to_gguf.py"))


def convert(converter: Path, directory: Path, outtype: str) -> Path:
    """Run llama.cpp's converter on ``directory``: the GGUF file it writes."""
    out = directory.with_suffix(f".{outtype}.gguf")
    run = subprocess.run(
        [
            sys.executable,
            str(converter),
            str(directory),
            "--outfile",
            str(out),
            "--outtype",
            outtype,
        ],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "NO_LOCAL_GGUF"},
        cwd=converter.parent,
    )
    assert run.returncode == 0, f"convert_hf_to_gguf.py failed:\n{run.stderr[-4000:]}"
    return out


def same_generation(directory: Path, gguf: Path, prompt: list[int], n: int) -> None:
    """IRON generates the same greedy tokens from ``directory`` and ``gguf``,
    and the prompt's logits bit for bit: the file holds the directory's bf16
    weights (as bf16, or as float32 that IRON narrows back to the same bits)."""
    answers, logits = [], []
    for source in (directory, gguf):
        decoder = Decoder.from_pretrained(
            source, device="npu2", context=128, rows=16, progress=False
        )
        logits.append(np.asarray(decoder.logits(prompt)))
        answers.append(list(decoder.generate(prompt, max_new_tokens=n)))
    assert answers[0] == answers[1], f"HF directory {answers[0]}, its GGUF {answers[1]}"
    assert len(answers[0]) == n
    differ = int((logits[0] != logits[1]).sum())
    assert differ == 0, (
        f"{differ} of the prompt's logits differ between {directory} and {gguf}"
    )


# -- the tiny model with a SentencePiece vocabulary ----------------------------------------


@pytest.fixture(scope="module")
def sentencepiece_directory(tmp_path_factory) -> Path:
    """The tiny model's weights and a SentencePiece BPE model (byte fallback)
    trained on the user guide, as a Hugging Face directory."""
    spm = pytest.importorskip("sentencepiece", reason="needs sentencepiece")
    root = tmp_path_factory.mktemp("spm")
    text = "\n".join(p.read_text(encoding="utf-8") for p in sorted(GUIDE.glob("*.md")))
    (root / "corpus.txt").write_text(text, encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(root / "corpus.txt"),
        model_prefix=str(root / "m"),
        vocab_size=1000,
        model_type="bpe",
        byte_fallback=True,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        add_dummy_prefix=True,
        character_coverage=1.0,
        minloglevel=2,
    )
    directory = root / "tiny-spm"
    config = LlamaConfig.tiny(vocab_size=1000, bos_token_id=1, eos_token_id=2)
    save_checkpoint(directory, config, random_state_dict(config, seed=3))
    (root / "m.model").rename(directory / "tokenizer.model")
    return directory


@pytest.fixture(scope="module")
def sentencepiece_gguf(converter, sentencepiece_directory) -> Path:
    """What llama.cpp's converter writes from ``sentencepiece_directory``."""
    return convert(converter, sentencepiece_directory, "f32")


def test_the_converters_sentencepiece_file_generates_as_its_directory(
    sentencepiece_directory, sentencepiece_gguf
) -> None:
    gguf = sentencepiece_gguf
    reader = open_gguf(gguf)
    assert reader.metadata.get("tokenizer.ggml.model", "str") == "llama"
    reader.close()
    same_generation(sentencepiece_directory, gguf, [1, 5, 300, 42, 7], 16)


def test_the_converters_sentencepiece_file_tokenizes_as_llama_cpp(
    sentencepiece_directory, sentencepiece_gguf
) -> None:
    import sentencepiece

    gguf = sentencepiece_gguf
    ours = Tokenizer.from_gguf(gguf)
    texts = [t for t in CORPUS if "<|" not in t]  # no such tokens in this vocabulary
    found = differences(ours, vocab_of(gguf), texts)
    assert not found, "\n".join(found)
    # and both as SentencePiece itself
    sp = sentencepiece.SentencePieceProcessor(
        model_file=str(sentencepiece_directory / "tokenizer.model")
    )
    for text in texts:
        assert ours.encode(text, add_bos=False) == sp.encode(text), text


# -- SmolLM2 from its published file --------------------------------------------------------


@pytest.fixture(scope="module")
def smollm2_directory(tmp_path_factory) -> Path:
    """SmolLM2-135M-Instruct as a Hugging Face directory, from its GGUF file."""
    ck = open_gguf(smollm2_gguf())
    directory = tmp_path_factory.mktemp("smollm2") / "SmolLM2-135M-Instruct"
    try:
        tree = {k: np.asarray(v) for k, v in ck.tree(quantized=False).items()}
        save_checkpoint(directory, ck.config, tree)
        parts = tokenizer_parts(ck)
    finally:
        ck.close()
    parts["tokenizer"].save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": parts["bos_token"],
                "eos_token": parts["eos_token"],
                "add_bos_token": bool(parts["add_bos_token"]),
                "clean_up_tokenization_spaces": False,
            }
        )
    )
    return directory


def test_smollm2_converted_again_keeps_its_pre_tokenizer_and_generates_alike(
    converter, smollm2_directory
) -> None:
    gguf = convert(converter, smollm2_directory, "bf16")
    reader = open_gguf(gguf)
    pre = reader.metadata.get("tokenizer.ggml.pre", "str")
    reader.close()
    assert pre == "smollm", f"the converter recognized the tokenizer as {pre!r}"
    ours = Tokenizer.from_gguf(gguf)
    found = differences(ours, vocab_of(gguf), CORPUS)
    assert not found, "\n".join(found)
    prompt = ours.encode("The capital of France is")
    same_generation(smollm2_directory, gguf, prompt, 12)
