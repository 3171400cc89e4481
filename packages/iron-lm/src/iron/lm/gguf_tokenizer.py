"""Tokenizers from a GGUF file's metadata (``tokenizer.ggml.*``).

A GGUF file has no ``tokenizer.json``: it stores the vocabulary, the merges
or scores, the token types and the special ids as metadata under llama.cpp's
key names. ``tokenizer_parts`` builds from them the ``tokenizers`` tokenizer
they describe, so ``iron.lm.tokenizer.Tokenizer.from_gguf`` encodes and
decodes with the same code as for a ``tokenizer.json``.
"""

from __future__ import annotations

from typing import Any

from iron.lm.gguf import GGUFCheckpoint, GGUFError

__all__ = ["tokenizer_parts"]


#: tokenizer.ggml.pre values whose text is split with Llama 3's expression
#: (llama.cpp's LLAMA_VOCAB_PRE_TYPE_LLAMA3, src/llama-vocab.cpp).
_LLAMA3_PRE = ("llama3", "llama-v3", "llama-bpe", "smaug-bpe", "falcon3", "pixtral")
#: ... and those split with GPT-2's (the byte-level pre-tokenizer's own).
_GPT2_PRE = ("default", "gpt2", "")
#: Llama 3's split expression (its tokenizer.json's pre_tokenizer, as in
#: meta-llama/Llama-3.2-1B on the Hugging Face Hub).
_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_CONTROL, _USER_DEFINED = 3, 4


