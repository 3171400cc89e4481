"""llama.cpp's pre-tokenizers: how a byte-level BPE vocabulary splits text.

A GGUF file's ``tokenizer.ggml.pre`` names how text is split into words
before byte-level BPE merges them. llama.cpp maps each name to a list of
regular expressions (``llama_vocab::impl::load`` and ``llm_tokenizer_bpe``
in https://github.com/ggml-org/llama.cpp src/llama-vocab.cpp); each
expression splits the pieces the previous one left, keeping both what it
matches and what lies between (``unicode_regex_split`` in src/unicode.cpp),
then every piece is byte-encoded as GPT-2 does. :data:`PRE_TOKENIZERS`
holds the expressions llama.cpp uses (its adaptations of the
``tokenizer.json`` ones, e.g. ``(?:'[sS]|...)`` for ``(?i:'s|...)``, which
the ``tokenizers`` library's Oniguruma engine reads alike) and the two
flags llama.cpp sets with them: ``ignore_merges`` (a piece that is a token
is that token) and ``add_bos`` (the default of ``tokenizer.ggml.add_bos_token``).

Names llama.cpp handles with code of its own rather than expressions
(kimi-k2, afmoe, superbpe, gemma4, granite-embed-multi-311m, sarvam-moe,
whitespace) and a few whose expressions were not transcribed here (youtu,
spark2_5, tiny_aya, cohere2moe, granite-embed-multi-97m, exaone-moe) are
refused by name.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PRE_TOKENIZERS", "PreTokenizer"]


@dataclass(frozen=True)
class PreTokenizer:
    """One of llama.cpp's pre-tokenizer types.

    Attributes:
        kind: llama.cpp's LLAMA_VOCAB_PRE_TYPE_* name, lower-case.
        regexes: The split expressions, applied in order.
        ignore_merges: A piece that is itself a token is kept whole.
        add_bos: llama.cpp's default for ``tokenizer.ggml.add_bos_token``.
        bos: False where llama.cpp drops the default bos id (chatglm).
    """

    kind: str
    regexes: tuple[str, ...]
    ignore_merges: bool = False
    add_bos: bool = False
    bos: bool = True


_CONTRACTIONS = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
_LLAMA3 = (
    _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2 = (
    _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_PUNCT = r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]"
_DEEPSEEK3 = (
    _PUNCT + r"[A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
    r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_CJK = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"
_KANA = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"
_PORO = " ?[^(\\s|.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c)]+"
# llama.cpp's stand-ins for [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and [\p{Ll}...]
_UPPER = r"((?=[\p{L}])([^a-z]))"
_LOWER = r"((?=[\p{L}])([^A-Z]))"
_TEKKEN = (
    rf"[^\r\n\p{{L}}\p{{N}}]?{_UPPER}*{_LOWER}+|[^\r\n\p{{L}}\p{{N}}]?{_UPPER}+{_LOWER}*"
    r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_GPT4O = (
    rf"[^\r\n\p{{L}}\p{{N}}]?{_UPPER}*{_LOWER}+{_CONTRACTIONS}?"
    rf"|[^\r\n\p{{L}}\p{{N}}]?{_UPPER}+{_LOWER}*{_CONTRACTIONS}?"
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_JAIS2 = (
    _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    + "".join(rf"|\s{{{n}}}(?!\S)" for n in (512, 256, 128, 64, 32, 16, 8, 4))
    + r"|\s{1,2}(?!\S)|\s{1}"
)

_KINDS: dict[str, PreTokenizer] = {
    p.kind: p
    for p in (
        PreTokenizer(
            "default", (r"[\p{P}\$\+<=>\^~\|]+", _GPT2, r"\p{N}+", "[0-9][0-9][0-9]")
        ),
        PreTokenizer("llama3", (_LLAMA3,), ignore_merges=True, add_bos=True),
        PreTokenizer("smaug", (_LLAMA3,)),
        PreTokenizer("chatglm4", (_LLAMA3,), bos=False),
        PreTokenizer("jais2", (_JAIS2,)),
        PreTokenizer(
            "deepseek_llm",
            (
                "[\r\n]",
                "\\s?[A-Za-z\xb5\xc0-\xd6\xd8-\xf6\xf8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943]+",
                "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+",
                r"\s+$",
                _CJK,
                r"\p{N}+",
            ),
        ),
        PreTokenizer("deepseek3_llm", (r"\p{N}{1,3}", _KANA, _DEEPSEEK3)),
        PreTokenizer(
            "deepseek_coder", ("[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", _CJK, r"\p{N}")
        ),
        PreTokenizer("falcon", (r"[\p{P}\$\+<=>\^~\|`]+", _GPT2, "[0-9][0-9][0-9]")),
        PreTokenizer("starcoder", (r"\p{N}", _GPT2)),
        PreTokenizer("gpt2", (_GPT2,)),
        PreTokenizer("qwen2", (_QWEN2,)),
        PreTokenizer(
            "qwen35",
            (
                _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
                r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
            ),
        ),
        PreTokenizer("poro", (_PORO,)),
        PreTokenizer("viking", (_PORO, r"\p{N}")),
        PreTokenizer("tekken", (_TEKKEN,), ignore_merges=True, add_bos=True),
        PreTokenizer(
            "chameleon",
            (
                "<sentinel:[0-9]+>",
                "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
                "([\\t\\n]|    |  )",
                r"\p{N}",
                r"[\p{P}!-/:-@\[-`{-~]",
                _GPT2,
            ),
            add_bos=True,
        ),
        PreTokenizer("gpt4o", (_GPT4O,)),
        PreTokenizer(
            "bailingmoe",
            (
                r"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+"
                r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+",
            ),
        ),
        PreTokenizer(
            "seed_coder",
            (
                _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}"
                r"| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+",
            ),
        ),
        PreTokenizer(
            "ufakzeka",
            (
                r"[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
                r"|\s+(?!\S)|\s+",
            ),
        ),
        PreTokenizer("grok_2", (_QWEN2,)),
        PreTokenizer("laguna", ("[^\\n]+|[\\n]+", _QWEN2)),
        PreTokenizer(
            "minicpm5",
            (
                r"\p{N}{1,3}",
                _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
            ),
            ignore_merges=True,
        ),
    )
}

_NAMES: dict[str, str] = {
    "default": "default",
    **dict.fromkeys(
        (
            "llama3",
            "llama-v3",
            "llama-bpe",
            "falcon3",
            "falcon-h1",
            "pixtral",
            "midm-2.0",
            "lfm2",
            "jina-v5-nano",
        ),
        "llama3",
    ),
    "dbrx": "smaug",
    "smaug-bpe": "smaug",
    "glm4": "chatglm4",
    "chatglm-bpe": "chatglm4",
    "jais-2": "jais2",
    "deepseek-llm": "deepseek_llm",
    **dict.fromkeys(
        ("deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"), "deepseek3_llm"
    ),
    "deepseek-coder": "deepseek_coder",
    "falcon": "falcon",
    **dict.fromkeys(
        (
            "starcoder",
            "refact",
            "command-r",
            "smollm",
            "codeshell",
            "exaone",
            "minerva-7b",
            "mellum2",
        ),
        "starcoder",
    ),
    **dict.fromkeys(
        (
            "gpt-2",
            "phi-2",
            "jina-es",
            "jina-de",
            "gigachat",
            "jina-v2-es",
            "jina-v2-de",
            "a.x-4.0",
            "mellum",
            "modern-bert",
            "jina-v1-en",
            "jina-v2-code",
            "roberta-bpe",
            "mpt",
            "olmo",
            "jais",
            "trillion",
            "granite-docling",
            "exaone4",
        ),
        "gpt2",
    ),
    **dict.fromkeys(
        (
            "qwen2",
            "deepseek-r1-qwen",
            "kormo",
            "f2llmv2",
            "megrez",
            "stablelm2",
            "hunyuan",
            "solar-open",
        ),
        "qwen2",
    ),
    "qwen35": "qwen35",
    **dict.fromkeys(("poro-chat", "bloom", "gpt3-finnish"), "poro"),
    "viking": "viking",
    "tekken": "tekken",
    "chameleon": "chameleon",
    **dict.fromkeys(("gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"), "gpt4o"),
    **dict.fromkeys(("bailingmoe", "bailingmoe2", "llada-moe"), "bailingmoe"),
    "seed-coder": "seed_coder",
    "ufakzeka": "ufakzeka",
    "grok-2": "grok_2",
    "laguna": "laguna",
    "minicpm5": "minicpm5",
}

#: tokenizer.ggml.pre value -> its pre-tokenizer, as llama.cpp maps them.
PRE_TOKENIZERS: dict[str, PreTokenizer] = {n: _KINDS[k] for n, k in _NAMES.items()}
