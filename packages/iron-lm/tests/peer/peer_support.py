"""What the llama.cpp peer's tests share: the peer, the corpus, vocabularies.

The peer is llama.cpp itself through its Python bindings, llama-cpp-python
(``nox -s peer`` installs it; these tests skip without it). A GGUF file is
opened by it with ``llama_cpp.Llama(path, vocab_only=True)`` to tokenize,
or whole to evaluate logits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

#: Strings whose tokenization differs between pre-tokenizers and between
#: careless and careful implementations: whitespace runs, digits, code, CJK,
#: emoji (joined and flags), combining marks, special tokens written in the
#: text, leading and trailing spaces, contractions, mixed scripts.
CORPUS = [
    "Hello world",
    " Hello world",
    "   three leading spaces",
    "x" + " " * 9 + "y\n\n\n" + "\t" * 5 + "z   ",
    " \n \n\n  \t \r\n\r\n",
    "trailing spaces   ",
    "1 12 123 1234 12345678 3.14159 -0.5e-10 1,000,000",
    "٣١٤ ١٢٣ ⅷ ² ½ ３２１",
    "don't DON'T we'RE you'll I'd they've She'S",
    "def f(x):\n    return x ** 2  # square\n",
    "x=a+b; if(a<=b&&c|d){return ~e^f;} $1 #2 @3 `4`",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}\n",
    "中文字符 한국어 にほんご カタカナ 漢字かな交じり文",
    "我们今天去公园散步。你呢？",
    "👩\u200d👩\u200d👧 🇫🇷 ✨!! 😀😃😄 👍🏽",
    "e\u0301 n\u0303 a\u0308\u0332 \u0915\u094d\u0937 \u0e01\u0e34",
    "Ünïcödé façade naïve coöperate Zürich",
    "Привет, мир! Γειά σου κόσμε. مرحبا بالعالم",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|>text after<|endoftext|> and between",
    "<|im_start|> spaced <|im_end|>",
    "a<|im_end|>b",
    "https://example.com/path?q=1&r=two#frag",
    "CamelCaseWords and snake_case_words and SCREAMING_CASE",
    "...!!!???---___***",
    "\u00a0non-breaking\u2003em space\u200bzero width",
]


def llama_cpp_module() -> Any:
    """The ``llama_cpp`` module, or skip the test (``nox -s peer`` installs it)."""
    return pytest.importorskip(
        "llama_cpp", reason="the llama.cpp peer needs llama-cpp-python (nox -s peer)"
    )


def vocab_of(path: Path) -> Any:
    """llama.cpp's tokenizer of the GGUF file ``path`` (no weights loaded).

    Raises:
        ValueError: llama.cpp refuses the file (llama-cpp-python's error).
    """
    llama_cpp = llama_cpp_module()
    return llama_cpp.Llama(str(path), vocab_only=True, verbose=False)


def detokenize(llm: Any, ids: list[int]) -> bytes:
    """llama.cpp's own detokenizer (``llama_detokenize``) on ``ids``.

    Special tokens rendered, none removed. Not llama-cpp-python's
    ``Llama.detokenize``: that joins ``llama_token_to_piece`` pieces and so
    keeps the space a SentencePiece vocabulary puts before the first word,
    which llama.cpp's ``llama_detokenize`` removes (``add_space_prefix``).
    """
    import ctypes

    llama_cpp = llama_cpp_module()
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    tokens = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
    size = 64 + 16 * len(ids)
    for _ in range(2):
        text = ctypes.create_string_buffer(size)
        n = llama_cpp.llama_detokenize(vocab, tokens, len(ids), text, size, False, True)
        if n >= 0:
            return text.raw[:n]
        size = -n  # too small: llama.cpp says how many bytes it needs
    raise AssertionError(f"llama_detokenize asked for {size} bytes twice")


def tokenizer_keys(path: Path) -> dict[str, Any]:
    """The BPE tokenizer of the GGUF file ``path`` as ``gguf_support``'s
    writers take it (read with the ``gguf`` package, not with IRON)."""
    import gguf

    reader = gguf.GGUFReader(str(path))

    def value(key: str) -> Any:
        return reader.fields[key].contents()

    return {
        "model": value("tokenizer.ggml.model"),
        "tokens": value("tokenizer.ggml.tokens"),
        "merges": value("tokenizer.ggml.merges"),
        "types": [int(t) for t in value("tokenizer.ggml.token_type")],
        "bos": int(value("tokenizer.ggml.bos_token_id")),
        "eos": int(value("tokenizer.ggml.eos_token_id")),
    }


def kl(p_logits: np.ndarray, q_logits: np.ndarray) -> np.ndarray:
    """KL(p || q) per row of two logits arrays, in nats (float64)."""
    p = _log_softmax(np.asarray(p_logits, np.float64))
    q = _log_softmax(np.asarray(q_logits, np.float64))
    return (np.exp(p) * (p - q)).sum(-1)


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))