def tokenizer_parts(ck: GGUFCheckpoint) -> dict[str, Any]:
    """A ``tokenizers.Tokenizer`` from ``tokenizer.ggml.*`` and its settings.

    The byte-level BPE model ("gpt2": tokens, merges) and SentencePiece's
    BPE ("llama": tokens, scores, byte tokens; merges from the file or
    recovered from the scores) are built as transformers builds them from a
    GGUF file (``integrations/gguf/gguf_tokenizer_mapping.py``, transformers
    v5): control tokens (type 3) special, user-defined ones (type 4) added.

    Returns:
        ``{"tokenizer", "bos_token", "eos_token", "add_bos_token",
        "chat_template", "special_tokens"}``.
    """
    from tokenizers import AddedToken, Regex, decoders, pre_tokenizers, processors
    from tokenizers import Tokenizer as _HFTokenizer
    from tokenizers.models import BPE

    m = ck.metadata
    where = f"GGUF file {str(ck.path)!r}"
    model = m.get("tokenizer.ggml.model", "str")
    tokens = m.array("tokenizer.ggml.tokens", "str")
    if model is None or tokens is None:
        raise GGUFError(
            f"{where} has no tokenizer (keys 'tokenizer.ggml.model' and "
            "'tokenizer.ggml.tokens'); pass a tokenizer directory instead"
        )
    types = m.array("tokenizer.ggml.token_type", "int") or [1] * len(tokens)
    if len(types) != len(tokens):
        raise GGUFError(
            f"{where}: key 'tokenizer.ggml.token_type' has {len(types)} entries for "
            f"{len(tokens)} tokens"
        )
    vocab = {t: i for i, t in enumerate(tokens)}
    merges_text = m.array("tokenizer.ggml.merges", "str")
    merges: list[tuple[str, str]] | None = None
    if merges_text is not None:
        merges = []
        for i, text in enumerate(merges_text):
            pair = text.split(" ")
            if len(pair) != 2:
                raise GGUFError(
                    f"{where}: key 'tokenizer.ggml.merges' item {i} is {text!r}, not "
                    "two tokens separated by a space"
                )
            merges.append((pair[0], pair[1]))
    if model == "gpt2":
        if merges is None:
            raise GGUFError(
                f"{where}: a 'gpt2' tokenizer needs 'tokenizer.ggml.merges'"
            )
        pre = m.get("tokenizer.ggml.pre", "str", "default")
        tok = _HFTokenizer(BPE(vocab, merges, fuse_unk=False, byte_fallback=False))
        if pre in _LLAMA3_PRE:
            tok.pre_tokenizer = pre_tokenizers.Sequence(
                [
                    pre_tokenizers.Split(Regex(_LLAMA3_SPLIT), behavior="isolated"),
                    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
                ]
            )
        elif pre in _GPT2_PRE:
            tok.pre_tokenizer = pre_tokenizers.ByteLevel(
                add_prefix_space=False, use_regex=True
            )
        else:
            raise GGUFError(
                f"{where}: key 'tokenizer.ggml.pre' is {pre!r}; IRON splits text as "
                f"{', '.join(repr(p) for p in _LLAMA3_PRE + _GPT2_PRE[:2])} only"
            )
        tok.decoder = decoders.ByteLevel()
    elif model == "llama":
        scores = m.array("tokenizer.ggml.scores", "float")
        if merges is None:
            if scores is None or len(scores) != len(tokens):
                raise GGUFError(
                    f"{where}: a 'llama' tokenizer needs 'tokenizer.ggml.merges' or "
                    "one 'tokenizer.ggml.scores' entry per token"
                )
            merges = _merges_from_scores(vocab, dict(zip(tokens, scores)))
        tok = _HFTokenizer(BPE(vocab, merges, fuse_unk=True, byte_fallback=True))
        prefix = m.get("tokenizer.ggml.add_space_prefix", "bool", True)
        tok.pre_tokenizer = pre_tokenizers.Metaspace(
            replacement="\u2581",
            prepend_scheme="first" if prefix else "never",
            split=False,
        )
        steps = [
            decoders.Replace("\u2581", " "),
            decoders.ByteFallback(),
            decoders.Fuse(),
        ]
        if prefix:
            steps.append(decoders.Strip(" ", 1, 0))
        tok.decoder = decoders.Sequence(steps)
    else:
        raise GGUFError(
            f"{where}: key 'tokenizer.ggml.model' is {model!r}; IRON builds 'gpt2' "
            "(byte-level BPE) and 'llama' (SentencePiece) tokenizers"
        )

    def token(key: str) -> str | None:
        i = m.get(key, "int")
        if i is None:
            return None
        if not 0 <= i < len(tokens):
            raise GGUFError(
                f"{where}: key {key!r} is {i}, outside the {len(tokens)} tokens"
            )
        return tokens[i]

    specials = {
        name: t
        for name, key in (
            ("bos_token", "tokenizer.ggml.bos_token_id"),
            ("eos_token", "tokenizer.ggml.eos_token_id"),
            ("unk_token", "tokenizer.ggml.unknown_token_id"),
            ("pad_token", "tokenizer.ggml.padding_token_id"),
        )
        if (t := token(key)) is not None
    }
    control = [t for t, k in zip(tokens, types) if k == _CONTROL]
    control += [t for t in specials.values() if t not in control]
    tok.add_special_tokens(
        [AddedToken(t, normalized=False, special=True) for t in control]
    )
    user = [t for t, k in zip(tokens, types) if k == _USER_DEFINED]
    if user:
        tok.add_tokens([AddedToken(t, normalized=False, special=False) for t in user])
    add_bos = m.get("tokenizer.ggml.add_bos_token", "bool")
    if add_bos is None and model == "llama":
        add_bos = True  # llama.cpp's default for SentencePiece vocabularies
    bos = specials.get("bos_token")
    if add_bos and bos is not None:
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A",
            pair=f"{bos} $A {bos} $B",
            special_tokens=[(bos, vocab[bos])],
        )
    return {
        "tokenizer": tok,
        "bos_token": bos,
        "eos_token": specials.get("eos_token"),
        "add_bos_token": add_bos,
        "chat_template": m.get("tokenizer.chat_template", "str"),
        "special_tokens": specials,
        "eos_token_ids": ck.config.eos_token_ids,
    }


def _merges_from_scores(
    vocab: dict[str, int], scores: dict[str, float]
) -> list[tuple[str, str]]:
    """SentencePiece BPE's merges from its vocabulary: every split of a token
    into two tokens, best-scored first (as transformers' ``generate_merges``
    orders them: by score, then the pieces' lengths, ties by the pieces' ids)."""
    found = []
    for piece, score in scores.items():
        local = [
            (piece[:i], piece[i:], score)
            for i in range(1, len(piece))
            if piece[:i] in vocab and piece[i:] in vocab
        ]
        local.sort(key=lambda x: (vocab[x[0]], vocab[x[1]]))
        found.extend(local)
    found.sort(key=lambda x: (x[2], len(x[0]), len(x[1])), reverse=True)
    return [(a, b) for a, b, _ in found]
