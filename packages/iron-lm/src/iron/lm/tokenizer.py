"""Tokenizers: text to ids and back, streamed decoding, chat templates.

``Tokenizer`` wraps a Hugging Face ``tokenizer.json`` (read by the
tokenizers library) with what ``tokenizer_config.json`` adds to it: the
bos/eos tokens, whether to prepend bos, and the chat template of instruct
models. ``Detokenizer`` turns ids into text as they are generated without
ever splitting a multi-byte character. Chat templates render in a sandboxed
Jinja environment set up as transformers sets up its own (trim_blocks,
lstrip_blocks, loop controls, a ``tojson`` that keeps non-ASCII text,
``raise_exception`` and ``strftime_now``; ``messages``,
``add_generation_prompt``, the special tokens such as ``bos_token`` and
``eos_token``, and any extra keyword as variables), so a model's own
template gives the text it was trained on.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from iron.lm import template
from iron.lm.template import TEMPLATE_CHARS, TEMPLATE_SECONDS

__all__ = [
    "ChatTemplateError",
    "Detokenizer",
    "Tokenizer",
    "TokenizerError",
    "TokenizerNotFoundError",
]

TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "tokenizer_config.json"
_SPECIAL_KEYS = (
    "bos_token",
    "eos_token",
    "unk_token",
    "pad_token",
    "sep_token",
    "cls_token",
    "mask_token",
)


class TokenizerError(ValueError):
    """A tokenizer directory whose files are malformed or inconsistent."""


class TokenizerNotFoundError(TokenizerError, FileNotFoundError):
    """A tokenizer directory, or its tokenizer.json, that does not exist."""


class ChatTemplateError(ValueError):
    """No chat template, or the template refused the messages."""


class Tokenizer:
    """Text to token ids and back, with the checkpoint's special tokens.

    Attributes:
        bos_token: The beginning-of-sequence token text, or None.
        eos_token: The end-of-sequence token text, or None.
        chat_template: The Jinja chat template, or None (base models).
        add_bos_token: True/False as ``tokenizer_config.json`` says, or None
            when it is silent (then the post-processor decides, as in
            transformers).
    """

    def __init__(
        self,
        tokenizer: Any,
        *,
        bos_token: str | None = None,
        eos_token: str | None = None,
        chat_template: str | None = None,
        add_bos_token: bool | None = None,
        eos_token_ids: Iterable[int] = (),
        special_tokens: Mapping[str, str] | None = None,
    ) -> None:
        self._tok = tokenizer
        self._is_byte_level: bool | None = None  # found on first use
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.chat_template = chat_template
        self.add_bos_token = add_bos_token
        self._special = dict(special_tokens or {})
        if bos_token is not None:
            self._special.setdefault("bos_token", bos_token)
        if eos_token is not None:
            self._special.setdefault("eos_token", eos_token)
        self.bos_id = self._id_of(bos_token, "bos_token")
        eos_id = self._id_of(eos_token, "eos_token")
        eos = [] if eos_id is None else [eos_id]
        self.eos_ids: tuple[int, ...] = tuple(dict.fromkeys([*eos, *eos_token_ids]))

    def _id_of(self, token: str | None, what: str) -> int | None:
        if token is None:
            return None
        i = self._tok.token_to_id(token)
        if i is None:
            raise TokenizerError(
                f"{what} {token!r} is not in the tokenizer's vocabulary"
            )
        return i

    # -- construction ----------------------------------------------------------

    @classmethod
    def from_directory(cls, directory: str | os.PathLike[str]) -> Tokenizer:
        """Load ``tokenizer.json`` and what the directory says around it.

        ``directory`` may also be a GGUF file, or a directory holding one and
        no tokenizer.json: then it is ``from_gguf``.

        Reads, when present: ``tokenizer_config.json`` (bos/eos tokens,
        ``add_bos_token``, ``chat_template``: a string, or a list of named
        templates of which "default" is taken), ``chat_template.jinja`` (the
        file newer transformers write; it wins over the config's), and the
        ``eos_token_id`` of ``config.json`` and ``generation_config.json``
        (Llama 3 instruct models stop on several ids).

        Raises:
            TokenizerNotFoundError: No such directory, or no tokenizer.json.
            TokenizerError: A file that cannot be read as what it should be.
        """
        from tokenizers import Tokenizer as _HFTokenizer

        root = Path(directory)
        if root.suffix.lower() == ".gguf" or (
            root.is_dir() and not (root / TOKENIZER_FILE).is_file()
        ):
            from iron.lm.gguf import find_gguf

            gguf = find_gguf(root)
            if gguf is not None:
                return cls.from_gguf(gguf)
        if not root.is_dir():
            raise TokenizerNotFoundError(
                f"tokenizer directory {str(root)!r} does not exist"
            )
        path = root / TOKENIZER_FILE
        if not path.is_file():
            raise TokenizerNotFoundError(
                f"{str(root)!r} has no {TOKENIZER_FILE}; IRON reads Hugging Face "
                "fast tokenizers (tokenizer.json), not tokenizer.model alone"
            )
        try:
            tokenizer = _HFTokenizer.from_file(str(path))
        except Exception as e:  # tokenizers raises plain Exception
            raise TokenizerError(f"cannot read {str(path)!r}: {e}") from None
        config = _read_json(root / CONFIG_FILE) or {}
        template = _pick_template(config.get("chat_template"), root / CONFIG_FILE)
        jinja_file = root / "chat_template.jinja"
        if jinja_file.is_file():
            template = jinja_file.read_text(encoding="utf-8")
        specials = {
            k: _token_text(config[k])
            for k in _SPECIAL_KEYS
            if config.get(k) is not None
        }
        add_bos = config.get("add_bos_token")
        eos_ids: list[int] = []
        for name in ("config.json", "generation_config.json"):
            model = _read_json(root / name) or {}
            value = model.get("eos_token_id")
            if isinstance(value, int):
                eos_ids.append(value)
            elif isinstance(value, list):
                eos_ids.extend(v for v in value if isinstance(v, int))
            bos_id = model.get("bos_token_id")
            if "bos_token" not in specials and isinstance(bos_id, int):
                token = tokenizer.id_to_token(bos_id)
                if token is not None:
                    specials["bos_token"] = token
        return cls(
            tokenizer,
            bos_token=specials.get("bos_token"),
            eos_token=specials.get("eos_token"),
            chat_template=template,
            add_bos_token=None if add_bos is None else bool(add_bos),
            eos_token_ids=eos_ids,
            special_tokens=specials,
        )

    @classmethod
    def from_gguf(cls, path: str | os.PathLike[str]) -> Tokenizer:
        """The tokenizer a GGUF file's metadata describes (``tokenizer.ggml.*``).

        Built as a ``tokenizers`` tokenizer, so encoding and streaming
        decoding are the same code as for a ``tokenizer.json``; the chat
        template from ``tokenizer.chat_template``. See
        ``iron.lm.gguf_tokenizer.tokenizer_parts`` for the models it builds.

        Raises:
            CheckpointNotFoundError: No such file.
            GGUFError: A malformed file or a tokenizer model IRON does not
                build (named with the file and key).
        """
        from iron.lm.gguf import open_gguf
        from iron.lm.gguf_tokenizer import tokenizer_parts

        checkpoint = open_gguf(path)
        try:
            parts = tokenizer_parts(checkpoint)
        finally:
            checkpoint.close()
        return cls(
            parts["tokenizer"],
            bos_token=parts["bos_token"],
            eos_token=parts["eos_token"],
            chat_template=parts["chat_template"],
            add_bos_token=parts["add_bos_token"],
            eos_token_ids=parts["eos_token_ids"],
            special_tokens=parts["special_tokens"],
        )

    # -- vocabulary -------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """Every id the tokenizer can produce (added special tokens included)."""
        return self._tok.get_vocab_size(with_added_tokens=True)

    def token_to_id(self, token: str) -> int | None:
        """The id of the token text ``token`` (None if not in the vocabulary)."""
        return self._tok.token_to_id(token)

    def id_to_token(self, token_id: int) -> str | None:
        """The token text of ``token_id``, or None if no token has that id."""
        return self._tok.id_to_token(token_id)

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes ``token_id`` stands for in decoded text, alone.

        A token may hold part of a multi-byte character, which ``decode``
        shows as U+FFFD: these are its bytes. Byte-level BPE vocabularies
        (GPT-2's, Llama 3's) map each byte to one character of the token's
        text; SentencePiece byte-fallback tokens are written ``<0xNN>``;
        any other token is its decoded text's UTF-8.

        Raises:
            ValueError: No token has that id.
        """
        token = self._tok.id_to_token(int(token_id))
        if token is None:
            raise ValueError(
                f"token id {token_id} is outside this tokenizer's vocabulary "
                f"[0, {self.vocab_size})"
            )
        if self._byte_level() and all(c in _BYTE_OF for c in token):
            return bytes(_BYTE_OF[c] for c in token)
        if len(token) == 6 and token.startswith("<0x") and token.endswith(">"):
            with contextlib.suppress(ValueError):
                return bytes([int(token[3:5], 16)])
        return self.decode([token_id]).encode("utf-8")

    def _byte_level(self) -> bool:
        """Whether the decoder maps characters back to bytes (ByteLevel)."""
        if self._is_byte_level is None:
            decoder = json.loads(self._tok.to_str()).get("decoder") or {}
            kinds = [decoder.get("type")] + [
                d.get("type") for d in decoder.get("decoders") or []
            ]
            self._is_byte_level = "ByteLevel" in kinds
        return self._is_byte_level

    # -- encode / decode ----------------------------------------------------------

    def encode(self, text: str, *, add_bos: bool = True) -> list[int]:
        """Token ids of ``text``; special tokens written in it are matched.

        With ``add_bos`` the tokenizer's post-processor runs (Llama 3's puts
        bos first), bos is prepended if ``add_bos_token`` asks and it did not,
        and a bos doubled because ``text`` already began with it (a rendered
        chat template) is kept once. Without, the ids are the text's alone.
        """
        if not add_bos:
            return list(self._tok.encode(text, add_special_tokens=False).ids)
        ids = list(self._tok.encode(text, add_special_tokens=True).ids)
        bos = self.bos_id
        if bos is None:
            return ids
        if (
            ids[:2] == [bos, bos]
            and self.bos_token is not None
            and text.startswith(self.bos_token)
        ):
            ids = ids[1:]
        if self.add_bos_token and (not ids or ids[0] != bos):
            ids.insert(0, bos)
        return ids

    def decode(self, ids: Iterable[int], *, skip_special_tokens: bool = False) -> str:
        """The text of ``ids`` (bytes that do not form UTF-8 become U+FFFD)."""
        return self._tok.decode(
            [int(i) for i in ids], skip_special_tokens=skip_special_tokens
        )

    def detokenizer(self, *, skip_special_tokens: bool = False) -> Detokenizer:
        """A streaming decoder for ids as they are generated."""
        return Detokenizer(self, skip_special_tokens=skip_special_tokens)

    # -- chat --------------------------------------------------------------------

    def apply_chat_template(
        self,
        messages: Sequence[Mapping[str, Any]],
        add_generation_prompt: bool = True,
        **kwargs: Any,
    ) -> str:
        """Render ``messages`` ([{"role": ..., "content": ...}, ...]) as text.

        ``add_generation_prompt`` ends it with the header of an assistant
        turn, so the model answers. Extra keywords are template variables
        (``tools``, ``date_string``, ...). Encode the result with
        ``encode(text)``: the template's own bos is kept once.

        Raises:
            ChatTemplateError: No chat template (a base model), or the
                template failed to compile or render (its ``raise_exception``
                refused the messages, or any other error in it).
        """
        if self.chat_template is None:
            raise ChatTemplateError(
                "this tokenizer has no chat template (tokenizer_config.json has no "
                "'chat_template'): use an instruct model for chat, or a plain prompt"
            )
        variables = {
            **self._special,
            "messages": [dict(m) for m in messages],
            "add_generation_prompt": add_generation_prompt,
            "tools": None,
            "documents": None,
        }
        variables.update(kwargs)
        import jinja2

        try:
            return template.render(self.chat_template, variables)
        except template.TemplateLimitError as e:
            raise ChatTemplateError(
                f"the chat template was stopped: {e} (a chat template renders "
                f"at most {TEMPLATE_CHARS} characters in {TEMPLATE_SECONDS:g} s); "
                "the checkpoint's template, or these messages, ask too much"
            ) from None
        except jinja2.TemplateSyntaxError as e:
            raise ChatTemplateError(f"chat template does not parse: {e}") from None
        except Exception as e:  # the template is the checkpoint's code: any failure
            raise ChatTemplateError(
                f"the chat template failed while rendering: {type(e).__name__}: {e}"
            ) from None

    def __repr__(self) -> str:
        return (
            f"Tokenizer(vocab_size={self.vocab_size}, bos={self.bos_token!r}, "
            f"eos_ids={self.eos_ids}, chat={self.chat_template is not None})"
        )


class Detokenizer:
    """Text from ids as they arrive, emitted only when it is stable.

    Each ``push`` decodes a short window: the ids since the last emitted
    piece plus the ones before them for context (so decoders that drop a
    leading space, or bytes split across tokens, come out as in a full
    decode). New text is emitted once it no longer ends in U+FFFD, the mark
    of an unfinished UTF-8 sequence. ``flush`` emits what is left. The
    pieces joined equal ``Tokenizer.decode`` of all the ids.
    """

    def __init__(self, tokenizer: Tokenizer, *, skip_special_tokens: bool = False):
        self._tokenizer = tokenizer
        self._skip = skip_special_tokens
        self.ids: list[int] = []
        self._prefix = 0  # first id of the context window
        self._read = 0  # ids before this are emitted

    def _decode(self, ids: list[int]) -> str:
        return self._tokenizer.decode(ids, skip_special_tokens=self._skip)

    def push(self, token_id: int) -> str:
        """Add one id; returns the text it completes (often "")."""
        self.ids.append(int(token_id))
        return self._emit(final=False)

    def extend(self, ids: Iterable[int]) -> str:
        """Add several ids; returns the text they complete."""
        return "".join(self.push(i) for i in ids)

    def flush(self) -> str:
        """Emit whatever is left (an unfinished character as U+FFFD)."""
        return self._emit(final=True)

    def _emit(self, *, final: bool) -> str:
        if self._read == len(self.ids):
            return ""
        before = self._decode(self.ids[self._prefix : self._read])
        text = self._decode(self.ids[self._prefix :])
        if not final and (len(text) <= len(before) or text.endswith("\ufffd")):
            return ""
        self._prefix, self._read = self._read, len(self.ids)
        return text[len(before) :]


# -- helpers -------------------------------------------------------------------


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte-level BPE alphabet: each byte as one printable character.

    The printable Latin-1 bytes stand for themselves; the others, in order,
    for U+0100 onwards (openai/gpt-2, src/encoder.py, ``bytes_to_unicode``;
    Hugging Face tokenizers' ByteLevel pre-tokenizer uses the same table).
    """
    kept = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("\xa1"), ord("\xac") + 1),
        *range(ord("\xae"), ord("\xff") + 1),
    ]
    table = {b: chr(b) for b in kept}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


_BYTE_OF = {c: b for b, c in _bytes_to_unicode().items()}


def _read_json(path: Path) -> dict | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise TokenizerError(f"{str(path)!r} is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise TokenizerError(f"{str(path)!r} must hold a JSON object")
    return data


def _token_text(value: Any) -> str:
    """A special token as tokenizer_config.json writes it: text, or an
    AddedToken object with its text under "content"."""
    if isinstance(value, dict):
        value = value.get("content")
    if not isinstance(value, str):
        raise TokenizerError(f"special token {value!r} is not text")
    return value


def _pick_template(value: Any, where: Path) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        named = {t.get("name"): t.get("template") for t in value if isinstance(t, dict)}
        if "default" in named:
            return named["default"]
        raise TokenizerError(
            f"{str(where)!r} lists chat templates {sorted(map(str, named))} but no "
            "'default'"
        )
    raise TokenizerError(f"{str(where)!r}: 'chat_template' must be text or a list")
