"""Tokenizers from a GGUF file's metadata (``tokenizer.ggml.*``).

A GGUF file has no ``tokenizer.json``: it stores the vocabulary, the merges
or scores, the token types and the special ids as metadata under llama.cpp's
key names. ``tokenizer_parts`` builds from them the ``tokenizers`` tokenizer
they describe, so ``iron.lm.tokenizer.Tokenizer.from_gguf`` encodes and
decodes with the same code as for a ``tokenizer.json``.
"""

from __future__ import annotations

import logging
from typing import Any

from iron.lm._gguf_pre import PRE_TOKENIZERS, PreTokenizer
from iron.lm.gguf import GGUFCheckpoint, GGUFError, special_ids

logger = logging.getLogger("iron.lm")

__all__ = ["tokenizer_parts"]


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
    from tokenizers import (
        AddedToken,
        Regex,
        decoders,
        normalizers,
        pre_tokenizers,
        processors,
    )
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
    # llama.cpp (llama_vocab::impl::load): an empty token is named
    # [EMPTY_<id>], a token listed twice refuses the file
    tokens = [t or f"[EMPTY_{i}]" for i, t in enumerate(tokens)]
    vocab: dict[str, int] = {}
    for i, t in enumerate(tokens):
        if vocab.setdefault(t, i) != i:
            raise GGUFError(
                f"{where}: key 'tokenizer.ggml.tokens' lists {t!r} twice (ids "
                f"{vocab[t]} and {i}); llama.cpp refuses it too"
            )
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
            unknown = [t for t in (*pair, pair[0] + pair[1]) if t not in vocab]
            if unknown:
                raise GGUFError(
                    f"{where}: key 'tokenizer.ggml.merges' item {i} is {text!r}, "
                    f"which makes or uses {unknown[0]!r}, not in "
                    "'tokenizer.ggml.tokens': the file is damaged"
                )
            merges.append((pair[0], pair[1]))
    pre: PreTokenizer | None = None
    if model == "gpt2":
        if merges is None:
            raise GGUFError(
                f"{where}: a 'gpt2' tokenizer needs 'tokenizer.ggml.merges'"
            )
        pre = _pre_tokenizer(ck)
        tok = _HFTokenizer(
            BPE(
                vocab,
                merges,
                fuse_unk=False,
                byte_fallback=False,
                ignore_merges=pre.ignore_merges,
            )
        )
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                *(
                    pre_tokenizers.Split(Regex(r), behavior="isolated")
                    for r in pre.regexes
                ),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
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
        # llama.cpp (llama_vocab::impl::tokenize, src/llama-vocab.cpp): each
        # stretch of text between special tokens gets a space in front when
        # add_space_prefix, its spaces become U+2581, and it is merged whole
        # (no split). A normalizer runs per stretch, as that does; Metaspace
        # would not double a leading space.
        steps_in: list[normalizers.Normalizer] = [
            *([normalizers.Prepend(" ")] if prefix else []),
            normalizers.Replace(" ", "\u2581"),
        ]
        tok.normalizer = normalizers.Sequence(steps_in)
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

    ids = special_ids(ck)
    if pre is not None and not pre.bos:
        ids["bos"] = m.get("tokenizer.ggml.bos_token_id", "int")
    specials = {
        f"{name}_token": tokens[i]
        for name in ("bos", "eos", "unk", "pad")
        if (i := ids[name]) is not None
    }
    control = [t for t, k in zip(tokens, types) if k == _CONTROL]
    control += [t for t in specials.values() if t not in control]
    tok.add_special_tokens(
        [AddedToken(t, normalized=False, special=True) for t in control]
    )
    user = [t for t, k in zip(tokens, types) if k == _USER_DEFINED]
    if user:
        tok.add_tokens([AddedToken(t, normalized=False, special=False) for t in user])
    # llama.cpp's defaults: SentencePiece adds bos; byte-level BPE adds it
    # for the pre-tokenizers that say so (Llama 3's); neither adds eos
    add_bos = m.get(
        "tokenizer.ggml.add_bos_token",
        "bool",
        model == "llama" or (pre is not None and pre.add_bos),
    )
    add_eos = m.get("tokenizer.ggml.add_eos_token", "bool", False)
    bos = specials.get("bos_token")
    eos = specials.get("eos_token")
    for flag, key, name, t in (
        (add_bos, "tokenizer.ggml.add_bos_token", "bos", bos),
        (add_eos, "tokenizer.ggml.add_eos_token", "eos", eos),
    ):
        if flag and t is None:
            raise GGUFError(
                f"{where}: key {key!r} is true but the file has no {name} token "
                f"(llama.cpp refuses it too)"
            )
    if add_bos or add_eos:
        head = f"{bos} " if add_bos else ""
        tail = f" {eos}" if add_eos else ""
        used = {
            t: vocab[t]
            for t in (bos if add_bos else None, eos if add_eos else None)
            if t
        }
        tok.post_processor = processors.TemplateProcessing(
            single=f"{head}$A{tail}",
            pair=f"{head}$A{tail} {head}$B{tail}",
            special_tokens=list(used.items()),
        )
    return {
        "tokenizer": tok,
        "bos_token": bos,
        "eos_token": eos,
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


def _pre_tokenizer(ck: GGUFCheckpoint) -> PreTokenizer:
    """``tokenizer.ggml.pre``'s split expressions, as llama.cpp maps the name.

    A missing or empty value is llama.cpp's 'default' with a warning (as
    llama.cpp warns); a name llama.cpp does not map, or one IRON does not
    reproduce (``iron.lm._gguf_pre``), is refused naming it.
    """
    pre = ck.metadata.get("tokenizer.ggml.pre", "str", "")
    if pre == "":
        logger.warning(
            "GGUF file %r has no 'tokenizer.ggml.pre': splitting text with "
            "llama.cpp's 'default' expressions, as llama.cpp does (it warns that "
            "generation quality may degrade; regenerate the file with a recent "
            "convert_hf_to_gguf.py)",
            str(ck.path),
        )
        pre = "default"
    found = PRE_TOKENIZERS.get(pre)
    if found is None:
        raise GGUFError(
            f"GGUF file {str(ck.path)!r}: key 'tokenizer.ggml.pre' is {pre!r}, a "
            "pre-tokenizer IRON does not split text as (llama.cpp refuses names it "
            "does not know too); IRON knows: " + ", ".join(sorted(PRE_TOKENIZERS))
        )
    return found
